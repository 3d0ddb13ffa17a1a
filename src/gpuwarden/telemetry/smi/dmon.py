"""``nvidia-smi dmon``: '#' header lines name the columns, one row per GPU per sample time.

Columns are read by name, so ``-s`` selections and ``-o DT`` (date/time columns) work. A GPU
index seen again starts the next sample block: one Snapshot per block. dmon prints no time unless
``-o T`` was given; blocks then get ``default_timestamp_s`` plus the default 1 s delay each.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable

from gpuwarden.telemetry.smi import cells
from gpuwarden.telemetry.smi.builder import DeviceBuilder, Series, snapshot
from gpuwarden.types.telemetry import DeviceSample, Snapshot
from gpuwarden.units import MIB

DMON_INTERVAL_S = 1.0  # nvidia-smi dmon -d default (nvidia-smi -h: "Default is 1 sec")


def _mib(cell: str | None) -> int | None:
    value = cells.to_float(cell)
    return None if value is None else round(value * MIB)


def _mb_per_s(cell: str | None) -> float | None:
    value = cells.to_float(cell)
    return None if value is None else value * 1_000_000


# dmon column → DeviceSample field. "sm" is utilization.gpu, "pclk" the graphics clock
# (nvidia-smi dmon -h: "pclk: processor clock").
DMON_FIELDS: dict[str, tuple[str, Callable[[str | None], object]]] = {
    "pwr": ("power_draw_watts", cells.to_float),
    "gtemp": ("temperature_gpu_celsius", cells.to_celsius),
    "temp": ("temperature_gpu_celsius", cells.to_celsius),  # the name before gtemp/mtemp (R4xx)
    "mtemp": ("temperature_memory_celsius", cells.to_celsius),
    "sm": ("gpu_utilization_percent", cells.to_float),
    "mem": ("memory_utilization_percent", cells.to_float),
    "enc": ("encoder_utilization_percent", cells.to_float),
    "dec": ("decoder_utilization_percent", cells.to_float),
    "mclk": ("clock_memory_mhz", cells.to_float),
    "pclk": ("clock_graphics_mhz", cells.to_float),
    "fb": ("memory_used_bytes", _mib),
    "rxpci": ("pcie_rx_bytes_per_second", _mb_per_s),
    "txpci": ("pcie_tx_bytes_per_second", _mb_per_s),
}


def _is_banner(line: str) -> bool:
    """A capture-file section separator ("####...####"): the dmon output ended before it."""
    stripped = line.strip()
    return len(stripped) >= 20 and set(stripped) == {"#"}


def looks_like_dmon(text: str) -> bool:
    for line in text.splitlines():
        if line.strip():
            words = line.lstrip("#").split()
            return line.startswith("#") and "gpu" in [w.lower() for w in words[:3]]
    return False


def parse_dmon(
    text: str, source: str, default_timestamp_s: float, *, interrupted: bool = False
) -> list[Snapshot]:
    """``interrupted``: a Ctrl-C stopped dmon, so its last row may be cut short (then dropped)."""
    lines = text.splitlines()
    last_row = max((n for n, line in enumerate(lines, start=1) if line.strip()), default=0)
    columns: list[str] | None = None
    snapshots = Series()
    block: list[DeviceSample] = []
    seen: set[int] = set()
    block_stamp = default_timestamp_s

    def close_block() -> None:
        if block:
            snapshots.append(
                snapshot(list(block), timestamp_s=block_stamp, host=None, source=source)
            )

    for number, raw in enumerate(lines, start=1):
        if _is_banner(raw):
            break
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            words = line.lstrip("#").split()
            if (
                words
                and words[0].lower() in ("gpu", "date", "time")
                and "gpu" in (w.lower() for w in words)
            ):
                columns = [w.lower() for w in words]
            continue  # the units line ("# Idx W C ...") and other comments
        if columns is None:
            raise cells.corrupt(source, number, "dmon row before the '# gpu ...' header line")
        row = line.split()
        if interrupted and number == last_row and len(row) < len(columns):
            break
        if len(row) != len(columns):
            raise cells.corrupt(
                source, number, f"{len(row)} cells, the dmon header has {len(columns)} columns"
            )
        cell = dict(zip(columns, row, strict=True))
        try:
            index = cells.to_int(cell["gpu"])
            if index is None:
                raise ValueError("no gpu index")
            if index in seen:
                close_block()
                block, seen = [], set()
            stamp = _row_time(cell, default_timestamp_s + snapshots.count * DMON_INTERVAL_S)
            if not block:
                block_stamp = stamp
            b = DeviceBuilder(index)
            b.set("index", index)
            for column, value in cell.items():
                if column in DMON_FIELDS:
                    field, convert = DMON_FIELDS[column]
                    b.set(field, convert(value))
                elif column not in ("gpu", "date", "time"):
                    b.set_extra(f"dmon_{column}", cells.to_float(value))
        except (ValueError, OverflowError) as exc:
            raise cells.corrupt(source, number, str(exc)) from None
        seen.add(index)
        block.append(b.build(stamp))
    if columns is None:
        raise cells.corrupt(source, None, "no '# gpu ...' dmon header line")
    close_block()
    if not snapshots.count:
        raise cells.corrupt(source, None, "dmon header without any sample row")
    return snapshots.readings()


def _row_time(cell: dict[str, str], fallback: float) -> float:
    """``-o D`` prints YYYYMMDD, ``-o T`` HH:MM:SS (local time of the host; read as UTC)."""
    day, clock = cell.get("date"), cell.get("time")
    if clock is None:
        return fallback
    try:
        parsed = time.strptime(f"{day or '19700101'} {clock}", "%Y%m%d %H:%M:%S")
    except ValueError as exc:
        raise ValueError(f"date/time {day} {clock}: {exc}") from None
    return float(calendar.timegm(parsed))
