"""The default ``nvidia-smi`` screen (the box-drawn table people paste into tickets).

It carries less than the other formats and truncates long names ("NVIDIA GeForce RTX 2080 ...",
"...em32\\ApplicationFrameHost.exe"): names are kept as printed. Read: the driver/CUDA line, per
GPU the name, persistence mode, bus id, volatile uncorrected ECC, fan, temperature, P-state,
power draw/cap, memory used/total, GPU utilisation, compute and MIG mode; the MIG devices block;
the processes block; and a GPU nvidia-smi could not open, from the line it prints above the screen.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

from gpuwarden.catalog.pci_bus import normalize_pci_bus_id, nvml_bus_id
from gpuwarden.telemetry.smi import catalog_facts, cells
from gpuwarden.telemetry.smi.builder import DeviceBuilder, device_index, snapshot
from gpuwarden.types.telemetry import MigDeviceSample, ProcessSample, Snapshot

_VERSIONS = re.compile(
    r"NVIDIA-SMI \S+\s+(?:Driver|KMD) Version: (?P<driver>\S+)\s+(?:CUDA(?: UMD)? Version: "
    r"(?P<cuda>\S+))?"
)
# what the first cell prints after the name: the persistence mode, or the driver model on Windows
_MODES = ("On", "Off", "WDDM", "TCC", "MCDM", "N/A")
# The bus id cell is read as any word: people redact it in pastes ("00000000: Off"), which must
# not make the whole row unreadable; only a well-formed id is kept (_BUS_ID). A name starts and
# ends with a non-blank: a long run of blanks before or after it is scanned once, not once for
# each place the name might start or end.
_GPU_ROW_1 = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>\S.*?(?<=\S))\s+(?P<mode>"
    + "|".join(map(re.escape, _MODES))
    + r")\s*\|"
    r"\s*(?P<bus>\S+)\s+\S+\s*\|"
    r"\s*(?P<ecc>\S+)\s*\|$"
)
_BUS_ID = re.compile(r"^[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
# Memory-Usage is a bare "N/A" on a GPU in MIG mode (R525+ screens): usage is per MIG device;
# "Not Supported" where the GPU has no memory of its own (Jetson's iGPU, GB10's unified memory).
# The compute mode may be missing: authors narrow the last cell to the utilisation ("|  0%  |").
# It ends with a non-blank, as a name does (_GPU_ROW_1).
_GPU_ROW_2 = re.compile(
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<power>\S+)\s*/\s*(?P<cap>\S+)\s*\|"
    r"\s*(?:N/A|Not Supported|(?P<used>\S+)\s*/\s*(?P<total>\S+))\s*\|"
    r"\s*(?P<util>\S+)(?:\s+(?P<compute>[^\s|][^|]*?(?<=\S)))?\s*\|$"
)
_GPU_ROW_3 = re.compile(r"^\|\s*\|\s*\|\s*(?P<mig>\S+)\s*\|$")
_MIG_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<ci>\d+)\s+(?P<dev>\d+)\s*\|"
    r"\s*(?P<used>\S+)\s*/\s*(?P<total>\S+)\s*\|\s*(?P<sm>\d+)\s+"
    # the "Shared" engines of the GPU instance, under "CE ENC DEC OFA JPG" (every MIG screen)
    r"(?:\S+\s*\|\s*(?P<ce>\d+)\s+\d+\s+\d+\s+(?P<ofa>\d+)\s+\d+\s*\|)?"
)
# GI/CI columns came with MIG (R450); older screens print `GPU  PID  Type  Process name  Usage`.
# The name starts and ends with a non-blank, as a GPU's does (_GPU_ROW_1).
_PROCESS_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?:(?P<gi>\S+)\s+(?P<ci>\S+)\s+)?(?P<pid>\d+)\s+"
    r"(?P<type>C\+G|C|G|M\+C|M)"
    r"\s+(?P<name>\S.*?(?<=\S))\s+(?P<mem>\S+)\s*\|$"
)


_EMPTY_FIRST_CELL = re.compile(r"^\|\s+(\||$)")
_NO_PROCESSES = "No running processes found"


def _section(heading: str) -> str | None:
    if "Processes:" in heading:
        return "processes"
    if "MIG devices:" in heading:
        return "mig"
    if "Bus-Id" in heading:
        return "gpus"
    return None


# Rows of the screen's headings: what tells them from data rows where the "|===" borders that
# close a heading are missing (pasted from a web page that dropped the border lines).
_HEADINGS = ("NVIDIA-SMI ", "Bus-Id", "Memory-Usage", "MIG M.", "Processes:", "Process name")


# A line of the screen's box drawing alone: the rule under the version line ("|-----+-----|"),
# met as a row where the heading has no "|===" border under it (a paste cut above it).
_RULE = re.compile(r"^\|[-+=| ]*$")


def _is_heading(line: str) -> bool:
    return any(word in line for word in _HEADINGS)


# The heading of the screen's MIG devices block, which a paste may hold alone (cut from below the
# GPU table): its rows name their GPU by index.
_MIG_HEADING = re.compile(r"^\|\s*MIG devices:", re.MULTILINE)


def looks_like_table(text: str) -> bool:
    if re.search(r"^\|\s*NVIDIA-SMI \S+", text, re.MULTILINE):
        return True
    lines = [line.rstrip() for line in text.splitlines()]
    if _MIG_HEADING.search(text) and any(_MIG_ROW.match(line) for line in lines):
        return True
    # a paste of a GPU's rows alone, the header left out: its first row, then its second
    return any(_GPU_ROW_1.match(a) and _GPU_ROW_2.match(b) for a, b in itertools.pairwise(lines))


def _first_timestamp(text: str, default: float) -> float:
    for line in text.splitlines()[:3]:
        stamp = cells.parse_smi_time(line.strip())
        if stamp is not None:
            return stamp
    return default


def _first_border_line(lines: list[str]) -> int | None:
    """The number of the first "|===" border line, None when there is none."""
    return next((n for n, line in enumerate(lines, start=1) if line.startswith("|=")), None)


class _Rows:
    """The rows of one screen read so far: per GPU index its builder, MIG devices, processes."""

    def __init__(self, versions: re.Match[str] | None, unheaded: bool) -> None:
        self.versions = versions
        self.unheaded = unheaded  # no heading anywhere: rows are told apart by their shape
        self.builders: dict[int, DeviceBuilder] = {}
        self.mig: dict[int, list[tuple[MigDeviceSample, catalog_facts.MigEngines]]] = {}
        self.processes: dict[int, list[ProcessSample]] = {}
        self.current: DeviceBuilder | None = None  # the GPU whose second and third rows follow
        self.second_row_read = False  # the current GPU's second row was read

    def awaits_second_row(self) -> bool:
        return self.current is not None and not self.second_row_read

    def read(self, line: str, section: str | None) -> bool:
        """Read ``line`` as a row of ``section``; whether it was one."""
        gpus = section == "gpus"
        if gpus and (match := _GPU_ROW_1.match(line)):
            self.current = _read_gpu_identity(self.builders, match, self.versions)
            self.second_row_read = False
        elif gpus and self.current is not None and (match := _GPU_ROW_2.match(line)):
            _read_gpu_row(self.current, match)
            self.second_row_read = True
        elif gpus and self.current is not None and (match := _GPU_ROW_3.match(line)):
            self.current.set("mig_mode", cells.to_bool(match["mig"]))
            self.current = None
        elif section == "mig" and (match := _MIG_ROW.match(line)):
            # checked here, where a bad one is named by its line: its GPU is made at the end
            self.mig.setdefault(device_index(int(match["gpu"])), []).append(
                (_mig_device(match), _mig_engines(match))
            )
        elif (section == "processes" or self.unheaded) and (match := _PROCESS_ROW.match(line)):
            self.processes.setdefault(int(match["gpu"]), []).append(_process(match))
        else:
            return False
        return True


def read_table(text: str, default_timestamp_s: float) -> Snapshot:
    stamp = _first_timestamp(text, default_timestamp_s)
    lines = text.splitlines()
    # the table whose rows are being read: gpus, mig, processes; GPU rows pasted without the
    # header (no "|===" line at all) are read as the gpus table
    unheaded: str | None = None if any(x.startswith("|=") for x in lines) else "gpus"
    rows = _Rows(_VERSIONS.search(text), unheaded is not None)
    # the GPU table is the screen's first: the rows under its first "|===" border are GPU rows
    # even when the heading above it is missing (a paste cut just above that border, or its
    # heading rows elided with "...")
    first_border = _first_border_line(lines)
    last = max((n for n, raw in enumerate(lines, start=1) if raw.strip()), default=0)
    section = unheaded
    heading = ""
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        if not line.strip():
            section, heading = unheaded, ""
            continue
        if line.startswith("|="):
            section = _section(heading) or ("gpus" if number == first_border else None)
            continue
        if section is None or not line.startswith("|"):
            heading += line
            continue
        if _RULE.match(line):  # a rule inside the heading ("|----+----|"), read unheaded
            continue
        if unheaded and _is_heading(line):  # the screen as a web page shows it: no borders
            section = _section(line) or section
            continue
        try:
            if rows.read(line, section):
                continue
            if number == last and _may_be_cut(line, section):  # its whole cells still read
                _read_cut_row(rows, line, section, above=lines[number - 2] if number > 1 else "")
            elif not (_EMPTY_FIRST_CELL.match(line) or _NO_PROCESSES in line):
                raise ValueError(f"unreadable row in the {section} table: {line.strip()[:60]!r}")
        except (ValueError, OverflowError) as exc:
            raise cells.SmiOutputError(number, str(exc)) from None
    return _snapshot(rows, lines, stamp)


# What nvidia-smi prints above the screen for a GPU it cannot open (nvmlDeviceGetHandleByIndex
# fails): it leaves that GPU out of the table and lists the others under their own indexes.
# R5xx and older print the bus id alone, with or without a blank after "GPU" ("... for GPU
# 0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU"), R6xx the index first
# ("... for GPU1: 0000:34:00.0: Unknown Error").
_UNOPENED = re.compile(
    r"Unable to determine the device handle for GPU\s*(?:(?P<index>\d+):\s*)?"
    r"(?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*:\s*(?P<error>.*\S)",
    re.IGNORECASE,
)


def _unopened_gpus(lines: list[str], rows: _Rows) -> list[DeviceBuilder]:
    """The GPUs nvidia-smi names above the screen as ones it could not open and the table does
    not list. One without its index printed takes the index the table skips for it: nvidia-smi
    goes through the GPUs in index order, its errors first, so the n-th such GPU is the n-th
    index the table leaves out (when as many are left out); else the first index after the
    table's."""
    by_bus = {_bus_key(bus): b for b in rows.builders.values() if (bus := b.get("pci_bus_id"))}
    found: dict[str, re.Match[str]] = {}
    for match in (_UNOPENED.match(line.strip()) for line in lines):
        if match is None:
            continue
        # one GPU per bus id: a line printed again by a second run is one GPU, and a GPU another
        # run of the paste listed is that GPU, which nvidia-smi could not open at some point
        bus = _bus_key(match["bus"])
        if bus in by_bus:
            by_bus[bus].note_unopened(match["error"])
        else:
            found.setdefault(bus, match)
    listed = set(rows.builders)
    printed = {int(m["index"]) for m in found.values() if m["index"] is not None}
    unindexed = [m for m in found.values() if m["index"] is None]
    taken = listed | printed
    skipped = sorted(set(range(len(listed) + len(found))) - taken)
    if len(skipped) != len(unindexed):
        after = max(taken, default=-1) + 1
        skipped = list(range(after, after + len(unindexed)))
    gaps = iter(skipped)
    gpus = []
    for match in found.values():
        index = int(match["index"]) if match["index"] is not None else next(gaps)
        b = DeviceBuilder(index)
        # the error line prints the legacy 4-digit domain, the screen NVML's 8 digits: one
        # spelling for every GPU of the snapshot (and of the exporter's pci_bus_id labels)
        b.set("pci_bus_id", nvml_bus_id(match["bus"]) or match["bus"])
        _set_versions(b, rows.versions)
        b.note_unopened(match["error"])
        gpus.append(b)
    return gpus


