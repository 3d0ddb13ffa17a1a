"""`gpuwarden history`: stored readings as a table, JSON (`gpuwarden.history/1`) or CSV.

A JSON/CSV row is the snapshot's device record (report.telemetry_records.device_record, so the
two schemas cannot drift) plus ``timestamp`` (ISO-8601 UTC) first and where the reading came
from (``host``, ``backend``, ``simulated``, ``run_id``: the `record` run, null for a rollup) last:
simulated data says so on every row. A reading that is not a finite number (a backend passing
on an exporter's ``+Inf``) is ``null`` (JSON has no Infinity or NaN) and blank in CSV. A CSV
cell is quoted by the csv module where it holds a comma, a quote or a line break, and a text
cell a spreadsheet would read as a formula starts with "'" (OWASP's CSV Injection rule).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import sys
from collections.abc import Iterable
from typing import Any

from rich.table import Table

from gpuwarden.errors import GpuwardenError
from gpuwarden.report.output import console, json_text
from gpuwarden.report.snapshot import memory_cell
from gpuwarden.report.telemetry_records import device_record
from gpuwarden.telemetry.store import StoredSample
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample
from gpuwarden.units import iso_utc

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
    "run_id",
)


def history_row(stored: StoredSample) -> dict[str, Any]:
    sample = stored.sample
    row: dict[str, Any] = {"timestamp": iso_utc(sample.timestamp_s, timespec="milliseconds")}
    row.update(device_record(sample))
    row["uuid"] = sample.info.uuid
    row["host"] = stored.origin.host
    row["backend"] = stored.origin.backend
    row["simulated"] = stored.origin.simulated
    row["run_id"] = stored.run_id
    return row


def print_history_json(rows: Iterable[StoredSample], *, db: str, resolution: str) -> None:
    """Streamed: one sample per line, so days of readings never sit in memory at once.
    ``simulated`` (any row simulated) comes after the samples for that reason. When the store
    fails part-way (a damaged page), the document still ends as JSON, with the samples read so
    far and ``"error"`` (the same object as on stderr); the error then goes on to the caller."""
    out = sys.stdout
    head = json_text({"schema": SCHEMA, "db": db, "resolution": resolution})
    out.write(head[:-1] + ', "samples": [')
    simulated, separator = False, "\n  "
    tail = ""
    try:
        for stored in rows:
            simulated = simulated or stored.origin.simulated
            out.write(separator + json_text(history_row(stored)))
            separator = ",\n  "
    except GpuwardenError as exc:
        tail = f', "error": {json_text(exc.to_dict())}'
        raise
    finally:
        out.write(
            ("\n" if separator != "\n  " else "")
            + f'], "simulated": {json.dumps(simulated)}{tail}}}\n'
        )


# OWASP's CSV Injection rule: a spreadsheet opening the file reads a cell that begins with one
# of these as a formula (`=HYPERLINK(...)`, `@SUM(...)`, `-2+3`); a host, GPU or process name
# is recorded as the machine gave it, so a text cell beginning so gets a leading "'", which the
# spreadsheet reads as "this is text". Numbers are written as numbers (-1 stays -1).
_FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json_text(value, separators=(",", ":"))
    if isinstance(value, str) and value.startswith(_FORMULA_LEADS):
        return "'" + value
    return str(value)


def print_history_csv(rows: Iterable[StoredSample]) -> None:
    """Same columns as the JSON rows; nested values (processes, links, ...) as JSON text."""
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(COLUMNS)
    for stored in rows:
        row = history_row(stored)
        writer.writerow([_csv_cell(row.get(column)) for column in COLUMNS])


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return _NONE if value is None or not math.isfinite(value) else format(value, spec)


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
    runs = any(stored.run_id is not None for stored in shown)  # none in rollups
    columns = ("time (UTC)", *(("run",) if runs else ()), "gpu", "name", "state", "util %",
               "mem GiB", "watts", "°C", "SM MHz")  # fmt: skip
    for column in columns:
        table.add_column(
            column,
            justify="left" if column in ("time (UTC)", "name", "state") else "right",
            no_wrap=column == "time (UTC)",
        )
    for stored in shown:
        s = stored.sample
        state = s.state.value + (" (sim)" if stored.origin.simulated else "")
        run = (_NONE if stored.run_id is None else str(stored.run_id),) if runs else ()
        table.add_row(
            iso_utc(s.timestamp_s, timespec="milliseconds").replace("T", " ").rstrip("Z"),
            *run,
            str(s.info.index),
            s.info.name,
            state,
            _fmt(s.gpu_utilization_percent),
            memory_cell(s),  # as `snapshot` shows it: one rule for both
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
