"""``nvidia-smi -q``: the indented "Key : value" report, old (R4xx/R5xx) and new (R535+) names.

The text is read into a tree by indentation first, then mapped field by field; a value that
cannot be read names its line.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from gpuwarden.errors import naming
from gpuwarden.telemetry.smi import catalog_facts, cells
from gpuwarden.telemetry.smi.builder import (
    DeviceBuilder,
    said_on_last_gpu,
    snapshot,
    to_vgpu_license_status,
)
from gpuwarden.telemetry.smi.selection import SelectedOutput, set_indices_by_output
from gpuwarden.types.telemetry import (
    MigDeviceSample,
    ProcessSample,
    Snapshot,
)

# "<indent><key><blanks>: <value>": the key ends at the first run of blanks followed by ":".
# Spelled with possessive runs (the same matches as ``\S.*?\s+: ?(.*?)\s*$``): the lazy form
# tried every position of a long blank run in the key or the value, and a line holding 10^5
# blanks took minutes.
_KEY_VALUE = re.compile(
    r"^(?P<indent> *+)(?P<key>\S(?:\S|\s++(?!:))*+)\s++: ?(?P<value>(?:\s*+\S)*+)\s*$"
)
# The R575+ repair readings: DeviceSample field and its "ECC Errors" row.
_REPAIR_ROWS = (
    ("channel_repair_pending", "Channel Repair Pending"),
    ("tpc_repair_pending", "TPC Repair Pending"),
    ("memory_unrepairable", "Unrepairable Memory"),
)
_GPU_HEADER = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
# Authors point at the line that matters in a pasted report: "Pending : Yes      <===",
# "HW Slowdown : Active  <── thermal!", "SM : 382 MHz   ← should be 1530 MHz". nvidia-smi prints
# no arrow in a value, so from a blank followed by an arrow on, the rest is the author's note.
_ANNOTATION_ARROW = re.compile(r"<[=\-\u2500]|[\u2190\u21d0\u27f5]")


@dataclass(slots=True)
class Node:
    key: str
    value: str | None
    line: int
    indent: int
    children: list[Node] = field(default_factory=list)

    def child(self, *path: str) -> Node | None:
        node: Node | None = self
        for key in path:
            assert node is not None
            node = next((c for c in node.children if c.key == key), None)
            if node is None:
                return None
        return node

    def value_of(self, *paths: tuple[str, ...]) -> tuple[str | None, int]:
        """The first present value among ``paths``, with its line (for errors)."""
        fallback_line = self.line
        for path in paths:
            node = self.child(*path)
            if node is None:
                continue
            fallback_line = node.line
            if not cells.is_missing(node.value):
                return node.value, node.line
        return None, fallback_line

    def walk(self) -> Iterator[Node]:
        for c in self.children:
            yield c
            yield from c.walk()


def _without_annotation(value: str) -> str:
    """``value`` without an author's arrow note after it (searched once: linear in the line)."""
    arrow = _ANNOTATION_ARROW.search(value)
    if arrow is None or arrow.start() == 0 or not value[arrow.start() - 1].isspace():
        return value
    return value[: arrow.start()].rstrip()