def _bus_key(bus: str) -> str:
    """A bus id as one GPU's key: the table prints an 8-digit PCI domain, the error line 4."""
    return normalize_pci_bus_id(bus) or bus


def _snapshot(rows: _Rows, lines: list[str], stamp: float) -> Snapshot:
    for b in _unopened_gpus(lines, rows):
        rows.builders.setdefault(b.default_index, b)
    # a GPU named only by its MIG devices' rows: the paste holds the MIG block without the GPU's
    # own rows (nvidia-smi lists a GPU's MIG devices under its index in the GPU table)
    for index in rows.mig:
        _listed_gpu(rows.builders, index, rows.versions)
    if not rows.builders:
        raise cells.SmiOutputError(None, "an nvidia-smi screen without any GPU row")
    has_process_block = bool(rows.processes) or any("Processes:" in line for line in lines)
    for index, b in rows.builders.items():
        if index in rows.mig:
            b.set("mig_devices", _with_profiles(b.get("name"), rows.mig[index]))
        if has_process_block and b.fault is None:  # of a GPU not opened, none is known
            b.set("processes", tuple(rows.processes.get(index, ())))
    samples = [b.build(stamp) for _, b in sorted(rows.builders.items())]
    return snapshot(samples, timestamp_s=stamp, host=None)


