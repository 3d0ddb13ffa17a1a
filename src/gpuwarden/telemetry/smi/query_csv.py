"""``--query-gpu=... --format=csv`` and ``--query-compute-apps=... --format=csv``.

The header names the columns ("memory.used [MiB]"); with ``nounits`` the cells are bare numbers
and the unit comes from the header, without it the cells carry it ("8192 MiB"). A file written
with ``noheader`` cannot say which column is which, so it is refused unless the caller names the
fields. Each row is one device, named by its index, UUID or bus id (the first of them the file
has); one seen again starts the next Snapshot (``-l``). A file with none of them (``-l`` logs of
``timestamp,utilization.gpu``) is grouped by its timestamp: nvidia-smi stamps every row of one
query with the same time, so a new time is the next reading.

nvidia-smi prints the ``timestamp`` as "YYYY/MM/DD HH:MM:SS.mmm". A first row whose time lost the
start of its year ("025/03/21 02:06:50.642") was cut by the selection of a paste: it cannot be
placed in time (read as year 25 it would stretch the series over two thousand years), so that
row is dropped; such a time anywhere else is refused as damaged.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from gpuwarden.errors import quoted, shown
from gpuwarden.telemetry.clock_events import decode_clock_events
from gpuwarden.telemetry.smi import cells
from gpuwarden.telemetry.smi.builder import DeviceBuilder, Series, said_on_last_gpu, snapshot
from gpuwarden.telemetry.smi.selection import WRONG_COMMAND_HINT, GpuSelection
from gpuwarden.types.telemetry import DeviceSample, ProcessSample, Snapshot

# nvidia-smi's CSV time with the start of its year cut off (1 to 4 of its digits missing).
_CUT_CSV_TIME = re.compile(r"^\d{0,3}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?$")
_HEADER_CELL = re.compile(r"^(?P<name>[a-z_][A-Za-z0-9_.]*)(?: \[(?P<unit>[^\]]+)\])?$")


def _bytes(cell: str | None, unit: str) -> int | None:
    return cells.to_bytes(cell, unit or "MiB")


def _float(cell: str | None, _unit: str) -> float | None:
    return cells.to_float(cell)


def _celsius(cell: str | None, _unit: str) -> float | None:
    return cells.to_celsius(cell)


def _int(cell: str | None, _unit: str) -> int | None:
    return cells.to_int(cell)


def _bool(cell: str | None, _unit: str) -> bool | None:
    return cells.to_bool(cell)


def _text(cell: str | None, _unit: str) -> str | None:
    return cells.to_text(cell)


def _version(cell: str | None, _unit: str) -> str | None:
    return cells.to_version(cell)


def _ns(cell: str | None, unit: str) -> int | None:
    return cells.us_to_ns(cell, unit or "us")


def _recovery_action(cell: str | None, _unit: str) -> str | None:
    return cells.to_recovery_action(cell)


def _fabric_state(cell: str | None, _unit: str) -> str | None:
    return cells.to_fabric_state(cell)


def _fabric_status(cell: str | None, _unit: str) -> str | None:
    return cells.to_fabric_status(cell)


def _reasons(cell: str | None, _unit: str) -> tuple[str, ...] | None:
    mask = cells.to_int(cell)
    return None if mask is None else decode_clock_events(mask)


CellReader = Callable[[str | None, str], object]

NOHEADER_HINT = (
    "a CSV written with `--format=csv,noheader` does not say which column is which: pass the "
    "field list it was written with (`gpuwarden snapshot --backend smi --from FILE "
    "--query-fields index,name,memory.used`, the names of its --query-gpu= or "
    "--query-compute-apps= option), or keep the `nvidia-smi --query-gpu=...` command line "
    "above the output in the file"
)

# nvidia-smi --help-query-gpu name → DeviceSample/DeviceInfo field (types/telemetry.py comments).
# Earlier names win when a file carries both spellings (gpucurrent over current).
QUERY_GPU_FIELDS: tuple[tuple[str, str, CellReader], ...] = (
    ("index", "index", _int),
    ("uuid", "uuid", _text),
    ("name", "name", _text),
    ("pci.bus_id", "pci_bus_id", _text),
    ("serial", "serial", _text),
    # --help-query-gpu's other spellings ("name" or "gpu_name", ...): a header row prints the
    # first, a noheader CSV read with its command line's fields has the one the user typed
    ("gpu_uuid", "uuid", _text),
    ("gpu_name", "name", _text),
    ("gpu_bus_id", "pci_bus_id", _text),
    ("gpu_serial", "serial", _text),
    ("vbios_version", "vbios_version", _text),
    ("kmd_version", "driver_version", _version),
    ("driver_version", "driver_version", _version),
    ("memory.total", "memory_total_bytes", _bytes),
    ("memory.used", "memory_used_bytes", _bytes),
    ("memory.free", "memory_free_bytes", _bytes),
    ("memory.reserved", "memory_reserved_bytes", _bytes),
    ("utilization.gpu", "gpu_utilization_percent", _float),
    ("utilization.memory", "memory_utilization_percent", _float),
    ("utilization.encoder", "encoder_utilization_percent", _float),
    ("utilization.decoder", "decoder_utilization_percent", _float),
    ("temperature.gpu", "temperature_gpu_celsius", _celsius),
    ("temperature.memory", "temperature_memory_celsius", _celsius),
    # T.Limit: degrees below the max operating temperature, a margin (not a temperature)
    ("temperature.gpu.tlimit", "temperature_margin_celsius", _float),
    ("power.draw", "power_draw_watts", _float),
    ("power.draw.average", "power_draw_watts", _float),
    ("power.draw.instant", "power_draw_watts", _float),
    ("power.limit", "power_limit_watts", _float),
    ("enforced.power.limit", "power_enforced_limit_watts", _float),
    ("clocks.current.sm", "clock_sm_mhz", _float),
    ("clocks.sm", "clock_sm_mhz", _float),
    ("clocks.current.memory", "clock_memory_mhz", _float),
    ("clocks.mem", "clock_memory_mhz", _float),
    ("clocks.current.graphics", "clock_graphics_mhz", _float),
    ("clocks.gr", "clock_graphics_mhz", _float),
    ("clocks.current.video", "clock_video_mhz", _float),
    ("clocks.video", "clock_video_mhz", _float),
    ("clocks.max.sm", "clock_sm_max_mhz", _float),
    ("clocks.max.memory", "clock_memory_max_mhz", _float),
    ("clocks.max.mem", "clock_memory_max_mhz", _float),
    ("pstate", "pstate", _text),
    ("fan.speed", "fan_speed_percent", _float),
    ("clocks_event_reasons.active", "clock_event_reasons", _reasons),
    ("clocks_throttle_reasons.active", "clock_event_reasons", _reasons),
    ("clocks_event_reasons_counters.sw_power_cap", "power_violation_ns_total", _ns),
    ("ecc.mode.current", "ecc_mode_enabled", _bool),
    ("ecc.errors.corrected.volatile.total", "ecc_errors_corrected_volatile", _int),
    ("ecc.errors.uncorrected.volatile.total", "ecc_errors_uncorrected_volatile", _int),
    ("ecc.errors.corrected.aggregate.total", "ecc_errors_corrected_aggregate", _int),
    ("ecc.errors.uncorrected.aggregate.total", "ecc_errors_uncorrected_aggregate", _int),
    ("retired_pages.single_bit_ecc.count", "retired_pages_single_bit", _int),
    ("retired_pages.sbe", "retired_pages_single_bit", _int),
    ("retired_pages.double_bit.count", "retired_pages_double_bit", _int),
    ("retired_pages.dbe", "retired_pages_double_bit", _int),
    ("retired_pages.pending", "retired_pages_pending", _bool),
    ("remapped_rows.correctable", "remapped_rows_correctable", _int),
    ("remapped_rows.uncorrectable", "remapped_rows_uncorrectable", _int),
    ("remapped_rows.pending", "remapped_rows_pending", _bool),
    ("remapped_rows.failure", "remapped_rows_failure", _bool),
    ("remapped_rows.histogram.none", "remapped_rows_banks_exhausted", _int),
    ("ecc.errors.uncorrected.aggregate.sram.thresholdExceeded", "sram_threshold_exceeded", _bool),
    ("gpu_recovery_action", "recovery_action", _recovery_action),
    ("fabric.state", "fabric_state", _fabric_state),
    ("fabric.status", "fabric_status", _fabric_status),
    ("pcie.link.gen.gpucurrent", "pcie_link_gen_current", _int),
    ("pcie.link.gen.current", "pcie_link_gen_current", _int),
    ("pcie.link.gen.max", "pcie_link_gen_max", _int),
    ("pcie.link.width.current", "pcie_link_width_current", _int),
    ("pcie.link.width.max", "pcie_link_width_max", _int),
    ("persistence_mode", "persistence_mode", _bool),
    ("compute_mode", "compute_mode", _text),
    ("mig.mode.current", "mig_mode", _bool),
    ("mig.mode.pending", "mig_mode_pending", _bool),
)
# Numbers without a DeviceSample field, kept in DeviceSample.extra under these names.
QUERY_GPU_EXTRA: dict[str, str] = {
    "power.draw.instant": "power_draw_instant_watts",
    "power.default_limit": "power_default_limit_watts",
    "power.min_limit": "power_min_limit_watts",
    "power.max_limit": "power_max_limit_watts",
    "compute_cap": "compute_capability",
}
_THERMAL_COUNTERS = (
    "clocks_event_reasons_counters.sw_thermal_slowdown",
    "clocks_event_reasons_counters.hw_thermal_slowdown",
)
_BY_NAME: dict[str, list[tuple[str, CellReader]]] = {}
for _query, _field, _reader in QUERY_GPU_FIELDS:
    _BY_NAME.setdefault(_query, []).append((_field, _reader))


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    unit: str


def parse_header(line: str) -> list[Column] | None:
    """The header row, or None if ``line`` is not one (a data row)."""
    columns = []
    for raw in line.split(","):
        match = _HEADER_CELL.match(raw.strip())
        if match is None:
            return None
        columns.append(Column(match["name"], match["unit"] or ""))
    return columns


def _cells(
    lines: list[tuple[int, str]], width: int, interrupted: bool
) -> Iterator[tuple[int, list[str]]]:
    """Each row's cells, split as it is read (a long log is not held twice); the last row is
    dropped when Ctrl-C cut it short."""
    pending: tuple[int, list[str]] | None = None
    for number, line in lines:
        if pending is not None:
            yield pending
        pending = (number, [c.strip() for c in line.split(",")])
    if pending is not None and not (interrupted and len(pending[1]) < width):
        yield pending


# What nvidia-smi prints instead of any row when a --query-gpu / --query-compute-apps field is not
# one it knows (a field added after its release: "compute_cap" on R470, for one).
_UNKNOWN_FIELD = re.compile(r'^\s*Field "(?P<field>[^"]*)" is not a valid field to query\.?\s*$')
_UNKNOWN_FIELD_HINT = (
    "`nvidia-smi --help-query-gpu` (or --help-query-compute-apps), run with the same nvidia-smi, "
    "lists the fields it knows: query only those and save that output"
)


def _refuse_unknown_field(lines: list[tuple[int, str]]) -> None:
    """Raise when nvidia-smi refused the query: its message is no row of values."""
    for number, line in lines:
        if (refused := _UNKNOWN_FIELD.match(line)) is not None:
            raise cells.SmiOutputError(
                number,
                f"nvidia-smi refused the query: {refused['field']!r} is not a field it knows, "
                "so it printed no reading",
                hint=_UNKNOWN_FIELD_HINT,
            )


def _rows(
    text: str, fields: Sequence[str] | None, *, interrupted: bool = False
) -> tuple[list[Column], Iterator[tuple[int, list[str]]]]:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise cells.SmiOutputError(None, "empty CSV")
    _refuse_unknown_field(lines)
    first_number, first = lines[0]
    header = parse_header(first)
    if header is None:
        if fields is None:
            raise cells.SmiOutputError(
                first_number,
                "CSV without a header row (written with noheader?): its columns are unknown",
                hint=NOHEADER_HINT,
            )
        header = [Column(f, "") for f in fields]
    else:
        del lines[0]
    return header, _cells(_before_other_output(lines, len(header)), len(header), interrupted)


def _before_other_output(lines: list[tuple[int, str]], width: int) -> list[tuple[int, str]]:
    """The CSV's lines, less what another command printed after it in the same paste (`time`'s
    report, a second run): nvidia-smi writes its rows with no blank line between them, so a line
    after a blank one that is not a row as wide as the header starts some other output."""
    for at, ((before, _), (number, line)) in enumerate(itertools.pairwise(lines), start=1):
        if number > before + 1 and len(line.split(",")) != width:
            return lines[:at]
    return lines


# The columns that name a device, in the order they are trusted.
_IDENTITY = ("index", "uuid", "gpu_uuid", "pci.bus_id", "gpu_bus_id")


def read_query_gpu(
    text: str,
    default_timestamp_s: float,
    fields: Sequence[str] | None = None,
    *,
    interrupted: bool = False,
    selection: GpuSelection | None = None,
    looped: bool = True,
) -> list[Snapshot]:
    """The readings of a --query-gpu CSV. ``selection``: the GPUs the command selected (``-i 3``,
    ``-i 0,2``), whose indices a CSV without an index column does not print: each reading's
    rows are those GPUs, in order (see ``selection``). ``looped``: the command may have printed
    several readings (False: it has no -l, and a second reading of the GPUs it selects is
    refused)."""
    header, rows = _rows(text, fields, interrupted=interrupted)
    names = [c.name for c in header]
    known = sum(1 for n in names if n in _BY_NAME or n in QUERY_GPU_EXTRA)
    if known == 0:
        raise cells.SmiOutputError(1, "no --query-gpu field this parser knows in the header")
    identity = next((names.index(n) for n in _IDENTITY if n in names), None)
    snapshots = Series()
    block: list[DeviceSample] = []
    seen: set[str] = set()
    indices: dict[str, int] = {}  # identity cell → device index, in order of first appearance
    selected = None if selection is None else selection.count
    block_stamp = default_timestamp_s
    block_time_cell: str | None = None
    host: str | None = None
    time_at = names.index("timestamp") if "timestamp" in names else None
    for order, (number, row) in enumerate(rows):
        if len(row) != len(header):
            raise cells.SmiOutputError(
                number, f"{len(row)} cells, the header has {len(header)} columns"
            )
        if time_at is not None and _CUT_CSV_TIME.match(row[time_at]):
            if order == 0:
                continue  # the paste's selection began inside this row
            raise cells.SmiOutputError(number, f"timestamp {row[time_at]!r} lost its year")
        b = DeviceBuilder(len(block))
        stamp = default_timestamp_s
        time_cell: str | None = None
        for column, cell in zip(header, row, strict=True):
            b.note(cell)
            try:
                if column.name == "timestamp":
                    time_cell = cell
                    stamp = cells.parse_smi_time(cell) or default_timestamp_s
                elif column.name == "hostname":
                    host = host or cells.to_text(cell)
                for field, reader in _BY_NAME.get(column.name, ()):
                    b.set(field, reader(cell, column.unit))
                if column.name in QUERY_GPU_EXTRA:
                    b.set_extra(QUERY_GPU_EXTRA[column.name], cells.to_float(cell))
            except (ValueError, OverflowError) as exc:
                raise cells.SmiOutputError(number, f"column {column.name}: {exc}") from None
        try:
            thermal = [_ns(row[names.index(n)], "us") for n in _THERMAL_COUNTERS if n in names]
        except ValueError as exc:
            raise cells.SmiOutputError(number, f"thermal slowdown counters: {exc}") from None
        present = [t for t in thermal if t is not None]
        b.set("thermal_violation_ns_total", sum(present) if present else None)
        if identity is not None:  # a device seen again: the next reading of a `-l` loop
            key = row[identity]
            next_reading = key in seen
            position = indices.setdefault(key, len(indices))
            _check_selected(selection, position, f"{shown(names[identity])} {quoted(key)}", number)
        elif selected is not None:  # the GPUs selected, in order: each `-l` loop's reading
            next_reading = len(block) == selected
        else:  # rows of one query share its timestamp; rows are GPUs in order
            next_reading = bool(block) and time_cell is not None and time_cell != block_time_cell
        if next_reading and not looped and selection is not None:
            raise cells.SmiOutputError(
                number,
                f"a second reading of the GPUs the command selects ({selection.option}) under "
                "a command that reports once (no -l / --loop)",
                hint=WRONG_COMMAND_HINT,
            )
        if next_reading:
            snapshots.append(snapshot(block, timestamp_s=block_stamp, host=host))
            block, seen = [], set()
        if not block:
            block_stamp, block_time_cell = stamp, time_cell
        if identity is not None:
            seen.add(key)
        else:
            position = len(block)
        # what the selection tells of this GPU; an index or identity column's cell, set above,
        # stays (a builder keeps the first value set)
        _set_selected(b, selection, position)
        b.set("index", position)
        block.append(b.build(stamp))
    if selection is not None:
        selection.check_printed(len(block), cut=interrupted)
    events = said_on_last_gpu(block, _selection_notes(selection, names)) if block else ()
    snapshots.append(snapshot(block, timestamp_s=block_stamp, host=host, events=events))
    return snapshots.readings()


def _check_selected(
    selection: GpuSelection | None, position: int, described: str, line: int | None
) -> None:
    """Refuses a GPU printed beyond the ones the command selects."""
    beyond = None if selection is None else selection.beyond_selected(position, described)
    if beyond is not None:
        raise cells.SmiOutputError(line, beyond, hint=WRONG_COMMAND_HINT)


def _set_selected(b: DeviceBuilder, selection: GpuSelection | None, position: int) -> None:
    """What the command's selection tells of the GPU printed at ``position`` of a reading: its
    index (a list of indices), its UUID or bus id (one GPU named so)."""
    if selection is None:
        return
    b.set("index", selection.index_at(position))
    identity = selection.identity()
    if identity is not None:
        b.set(*identity)


def _selection_notes(selection: GpuSelection | None, names: list[str]) -> list[str]:
    """What the command's selection leaves unknown of GPUs whose rows print no index."""
    if selection is None or "index" in names:
        return []
    identified = any(n in names for n in _IDENTITY)
    note = selection.unknown_index_note(identified=identified)
    return [] if note is None else [note]