def parse_tree(text: str) -> Node:
    root = Node("", None, 0, -1)
    stack = [root]
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip() or line.strip().startswith("==="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        match = _KEY_VALUE.match(line)
        if match is not None:
            node = Node(match["key"], _without_annotation(match["value"]), number, indent)
        else:
            node = Node(line.strip(), None, number, indent)
        while stack[-1].indent >= indent:
            stack.pop()
        stack[-1].children.append(node)
        stack.append(node)
    return root


# Rows that name one GPU: two sections of one bus id that print different values are two GPUs
# (reports of two hosts pasted together), not two runs on one.
_IDENTITY_ROWS = ("GPU UUID", "Serial Number", "Product Name")


def _rows_by_key(children: list[Node]) -> dict[str, list[Node]]:
    rows: dict[str, list[Node]] = {}
    for child in children:
        rows.setdefault(child.key, []).append(child)
    return rows


def _same_gpu(known: dict[str, list[Node]], later: dict[str, list[Node]]) -> bool:
    for key in _IDENTITY_ROWS:
        a, b = known.get(key, [None])[0], later.get(key, [None])[0]
        if a is None or b is None or cells.is_missing(a.value) or cells.is_missing(b.value):
            continue
        if a.value != b.value:
            return False
    return True


def _one_section_per_gpu(sections: list[Node]) -> list[Node]:
    """The GPU sections, one per GPU: a paste of several `-q -d` runs on one node (`-d POWER`
    then `-d CLOCK`) prints each GPU once per run, and those are the same GPU (same bus id, no
    identity row that differs), its sections joined in the order printed. A block printed again
    (`-q -d ECC` twice) is the later run's: the newer reading replaces the older."""
    gpus: list[tuple[Node, dict[str, list[Node]]]] = []  # each GPU and its rows by key
    latest: dict[str, int] = {}  # bus id -> the GPU last printed with it
    joined: set[int] = set()
    for section in sections:
        rows = _rows_by_key(section.children)
        at = latest.get(section.key)
        if at is None or not _same_gpu(gpus[at][1], rows):
            latest[section.key] = len(gpus)
            gpus.append((section, rows))
            continue
        known = gpus[at][1]
        for key, printed in rows.items():
            known.pop(key, None)  # the later run's reading of the row
            known[key] = printed
        joined.add(at)
    for at in joined:
        gpu, known = gpus[at]
        gpu.children = [row for printed in known.values() for row in printed]
    return [gpu for gpu, _ in gpus]


# -q's own names for a GPU's sections (a title line over indented rows), and its one row whose
# value says a P-state: what tells a GPU's report copied without its "GPU <bus id>" line (an
# excerpt that starts inside it) from any other indented "Key : value" text.
_SECTION_TITLES = frozenset(
    {
        "FB Memory Usage",
        "BAR1 Memory Usage",
        "Clocks Event Reasons",
        "Clocks Throttle Reasons",
        "PCI",
        "Temperature",
        "Power Readings",
        "GPU Power Readings",
        "ECC Errors",
        "Retired Pages",
        "Remapped Rows",
        "Max Clocks",
        "Applications Clocks",
        "Utilization",
        # the identity part of the report, above PCI: an excerpt may hold only these
        "Inforom Version",
        "GPU Operation Mode",
        "GPU Virtualization Mode",
        "GPU Reset Status",
        "IBMNPU",
    }
)
_PSTATE_ROW = "Performance State"
_PSTATE = re.compile(r"P\d{1,2}|Unknown")
# the excerpt's sections must be two or more, so one stray title word is not a report
_MIN_SECTIONS = 2
# the one GPU of an excerpt: its report prints its bus id on the line the excerpt left out
_HEADERLESS_GPU = "GPU (bus id not printed)"
_HEADERLESS_NOTE = (
    "its bus id and index: the -q text starts inside this GPU's report, below its "
    "'GPU <bus id>' line (read as the text's only GPU)"
)
_LEADING_NOTE = (
    "the -q text starts inside a GPU's report, above the first 'GPU <bus id>' line: those rows "
    "are read as one more GPU, the first, whose bus id and index were not printed"
)


def _sections_named(rows: list[Node]) -> set[str]:
    """The -q section names among a GPU's rows: a title over rows with values, or the P-state
    row with a P-state as its value."""
    named = set()
    for row in rows:
        if row.key in _SECTION_TITLES and row.value is None and row.children:
            if any(child.value is not None for child in row.children):
                named.add(row.key)
        elif row.key == _PSTATE_ROW and row.value is not None and _PSTATE.fullmatch(row.value):
            named.add(row.key)
    return named


# The rows -q prints above the GPU sections, about the node: not a GPU's.
_REPORT_ROWS = frozenset(
    {
        "Timestamp",
        "Driver Version",
        "KMD Version",
        "CUDA Version",
        "CUDA UMD Version",
        "Attached GPUs",
        "HIC Info",
    }
)


def _gpu_rows(root: Node) -> list[Node]:
    """The rows of a report without its header line: all but the node's own rows."""
    return [n for n in root.children if n.key not in _REPORT_ROWS]


def is_report_without_banner(text: str) -> bool:
    """Whether ``text`` is a -q report copied from below its banner and Timestamp: a "GPU <bus
    id>" line over a GPU's report (the copy starts at "Attached GPUs" or at a GPU's line), or
    one GPU's rows without that line, carrying at least two of -q's own section names.

    A GPU's report opens with its "Product Name" row, or (a `-q -d` selection) with one of the
    sections above. `nvidia-smi vgpu -q` prints the same "GPU <bus id>" line over its guests'
    "vGPU ID" blocks: not a GPU's report (`-L`, `nvlink -s` and `topo -m` name a GPU by its
    index, not its bus id)."""
    root = parse_tree(text)
    headers = _gpu_headers(root)
    if headers:
        return any(_is_gpu_report(gpu.children) for gpu in headers)
    return _headerless_rows(root) is not None


def _is_gpu_report(rows: list[Node]) -> bool:
    return any(row.key == "Product Name" for row in rows) or bool(_sections_named(rows))


def _is_gpu_line(row: Node) -> bool:
    return row.indent == 0 and _GPU_HEADER.match(row.key) is not None


def _gpu_headers(root: Node) -> list[Node]:
    """The report's "GPU <bus id>" sections, as printed."""
    return [n for n in root.children if _is_gpu_line(n)]


def _headerless_rows(root: Node) -> list[Node] | None:
    """The rows of one GPU's report copied without its header line, when they carry -q's own
    section names (``_MIN_SECTIONS`` of them), else None."""
    rows = _gpu_rows(root)
    return rows if len(_sections_named(rows)) >= _MIN_SECTIONS else None


def _printed_bus_id(gpu: Node) -> str | None:
    """The bus id a GPU's PCI section prints (its "GPU <bus id>" line prints it too)."""
    return cells.to_text(gpu.value_of(("PCI", "Bus Id"))[0])


def _rows_above(root: Node, headers: list[Node]) -> list[Node] | None:
    """The end of a GPU's report above ``headers``, the "GPU <bus id>" lines, else None.
    -q prints each GPU's report under its line, its rows indented, down to its "Processes"
    section (``_CLOSING_SECTION``), one report after another: an excerpt starting inside one
    report holds the end of it above the next one's line. The line below says the text is a -q
    report, so any section of it tells, not only -q's names (``_SECTION_TITLES``, what rows
    with no such line need): ``_MIN_SECTIONS`` titles over rows with values, indented.

    -q prints its own rows (``_REPORT_ROWS``: Timestamp, "Attached GPUs") above every GPU's: rows
    above those are another output's (a report pasted twice, the first copy starting inside its
    GPU's report), and only the rows below the last of them can be a GPU's. Rows whose PCI
    section prints the bus id of a GPU line below are that GPU's, printed twice, not one more."""
    above = list(itertools.takewhile(lambda row: not _is_gpu_line(row), root.children))
    starts = [i for i, row in enumerate(above) if row.key in _REPORT_ROWS]
    rows = above[starts[-1] + 1 :] if starts else above
    sections = [
        row
        for row in rows
        if row.indent > 0 and row.value is None and any(c.value is not None for c in row.children)
    ]
    if len(sections) < _MIN_SECTIONS:
        return None
    bus_id = _printed_bus_id(Node("", None, 0, -1, rows))
    if bus_id is not None and f"GPU {bus_id}".upper() in {h.key.upper() for h in headers}:
        return None
    return rows


def _selected_count(outputs: Sequence[SelectedOutput]) -> int | None:
    """How many GPU reports the pasted commands print, where each of them says (its -i)."""
    counts = [None if o.selection is None else o.selection.count for o in outputs]
    known = [count for count in counts if count is not None]
    return sum(known) if known and len(known) == len(counts) else None


def _gpu_sections(
    root: Node, headers: list[Node], outputs: Sequence[SelectedOutput]
) -> tuple[list[Node], bool]:
    """The GPU sections of the report (``headers``: its "GPU <bus id>" lines), and whether the
    first is a GPU's rows without its header line (an excerpt starting inside its report, alone
    or above the first header line). Rows above are one more GPU only where the pasted commands
    (``outputs``) select more GPUs than the lines print: `-i 1` prints one report."""
    if not headers:
        rows = _headerless_rows(root)
    else:
        selected = _selected_count(outputs)
        rows = _rows_above(root, headers) if selected is None or len(headers) < selected else None
    gpus = _one_section_per_gpu(headers)
    if rows is None:
        return gpus, False
    return [Node(_HEADERLESS_GPU, None, rows[0].line, 0, rows), *gpus], True


def _cut_line(text: str, ends_inside_a_line: bool) -> int | None:
    """The number of the last line when the text ends inside it (the input has no newline after
    it: a copy or a stored excerpt cut short), else None."""
    if not ends_inside_a_line:
        return None
    lines = text.splitlines()
    if not lines or not lines[-1].strip():
        return None
    return len(lines)


def _read_gpu(
    index: int, gpu: Node, driver: str | None, cuda: str | None, cut_line: int | None
) -> DeviceBuilder:
    """One GPU's rows in a builder. A value the text ends inside that cannot be read ("7636 M"
    of "7636 MiB") is not reported: what was cut is lost, the rows above it are read."""
    try:
        return _filled(index, gpu, driver, cuda)
    except cells.LineError as error:
        cut = next((n for n in gpu.walk() if n.line == error.line), None)
        if cut is None or error.line != cut_line or cut.value is None:
            raise
        cut.value = None
        return _filled(index, gpu, driver, cuda)


def _filled(index: int, gpu: Node, driver: str | None, cuda: str | None) -> DeviceBuilder:
    b = DeviceBuilder(index)
    b.set("driver_version", cells.to_version(driver))
    b.set("cuda_driver_version", cells.to_version(cuda))
    if gpu.key != _HEADERLESS_GPU:
        b.set("pci_bus_id", gpu.key.removeprefix("GPU "))
    else:  # the line the excerpt left out printed it; its PCI section prints it again
        b.set("pci_bus_id", _printed_bus_id(gpu))
    for node in gpu.walk():
        b.note(node.value)
    for said in (c.key for c in gpu.children if _NO_REPORT.search(c.key)):
        b.note_message(said)
    _fill(b, gpu)
    return b


def parse_q_text(text: str, source: str, default_timestamp_s: float) -> Snapshot:
    """``read_q_text`` of an input named ``source``: its errors name it, its Snapshot carries it."""
    with naming(source):
        return replace(read_q_text(text, default_timestamp_s), source=source)


def read_q_text(
    text: str,
    default_timestamp_s: float,
    *,
    ends_inside_a_line: bool = False,
    outputs: Sequence[SelectedOutput] = (),
) -> Snapshot:
    """The Snapshot of a -q report; bad input raises ``cells.SmiOutputError``.
    ``ends_inside_a_line``: the input had no newline after its last line, which may be cut
    short. ``outputs``: the outputs of the paste, each under its command line, with the GPUs
    the command's -i selects (the report prints no index)."""
    root = parse_tree(text)
    headers = _gpu_headers(root)
    gpus, headerless = _gpu_sections(root, headers, outputs)
    if not gpus:
        raise cells.SmiOutputError(None, "no 'GPU <bus id>' section in the -q report")
    stamp_text, _ = root.value_of(("Timestamp",))
    stamp = cells.parse_smi_time(stamp_text)
    timestamp_s = default_timestamp_s if stamp is None else stamp
    # R610+ prints "610.57.04 [Deprecated; ... Use KMD Version instead]" and adds KMD/UMD rows.
    driver, _ = root.value_of(("KMD Version",), ("Driver Version",))
    cuda, _ = root.value_of(("CUDA UMD Version",), ("CUDA Version",))
    cut_line = _cut_line(text, ends_inside_a_line)
    try:
        builders = [_read_gpu(i, gpu, driver, cuda, cut_line) for i, gpu in enumerate(gpus)]
    except cells.LineError as error:
        raise error.plainly() from None
    notes = [_LEADING_NOTE if headers else _HEADERLESS_NOTE] if headerless else []
    cut = truncation(gpus)
    if cut is not None:
        notes.append(cut)
    if outputs:
        opening = [gpu.line for gpu in gpus]
        # every section printed, a GPU printed twice (two -d runs) too; an excerpt's first GPU
        leading = [gpus[0].line] if headerless else []
        printed = [*leading, *(section.line for section in headers)]
        notes += set_indices_by_output(builders, opening, printed, outputs, cut=cut is not None)
    samples = [b.build(timestamp_s) for b in builders]
    events = said_on_last_gpu(samples, notes)
    return snapshot(samples, timestamp_s=timestamp_s, host=None, events=events)


# Every -q report of a GPU ends with its "Processes" section ("Compute Processes" before R346;
# R550+ add "Capabilities" after it); a -d selection prints only the sections asked for, the
# same ones for every GPU, and no "Product Name".
_CLOSING_SECTION = "Processes"
_CLOSING_SECTIONS = (_CLOSING_SECTION, "Compute Processes")


# What nvidia-smi prints instead of the report of a GPU it cannot read (fallen off the bus).
_NO_REPORT = re.compile(r"Unable to determine the device handle|GPU is lost", re.IGNORECASE)


def _cut_at(gpu: Node, expected_last: str | None) -> str | None:
    """What is missing at the end of one GPU's report, or None when it is whole."""
    keys = [c.key for c in gpu.children]
    if any(_NO_REPORT.search(key) for key in keys):
        return None  # an error in place of the report: nothing was cut
    if expected_last is not None and expected_last not in keys:
        return f"its {expected_last!r} section"
    if gpu.child("Product Name") is not None and not any(k in keys for k in _CLOSING_SECTIONS):
        return f"its {_CLOSING_SECTION!r} section"
    block = gpu.child(_CLOSING_SECTION)
    if block is not None and block.children:
        last = block.children[-1]  # each process ends with its memory, printed even as N/A
        if last.key != "Process ID" or last.child("Used GPU Memory") is None:
            return "the end of its last process"
    *_, deepest = (gpu, *gpu.walk())
    if deepest.value is None and not deepest.children:  # a section title with no body
        return f"the body of {deepest.key!r}"
    return None


def truncation(gpus: list[Node]) -> str | None:
    """Why the report was cut short (a truncated copy, a paste that lost its end), or None.

    The last GPU's report must end as the first one's does, and a full report with its
    processes."""
    last = gpus[-1]
    expected = gpus[0].children[-1].key if len(gpus) > 1 and gpus[0].children else None
    missing = _cut_at(last, expected)
    if missing is None:
        return None
    read = last.children[-1].key if last.children else "its header"
    return (
        f"the nvidia-smi -q report is cut short: {last.key}'s report ends after {read!r}, "
        f"without {missing}; what came after is not reported"
    )


Convert = Callable[[str | None], object]


def _fabric_health(b: DeviceBuilder, gpu: Node) -> None:
    """ "Fabric / Health" (R550+): the summary and the rows that report a condition."""
    health = gpu.child("Fabric", "Health")
    if health is None:
        return

    def row(key: str) -> str | None:
        node = health.child(key)
        return None if node is None else node.value

    b.set("fabric_health_summary", cells.to_fabric_health_summary(row("Summary")))
    conditions = [(issue, row(key)) for key, _tag, issue in cells.FABRIC_HEALTH_ROWS]
    configuration = row(cells.FABRIC_HEALTH_CONFIGURATION[0])
    b.set("fabric_health_issues", cells.fabric_health_issues(conditions, configuration))


@dataclass(frozen=True, slots=True)
class _Rows:
    """One GPU's rows, read into its DeviceBuilder; a cell that cannot be read names its line."""

    b: DeviceBuilder
    gpu: Node

    def put(self, name: str, convert: Convert, *paths: tuple[str, ...]) -> None:
        """The first of ``paths`` that is printed, converted (old and new names of one row)."""
        cell, line = self.gpu.value_of(*paths)
        try:
            value = convert(cell)
        except (ValueError, OverflowError) as exc:
            raise cells.LineError(line, f"{' / '.join(paths[0])}: {exc}") from None
        self.b.set(name, value)

    def put_printed(self, name: str, convert: Convert, path: tuple[str, ...]) -> None:
        """A field whose values include words ``value_of`` skips as "not reported" ("None")."""
        node = self.gpu.child(*path)
        if node is not None:
            self.b.set(name, convert(node.value))

    def extra(self, name: str, *paths: tuple[str, ...]) -> None:
        """A number kept as an extra of the sample (no DeviceSample field)."""
        cell, line = self.gpu.value_of(*paths)
        try:
            self.b.set_extra(name, cells.to_float(cell))
        except ValueError as exc:
            raise cells.LineError(line, f"{' / '.join(paths[0])}: {exc}") from None


def _fill(b: DeviceBuilder, gpu: Node) -> None:
    rows = _Rows(b, gpu)
    _identity(rows)
    _memory_and_utilization(rows)
    _temperature(b, gpu, rows.put)
    _power(gpu, rows.put, rows.extra)
    _recovery_and_fabric(rows)
    _clocks(rows)
    _ecc(b, gpu, rows.put)
    _pcie(rows)
    _modes(rows)
    migs = _mig_devices(gpu)
    if migs is not None:
        b.set("mig_devices", catalog_facts.with_profiles(b.get("name"), migs))
    # drivers before R470-ish print no "Product Architecture": the catalog knows it by name
    b.set("architecture", catalog_facts.architecture(b.get("name")))
    b.set("processes", _processes(gpu))


def _identity(rows: _Rows) -> None:
    rows.put("uuid", cells.to_text, ("GPU UUID",))
    rows.put("name", cells.to_text, ("Product Name",))
    rows.put("serial", cells.to_text, ("Serial Number",))
    rows.put("vbios_version", cells.to_text, ("VBIOS Version",))
    rows.put("architecture", cells.to_text, ("Product Architecture",))


def _memory_and_utilization(rows: _Rows) -> None:
    put = rows.put
    put("memory_total_bytes", cells.to_bytes, ("FB Memory Usage", "Total"))
    put("memory_used_bytes", cells.to_bytes, ("FB Memory Usage", "Used"))
    put("memory_free_bytes", cells.to_bytes, ("FB Memory Usage", "Free"))
    put("memory_reserved_bytes", cells.to_bytes, ("FB Memory Usage", "Reserved"))
    put("gpu_utilization_percent", cells.to_float, ("Utilization", "GPU"), ("Utilization", "Gpu"))
    put("memory_utilization_percent", cells.to_float, ("Utilization", "Memory"))
    put("encoder_utilization_percent", cells.to_float, ("Utilization", "Encoder"))
    put("decoder_utilization_percent", cells.to_float, ("Utilization", "Decoder"))


def _recovery_and_fabric(rows: _Rows) -> None:
    rows.put_printed("recovery_action", cells.to_recovery_action, ("GPU Recovery Action",))
    rows.put_printed("fabric_state", cells.to_fabric_state, ("Fabric", "State"))
    rows.put_printed("fabric_status", cells.to_fabric_status, ("Fabric", "Status"))
    _fabric_health(rows.b, rows.gpu)
    # the guest's own license; a host's "vGPU ID" blocks list its guests', not read here
    rows.put(
        "vgpu_license_status",
        to_vgpu_license_status,
        ("vGPU Software Licensed Product", "License Status"),
    )


def _clocks(rows: _Rows) -> None:
    """Clocks, the performance state and fan, and the clock event reasons."""
    for name, path in (
        ("clock_graphics_mhz", ("Clocks", "Graphics")),
        ("clock_sm_mhz", ("Clocks", "SM")),
        ("clock_memory_mhz", ("Clocks", "Memory")),
        ("clock_video_mhz", ("Clocks", "Video")),
        ("clock_sm_max_mhz", ("Max Clocks", "SM")),
        ("clock_memory_max_mhz", ("Max Clocks", "Memory")),
    ):
        rows.put(name, cells.to_float, path)
    rows.put("pstate", cells.to_text, ("Performance State",))
    rows.put("fan_speed_percent", cells.to_float, ("Fan Speed",))
    _clock_events(rows.b, rows.gpu)


def _pcie(rows: _Rows) -> None:
    put = rows.put
    link = ("PCI", "GPU Link Info")
    put(
        "pcie_link_gen_current",
        cells.to_int,
        (*link, "PCIe Generation", "Device Current"),
        (*link, "PCIe Generation", "Current"),
    )
    put("pcie_link_gen_max", cells.to_int, (*link, "PCIe Generation", "Max"))
    put("pcie_link_width_current", cells.to_int, (*link, "Link Width", "Current"))
    put("pcie_link_width_max", cells.to_int, (*link, "Link Width", "Max"))
    put("pcie_tx_bytes_per_second", cells.to_bytes_per_second, ("PCI", "Tx Throughput"))
    put("pcie_rx_bytes_per_second", cells.to_bytes_per_second, ("PCI", "Rx Throughput"))
    put("pcie_replay_total", cells.to_int, ("PCI", "Replays Since Reset"))


def _modes(rows: _Rows) -> None:
    rows.put("persistence_mode", cells.to_bool, ("Persistence Mode",))
    rows.put("compute_mode", cells.to_text, ("Compute Mode",))
    rows.put("mig_mode", cells.to_bool, ("MIG Mode", "Current"))
    rows.put("mig_mode_pending", cells.to_bool, ("MIG Mode", "Pending"))


def _temperature(b: DeviceBuilder, gpu: Node, put: Callable[..., None]) -> None:
    temp = "Temperature"
    # R3xx drivers name the reading "Gpu" (as they name "Utilization / Gpu"): R304.108 and R325.15
    # print "Temperature / Gpu : 49 C" (held-out set 25)
    put("temperature_gpu_celsius", cells.to_celsius, (temp, "GPU Current Temp"), (temp, "Gpu"))
    put("temperature_memory_celsius", cells.to_celsius, (temp, "Memory Current Temp"))
    # Absolute limits where printed (R5xx, pre-Ada GPUs). Ada and newer print the same limits
    # as "... T.Limit Temp" rows: margins, never degrees (health_readings.TLimitThresholds).
    put("temperature_slowdown_celsius", cells.to_float, (temp, "GPU Slowdown Temp"))
    put("temperature_shutdown_celsius", cells.to_float, (temp, "GPU Shutdown Temp"))
    put("temperature_gpu_max_celsius", cells.to_float, (temp, "GPU Max Operating Temp"))
    put("temperature_memory_max_celsius", cells.to_float, (temp, "Memory Max Operating Temp"))
    put(
        "temperature_margin_celsius",
        cells.to_float,
        (temp, "GPU T.Limit Temp"),
        (temp, "GPU Current T.Limit Temp"),  # R610+
    )
    relative = {}
    for key, label in (
        ("slowdown", "GPU Slowdown T.Limit Temp"),
        ("shutdown", "GPU Shutdown T.Limit Temp"),
    ):
        # R610 names the same fixed thresholds "... T.Limit Temp Specification"
        cell, line = gpu.value_of((temp, label), (temp, f"{label} Specification"))
        try:
            relative[key] = cells.to_float(cell)
        except ValueError as exc:
            raise cells.LineError(line, f"{temp} / {label}: {exc}") from None
    b.set_tlimit_thresholds(relative["slowdown"], relative["shutdown"])


def _power(
    gpu: Node,
    put: Callable[..., None],
    extra: Callable[..., None],
) -> None:
    block = "GPU Power Readings" if gpu.child("GPU Power Readings") else "Power Readings"
    ceiling = (block, "GPU Ceiling Power Limit")
    put(
        "power_draw_watts",
        cells.to_float,
        (block, "Average Power Draw"),
        (block, "Power Draw"),
        (block, "Instantaneous Power Draw"),
    )
    # R535+ "Requested" is the management limit (power.limit), "Current" the enforced one.
    put(
        "power_limit_watts",
        cells.to_float,
        (block, "Requested Power Limit"),
        (*ceiling, "Requested Power Limit"),
        (block, "Power Limit"),
    )
    put(
        "power_enforced_limit_watts",
        cells.to_float,
        (block, "Current Power Limit"),
        (*ceiling, "Current Power Limit"),
        (block, "Enforced Power Limit"),
    )
    extra("power_draw_instant_watts", (block, "Instantaneous Power Draw"))
    extra(
        "power_default_limit_watts",
        (block, "Default Power Limit"),
        (*ceiling, "Default Power Limit"),
    )
    extra("power_min_limit_watts", (block, "Min Power Limit"))
    extra("power_max_limit_watts", (block, "Max Power Limit"))


def _clock_events(b: DeviceBuilder, gpu: Node) -> None:
    block = gpu.child("Clocks Event Reasons") or gpu.child("Clocks Throttle Reasons")
    if block is not None and block.children:
        active: set[str] = set()
        seen = False
        for node in block.walk():
            name = cells.clock_event_name(node.key)
            if name is None:
                continue
            try:
                state = cells.to_bool(node.value)
            except ValueError as exc:
                raise cells.LineError(node.line, f"{node.key}: {exc}") from None
            if state is not None:
                seen = True
                if state:
                    active.add(name)
        if seen:
            b.set("clock_event_reasons", cells.ordered_reasons(active))
    counters = gpu.child("Clocks Event Reasons Counters")
    if counters is None:
        return
    thermal: list[int] = []
    for node in counters.children:
        try:
            value = cells.us_to_ns(node.value)
        except ValueError as exc:
            raise cells.LineError(node.line, f"{node.key}: {exc}") from None
        if value is None:
            continue
        if node.key == "SW Power Capping":
            b.set("power_violation_ns_total", value)
        elif node.key in ("SW Thermal Slowdown", "HW Thermal Slowdown"):
            thermal.append(value)
    if thermal:
        b.set("thermal_violation_ns_total", sum(thermal))


def _ecc(b: DeviceBuilder, gpu: Node, put: Callable[..., None]) -> None:
    put("ecc_mode_enabled", cells.to_bool, ("ECC Mode", "Current"))
    for scope in ("Volatile", "Aggregate"):
        node = gpu.child("ECC Errors", scope)
        if node is None:
            continue
        corrected: list[int] = []
        uncorrected: list[int] = []
        for leaf in node.children:
            key = leaf.key.lower()
            try:
                if key in ("single bit", "double bit"):  # pre-Ampere: a Total per kind
                    total = leaf.child("Total")
                    value = cells.to_int(total.value if total else None)
                    is_corrected = key == "single bit"
                elif key.endswith("uncorrectable") or "uncorrectable " in key:
                    value, is_corrected = cells.to_int(leaf.value), False
                elif key.endswith("correctable"):
                    value, is_corrected = cells.to_int(leaf.value), True
                else:
                    continue
            except ValueError as exc:
                raise cells.LineError(leaf.line, f"{leaf.key}: {exc}") from None
            if value is not None:
                (corrected if is_corrected else uncorrected).append(value)
        scope_name = scope.lower()
        b.set(f"ecc_errors_corrected_{scope_name}", sum(corrected) if corrected else None)
        b.set(f"ecc_errors_uncorrected_{scope_name}", sum(uncorrected) if uncorrected else None)
    put("retired_pages_single_bit", cells.to_int, ("Retired Pages", "Single Bit ECC"))
    put("retired_pages_double_bit", cells.to_int, ("Retired Pages", "Double Bit ECC"))
    put(
        "retired_pages_pending",
        cells.to_bool,
        ("Retired Pages", "Pending Page Retirement"),
        ("Retired Pages", "Pending Page Blacklist"),
    )
    put(
        "sram_threshold_exceeded",
        cells.to_bool,
        ("ECC Errors", "Aggregate", "SRAM Threshold Exceeded"),
    )
    # R575+: the repair readings, the last rows of "ECC Errors" ("Yes" / "No" / N/A)
    for name, key in _REPAIR_ROWS:
        put(name, cells.to_bool, ("ECC Errors", key))
    rows = "Remapped Rows"
    put(
        "remapped_rows_banks_exhausted",  # "None : 0 bank(s)": banks without a spare row left
        cells.to_int,
        (rows, "Bank Remap Availability Histogram", "None"),
    )
    put("remapped_rows_correctable", cells.to_int, (rows, "Correctable Error"))
    put("remapped_rows_uncorrectable", cells.to_int, (rows, "Uncorrectable Error"))
    put("remapped_rows_pending", cells.to_bool, (rows, "Pending"))
    put("remapped_rows_failure", cells.to_bool, (rows, "Remapping Failure Occurred"))


def _mig_devices(gpu: Node) -> list[tuple[MigDeviceSample, catalog_facts.MigEngines]] | None:
    nodes = [n for n in gpu.walk() if n.key == "MIG Device"]
    if not nodes:
        return None
    devices = []
    for node in nodes:
        try:
            gi = cells.to_int(node.value_of(("GPU Instance ID",))[0])
            if gi is None:
                raise ValueError("a MIG device without GPU Instance ID")
            memory = ("Shared FB Memory Usage",), ("FB Memory Usage",)
            shared = ("Device Attributes", "Shared")
            engines = catalog_facts.MigEngines(
                copy_engines=cells.to_int(node.value_of((*shared, "Copy Engine count"))[0]),
                ofa=cells.to_int(node.value_of((*shared, "OFA count"))[0]),
            )
            device = MigDeviceSample(
                gpu_instance_id=gi,
                compute_instance_id=cells.to_int(node.value_of(("Compute Instance ID",))[0]),
                profile=None,  # -q does not print the profile name: with_profiles
                uuid=None,
                memory_total_bytes=cells.to_bytes(
                    node.value_of(*((*m, "Total") for m in memory))[0]
                ),
                memory_used_bytes=cells.to_bytes(node.value_of(*((*m, "Used") for m in memory))[0]),
                sm_count=cells.to_int(node.value_of((*shared, "Multiprocessor count"))[0]),
            )
            devices.append((device, engines))
        except ValueError as exc:
            raise cells.LineError(node.line, f"MIG Device: {exc}") from None
    return devices


def _processes(gpu: Node) -> tuple[ProcessSample, ...] | None:
    block = gpu.child("Processes")
    if block is None:
        return None
    processes = []
    gi: str | None = None
    ci: str | None = None
    for node in block.children:
        if node.key == "GPU instance ID":
            gi = node.value
        elif node.key == "Compute instance ID":
            ci = node.value
        elif node.key == "Process ID":
            try:
                pid = cells.to_int(node.value)
                if pid is None:
                    raise ValueError("a process without Process ID")
                processes.append(
                    ProcessSample(
                        pid=pid,
                        used_memory_bytes=cells.to_bytes(node.value_of(("Used GPU Memory",))[0]),
                        name=cells.to_text(node.value_of(("Name",))[0]),
                        kind=cells.to_text(node.value_of(("Type",))[0]),
                        gpu_instance_id=cells.to_int(gi),
                        compute_instance_id=cells.to_int(ci),
                    )
                )
            except ValueError as exc:
                raise cells.LineError(node.line, f"Process: {exc}") from None
            gi = ci = None
    return tuple(processes)