# What a cell cut at the end of a paste holds whole: a number followed by its unit (the unit is
# printed after the number, so the number is complete), or "N/A".
_WHOLE_CELL = re.compile(r"(?:\d(?:%|[A-Za-z]+)|N/A)\s*$")
_GPU_CELLS = 3  # every row of the GPU table has three cells
# a process row is one cell; a MIG row's regex reads its first cells only: neither is padded
_OTHER_ROW_CELLS = 1


def _may_be_cut(line: str, section: str | None) -> bool:
    """Whether the text may end inside this row: it is not closed by "|", or (its trailing
    blanks gone) it closes after fewer cells than a GPU row has."""
    return not line.endswith("|") or (section == "gpus" and line.count("|") <= _GPU_CELLS)


def _close_cut_row(line: str, cells_per_row: int) -> str:
    """The text ends inside a row (a paste, or a stored copy, cut short): the cut cell is kept
    when what it holds is whole, else read as N/A, and the cells after it as N/A, so the row's
    whole cells read. A row that still reads as nothing is skipped: what was cut is lost."""
    texts = line[1:].split("|")  # the cells' texts, the cut one last
    if not _WHOLE_CELL.search(texts[-1]):
        texts[-1] = " N/A "
    texts += [" N/A "] * (cells_per_row - len(texts))
    return "|" + "|".join(texts) + "|"


