"""`gpuwarden watch`: a live view of every GPU with the verdict of the health rules.

On a terminal the frame redraws in place (rich Live); piped to a file or a log it prints the
first frame whole, then one line per finding as it appears or clears, so a log reads as a
timeline. `--json` writes one `gpuwarden.watch/1` document per frame, one per line.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gpuwarden.doctor.watch import ActiveFinding, ClearedFinding, WatchFrame
from gpuwarden.report.columns import numbers_table
from gpuwarden.report.findings import (
    SEVERITY_MARK,
    SEVERITY_STYLE,
    check_record,
    device_label,
    finding_record,
)
from gpuwarden.report.output import console, json_text, print_line
from gpuwarden.report.snapshot import (
    finding_is_about,
    header,
    memory_cell,
    short_name,
    verdict_cell,
)
from gpuwarden.report.snapshot_document import snapshot_document, stamp
from gpuwarden.types.health import CheckStatus, Finding
from gpuwarden.types.telemetry import DeviceSample, DeviceState

WATCH_SCHEMA = "gpuwarden.watch/1"
_NONE = "–"


def _clock(timestamp_s: float) -> str:
    return datetime.fromtimestamp(timestamp_s, UTC).strftime("%H:%M:%S")


def _num(value: float | None, spec: str = ".0f") -> str:
    return _NONE if value is None else format(value, spec)


def _power(sample: DeviceSample) -> str:
    draw = sample.power_draw_watts
    if draw is None:
        return _NONE
    limit = sample.power_enforced_limit_watts or sample.power_limit_watts
    return f"{draw:.0f}/{limit:.0f}" if limit else f"{draw:.0f}"


def _verdict(sample: DeviceSample, findings: tuple[ActiveFinding, ...]) -> Text:
    """The worst finding about this GPU (info ones too), or "ok"."""
    return verdict_cell([a.finding for a in findings if finding_is_about(a.finding, sample.info)])


_COLUMNS = ("GPU", "name", "util %", "SM act", "mem GiB", "power W", "temp °C", "SM MHz", "verdict")
# the columns a narrow terminal leaves out first
_DROP_FIRST = ("SM MHz", "SM act", "power W")


def _gpu_table(frame: WatchFrame, width: int) -> Table:
    snapshot = frame.snapshot
    rows: list[list[str | Text]] = []
    for sample in snapshot.samples:
        if sample.info.mig_parent_uuid is not None:
            continue
        if sample.state is not DeviceState.OK:
            cells = [_NONE] * 6
        else:
            cells = [
                _num(sample.gpu_utilization_percent),
                _num(sample.sm_active_ratio, ".2f"),
                memory_cell(sample),
                _power(sample),
                _num(sample.temperature_gpu_celsius),
                _num(sample.clock_sm_mhz),
            ]
        rows.append(
            [
                str(sample.info.index),
                short_name(sample.info.name),
                *cells,
                _verdict(sample, frame.findings),
            ]
        )
    return numbers_table(
        _COLUMNS,
        rows,
        width,
        words={"verdict"},
        labels={"name"},
        drop_first=_DROP_FIRST,
        title="SIMULATED" if snapshot.simulated else None,
    )


def finding_line(finding: Finding) -> Text:
    line = Text()
    line.append(f"{SEVERITY_MARK[finding.severity]:<4} ", style=SEVERITY_STYLE[finding.severity])
    line.append(f"{finding.code:<22} ", style="bold")
    line.append(f"{device_label(finding.device):<7} ")
    line.append(finding.title)
    return line


def _findings_block(frame: WatchFrame) -> RenderableType:
    parts: list[RenderableType] = []
    if frame.findings:
        parts.append(Text(f"findings ({len(frame.findings)})", style="bold"))
        for active in frame.findings:
            line = finding_line(active.finding)
            line.append(f"  since {_clock(active.first_seen_s)}", style="dim")
            if active.new:
                line.append("  NEW", style="bold reverse")
            parts.append(line)
    else:
        parts.append(Text("no findings: every rule that could judge these readings passed"))
    for cleared in frame.cleared:
        parts.append(
            Text(
                f"cleared {cleared.finding.code} on {device_label(cleared.finding.device)} "
                f"at {_clock(cleared.cleared_s)}",
                style="dim",
            )
        )
    skipped = [c for c in frame.checks if c.status is CheckStatus.SKIP]
    if skipped:
        parts.append(
            Text("not judged: " + "; ".join(f"{c.name} ({c.detail})" for c in skipped), "dim")
        )
    return Group(*parts)


def render_frame(frame: WatchFrame, width: int = 120) -> RenderableType:
    title = header(frame.snapshot)
    title.append(
        f" · window {frame.window_s:.0f} s ({frame.window_snapshots} readings)", style="dim"
    )
    return Group(title, _gpu_table(frame, width), _findings_block(frame))


def frame_document(frame: WatchFrame) -> dict[str, Any]:
    return {
        "schema": WATCH_SCHEMA,
        "snapshot": snapshot_document(frame.snapshot),
        "window_s": frame.window_s,
        "window_snapshots": frame.window_snapshots,
        "findings": [
            {
                **finding_record(a.finding),
                "first_seen": stamp(a.first_seen_s),
                "new": a.new,
            }
            for a in frame.findings
        ],
        "cleared": [_cleared_record(c) for c in frame.cleared],
        "checks": [check_record(c) for c in frame.checks],
    }


def _cleared_record(cleared: ClearedFinding) -> dict[str, Any]:
    return {
        **finding_record(cleared.finding),
        "first_seen": stamp(cleared.first_seen_s),
        "cleared": stamp(cleared.cleared_s),
    }


class WatchView:
    """Where frames go: a live terminal view, a log of changes, or JSON lines."""

    def __init__(self, *, as_json: bool, live: bool | None = None) -> None:
        self._json = as_json
        self._live_wanted = sys.stdout.isatty() if live is None else live
        self._console: Console = console()
        self._live: Live | None = None
        self._frames = 0

    def __enter__(self) -> WatchView:
        if self._live_wanted and not self._json:
            self._live = Live(console=self._console, auto_refresh=False, transient=False)
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)

    def show(self, frame: WatchFrame) -> None:
        self._frames += 1
        if self._json:
            sys.stdout.write(json_text(frame_document(frame)) + "\n")
            sys.stdout.flush()
        elif self._live is not None:
            self._live.update(render_frame(frame, self._console.width), refresh=True)
        elif self._frames == 1:
            self._console.print(render_frame(frame, self._console.width))
        else:
            self._log_changes(frame)

    def _log_changes(self, frame: WatchFrame) -> None:
        at = stamp(frame.snapshot.timestamp_s)
        for active in frame.findings:
            if active.new:
                line = Text(f"{at} NEW     ")
                line.append_text(finding_line(active.finding))
                print_line(self._console, line)
        for cleared in frame.cleared:
            lasted = cleared.cleared_s - cleared.first_seen_s
            print_line(
                self._console,
                f"{at} CLEARED {cleared.finding.code} on "
                f"{device_label(cleared.finding.device)} (lasted {lasted:.0f} s)",
            )
