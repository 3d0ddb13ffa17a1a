"""`gpuwarden record`: the per-GPU summary when the job ends (table on stderr, like `time`, so
it does not mix with the command's own output; `gpuwarden.record/1` JSON on stdout), and the
live status line while it records (stderr, on a terminal only)."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuwarden.doctor.watch import FindingEpisode
from gpuwarden.report.findings import finding_record
from gpuwarden.report.output import console, json_text, print_line
from gpuwarden.report.snapshot_document import event_record, stamp
from gpuwarden.report.watch import finding_line
from gpuwarden.types.health import Severity
from gpuwarden.types.telemetry import DeviceEvent, DeviceState, Snapshot
from gpuwarden.types.telemetry_summary import RecordSummary
from gpuwarden.units import GIB

RECORD_SCHEMA = "gpuwarden.record/1"
_NONE = "–"


@dataclass(frozen=True, slots=True)
class RecordRun:
    """What was recorded, around the per-GPU summaries."""

    command: tuple[str, ...]
    pid: int | None
    exit_code: int | None
    host: str
    backend: str
    simulated: bool
    started_s: float
    ended_s: float
    interval_s: float
    snapshots: int
    db_path: str | None
    run_id: int | None
    price_per_kwh: float
    price_is_default: bool
    events: tuple[DeviceEvent, ...] = ()  # events without a device (backend errors)
    # what the health rules found over the run, each finding once per time it was active
    findings: tuple[FindingEpisode, ...] = ()
    findings_dropped: int = 0  # episodes past the log's bound


def summary_record(s: RecordSummary) -> dict[str, Any]:
    return {
        "index": s.index,
        "uuid": s.uuid,
        "name": s.name,
        "mig_parent_uuid": s.mig_parent_uuid,
        "mig_profile": s.mig_profile,
        "samples": s.samples,
        "duration_s": s.duration_s,
        "memory_total_bytes": s.memory_total_bytes,
        "peak_memory_used_bytes": s.peak_memory_used_bytes,
        "gpu_utilization_mean_percent": s.gpu_utilization_mean_percent,
        "gpu_utilization_p95_percent": s.gpu_utilization_p95_percent,
        "sm_active_mean_ratio": s.sm_active_mean_ratio,
        "sm_active_p95_ratio": s.sm_active_p95_ratio,
        "power_mean_watts": s.power_mean_watts,
        "power_peak_watts": s.power_peak_watts,
        "temperature_peak_celsius": s.temperature_peak_celsius,
        "throttled_seconds_by_reason": dict(s.throttled_seconds_by_reason),
        "power_violation_seconds": s.power_violation_seconds,
        "thermal_violation_seconds": s.thermal_violation_seconds,
        "energy_wh": s.energy_wh,
        "energy_basis": s.energy_basis,
        "energy_cost": s.energy_cost,
        "xid_events": [event_record(e) for e in s.xid_events],
        "ecc_events": [event_record(e) for e in s.ecc_events],
        "ecc_uncorrected_increase": s.ecc_uncorrected_increase,
        "ecc_corrected_increase": s.ecc_corrected_increase,
        "lost": s.lost,
        "lost_at_s": s.lost_at_s,
    }


def record_document(run: RecordRun, summaries: Sequence[RecordSummary]) -> dict[str, Any]:
    return {
        "schema": RECORD_SCHEMA,
        "command": list(run.command),
        "pid": run.pid,
        "exit_code": run.exit_code,
        "host": run.host,
        "backend": run.backend,
        "simulated": run.simulated,
        "started": stamp(run.started_s),
        "ended": stamp(run.ended_s),
        "duration_s": run.ended_s - run.started_s,
        "interval_s": run.interval_s,
        "snapshots": run.snapshots,
        "db": run.db_path,
        "run_id": run.run_id,
        "price_per_kwh": run.price_per_kwh,
        "price_basis": "assumed default (--price-kwh)" if run.price_is_default else "--price-kwh",
        "gpus": [summary_record(s) for s in summaries],
        "events": [event_record(e) for e in run.events],
        "findings": [episode_record(e) for e in run.findings],
        "findings_not_listed": run.findings_dropped,
    }


def episode_record(episode: FindingEpisode) -> dict[str, Any]:
    return {
        **finding_record(episode.finding),
        "first_seen": stamp(episode.first_seen_s),
        "cleared": None if episode.cleared_s is None else stamp(episode.cleared_s),
    }


def print_record_json(run: RecordRun, summaries: Sequence[RecordSummary]) -> None:
    """The document on stdout; a non-finite number in it is null (JSON has no Infinity)."""
    sys.stdout.write(json_text(record_document(run, summaries), indent=2) + "\n")


# --- the live line ----------------------------------------------------------------------------


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _finite(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def live_text(elapsed_s: float, readings: int, snapshot: Snapshot) -> str:
    """``recording 0:01:23 · 84 readings · 8 GPUs · util 87 % (min 80) · mem 45.2 GiB peak ·
    2,496 W · 61 °C max``: the latest snapshot over all its GPUs, what fits on one line."""
    samples = snapshot.samples
    ok = [s for s in samples if s.state is DeviceState.OK]
    parts = [f"recording {_clock(elapsed_s)}", f"{readings} reading{'s' if readings != 1 else ''}"]
    if snapshot.simulated:
        parts.insert(0, "SIMULATED")
    parts.append(f"{len(samples)} GPU{'s' if len(samples) != 1 else ''}")
    if lost := sum(s.state is DeviceState.GPU_LOST for s in samples):
        parts.append(f"{lost} LOST")
    util = _finite([s.gpu_utilization_percent for s in ok])
    if util:
        low = f" (min {min(util):.0f})" if len(util) > 1 else ""
        parts.append(f"util {sum(util) / len(util):.0f} %{low}")
    memory = [s.memory_used_bytes for s in ok if s.memory_used_bytes is not None]
    if memory:
        parts.append(f"mem {max(memory) / GIB:.1f} GiB peak")
    power = _finite([s.power_draw_watts for s in ok])
    if power:
        parts.append(f"{sum(power):,.0f} W")
    temperature = _finite([s.temperature_gpu_celsius for s in ok])
    if temperature:
        parts.append(f"{max(temperature):.0f} °C max")
    return " · ".join(parts)


# VT100 sequences (ECMA-48 / DEC), as apt draws its progress bar under dpkg's output.
_SAVE, _RESTORE = "\x1b7", "\x1b8"  # cursor position (DECSC / DECRC)
_CLEAR_LINE = "\x1b[2K"
_UP = "\x1b[1A"


def _region(bottom: int | None) -> str:
    """DECSTBM: scroll only rows 1..bottom (None: the whole screen again)."""
    return "\x1b[r" if bottom is None else f"\x1b[1;{bottom}r"


def _at_row(row: int) -> str:
    return f"\x1b[{row};1H"


# How often the line is redrawn at most: readings may come every few ms (--interval 0.01).
_REDRAW_EVERY_S = 0.5


class LiveLine:
    """A status line on the last row of the terminal that stderr is, only when it is one (a log
    file or a pipe gets nothing), redrawn at most every _REDRAW_EVERY_S.

    The job writes to the same terminal, unseen by us: so the line gets a row of its own, the
    way apt keeps its progress bar under dpkg's output. The rows above it become the scrolling
    region (DECSTBM), where the job's output scrolls; the line is drawn on the last row with the
    cursor saved and restored around it. The terminal's size is read again at each redraw: after
    a resize the region and the line follow the new last row. ``close`` clears the row and gives
    the whole screen back (before the summary is printed)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream: TextIO = sys.stderr if stream is None else stream
        self._rows, self._columns = self._size()
        # two rows at least: one for the job, one for the line
        self.enabled = self._stream.isatty() and self._rows >= 2
        self._started = time.monotonic()
        self._shown_at: float | None = None
        self._readings = 0

    def _size(self) -> tuple[int, int]:
        """Rows and columns of the terminal the line goes to (stderr: stdout may be a pipe)."""
        try:
            size = os.get_terminal_size(self._stream.fileno())
        except (OSError, ValueError, AttributeError):
            return 0, 0
        return size.lines, size.columns

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()

    def update(self, snapshot: Snapshot) -> None:
        self._readings += 1
        now = time.monotonic()
        if not self.enabled or (
            self._shown_at is not None and now - self._shown_at < _REDRAW_EVERY_S
        ):
            return
        if self._shown_at is None:
            self._rows, self._columns = self._size()
            if self._rows < 2:
                return
            # two new lines (the screen scrolls when the cursor is at the bottom), the last row
            # reserved, the cursor back on the empty row above it: the job writes from there
            self._write(f"\n\n{_SAVE}{_region(self._rows - 1)}{_RESTORE}{_UP}")
        elif not self._follow_resize():
            return
        self._shown_at = now
        text = live_text(now - self._started, self._readings, snapshot)[: self._columns - 1]
        self._write(f"{_SAVE}{_at_row(self._rows)}{_CLEAR_LINE}{text}{_RESTORE}")

    def _follow_resize(self) -> bool:
        """After a resize: clear the line where it was (if that row is still on screen), and
        reserve the new last row; a terminal of one row gets the whole screen back (False: no
        more line)."""
        rows, columns = self._size()
        if (rows, columns) == (self._rows, self._columns) or rows == 0:
            return True
        stale = f"{_at_row(self._rows)}{_CLEAR_LINE}" if self._rows <= rows else ""
        self._rows, self._columns = rows, columns
        if rows < 2:
            self._write(f"{_SAVE}{_region(None)}{_RESTORE}")
            self.enabled = False
            return False
        self._write(f"{_SAVE}{stale}{_region(rows - 1)}{_RESTORE}")
        return True

    def close(self) -> None:
        """Clear the line and give the whole screen back to scrolling."""
        if self.enabled and self._shown_at is not None:
            self._write(f"{_SAVE}{_at_row(self._rows)}{_CLEAR_LINE}{_region(None)}{_RESTORE}")
            self._shown_at = None