# The words of a GPU's second row's first cell: four readings of their own (fan, temperature,
# P-state, power draw and cap), where a row cut inside it loses only the cut one. The other cells
# hold one reading each (memory "used / total", utilisation): _close_cut_row keeps or drops them.
_FIRST_CELL_WORDS = ("fan", "temp", "perf", "power", "/", "cap")
_CELLS_AFTER_FIRST = " N/A / N/A | N/A "
# A word of that cell that is whole wherever it stands: a number and its unit, N/A, ERR!, "/"; a
# P-state is whole only with a blank after it ("P1" may be the start of "P12").
_WHOLE_WORD = re.compile(r"^(?:\d+(?:\.\d+)?(?:%|[A-Za-z]+)|N/A|ERR!|/)$")
_PSTATE = re.compile(r"^P\d{1,2}$")


def _close_cut_second_row(line: str) -> str | None:
    """A GPU's second row the text ends inside its first cell ("| N/A   36C    P0    6"), closed:
    the cut word dropped unless it is whole, the words and cells after it N/A, so the fan,
    temperature and whatever else was printed whole read. None when the text ends elsewhere or
    its words are not that cell's."""
    if "|" in line[1:]:
        return None
    words = line[1:].split()
    if words and not _WHOLE_WORD.match(words[-1]):
        words.pop()
    if not words or not all(_WHOLE_WORD.match(w) or _PSTATE.match(w) for w in words):
        return None
    words += [w if w == "/" else "N/A" for w in _FIRST_CELL_WORDS[len(words) :]]
    return f"| {' '.join(words)} |{_CELLS_AFTER_FIRST}|"


