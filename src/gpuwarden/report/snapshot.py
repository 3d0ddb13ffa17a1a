"""`gpuwarden snapshot`: one reading of every GPU as a table or a `gpuwarden.snapshot/1` document.

JSON keeps base units (bytes, watts, ratios) with ``null`` for what the backend does not report;
the table shows GiB, percent and MHz. Simulated readings say SIMULATED in the header and the JSON
carries ``"simulated": true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from gpuwarden.report.output import console, print_json
from gpuwarden.report.telemetry_records import device_record
from gpuwarden.telemetry.sim import Scenario
from gpuwarden.types.telemetry import DeviceEvent, DeviceSample, DeviceState, Snapshot
from gpuwarden.units import GIB

SNAPSHOT_SCHEMA = "gpuwarden.snapshot/1"
SCENARIOS_SCHEMA = "gpuwarden.sim.scenarios/1"
_NONE = "–"


def iso_utc(timestamp_s: float) -> str:
    return datetime.fromtimestamp(timestamp_s, UTC).isoformat(timespec="milliseconds")


def event_record(event: DeviceEvent) -> dict[str, Any]:
    return {
        "kind": event.kind.value,
        "timestamp_s": event.timestamp_s,
        "uuid": event.uuid,
        "index": event.index,
        "code": event.code,
        "message": event.message,
    }


def snapshot_document(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "schema": SNAPSHOT_SCHEMA,
        "timestamp": iso_utc(snapshot.timestamp_s),
        "timestamp_s": snapshot.timestamp_s,
        "host": snapshot.host,
        "backend": snapshot.backend,
        "simulated": snapshot.simulated,
        "source": snapshot.source,
        "devices": [device_record(s) for s in snapshot.samples],
        "events": [event_record(e) for e in snapshot.events],
    }


def print_snapshot_json(snapshot: Snapshot) -> None:
    print_json(snapshot_document(snapshot))


def _num(value: float | None, spec: str = ".0f", suffix: str = "") -> str:
    return _NONE if value is None else f"{format(value, spec)}{suffix}"


def _memory(sample: DeviceSample) -> str:
    used, total = sample.memory_used_bytes, sample.info.memory_total_bytes
    if used is None:
        return _NONE
    return f"{used / GIB:.1f}/{total / GIB:.1f}" if total else f"{used / GIB:.1f}"


def _power(sample: DeviceSample) -> str:
    draw, limit = sample.power_draw_watts, sample.power_limit_watts
    if draw is None:
        return _NONE
    return f"{draw:.0f}/{limit:.0f}" if limit is not None else f"{draw:.0f}"


def _health(sample: DeviceSample) -> str:
    notes = []
    if sample.ecc_errors_uncorrected_volatile:
        notes.append(f"ECC DBE {sample.ecc_errors_uncorrected_volatile}")
    if sample.remapped_rows_pending:
        notes.append("remap pending")
    if sample.retired_pages_pending:
        notes.append("retire pending")
    if sample.xid_last is not None:
        notes.append(f"Xid {sample.xid_last}")
    down = [link.link for link in sample.nvlinks or () if link.active is False]
    if down:
        notes.append("NVLink down " + ",".join(str(d) for d in down))
    return ", ".join(notes) or "ok"


def short_name(name: str) -> str:
    """ "NVIDIA H100 80GB HBM3" → "H100 80GB HBM3": the vendor prefix only costs width."""
    for prefix in ("NVIDIA ", "Tesla "):
        name = name.removeprefix(prefix)
    return name


def _row(sample: DeviceSample) -> list[str | Text]:
    info = sample.info
    if sample.state is not DeviceState.OK:
        state = Text(sample.state.value.upper(), style="bold red")
        return [str(info.index), short_name(info.name), *[_NONE] * 8, state]
    reasons = [r for r in sample.clock_event_reasons or () if r != "gpu_idle"]
    return [
        str(info.index),
        short_name(info.name),
        _num(sample.gpu_utilization_percent),
        _num(sample.sm_active_ratio, ".2f"),
        _memory(sample),
        _power(sample),
        _num(sample.temperature_gpu_celsius),
        _num(sample.clock_sm_mhz),
        ", ".join(reasons) or ("idle" if sample.clock_event_reasons else _NONE),
        str(len(sample.processes)) if sample.processes is not None else _NONE,
        _health(sample),
    ]


def header(snapshot: Snapshot) -> Text:
    text = Text()
    if snapshot.simulated:
        text.append("SIMULATED", style="bold reverse yellow")
        text.append(" data, not a real GPU · ")
    text.append(f"{snapshot.host} · backend {snapshot.backend} · {iso_utc(snapshot.timestamp_s)}")
    if snapshot.source:
        text.append(f" · {snapshot.source}")
    return text


def print_snapshot_table(snapshot: Snapshot) -> None:
    out = console()
    out.print(header(snapshot))
    columns = (
        "GPU", "name", "util %", "SM act", "mem GiB", "power W",
        "temp °C", "SM MHz", "clock events", "procs", "health",
    )  # fmt: skip
    left = {"name", "clock events", "health"}
    table = Table(title="SIMULATED snapshot" if snapshot.simulated else "snapshot")
    for column in columns:
        table.add_column(
            column, justify="left" if column in left else "right", no_wrap=column == "name"
        )
    for sample in snapshot.samples:
        table.add_row(*_row(sample))
    out.print(table)
    for sample in snapshot.samples:
        if sample.state is not DeviceState.OK:
            out.print(f"GPU {sample.info.index} {sample.state.value}: {sample.error or ''}")
    if not snapshot.samples:
        out.print("no devices reported")
    for event in snapshot.events:
        where = f"GPU {event.index}" if event.index is not None else "backend"
        code = f" {event.code}" if event.code is not None else ""
        out.print(f"event {event.kind.value}{code} on {where}: {event.message}")


def print_scenarios(scenarios: Mapping[str, Scenario], *, as_json: bool) -> None:
    """`snapshot --backend sim --scenario list`: the simulator's scenarios."""
    if as_json:
        print_json(
            {
                "schema": SCENARIOS_SCHEMA,
                "scenarios": [
                    {
                        "name": s.name,
                        "description": s.description,
                        "gpu": s.gpu_key,
                        "gpus": s.gpus,
                        "faults": [
                            {"kind": f.kind.value, "gpu": f.gpu, "at_s": f.at_s} for f in s.faults
                        ],
                    }
                    for s in scenarios.values()
                ],
            }
        )
        return
    width = max(len(name) for name in scenarios)
    out = console()
    for name, scenario in scenarios.items():
        out.print(f"{name:<{width}}  {scenario.description}")
