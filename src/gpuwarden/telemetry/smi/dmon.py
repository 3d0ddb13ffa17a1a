"""``nvidia-smi dmon``: '#' header lines name the columns, one row per GPU per sample time.

Columns are read by name, so ``-s`` selections and ``-o DT`` (date/time columns) work. A GPU
index seen again starts the next sample block: one Snapshot per block. dmon prints no time unless
``-o T`` was given; blocks then get ``default_timestamp_s`` plus the delay between samples each:
``-d N`` of the pasted command when the paste shows it (``dmon_interval_s``), else dmon's default
of 1 s.

A paste often holds lines another program printed among dmon's (the job's own log before the
header, a line after the last sample, a command's message between rows). Such a line is text, not
a sample: every dmon row starts with the GPU index, or with the date/time ``-o DT`` puts first,
and has as many cells as the header has columns. A line that has neither is skipped; one that
starts like a row or has the header's width is a row, and read (or refused) as one.
"""

from __future__ import annotations

import calendar
import itertools
import re
import shlex
import time
from collections.abc import Callable

from gpuwarden.telemetry.smi import cells
from gpuwarden.telemetry.smi.builder import DeviceBuilder, Series, snapshot
from gpuwarden.types.telemetry import DeviceSample, Snapshot
from gpuwarden.units import MIB

DMON_INTERVAL_S = 1.0  # nvidia-smi dmon -d default (nvidia-smi -h: "Default is 1 sec")
# How far down a paste the "# gpu ..." header is looked for, under lines another program printed.
_HEADER_WITHIN_LINES = 5
# What a dmon row starts with: the GPU index, -o D's YYYYMMDD, or -o T's HH:MM:SS.
_ROW_START = re.compile(r"^(?:\d+|\d{1,2}:\d{2}:\d{2})$")
_DELAY = re.compile(r"^(?:-d|--delay)(?:=(?P<joined>\S+))?$")


def _mib(cell: str | None) -> int | None:
    value = cells.to_float(cell)
    return None if value is None else round(value * MIB)


def _mb_per_s(cell: str | None) -> float | None:
    value = cells.to_float(cell)
    return None if value is None else value * 1_000_000


# dmon column → the DeviceSample fields it fills. "sm" is utilization.gpu. "pclk" is the processor
# clock (dmon -h: "c - Proc and Mem Clocks"), the streaming multiprocessors' clock: the SM clock,
# and the graphics clock too, one clock domain on the GPUs dmon runs on (each dmon fixture's -q
# twin of the same state prints Graphics = SM = pclk, idle and under load).
DMON_FIELDS: dict[str, tuple[tuple[str, ...], Callable[[str | None], object]]] = {
    "pwr": (("power_draw_watts",), cells.to_float),
    "gtemp": (("temperature_gpu_celsius",), cells.to_celsius),
    "temp": (("temperature_gpu_celsius",), cells.to_celsius),  # the name before gtemp/mtemp (R4xx)
    "mtemp": (("temperature_memory_celsius",), cells.to_celsius),
    "sm": (("gpu_utilization_percent",), cells.to_float),
    "mem": (("memory_utilization_percent",), cells.to_float),
    "enc": (("encoder_utilization_percent",), cells.to_float),
    "dec": (("decoder_utilization_percent",), cells.to_float),
    "mclk": (("clock_memory_mhz",), cells.to_float),
    "pclk": (("clock_sm_mhz", "clock_graphics_mhz"), cells.to_float),
    "fb": (("memory_used_bytes",), _mib),
    "rxpci": (("pcie_rx_bytes_per_second",), _mb_per_s),
    "txpci": (("pcie_tx_bytes_per_second",), _mb_per_s),
}


def _is_banner(line: str) -> bool:
    """A capture-file section separator ("####...####"): the dmon output ended before it."""
    stripped = line.strip()
    return len(stripped) >= 20 and set(stripped) == {"#"}