def _read_cut_row(rows: _Rows, line: str, section: str | None, above: str) -> None:
    """Read the row the text ends inside (``above``: the line printed above it), as far as it is
    whole: a GPU's second row cut in its first cell, a row whose whole cells read once closed,
    else a GPU's first row cut before its cells read (``_read_cut_first_row``)."""
    if _read_cut_second_row(rows, line, section):
        return
    cut_cells = _GPU_CELLS if section == "gpus" else _OTHER_ROW_CELLS
    if not rows.read(_close_cut_row(line, cut_cells), section) and section == "gpus":
        _read_cut_first_row(rows, line, above)


# A GPU's first row the text ends inside: the index printed at its start, then at least the
# first letter of the name (product names start with one: NVIDIA, GeForce, Tesla, Quadro...).
# Without a letter the index itself may be cut ("|   1" of "|  12": trailing blanks are not
# kept), and what follows an index in the screen's other numbered rows is a number (a process
# row's PID, GI and CI ids). ``cell``: the first cell, up to its "|" or the cut.
_CUT_FIRST_ROW = re.compile(r"^\|\s*(?P<index>\d+)\s+(?P<cell>[A-Za-z][^|]*)(?P<closed>\|)?")
# What nvidia-smi prints right above every GPU's first row: the border under the table's heading
# ("|===+===") or the rule closing the GPU above ("+---+---"). A line quoted in prose below the
# screen has the prose above it.
_ABOVE_FIRST_ROW = ("|=", "+-")


def _read_cut_first_row(rows: _Rows, line: str, above: str) -> None:
    """List the GPU whose first row the text ends inside, where that row is one of the GPU
    table's (under a border of the table: a paste without borders tells its rows apart by their
    shape, which a cut row has lost): its index; its name when whole (followed by the mode or by
    "|": a name the cut ends inside is no name); its persistence mode; its bus id when whole. The
    cell after the bus id's, the ECC count, is not read: it is the one cut, and a number without
    a unit is never whole (``_WHOLE_CELL``)."""
    in_table = not rows.unheaded and above.startswith(_ABOVE_FIRST_ROW)
    match = _CUT_FIRST_ROW.match(line) if in_table else None
    if match is None:
        return
    b = rows.current = _listed_gpu(rows.builders, int(match["index"]), rows.versions)
    rows.second_row_read = False
    cell = match["cell"].rstrip()
    mode = cell.split()[-1]
    if mode in _MODES and mode != cell:
        _read_mode(b, mode)
        b.set("name", cell.removesuffix(mode).strip())
    elif match["closed"]:
        b.set("name", cell)
    if match["closed"]:
        bus_id = (line[match.end() :].partition("|")[0].split() or [""])[0]
        b.set("pci_bus_id", bus_id if _BUS_ID.match(bus_id) else None)


def _read_cut_second_row(rows: _Rows, line: str, section: str | None) -> bool:
    """Read ``line`` as the current GPU's second row cut short; whether it was one."""
    second = _close_cut_second_row(line) if rows.awaits_second_row() else None
    try:
        return second is not None and rows.read(second, section)
    except ValueError:  # whole words of another kind ("12W" as a fan): read as a cut row
        return False


def _listed_gpu(
    builders: dict[int, DeviceBuilder], index: int, versions: re.Match[str] | None
) -> DeviceBuilder:
    """The builder of the GPU the screen lists under ``index``, made where the screen first
    names it (its first row, or its MIG devices' rows)."""
    if index not in builders:
        b = builders[index] = DeviceBuilder(index)
        b.set("index", index)
        _set_versions(b, versions)
    return builders[index]


def _read_gpu_identity(
    builders: dict[int, DeviceBuilder], match: re.Match[str], versions: re.Match[str] | None
) -> DeviceBuilder:
    b = _listed_gpu(builders, int(match["index"]), versions)
    b.set("name", match["name"].strip())
    b.set("pci_bus_id", match["bus"] if _BUS_ID.match(match["bus"]) else None)
    _read_mode(b, match["mode"])
    if match["ecc"] in ("On", "Off"):  # MIG mode: the counts are per MIG device
        b.set("ecc_mode_enabled", match["ecc"] == "On")
    else:
        b.set("ecc_errors_uncorrected_volatile", cells.to_int(match["ecc"]))
    return b


