"""`gpuwarden history`: stored readings as a table, JSON (`gpuwarden.history/1`) or CSV.

A JSON/CSV row is the snapshot's device record (report.telemetry_records.device_record, so the
two schemas cannot drift) plus ``timestamp`` (ISO-8601 UTC) first and where the reading came
from (``host``, ``backend``, ``simulated``) last: simulated data says so on every row.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from gpuwarden.report.output import console
from gpuwarden.report.telemetry_records import device_record
from gpuwarden.telemetry.store import StoredSample
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample
from gpuwarden.units import GIB

SCHEMA = "gpuwarden.history/1"
_NONE = "–"
# Rich lays a table out in Python: 2000 rows took 3-4.5 s here, 200 rows 0.3 s (25 snapshots
# of 8 GPUs, more than a terminal shows); --json/--csv stream everything.
TABLE_ROWS = 200

# CSV columns: every key a row can have, in row order ("extra" only appears when non-empty).
COLUMNS: tuple[str, ...] = (
    "timestamp",
    *(f.name for f in dataclasses.fields(DeviceInfo)),
    *(f.name for f in dataclasses.fields(DeviceSample) if f.name != "info"),
    "host",
    "backend",
    "simulated",
)


def iso_utc(timestamp_s: float) -> str:
    """``2026-07-14T08:12:53.353Z``."""
    moment = datetime.fromtimestamp(timestamp_s, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def history_row(stored: StoredSample) -> dict[str, Any]:
    sample = stored.sample
    row: dict[str, Any] = {"timestamp": iso_utc(sample.timestamp_s)}
    row.update(device_record(sample))
    row["uuid"] = sample.info.uuid
    row["host"] = stored.origin.host
    row["backend"] = stored.origin.backend
    row["simulated"] = stored.origin.simulated
    return row


def print_history_json(rows: Iterable[StoredSample], *, db: str, resolution: str) -> None:
    """Streamed: one sample per line, so days of readings never sit in memory at once.
    ``simulated`` (any row simulated) comes after the samples for that reason."""
    out = sys.stdout
    head = json.dumps({"schema": SCHEMA, "db": db, "resolution": resolution}, ensure_ascii=False)
    out.write(head[:-1] + ', "samples": [')
    simulated, separator = False, "\n  "
    for stored in rows:
        simulated = simulated or stored.origin.simulated
        out.write(separator + json.dumps(history_row(stored), ensure_ascii=False))
        separator = ",\n  "
    out.write(
        ("\n" if separator != "\n  " else "") + f'], "simulated": {json.dumps(simulated)}}}\n'
    )


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def print_history_csv(rows: Iterable[StoredSample]) -> None:
    """Same columns as the JSON rows; nested values (processes, links, ...) as JSON text."""
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(COLUMNS)
    for stored in rows:
        row = history_row(stored)
        writer.writerow([_csv_cell(row.get(column)) for column in COLUMNS])


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return _NONE if value is None else format(value, spec)


def _memory(sample: DeviceSample) -> str:
    used, total = sample.memory_used_bytes, sample.info.memory_total_bytes
    if used is None:
        return _NONE
    return f"{used / GIB:.1f}" + ("" if total is None else f" / {total / GIB:.0f}")


def print_history_table(
    rows: Iterable[StoredSample], *, total: int, db: str, resolution: str
) -> None:
    """The newest samples (a terminal is no place for a day of 1 s readings): ``rows`` are the
    last TABLE_ROWS of the range (the store reads only those), ``total`` counts the range."""
    out = console()
    shown = list(rows)
    simulated = any(stored.origin.simulated for stored in shown)
    if not shown:
        out.print(f"no samples in {db} for this range (resolution {resolution})")
        return
    title = f"history ({resolution}) from {db}" + (" — SIMULATED data" if simulated else "")
    table = Table(title=title)
    for column in ("time (UTC)", "gpu", "name", "state", "util %", "mem GiB", "power W",
                   "temp °C", "SM MHz"):  # fmt: skip
        table.add_column(
            column, justify="left" if column in ("time (UTC)", "name", "state") else "right"
        )
    for stored in shown:
        s = stored.sample
        state = s.state.value + (" (sim)" if stored.origin.simulated else "")
        table.add_row(
            iso_utc(s.timestamp_s).replace("T", " ").rstrip("Z"),
            str(s.info.index),
            s.info.name,
            state,
            _fmt(s.gpu_utilization_percent),
            _memory(s),
            _fmt(s.power_draw_watts, ".1f"),
            _fmt(s.temperature_gpu_celsius),
            _fmt(s.clock_sm_mhz),
        )
    out.print(table)
    if total > len(shown):
        out.print(
            f"showing the last {len(shown)} of {total} samples; narrow with --since/--gpu, "
            "use --resolution 1m, or --json/--csv for all"
        )