_APP_COLUMNS = frozenset({"pid", "process_name", "name", "used_gpu_memory", "used_memory"})
# The columns of `nvidia-smi --help-query-compute-apps` that --query-gpu has none of: the process's
# own. (Its "name" field prints as process_name; "name" alone is also --query-gpu's.)
_PROCESS_ONLY_COLUMNS = _APP_COLUMNS - {"name"}
_APP_GPU_COLUMNS = frozenset({"timestamp", "gpu_name", "gpu_bus_id", "gpu_serial", "gpu_uuid"})


def is_compute_apps_header(columns: list[Column]) -> bool:
    """Whether a header is --query-compute-apps': only its fields, one of them a process's."""
    names = {c.name for c in columns}
    return bool(names & _PROCESS_ONLY_COLUMNS) and names <= _APP_COLUMNS | _APP_GPU_COLUMNS


def read_compute_apps(
    text: str,
    default_timestamp_s: float,
    fields: Sequence[str] | None = None,
    *,
    interrupted: bool = False,
    selection: GpuSelection | None = None,
) -> Snapshot:
    """Processes per GPU. The GPUs are named by UUID and bus id; their index is their order,
    or what ``selection`` (the command's -i: nvidia-smi lists the processes of the GPUs it
    selects) tells of them."""
    header, rows = _rows(text, fields, interrupted=interrupted)
    names = [c.name for c in header]
    if "pid" not in names:
        raise cells.SmiOutputError(
            1,
            "a --query-compute-apps CSV without its pid column: a process list whose processes "
            "cannot be told apart, and no GPU reading",
            hint="query the processes with pid (--query-compute-apps=gpu_uuid,pid,process_name,"
            "used_memory), and the GPUs with --query-gpu",
        )
    builders: dict[str, DeviceBuilder] = {}
    processes: dict[str, list[ProcessSample]] = {}
    stamp: float | None = None
    name_at = names.index("process_name") if "process_name" in names else None
    for number, raw_row in rows:
        row = raw_row
        if len(row) > len(header) and name_at is not None:
            # a process name with commas: the surplus cells belong to it
            surplus = len(row) - len(header)
            row = [*row[:name_at], ", ".join(row[name_at : name_at + surplus + 1])]
            row += raw_row[name_at + surplus + 1 :]
        if len(row) != len(header):
            raise cells.SmiOutputError(
                number, f"{len(row)} cells, the header has {len(header)} columns"
            )
        cell = dict(zip(names, row, strict=True))
        key = cell.get("gpu_uuid") or cell.get("gpu_bus_id") or ""
        b = builders.setdefault(key, DeviceBuilder(len(builders)))
        unit = next((c.unit for c in header if c.name in ("used_gpu_memory", "used_memory")), "")
        try:
            b.set("uuid", cells.to_text(cell.get("gpu_uuid")))
            b.set("name", cells.to_text(cell.get("gpu_name")))
            b.set("pci_bus_id", cells.to_text(cell.get("gpu_bus_id")))
            b.set("serial", cells.to_text(cell.get("gpu_serial")))
            if stamp is None:
                stamp = cells.parse_smi_time(cell.get("timestamp"))
            pid = cells.to_int(cell["pid"])
            if pid is None:
                raise ValueError("a process without pid")
            used = cell.get("used_gpu_memory", cell.get("used_memory"))
            processes.setdefault(key, []).append(
                ProcessSample(
                    pid=pid,
                    used_memory_bytes=_bytes(used, unit),
                    name=cells.to_text(cell.get("process_name", cell.get("name"))),
                )
            )
        except (ValueError, OverflowError) as exc:
            raise cells.SmiOutputError(number, str(exc)) from None
    timestamp_s = default_timestamp_s if stamp is None else stamp
    for key, b in builders.items():
        b.set("processes", tuple(processes[key]))
    notes = _apps_selected(builders, selection)
    samples = [b.build(timestamp_s) for b in builders.values()]
    events = said_on_last_gpu(samples, notes) if samples and notes else ()
    return snapshot(samples, timestamp_s=timestamp_s, host=None, events=events)