def _read_mode(b: DeviceBuilder, mode: str) -> None:
    if mode in ("On", "Off"):  # else the Windows driver model (WDDM/TCC)
        b.set("persistence_mode", mode == "On")


def _set_versions(b: DeviceBuilder, versions: re.Match[str] | None) -> None:
    if versions is not None:
        # "Driver Version: N/A" inside a Jetson container that sees no driver
        b.set("driver_version", cells.to_version(versions["driver"]))
        b.set("cuda_driver_version", cells.to_version(versions["cuda"]))


def _with_profiles(
    gpu_name: str | None, devices: list[tuple[MigDeviceSample, catalog_facts.MigEngines]]
) -> tuple[MigDeviceSample, ...]:
    """The MIG devices, named by their catalog profile where the screen singles one out: by
    the GPU instance's memory and its shared engines (one copy engine per slice, the optical-flow
    engine of a "+me" profile), else its SMs. A device that shares its GPU instance with other
    compute instances (two "1c.2g.10gb" devices share GI 3) is a compute-instance profile no
    table here names: left unnamed (its SMs with the instance's memory would read "1g.10gb")."""
    per_instance = Counter(device.gpu_instance_id for device, _ in devices)
    return tuple(
        catalog_facts.with_profiles(gpu_name, [(device, engines)])[0]
        if per_instance[device.gpu_instance_id] == 1
        else device
        for device, engines in devices
    )


def _mig_engines(match: re.Match[str]) -> catalog_facts.MigEngines:
    ce, ofa = match["ce"], match["ofa"]
    return catalog_facts.MigEngines(
        copy_engines=None if ce is None else int(ce), ofa=None if ofa is None else int(ofa)
    )


def _mig_device(match: re.Match[str]) -> MigDeviceSample:
    return MigDeviceSample(
        gpu_instance_id=int(match["gi"]),
        compute_instance_id=int(match["ci"]),
        profile=None,  # the screen does not name the profile: with_profiles
        memory_used_bytes=cells.to_bytes(match["used"]),
        memory_total_bytes=cells.to_bytes(match["total"]),
        sm_count=int(match["sm"]),
    )


# nvidia-smi cuts a cell too wide for its column and ends it with "..." ("RTX 3060 ...",
# "...\WinStore.App.exe", a 6-digit "10052..." MiB): what was cut cannot be read back.
_CUT_CELL = "..."


def _process(match: re.Match[str]) -> ProcessSample:
    memory = match["mem"]
    return ProcessSample(
        pid=int(match["pid"]),
        used_memory_bytes=None if memory.endswith(_CUT_CELL) else cells.to_bytes(memory),
        name=match["name"].strip(),
        kind=match["type"],
        gpu_instance_id=cells.to_int(match["gi"]),
        compute_instance_id=cells.to_int(match["ci"]),
    )


# the screen abbreviates the compute mode ("E. Process", "E. Thread", "Prohibited"): the names
# --query-gpu=compute_mode prints
_COMPUTE_MODES = {"E. Process": "Exclusive_Process", "E. Thread": "Exclusive_Thread"}


def _read_gpu_row(b: DeviceBuilder, match: re.Match[str]) -> None:
    b.set("fan_speed_percent", cells.to_float(match["fan"]))
    b.set("temperature_gpu_celsius", cells.to_celsius(match["temp"]))
    b.set("pstate", cells.to_text(match["perf"]))
    b.set("power_draw_watts", cells.to_float(match["power"]))
    b.set("power_limit_watts", cells.to_float(match["cap"]))
    b.set("memory_used_bytes", cells.to_bytes(match["used"]))
    b.set("memory_total_bytes", cells.to_bytes(match["total"]))
    b.set("gpu_utilization_percent", cells.to_float(match["util"]))
    if match["compute"] is not None:
        compute = match["compute"].strip()
        b.set("compute_mode", _COMPUTE_MODES.get(compute, compute))