def _pair(mean: float | None, p95: float | None, spec: str) -> str:
    if mean is None or p95 is None:
        return _NONE
    return f"{format(mean, spec)} / {format(p95, spec)}"


def _money(value: float | None) -> str:
    if value is None:
        return _NONE
    return "<0.01" if value < 0.005 else f"{value:.2f}"


def _throttle(s: RecordSummary) -> str:
    parts = [f"{r} {sec:.0f}s" for r, sec in s.throttled_seconds_by_reason.items() if sec > 0]
    return ", ".join(parts) or "none"


def _incidents(s: RecordSummary) -> str:
    parts = [f"Xid {e.code}" for e in s.xid_events]
    if s.ecc_uncorrected_increase:
        parts.append(f"ECC DBE +{s.ecc_uncorrected_increase}")
    if s.ecc_corrected_increase:
        parts.append(f"ECC SBE +{s.ecc_corrected_increase}")
    if s.lost:
        parts.append("LOST")
    return ", ".join(parts) or "none"


def _span(episode: FindingEpisode, ended_s: float) -> str:
    """ "15:31:02 → 15:31:14 (12 s)", or "15:31:02 → the end (40 s)" for one still active."""
    end = ended_s if episode.cleared_s is None else episode.cleared_s
    until = (
        "the end" if episode.cleared_s is None else time.strftime("%H:%M:%S", time.localtime(end))
    )
    began = time.strftime("%H:%M:%S", time.localtime(episode.first_seen_s))
    return f"{began} → {until} ({max(0.0, end - episode.first_seen_s):.0f} s)"