def _is_header(line: str) -> bool:
    words = line.lstrip("#").split()
    return line.startswith("#") and "gpu" in [w.lower() for w in words[:3]]


def _is_row_start(word: str) -> bool:
    return bool(_ROW_START.match(word))


def looks_like_dmon(text: str) -> bool:
    """The "# gpu ..." header opens the text, or follows a few lines of text that are not dmon
    rows (another program's output pasted above it)."""
    content = (line for line in text.splitlines() if line.strip())
    for line in itertools.islice(content, _HEADER_WITHIN_LINES):
        if _is_header(line):
            return True
        words = line.split()
        if line.startswith("#") or _is_row_start(words[0]):
            return False  # another format's first line, or rows without their header
    return False


def dmon_interval_s(command: str | None) -> float:
    """The delay between samples an ``nvidia-smi dmon`` command line asks for (``-d N`` /
    ``--delay=N``, seconds), else dmon's default. None or another command: the default."""
    if command is None or "dmon" not in command:
        return DMON_INTERVAL_S
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for i, word in enumerate(words):
        match = _DELAY.match(word)
        if match is None:
            continue
        value = match["joined"] or (words[i + 1] if i + 1 < len(words) else "")
        try:
            delay = float(value)
        except ValueError:
            return DMON_INTERVAL_S  # a malformed -d: dmon itself would have refused it
        return delay if 0 < delay < float("inf") else DMON_INTERVAL_S
    return DMON_INTERVAL_S


def read_dmon(
    text: str,
    default_timestamp_s: float,
    *,
    interrupted: bool = False,
    interval_s: float = DMON_INTERVAL_S,
) -> list[Snapshot]:
    """``interrupted``: a Ctrl-C stopped dmon, so its last row may be cut short (then dropped).
    ``interval_s``: the delay between samples when the rows carry no time (``dmon_interval_s``)."""
    lines = text.splitlines()
    last_row = max((n for n, line in enumerate(lines, start=1) if line.strip()), default=0)
    columns: list[str] | None = None
    snapshots = Series()
    block: list[DeviceSample] = []
    seen: set[int] = set()
    block_stamp = default_timestamp_s

    def close_block() -> None:
        if block:
            snapshots.append(snapshot(list(block), timestamp_s=block_stamp, host=None))

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
        row = line.split()
        if not _is_row_start(row[0]) and (columns is None or len(row) != len(columns)):
            continue  # another program's text pasted with dmon's: neither a row nor a torn one
        if columns is None:
            raise cells.SmiOutputError(number, "dmon row before the '# gpu ...' header line")
        if interrupted and number == last_row and len(row) < len(columns):
            break
        if len(row) != len(columns):
            raise cells.SmiOutputError(
                number, f"{len(row)} cells, the dmon header has {len(columns)} columns"
            )
        cell = dict(zip(columns, row, strict=True))
        try:
            index = cells.to_int(cell["gpu"])
            if index is None:
                raise ValueError("no gpu index")
            if index in seen:
                close_block()
                block, seen = [], set()
            stamp = _row_time(cell, default_timestamp_s + snapshots.count * interval_s)
            if not block:
                block_stamp = stamp
            b = DeviceBuilder(index)
            b.set("index", index)
            for column, value in cell.items():
                if column in DMON_FIELDS:
                    fields, convert = DMON_FIELDS[column]
                    for field in fields:
                        b.set(field, convert(value))
                elif column not in ("gpu", "date", "time"):
                    b.set_extra(f"dmon_{column}", cells.to_float(value))
        except (ValueError, OverflowError) as exc:
            raise cells.SmiOutputError(number, str(exc)) from None
        seen.add(index)
        block.append(b.build(stamp))
    if columns is None:
        raise cells.SmiOutputError(None, "no '# gpu ...' dmon header line")
    close_block()
    if not snapshots.count:
        raise cells.SmiOutputError(None, "dmon header without any sample row")
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
