"""``nvidia-smi topo -m`` / ``topo -mp`` and ``nvidia-smi nvlink -s`` / ``nvlink --status``.

Not telemetry snapshots: ``doctor`` reads these captures directly (``parse_topology``,
``parse_nvlink_status``) to check the wiring and the links against the GPU model.

The matrix is read as nvidia-smi writes it to a pipe: the header row underlined with ANSI
escapes, cells separated by tabs, affinity columns padded with an extra tab (Linux
"0-23<tab>0<tab><tab>N/A", Windows "<tab><tab><tab><tab>N/A"), or as pasted with the tabs turned
into spaces. Older drivers name a NIC column by its device ("mlx5_0") and print SOC for SYS.
A paste that lost a separator runs names or codes together ("NIC8NIC9", "NIC11CPU Affinity",
"NODENODE", an older driver's "mlx5_2mlx5_3"): they are split back, since no name or code of the
legend is two of them.
A paste double-spaced by the Markdown or mail it went through has a blank line between two rows:
it does not end the matrix. A ``topo -p2p`` peer-access matrix has the same shape, but its cells
(OK, CNS, GNS, TNS, NS, DR, U) say whether peer access works, not what links the GPUs: it is
refused, never read as links.
In ``nvlink -s``, a link's rate is read in the unit nvidia-smi prints it in (GB/s); a rate in
another unit, negative or beyond a float's range (5,000 digits) is refused naming it. Older
drivers (and a GB300's ``nvlink -e``) print the GPU lines without their UUID; another ``nvlink``
listing keyed by link (``-e`` error counters, ``-gt`` throughput, ``-R`` peers: "Link 0: Replay
Errors: 0") is refused as what it is, not read as link states, and so is
an ``nvlink -c`` capabilities listing ("Link 0, P2P is supported: true"). A paste of
``nvlink -s`` and such a listing one under the other is cut at its command lines ("### nvidia-smi
nvlink -e") or, without them, at its GPU lines (``nvlink_listing``), and the states' part read.
A command's output cut from an nvidia_gpu_exporter capture file may carry the next section
after it; a whole capture file gives its ``topo -m`` / ``nvlink -s`` section.
A paste cut in the middle of a row (the text ends without a newline inside the matrix: a copy
or an excerpt cut there) keeps the rows above it. The cut row is read as printed when it can
be, else without its last cell, which the cut may have split ("NV1" of NV18, "N" of N/A); its
affinities are read from the left (a cut loses the end); a cut row whose links are not all left
is missing, and a matrix whose only row is cut is refused. A NUMA affinity run together with
the GPU NUMA ID after it ("0N/A") is two cells.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from gpuwarden.errors import naming, quoted
from gpuwarden.telemetry.smi import cells
from gpuwarden.telemetry.smi.paste import command_output_lines, pasted_commands
from gpuwarden.types.topology import (
    GpuNvLinks,
    LinkKind,
    NvLinkState,
    NvLinkStatus,
    NvLinkSupport,
    Ranges,
    TopoGpu,
    TopoLink,
    Topology,
    TopoNic,
)

TOPO_HINT = (
    "save the output of `nvidia-smi topo -m` (or `topo -mp`) unchanged and pass that file; "
    "an error message from nvidia-smi is not a topology"
)
NVLINK_HINT = (
    "save the output of `nvidia-smi nvlink -s` (or `nvlink --status`) unchanged and pass that "
    "file; `nvidia-smi -L` lists the GPUs but not their links"
)

# A device column: GPU#, NIC#, or a NIC by its device name (mlx5_0, bnxt_re1, hfi1_0, ib0)
_DEVICE = re.compile(r"^(?:GPU\d+|NIC\d+|[a-z][a-z0-9_]*\d)$")
# indices and counts are a few digits: a bounded group never feeds int() a 5,000-digit number
_GPU = re.compile(r"^GPU(\d{1,6})$")
_NIC_ROW = re.compile(r"^NIC(\d{1,6})$")
_TAIL_NAMES = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_TAIL_SPLIT = re.compile("|".join(re.escape(n) for n in _TAIL_NAMES) + r"|\S+")
_NVLINK_CODE = re.compile(r"^NV(\d{1,6})$")
_OTHER_CODE = re.compile(r"^[A-Z][A-Z0-9]{1,5}$")  # a legend code newer than this parser
_KINDS = {
    "PIX": LinkKind.PIX,
    "PXB": LinkKind.PXB,
    "PHB": LinkKind.PHB,
    "NODE": LinkKind.NODE,
    "SYS": LinkKind.SYS,
    "SOC": LinkKind.SYS,  # before NODE existed: "PCIe as well as the SMP link between sockets"
}
_SELF = "X"
# the cells of a `topo -p2p r|w|n|a|p` peer-access matrix (its legend: Status Ok, Chipset / GPU /
# Topology not supported, Not supported, Disabled by regkey, Unknown): a status, not a link
_P2P_STATUS = frozenset({"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"})
# the meaning starts and ends with a non-blank: a lazy meaning before "\s*$" tries every end in a
# long run of blanks (n² steps)
_LEGEND = re.compile(r"^\s*(\S+)\s+=\s+(\S(?:.*\S)?)\s*$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_RANGE = re.compile(r"^(\d{1,6})(?:-(\d{1,6}))?$")
# a matrix row, also indented (pasted inside a Markdown code block or a list): a GPU's, or a
# NIC#'s (a paste that kept only the NIC rows below the GPU rows)
_DEVICE_LABELS = ("GPU", "NIC")  # what a matrix row's label opens with
_TOPO_ROW = re.compile(r"^[ \t]*(?:GPU|NIC)\d+[ \t]+(?:\S+[ \t]+)*X(?:[ \t]|$)", re.MULTILINE)
# device names run together in a header where a name filled its tab stop ("NIC11NIC12")
_GLUED_DEVICES = re.compile(r"^(?:(?:GPU|NIC)\d+){2,}$")
_ONE_DEVICE = re.compile(r"(?:GPU|NIC)\d+")
# where a name by device ends and the next begins when two ran together ("mlx5_2|mlx5_3"): a
# digit, then a letter
_NAME_BOUNDARY = re.compile(r"(?<=\d)(?=[A-Za-z])")
# the last device name run together with the first affinity column ("NIC11CPU Affinity")
_GLUED_TAIL = re.compile(r"(?<=\d)(?=" + "|".join(re.escape(n) for n in _TAIL_NAMES) + ")")
# link codes run together in a row where the separator between two cells was lost in the paste
# ("NODENODE", "NODEPXB"): every code of the legend, nothing else, so a single code never splits
_GLUED_CODES = re.compile(r"^(?:PIX|PXB|PHB|NODE|SYS|SOC|NV\d{1,6}){2,}$")
_ONE_CODE = re.compile(r"PIX|PXB|PHB|NODE|SYS|SOC|NV\d{1,6}")
# an affinity run together with the N/A after it where the separator was lost ("0N/A")
_GLUED_NA = re.compile(r"(?<=\d)(?=N/A$)")
GPU_HEADER = re.compile(r"^GPU (\d{1,6}): (.+?) \(UUID: ([^)]*)\)\s*$")
# a GPU line without its UUID ("GPU 0: NVIDIA GB300", as a GB300 node's `nvlink -e` prints it):
# a GPU header only when a link line or a statement about the links follows it, since other
# tools print "GPU n: name" lines too
GPU_HEADER_BARE = re.compile(r"^GPU (\d{1,6}): ([^\s()][^()]*?)\s*$")
# a GPU named by its PCI bus id alone ("GPU 00000008:06:00.0", as some `nvlink -e` print it)
GPU_HEADER_BUS = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
# what every GPU line above opens with
GPU_LINE_START = "GPU "
_LINK_WORD = "Link "  # what a link line opens with
LINK_LINE = re.compile(r"^\s*Link (\d{1,6}): (.*?)\s*$")
# the value of another `nvidia-smi nvlink` listing keyed by link, itself "name: value": `-e` error
# counters ("Replay Errors: 0"), `-gt` throughput ("Data Tx: 12 KiB"), `-R` remote ends ("Remote
# Device 00000000:C2:00.0: Link 12"); a link state of `-s` is a speed or <inactive>, never that
_OTHER_LISTING_VALUE = re.compile(r"^[A-Za-z][\w /().-]*?:\s*\S")
# The units nvidia-smi prints a link's rate in, and the bytes per second of each. `nvlink -s`
# prints "%.3f GB/s": every output of R4xx to R6xx drivers in tests/data and the shared fixtures
# (504 links in 25 files), and its help documents the status as active / inactive, no unit.
# NVML's MBps divided by 1000, so decimal. Another unit is refused naming it, never rescaled.
_LINK_RATE_UNITS = {"GB/s": 1e9}
# what a rate's unit is shaped as, printed or not: "<letters>/s" ("GB/s", "TB/s", "GiB/s", "Gb/s")
_PER_SECOND = re.compile(r"^[A-Za-z]{1,4}/s$")
_INACTIVE = "inactive"  # a link that is down, printed "<inactive>"
_MIG_LINE = re.compile(r"^\s*MIG \S+\s+Device \d+:")  # `nvidia-smi -L`, not `nvlink -s`
# a line of `nvidia-smi nvlink -c` / `--capabilities`: one capability of one link, true or false
# ("Link 0, P2P is supported: true", "Link 3, System memory atomics supported: false"); what the
# link can do, never whether it is up
_CAPABILITY_LINE = re.compile(r"^\s*Link \d{1,6}, [^:]+:\s*(?:true|false)\s*$", re.IGNORECASE)
# the start of one, up to where a paste ends inside it ("Link 0, P2P is supp", "... supported: t"):
# no other `nvlink` listing puts a comma after the link number ("Link 0: 26.562 GB/s")
_CAPABILITY_START = re.compile(r"^\s*Link \d{1,6},(?: [^:]*(?::\s*(?P<value>[A-Za-z]*))?)?$")
_CAPABILITY_VALUES = ("true", "false")
CAPABILITIES_REFUSAL = (
    "nvidia-smi nvlink -c prints what each link supports, not its state: "
    "paste `nvidia-smi nvlink -s`"
)


_TOPO_COMMAND = re.compile(r"nvidia-smi(?:\.exe)?\s+topo\b")
# `nvlink -s` / `--status` among the command's options ("nvlink -s -i 0", "nvlink -i 0 -s"): in a
# paste of several `nvlink` commands, the output under it is the states' ("nvlink -e" prints
# error counters, "-c" capabilities)
_NVLINK_COMMAND = re.compile(r"nvidia-smi(?:\.exe)?\s+nvlink\b(?=.*?\s(?:-s|--status)(?:\s|$))")


def lists_nvlink_capabilities(text: str) -> bool:
    """Whether ``text`` holds `nvidia-smi nvlink -c` lines (what each link supports), or ends
    inside its first one (a paste cut there: the text ends without a newline)."""
    lines = text.splitlines()
    if any(_CAPABILITY_LINE.match(line) for line in lines):
        return True
    return bool(lines) and not text.endswith(("\n", "\r")) and _starts_capability(lines[-1])


def _starts_capability(line: str) -> bool:
    """``line`` is the start of a capability line: its value, if begun, a start of true / false."""
    start = _CAPABILITY_START.match(line.rstrip())
    if start is None:
        return False
    value = (start.group("value") or "").lower()
    return any(word.startswith(value) for word in _CAPABILITY_VALUES)


def looks_like_topo(text: str) -> bool:
    """A ``topo -m`` matrix: a GPU row with its X on the diagonal."""
    lines = command_output_lines(text, _TOPO_COMMAND)
    # a row never spans lines: each line that opens as a device row is tried alone (a search of
    # the joined text tried the pattern at every character of it)
    return any(
        _TOPO_ROW.match(line) for _, line in lines if line.lstrip(" \t").startswith(_DEVICE_LABELS)
    )


def looks_like_nvlink_status(text: str) -> bool:
    """``nvlink -s``: a "GPU n: name (UUID: ...)" line followed by links or a statement about
    them (``nvidia-smi -L`` has the GPU lines alone)."""
    lines = [line for _, line in _status_lines(text) if line.strip()]
    # what both GPU lines open with: the other lines are not looked at further
    opening = [at for at, line in enumerate(lines[:-1]) if line.lstrip().startswith(GPU_LINE_START)]
    for current, following in ((lines[at], lines[at + 1]) for at in opening):
        if GPU_HEADER.match(current.strip()) and not GPU_HEADER.match(following.strip()):
            return _about_links(following)
        if GPU_HEADER_BARE.match(current.strip()) and _about_links(following):
            return True
    return False


# ---- topo -m ------------------------------------------------------------------------------


@dataclass
class _Matrix:
    devices: list[str]
    tail: list[str]  # column names after the devices ("CPU Affinity", ...)
    cells: dict[tuple[str, str], str] = field(default_factory=dict)
    tails: dict[str, dict[str, str]] = field(default_factory=dict)  # row -> column -> value
    rows: list[str] = field(default_factory=list)
    row_lines: dict[str, int] = field(default_factory=dict)  # row -> its line number
    inferred: list[str] = field(default_factory=list)  # columns named without a header


def _header(line: str) -> tuple[list[str], list[str]] | None:
    """(device columns, the other columns) of a header row, or None if ``line`` is not one."""
    tokens = [name for token in _GLUED_TAIL.sub(" ", line).split() for name in _names_in(token)]
    devices: list[str] = []
    for token in tokens:
        if not _DEVICE.match(token):
            break
        devices.append(token)
    if not any(_GPU.match(d) for d in devices):
        return None
    tail = _TAIL_SPLIT.findall(" ".join(tokens[len(devices) :]))
    if _SELF in tail:
        return None  # a matrix row ("GPU0  X  NV8 ..."), not the header
    return devices, tail


def _names_in(token: str) -> list[str]:
    """The column names of a header token: itself, or the device names run together in it. A
    name by device is split only into names of one device kind numbered apart ("mlx5_2mlx5_3",
    as older drivers name NIC columns in order), so a single name whose digits run into letters
    ("rocep1s0f0") stays whole."""
    if _GLUED_DEVICES.match(token):
        return _ONE_DEVICE.findall(token)
    names = _NAME_BOUNDARY.split(token)
    kinds = {name.rstrip(string.digits) for name in names}
    if len(names) > 1 and len(kinds) == 1 and all(_DEVICE.match(name) for name in names):
        return names
    return [token]


def _row_cells(line: str) -> list[str]:
    """Cells of a row: tab-separated as written (empty cells kept), else whitespace-separated;
    link codes run together where a separator was lost ("NODENODE") are two cells."""
    raw = [cell.strip() for cell in line.split("\t")] if "\t" in line else line.split()
    return [
        code
        for cell in raw
        for code in (_ONE_CODE.findall(cell) if _GLUED_CODES.match(cell) else [cell])
    ]


def _tail_values(values: list[str], columns: int) -> list[str | None] | None:
    """The affinity cells in column order, or None when they cannot be placed. nvidia-smi pads
    short affinity cells with extra tabs (Linux "0-23<tab>0<tab><tab>N/A", "0-7,16-23<tab><tab>
    N/A<tab><tab>N/A"; Windows "<tab><tab><tab><tab>N/A"): empty cells are padding, never a
    value (an unknown value prints N/A). The values left are read right-aligned: the leading
    CPU affinity is what Windows leaves blank."""
    printed = [v for v in values if v]
    if len(printed) > columns:
        return None
    return [None] * (columns - len(printed)) + list(printed)


def _code(cell: str) -> tuple[LinkKind, int | None] | None:
    nvlink = _NVLINK_CODE.match(cell)
    if nvlink:
        return LinkKind.NVLINK, int(nvlink.group(1))
    if cell in _KINDS:
        return _KINDS[cell], None
    if _OTHER_CODE.match(cell) and cell != _SELF:
        return LinkKind.OTHER, None
    return None


def _tail_cells(values: list[str]) -> list[str]:
    return [part for value in values for part in _GLUED_NA.split(value)]


def _read_cut_row(matrix: _Matrix, line: str) -> None:
    """The row on the line where the paste ends without a newline: read as printed if it can
    be, else without its last cell (which the cut may have split: "NV1" of NV18, "N" of N/A);
    short affinities are read from the left, since a cut loses the end. A row whose links are
    not all left is missing."""
    cells_of_row = _row_cells(line)
    for row in (cells_of_row, cells_of_row[:-1]):
        if _read_cut_cells(matrix, row):
            return


def _read_cut_cells(matrix: _Matrix, row: list[str]) -> bool:
    n = len(matrix.devices)
    if not row or row[0] not in matrix.devices or row[0] in matrix.rows:
        return False
    label, rest = row[0], row[1:]
    if len(rest) < n or not all(
        _is_cell(label, d, c) for d, c in zip(matrix.devices, rest[:n], strict=True)
    ):
        return False
    printed = [v for v in _tail_cells(rest[n:]) if v]
    if len(printed) > len(matrix.tail) or not all(
        _is_tail_value(c, v) for c, v in zip(matrix.tail, printed, strict=False)
    ):
        return False
    tail: list[str | None] = [*printed, *[None] * (len(matrix.tail) - len(printed))]
    _store_row(matrix, label, rest[:n], tail)
    return True


def _is_tail_value(column: str, value: str) -> bool:
    """``value`` reads as ``column`` does in ``_gpu`` (other columns: anything)."""
    try:
        if column == "GPU NUMA ID":
            cells.to_int(value)
        elif column in ("CPU Affinity", "NUMA Affinity"):
            _ranges(value)
    except ValueError:
        return False
    return True


def _is_cell(row: str, column: str, cell: str) -> bool:
    """``cell`` is what row ``row`` may hold in ``column``: X on the diagonal, a link elsewhere."""
    return cell == _SELF if column == row else _code(cell) is not None


def _store_row(matrix: _Matrix, label: str, links: list[str], tail: list[str | None]) -> None:
    for column, cell in zip(matrix.devices, links, strict=True):
        if column != label:
            matrix.cells[(label, column)] = cell
    matrix.tails[label] = {c: v for c, v in zip(matrix.tail, tail, strict=True) if v}
    matrix.rows.append(label)


def _read_row(matrix: _Matrix, number: int, line: str) -> None:
    row = _row_cells(line)
    label, rest = row[0], row[1:]
    if label not in matrix.devices:
        raise cells.LineError(number, f"row {label!r} is not a device of the header")
    if label in matrix.rows:
        raise cells.LineError(number, f"device {label} has two rows")
    n = len(matrix.devices)
    if len(rest) < n or not all(rest[:n]):
        raise cells.LineError(number, f"row {label} has fewer cells than the {n} devices")
    for column, cell in zip(matrix.devices, rest[:n], strict=True):
        if (cell == _SELF) != (column == label):
            where = "off" if cell == _SELF else "on"
            raise cells.LineError(number, f"row {label}: {cell!r} {where} the diagonal")
        if column != label:
            if cell in _P2P_STATUS:
                what = "a peer-access status: a `topo -p2p` matrix, not `topo -m`"
                raise cells.LineError(number, f"row {label}: {cell!r} is {what}")
            if _code(cell) is None:
                raise cells.LineError(number, f"row {label}: {cell!r} is not a link")
    tail = _tail_values(_tail_cells(rest[n:]), len(matrix.tail))
    if tail is None:
        raise cells.LineError(number, f"row {label}: more cells than columns")
    _store_row(matrix, label, rest[:n], tail)


def _ranges(text: str | None) -> Ranges | None:
    """ "0-47,96-143" → ((0, 47), (96, 143)); N/A → None."""
    if cells.is_missing(text):
        return None
    assert text is not None
    out = []
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise ValueError(f"not a CPU/NUMA list: {text!r}")
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if high < low:
            raise ValueError(f"not a CPU/NUMA list: {text!r}")
        out.append((low, high))
    return tuple(out)


def _gpu(label: str, values: dict[str, str], line: int | None) -> TopoGpu:
    match = _GPU.match(label)
    assert match is not None
    try:
        return TopoGpu(
            index=int(match.group(1)),
            label=label,
            cpu_affinity=_ranges(values.get("CPU Affinity")),
            numa_affinity=_ranges(values.get("NUMA Affinity")),
            numa_id=cells.to_int(values.get("GPU NUMA ID")),
        )
    except ValueError as exc:
        raise cells.LineError(line, f"{label}: {exc}") from None


def _links(matrix: _Matrix) -> Iterator[TopoLink]:
    order = matrix.devices
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            forward, backward = matrix.cells.get((a, b)), matrix.cells.get((b, a))
            if forward is not None and backward is not None and forward != backward:
                yield _link(a, b, forward)
                yield _link(b, a, backward)
            elif forward is not None or backward is not None:
                yield _link(a, b, forward or backward or "")


def _link(a: str, b: str, code: str) -> TopoLink:
    kind, nvlinks = _code(code) or (LinkKind.OTHER, None)
    return TopoLink(a=a, b=b, kind=kind, code=code, nvlinks=nvlinks)


def _no_matrix(lines: list[tuple[int, str]]) -> cells.LineError:
    """The error for a text without a matrix, quoting what it says instead (an nvidia-smi
    error message, most often)."""
    first = next(((n, line.strip()) for n, line in lines if line.strip()), None)
    if first is None:
        return cells.LineError(None, "no `nvidia-smi topo -m` matrix: empty")
    number, said = first
    return cells.LineError(number, f"no `nvidia-smi topo -m` matrix: {said[:120]!r}")


def _read_matrix(lines: list[tuple[int, str]], cut: int | None) -> tuple[_Matrix, int]:
    """The matrix from its header row down to the first blank or "Legend" line, and the index
    of the line after it."""
    start = next((i for i, (_, line) in enumerate(lines) if _header(line)), None)
    if start is None:
        return _headerless_matrix(lines, cut)
    header_number, header_line = lines[start]
    header = _header(header_line)
    assert header is not None
    matrix = _Matrix(devices=header[0], tail=header[1])
    if len(set(matrix.devices)) != len(matrix.devices):
        raise cells.LineError(header_number, "a device named twice in the header")
    rows, end = _rows_below(lines, start + 1)
    if not rows:
        raise cells.LineError(header_number, "a topology header without rows")
    _read_rows(matrix, rows, cut)
    return matrix, end


def _rows_below(lines: list[tuple[int, str]], start: int) -> tuple[list[tuple[int, str]], int]:
    """The rows that begin at ``start`` and the index of the line after them. The legend or a
    blank line ends them, but for a blank line between two rows: a paste that went through
    Markdown or a mail client may double-space its lines ("GPU0 ...", "", "GPU1 ...")."""
    rows: list[tuple[int, str]] = []
    end = start
    while end < len(lines) and not lines[end][1].strip().startswith("Legend"):
        if not lines[end][1].strip():
            # the blank run ends the rows unless a row follows it: go on from that row
            after = next((i for i in range(end, len(lines)) if lines[i][1].strip()), len(lines))
            if after == len(lines) or not _is_row(lines[after][1]):
                break
            end = after
        rows.append(lines[end])
        end += 1
    return rows, end


def _is_row(line: str) -> bool:
    """A matrix row: a device's name, then cells with its X among them."""
    tokens = line.split()
    return len(tokens) > 1 and _DEVICE.match(tokens[0]) is not None and _SELF in tokens[1:]


def _headerless_matrix(lines: list[tuple[int, str]], cut: int | None) -> tuple[_Matrix, int]:
    """The matrix of rows pasted without their header row (a copy that starts at "GPU0"): the
    columns are named from what the rows prove (see ``_columns_of_rows``)."""
    start = next((i for i, (_, line) in enumerate(lines) if _TOPO_ROW.match(line)), None)
    if start is None:
        raise _no_matrix(lines)
    block, end = _rows_below(lines, start)
    devices, tail, inferred = _columns_of_rows([(n, _row_cells(line)) for n, line in block])
    matrix = _Matrix(devices=devices, tail=tail, inferred=inferred)
    _read_rows(matrix, block, cut)
    return matrix, end


def _read_rows(matrix: _Matrix, rows: list[tuple[int, str]], cut: int | None) -> None:
    """Every row; the one on line ``cut`` (where the paste was cut) only if it can be."""
    for number, line in rows:
        read = len(matrix.rows)
        if number == cut:
            _read_cut_row(matrix, line)
        else:
            _read_row(matrix, number, line)
        if len(matrix.rows) > read:
            matrix.row_lines[matrix.rows[-1]] = number
    if not matrix.rows:
        raise cells.LineError(rows[0][0], "the matrix's only row is cut off: no row to read")


def _link_width(cells_after_label: list[str]) -> int:
    """How many device cells a row has: the leading X and link codes, before its affinities."""
    width = 0
    for cell in cells_after_label:
        if cell != _SELF and _code(cell) is None:
            break
        width += 1
    return width


def _columns_of_rows(rows: list[tuple[int, list[str]]]) -> tuple[list[str], list[str], list[str]]:
    """(device columns, affinity columns, the device columns no row names) of header-less rows.

    nvidia-smi prints the GPUs first, GPU0..GPUn-1, then the NICs, NIC0..: a row's X is its own
    column, an NV# cell is a GPU's, and a NIC row NICj in column c puts the first NIC at c - j,
    so the c - j columns before it are the GPUs' (what proves them when only NIC rows are left).
    Without a NIC row, the columns after the last proven GPU are taken for NICs only on an
    NVSwitch board (three or more GPUs bonded to each other by the same NV#), where a GPU with
    its NVLinks up shows in every healthy row; on a PCIe or bridged board a GPU's column looks
    like a NIC's, so the rows are refused."""
    first_line = rows[0][0]
    widths = {_link_width(row[1:]) for _, row in rows}
    if len(widths) != 1:
        raise cells.LineError(first_line, "rows of unequal width and no header row to name them")
    width = widths.pop()
    named: dict[int, str] = {}
    for number, row in rows:
        label, links = row[0], row[1 : width + 1]
        if not _DEVICE.match(label):
            raise cells.LineError(number, f"row {label!r} is not a device")
        column = links.index(_SELF) if _SELF in links else -1
        gpu = _GPU.match(label)
        if column < 0 or column in named or (gpu is not None and int(gpu.group(1)) != column):
            raise cells.LineError(number, f"row {label}: its X does not place it without a header")
        named[column] = label
    nvlinked = {
        c
        for _, row in rows
        for c, cell in enumerate(row[1 : width + 1])
        if _NVLINK_CODE.match(cell)
    }
    proven = nvlinked | {c for c, label in named.items() if _GPU.match(label)}
    # the first NIC column each NIC row proves: every column before it is a GPU's
    nic_rows = {c - int(m.group(1)) for c, label in named.items() if (m := _NIC_ROW.match(label))}
    if not proven and nic_rows:
        proven = set(range(min(nic_rows)))
    if not proven:
        raise cells.LineError(first_line, "no row places a GPU column without a header")
    gpus = max(proven) + 1
    if len(nic_rows) > 1 or any(first < gpus for first in nic_rows):
        raise cells.LineError(first_line, "the NIC rows do not fit the GPU columns")
    if not nic_rows and len(named) < width and not _nvswitch(rows, width, gpus):
        raise cells.LineError(
            first_line,
            "no header row, and the rows cannot tell GPU columns from NIC columns "
            "(not an NVSwitch board, no NIC row)",
        )
    gpus = nic_rows.pop() if nic_rows else gpus
    devices = [named.get(c) or (f"GPU{c}" if c < gpus else f"NIC{c - gpus}") for c in range(width)]
    printed = max(len([v for v in row[width + 1 :] if v]) for _, row in rows)
    if printed > len(_TAIL_NAMES):
        raise cells.LineError(first_line, "more cells after the devices than affinity columns")
    inferred = [d for c, d in enumerate(devices) if c not in named]
    return devices, list(_TAIL_NAMES[:printed]), inferred


def _nvswitch(rows: list[tuple[int, list[str]]], width: int, gpus: int) -> bool:
    """Three or more GPU rows bonded to each other GPU they reach by NVLink with one NV#: the
    all-to-all of an NVSwitch board (a GPU whose links are down shows none)."""
    bonded = []
    for _, row in rows:
        links = row[1 : width + 1]
        codes = {cell for cell in links[:gpus] if _NVLINK_CODE.match(cell)}
        if codes:
            if len(codes) != 1:
                return False
            bonded.append(sum(1 for cell in links[:gpus] if cell in codes))
    return len(bonded) >= 3 and len(set(bonded)) == 1 and bonded[0] >= 2


def parse_topology(text: str, source: str) -> Topology:
    """``read_topology`` of an input named ``source``: its errors name it."""
    with naming(source):
        return read_topology(text)


def read_topology(text: str) -> Topology:
    """The ``topo -m`` matrix of ``text``; ``cells.SmiOutputError`` naming the line where it is
    not one (or where nvidia-smi printed an error instead)."""
    try:
        lines = command_output_lines(text, _TOPO_COMMAND)
        return _topology(lines, _cut_line(text, lines))
    except cells.LineError as error:
        raise error.plainly(TOPO_HINT) from None


def _cut_line(text: str, lines: list[tuple[int, str]]) -> int | None:
    """The number of the last line when the text ends inside it (no newline after it: a paste
    or an excerpt cut there), else None."""
    if not lines or not lines[-1][1].strip() or text.endswith(("\n", "\r")):
        return None
    last = text.splitlines()[-1].rstrip()
    return lines[-1][0] if last.endswith(lines[-1][1].strip()) else None


def _topology(lines: list[tuple[int, str]], cut: int | None) -> Topology:
    matrix, end = _read_matrix(lines, cut)
    legend, nic_names = _legends(lines[end:])
    gpus = tuple(
        _gpu(d, matrix.tails.get(d, {}), matrix.row_lines.get(d))
        for d in matrix.devices
        if _GPU.match(d)
    )
    nics = tuple(
        TopoNic(label=d, name=nic_names.get(d, None if d.startswith("NIC") else d))
        for d in matrix.devices
        if not _GPU.match(d)
    )
    return Topology(
        gpus=gpus,
        nics=nics,
        links=tuple(_links(matrix)),
        missing_rows=tuple(d for d in matrix.devices if d not in matrix.rows),
        legend=legend,
        inferred_columns=tuple(matrix.inferred),
    )


def _legends(
    lines: list[tuple[int, str]],
) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
    """The legend's (code, meaning) pairs and the NIC legend's NIC# → device name."""
    legend: list[tuple[str, str]] = []
    nics: dict[str, str] = {}
    for _, line in lines:
        nic = _NIC_LEGEND.match(line)
        if nic:
            nics[nic.group(1)] = nic.group(2)
            continue
        entry = _LEGEND.match(line)
        if entry:
            legend.append((entry.group(1), entry.group(2)))
    return tuple(legend), nics


# ---- nvlink -s ----------------------------------------------------------------------------


def _support(line: str) -> NvLinkSupport | None:
    """What a sentence of ``nvlink -s`` says about the links; None if it says nothing of them."""
    text = line.strip().lower()
    if "mig mode" in text:
        return NvLinkSupport.MIG_MODE
    if "inactive" in text:
        return NvLinkSupport.ALL_INACTIVE
    if "not support" in text or "not have or support" in text:
        return NvLinkSupport.NOT_SUPPORTED
    return None


def _printed_rate(value: str) -> tuple[float, str] | None:
    """(number, unit) of a value shaped as a rate in any unit ("26.562 GB/s", "26.562TB/s",
    "1e308 GB/s"), else None: what says a line is a link state, before its unit is judged."""
    try:
        parsed = cells.number_and_unit(value)
    except ValueError:
        return None
    return parsed if parsed is not None and _PER_SECOND.match(parsed[1]) else None


def is_link_state(value: str) -> bool:
    """``value`` is shaped as an ``nvlink -s`` link state: a rate in any unit or a bracketed
    word ("<inactive>") — what ``_link_state`` reads, or refuses as a rate it cannot read."""
    try:
        return _link_state(0, value) is not None
    except ValueError:  # a rate in a unit nvidia-smi does not print, or no link's: still a state
        return True


def _rate_bytes_per_s(number: float, unit: str, value: str) -> float:
    """A link's rate in bytes per second; ValueError naming ``value`` for a unit nvidia-smi does
    not print, or a rate no link has (negative, or too large for a float: 5,000 digits, 1e308
    GB/s both read as infinity)."""
    scale = _LINK_RATE_UNITS.get(unit)
    if scale is None:
        printed = " or ".join(_LINK_RATE_UNITS)
        raise ValueError(
            f"{quoted(value)} is in {unit}: nvidia-smi prints a link's rate in {printed}"
        )
    rate = number * scale
    if rate < 0:
        raise ValueError(f"{quoted(value)} is not a link rate: negative")
    if not math.isfinite(rate):
        raise ValueError(f"{quoted(value)} is not a link rate: beyond a float's range")
    return rate


def _link_state(number: int, value: str) -> NvLinkState | None:
    """The state a link line prints: None when it is not one; ValueError for a rate that is
    shaped as one but not read (``_rate_bytes_per_s``)."""
    rate = _printed_rate(value)
    if rate is not None:
        speed = _rate_bytes_per_s(*rate, value)
        return NvLinkState(link=number, active=True, speed_bytes_per_s=speed, state=value)
    bare = value.strip("<>").strip().lower()
    if bare == _INACTIVE:
        return NvLinkState(link=number, active=False, speed_bytes_per_s=None, state=value)
    if value.startswith("<") and value.endswith(">") and bare:
        # a state this version does not know ("<disabled>"?): neither up nor down for certain
        return NvLinkState(link=number, active=None, speed_bytes_per_s=None, state=value)
    return None


@dataclass
class _Gpu:
    index: int
    name: str
    uuid: str | None
    links: list[NvLinkState] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def build(self) -> GpuNvLinks:
        message = " ".join(self.messages) or None
        if self.links:
            support = NvLinkSupport.REPORTED
        else:
            kinds = [k for k in map(_support, self.messages) if k is not None]
            support = kinds[0] if kinds else NvLinkSupport.OTHER
        return GpuNvLinks(
            index=self.index,
            name=self.name,
            uuid=self.uuid,
            support=support,
            links=tuple(self.links),
            message=None if self.links else message,
        )


def holds_link_states(text: str, *, looked: bool = False) -> bool:
    """``text`` holds an ``nvlink -s`` output, alone or beside another ``nvlink`` listing: its
    command line, or GPU lines with links printed as states (or statements about the links).
    ``looked``: ``looks_like_nvlink_status`` said no of ``text`` already (doctor's classify), so
    only its command line is looked for."""
    if any(_NVLINK_COMMAND.search(command) for command in pasted_commands(text)):
        return True
    if looked:
        return False
    listed = {listing for listing, _ in _gpu_blocks(_status_lines(text)) if listing is not None}
    return listed <= {NvLinkListing.STATES} and looks_like_nvlink_status(text)


def _status_lines(text: str) -> list[tuple[int, str]]:
    return nvlink_listing(command_output_lines(text, _NVLINK_COMMAND), NvLinkListing.STATES)


class NvLinkListing(StrEnum):
    """What an ``nvidia-smi nvlink`` listing prints per link: a state (``-s``: "26.562 GB/s",
    "<inactive>") or another value keyed by a name (``-e``: "Replay Errors: 0")."""

    STATES = "states"
    KEYED = "keyed"


def _listing_of(line: str) -> NvLinkListing | None:
    """The listing a link line is of; None for a line that is not a link, or not of either."""
    link = LINK_LINE.match(line)
    if link is None:
        return None
    if is_link_state(link.group(2)):
        return NvLinkListing.STATES
    return NvLinkListing.KEYED if _OTHER_LISTING_VALUE.match(link.group(2)) else None


def _is_gpu_line(line: str) -> bool:
    stripped = line.strip()
    return any(p.match(stripped) for p in (GPU_HEADER, GPU_HEADER_BARE, GPU_HEADER_BUS))


def _gpu_blocks(lines: list[tuple[int, str]]) -> list[tuple[NvLinkListing | None, list[int]]]:
    """(listing of its first link, indices of its lines) of each GPU line's block, and of the
    lines above the first GPU line."""
    blocks: list[tuple[NvLinkListing | None, list[int]]] = [(None, [])]
    for at, (_, line) in enumerate(lines):
        stripped = line.lstrip()
        if not stripped:
            continue  # a blank line is no one's: emptied or not, it stays blank
        if stripped.startswith(GPU_LINE_START) and _is_gpu_line(line):
            blocks.append((None, [at]))
            continue
        shown, members = blocks[-1]
        if shown is None and stripped.startswith(_LINK_WORD):
            blocks[-1] = (_listing_of(line), members)
        members.append(at)
    return blocks


def nvlink_listing(lines: list[tuple[int, str]], wanted: NvLinkListing) -> list[tuple[int, str]]:
    """The lines of the ``wanted`` listing where a paste holds ``nvlink -s`` and ``nvlink -e``
    outputs one after the other without a command line between them. nvidia-smi prints each
    GPU's line, then its links: the paste is cut into blocks at each GPU line. A block's
    listing is its first link's (a link of the other listing under it stays in it, for its
    reader to refuse); a block without a link goes with the block above it (at the top, with
    the first below it). The other blocks' lines are emptied (line numbers stay the file's). A
    paste of one listing is returned whole: its reader says what a stray line is."""
    if not any(_LINK_WORD in line for _, line in lines):
        return lines  # no link line: no listing (most texts doctor asks about)
    blocks = _gpu_blocks(lines)
    listed = [listing for listing, _ in blocks if listing is not None]
    if len(set(listed)) < 2:
        return lines
    above = listed[0]
    kept: set[int] = set()
    for listing, members in blocks:
        above = listing or above
        if above is wanted:
            kept.update(members)
    return [(number, line if at in kept else "") for at, (number, line) in enumerate(lines)]


def parse_nvlink_status(text: str, source: str) -> NvLinkStatus:
    """``read_nvlink_status`` of an input named ``source``: its errors name it."""
    with naming(source):
        return read_nvlink_status(text)


def read_nvlink_status(text: str) -> NvLinkStatus:
    """Per GPU, its links (speed or inactive) or what nvidia-smi said instead of them; of a paste
    that also holds another ``nvlink`` listing, the states' part (``nvlink_listing``); bad input
    raises ``cells.SmiOutputError`` naming the line."""
    try:
        return _nvlink_status(_status_lines(text))
    except cells.LineError as error:
        raise error.plainly(NVLINK_HINT) from None


def _gpu_line(line: str, following: str | None) -> _Gpu | None:
    """The GPU a header line opens: "GPU n: name (UUID: ...)", or "GPU n: name" when what
    follows it is a link or a statement about the links."""
    header = GPU_HEADER.match(line.strip())
    if header:
        uuid = header.group(3).strip() or None
        return _Gpu(int(header.group(1)), header.group(2).strip(), uuid)
    bare = GPU_HEADER_BARE.match(line.strip())
    if bare and following is not None and _about_links(following):
        return _Gpu(int(bare.group(1)), bare.group(2).strip(), None)
    return None


def _about_links(line: str) -> bool:
    return LINK_LINE.match(line) is not None or _support(line) is not None


def _link_of(number: int, link: re.Match[str]) -> NvLinkState:
    value = link.group(2)
    try:
        state = _link_state(int(link.group(1)), value)
    except ValueError as error:
        raise cells.LineError(number, f"link {link.group(1)}: {error}") from None
    if state is not None:
        return state
    if _OTHER_LISTING_VALUE.match(value):
        what = "`nvlink -e` error counters, `-gt` throughput or `-R` peers"
        raise cells.LineError(
            number,
            f"link {link.group(1)}: {value[:120]!r} is a per-link counter ({what}), not a state",
        )
    raise cells.LineError(number, f"link {link.group(1)}: {value[:120]!r}")


def _nvlink_status(lines: list[tuple[int, str]]) -> NvLinkStatus:
    gpus: list[_Gpu] = []
    host_message: list[str] = []
    printed = [(number, line) for number, line in lines if line.strip()]
    for at, (number, line) in enumerate(printed):
        if _CAPABILITY_LINE.match(line):
            raise cells.LineError(number, CAPABILITIES_REFUSAL)
        gpu = _gpu_line(line, printed[at + 1][1] if at + 1 < len(printed) else None)
        link = LINK_LINE.match(line)
        if gpu:
            gpus.append(gpu)
        elif _MIG_LINE.match(line):
            raise cells.LineError(number, "a MIG device line: `nvidia-smi -L` output")
        elif link:
            if not gpus:
                raise cells.LineError(number, "a link before any GPU line")
            gpus[-1].links.append(_link_of(number, link))
        elif gpus:
            gpus[-1].messages.append(line.strip())
        elif _support(line) in (NvLinkSupport.NOT_SUPPORTED, NvLinkSupport.ALL_INACTIVE):
            host_message.append(line.strip())
        else:  # nvidia-smi's own failure ("Failed to initialize NVML: ...")
            raise cells.LineError(number, f"not NVLink status: {line.strip()[:120]!r}")
    if not gpus and not host_message:
        raise cells.LineError(None, "no `nvidia-smi nvlink -s` output")
    built = tuple(g.build() for g in gpus)
    if built and all(g.support is NvLinkSupport.OTHER and g.message is None for g in built):
        raise cells.LineError(None, "GPU lines without any link: `nvidia-smi -L`?")
    return NvLinkStatus(gpus=built, message=" ".join(host_message) or None)