def _print_findings(out: Console, run: RecordRun) -> None:
    """The warnings and critical findings of the run, as `watch` would have shown them, with
    when each held; info findings are counted (the JSON has them all)."""
    shown = [e for e in run.findings if e.finding.severity is not Severity.INFO]
    info = len(run.findings) - len(shown)
    more = f" (+{info} info in --json)" if info else ""
    if not shown:
        print_line(out, f"findings during the run: none{more}")
        return
    print_line(
        out, f"findings during the run ({len(shown)}; the health rules as `watch` judges){more}"
    )
    for episode in shown:
        line = Text("  ")
        line.append_text(finding_line(episode.finding))
        line.append(f"  {_span(episode, run.ended_s)}", style="dim")
        print_line(out, line)
    if run.findings_dropped:
        print_line(out, f"  … and {run.findings_dropped} more episodes (not listed)")


def print_record_table(run: RecordRun, summaries: Sequence[RecordSummary]) -> None:
    out = console(stderr=True, piped_width=140)
    head = Text()
    if run.simulated:
        head.append("SIMULATED", style="bold reverse yellow")
        head.append(" telemetry, not a real GPU · ")
    if run.command:
        what = " ".join(run.command)
    elif run.pid is not None:
        what = f"pid {run.pid}"
    else:  # --duration alone: the GPUs, with no job
        what = "the GPUs"
    head.append(
        f"recorded {what!r} for {run.ended_s - run.started_s:.1f} s on {run.host} "
        f"(backend {run.backend}, {run.snapshots} readings every {run.interval_s:g} s)"
    )
    out.print(head)
    table = Table(title="GPU summary")
    columns = (
        "GPU", "name", "peak mem GiB", "util % mean/p95", "SM act mean/p95",
        "throttled", "energy Wh", "cost $", "incidents",
    )  # fmt: skip
    for column in columns:
        table.add_column(
            column, justify="left" if column in {"name", "throttled", "incidents"} else "right"
        )
    for s in summaries:
        peak = s.peak_memory_used_bytes
        table.add_row(
            _NONE if s.index is None else str(s.index),
            s.name if s.mig_parent_uuid is None else f"└ MIG {s.mig_profile or s.uuid}",
            _NONE if peak is None else f"{peak / GIB:.1f}",
            _pair(s.gpu_utilization_mean_percent, s.gpu_utilization_p95_percent, ".0f"),
            _pair(s.sm_active_mean_ratio, s.sm_active_p95_ratio, ".2f"),
            _throttle(s),
            _NONE if s.energy_wh is None else f"{s.energy_wh:.2f}",
            _money(s.energy_cost),
            _incidents(s),
        )
    out.print(table)
    _print_findings(out, run)
    basis = "assumed default; set --price-kwh" if run.price_is_default else "from --price-kwh"
    out.print(f"energy cost at ${run.price_per_kwh:g}/kWh ({basis})")
    for event in run.events:
        out.print(f"event {event.kind.value}: {event.message}")
    if run.db_path:
        out.print(f"telemetry stored in {run.db_path} (run {run.run_id})")
    if run.exit_code is not None:
        out.print(f"command exit code {run.exit_code}")