def _apps_selected(builders: dict[str, DeviceBuilder], selection: GpuSelection | None) -> list[str]:
    """What the command's -i tells of the GPUs of a process list (keyed by their gpu_uuid /
    gpu_bus_id cell, "" where the rows print neither): a GPU beyond the ones it selects, or one
    it names otherwise, is refused; each GPU's index (or UUID / bus id) is set where every GPU
    selected is listed (a GPU with no process prints no row). What it leaves unknown, as
    notes."""
    if selection is None or not builders:
        return []
    for position, (key, b) in enumerate(builders.items()):
        _check_selected(selection, position, f"the GPU of processes {quoted(key)}", None)
        _refuse_other_identity(b, selection)
    if len(builders) == selection.count:
        for position, b in enumerate(builders.values()):
            _set_selected(b, selection, position)
        note = selection.unknown_index_note(identified="" not in builders)
        return [] if note is None else [note]
    if "" in builders:
        return [
            f"which of the GPUs selected ({selection.option}) each process runs on: the rows "
            "print no gpu_uuid or gpu_bus_id"
        ]
    return [
        f"each GPU's index: the command selects {selection.option} and lists the processes of "
        f"{len(builders)} GPU(s) (a GPU without processes prints no row)"
    ]


def _refuse_other_identity(b: DeviceBuilder, selection: GpuSelection) -> None:
    """Refuses a GPU whose rows name it otherwise than the one GPU the command names."""
    identity = selection.identity()
    if identity is None:
        return
    name, wanted = identity
    printed = b.info.get(name)
    if printed is not None and str(printed).lower() != wanted.lower():
        raise cells.SmiOutputError(
            None,
            f"processes of the GPU {printed} under a command that selects {selection.option}",
            hint=WRONG_COMMAND_HINT,
        )
