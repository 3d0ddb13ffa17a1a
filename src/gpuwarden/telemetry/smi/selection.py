"""The GPUs an nvidia-smi command's ``-i`` / ``--id`` selects, and what that says of its output.

The ids ``-i`` takes (its man page): a GPU's 0-based index in the driver's enumeration, its board
serial, its UUID ("GPU-...") or its PCI bus id (domain:bus:device.function in hex); a
comma-separated list of them selects several GPUs (``nvidia-smi -i 0,1,2``; ``dmon -h`` and
``pmon -h``: "Comma separated Enumeration index, PCI bus ID or UUID"). nvidia-smi prints the GPUs
it selected in its own enumeration order, whatever the order of the list, and prints the index
only where asked to (a --query-gpu ``index`` column, the default screen, ``dmon``): a list of
indices tells which index each GPU printed in order has; a UUID or a bus id tells which GPU it is
but not its index; a board serial may be shared by the GPUs of one board (the man page), so it
does not even tell how many GPUs were printed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwarden.catalog.pci_bus import nvml_bus_id
from gpuwarden.telemetry.smi.builder import DeviceBuilder
from gpuwarden.telemetry.smi.cells import SmiOutputError

# A number of at most four digits is an index (a board serial has 13).
_INDEX = re.compile(r"[0-9]{1,4}")
_UUID_PREFIX = "GPU-"
# Only the first ids of a list are looked at: no node has more GPUs than this.
_MAX_IDS = 1024

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """The ids of one ``-i`` option, each once, in the order written."""

    ids: tuple[str, ...]

    @property
    def option(self) -> str:
        return f"-i {','.join(self.ids)}"

    @property
    def indices(self) -> tuple[int, ...] | None:
        """The indices of the GPUs selected, ascending (the order nvidia-smi prints them in);
        None when some id is not an index."""
        if not all(_INDEX.fullmatch(i) for i in self.ids):
            return None
        return tuple(sorted({int(i) for i in self.ids}))

    @property
    def count(self) -> int | None:
        """How many GPUs nvidia-smi printed for it; None where a board serial is among the ids."""
        if self.indices is not None:
            return len(self.indices)
        if any(_kind(i) == "serial" for i in self.ids):
            return None
        return len(self.ids)

    def index_at(self, position: int) -> int | None:
        """The index of the GPU printed at ``position`` (0-based) of a reading; None when the
        ids do not tell it."""
        indices = self.indices
        return indices[position] if indices is not None and position < len(indices) else None

    def identity(self) -> tuple[str, str] | None:
        """(DeviceInfo field, value) of the one GPU it names by UUID or PCI bus id (the bus id
        as nvidia-smi prints it); None when it names several, or none that way."""
        if len(self.ids) != 1:
            return None
        (only,) = self.ids
        kind = _kind(only)
        if kind == "uuid":
            return "uuid", only
        bus = nvml_bus_id(only) if kind == "pci_bus_id" else None
        return None if bus is None else ("pci_bus_id", bus)

    def unknown_index_note(self, *, identified: bool) -> str | None:
        """What an output that prints no index does not tell of the GPUs this selects (an event
        the reader says on the last GPU); None when the ids are indices. ``identified``: each
        GPU's report names it (a UUID or bus id column, a -q report's bus id)."""
        if self.indices is not None:
            return None
        if identified or self.identity() is not None:
            what = "its index"
        else:
            what = "its index and which of the GPUs selected each row is"
        return (
            f"{what}: the command selects by UUID, PCI bus id or board serial ({self.option}) "
            "and the output prints no index (the GPUs are numbered in the order printed)"
        )

    def beyond_selected(self, position: int, described: str) -> str | None:
        """The error for a GPU (``described``) printed at ``position`` (0-based) of a reading,
        beyond the GPUs this selects; None when it is one of them, or their number is not known."""
        count = self.count
        if count is None or position < count:
            return None
        nth = _ORDINALS[position] if position < len(_ORDINALS) else f"number {position + 1}"
        gpus = "GPU" if count == 1 else "GPUs"
        return (
            f"a {nth} GPU ({described}) in one reading of a command that selects {count} {gpus} "
            f"({self.option})"
        )

    def check_printed(self, printed: int, *, cut: bool) -> None:
        """Refuses a reading of ``printed`` GPUs where this selects more (unless the output is
        cut short: its last reading may stop before their end) or fewer."""
        count = self.count
        if count is None or printed == count or (printed < count and cut):
            return
        raise SmiOutputError(
            None,
            f"{printed} GPU(s) in a reading where the command selects {count} ({self.option})",
            hint=WRONG_COMMAND_HINT,
        )


WRONG_COMMAND_HINT = "paste the output under the command that printed it"


def set_selected_indices(
    builders: list[DeviceBuilder], selection: GpuSelection | None, *, cut: bool
) -> list[str]:
    """Sets the indices ``selection`` gives the GPUs of a report that prints none (-q, -q -x),
    in the order printed; what it leaves unknown, as notes. A report of more GPUs than it
    selects, or of fewer and not cut short, is refused."""
    if selection is None:
        return []
    selection.check_printed(len(builders), cut=cut)
    for position, builder in enumerate(builders):
        builder.set("index", selection.index_at(position))
    note = selection.unknown_index_note(identified=True)
    return [] if note is None else [note]


@dataclass(frozen=True, slots=True)
class SelectedOutput:
    """One command's output in a paste of several (each under its own command line): its first
    line (1-based) and the GPUs its command selects, if it says."""

    first_line: int
    selection: GpuSelection | None


def set_indices_by_output(
    builders: list[DeviceBuilder],
    opening_lines: list[int],
    printed_lines: list[int],
    outputs: Sequence[SelectedOutput],
    *,
    cut: bool,
) -> list[str]:
    """``set_selected_indices`` of a report pasted under several commands: each GPU printed
    (a report's section, opening at a line of ``printed_lines``) takes its index from the
    selection of the command it is printed under, by its place in that command's output. A GPU
    (``builders[i]``, its first report opening at ``opening_lines[i]``) takes the index of its
    first report. Each output is checked against its own selection (``cut``: the last may be
    cut short)."""
    index_at_line: dict[int, int | None] = {}
    notes: list[str] = []
    for at, output in enumerate(outputs):
        end = outputs[at + 1].first_line if at + 1 < len(outputs) else None
        printed = [n for n in printed_lines if output.first_line <= n and (end is None or n < end)]
        if output.selection is None or not printed:
            continue
        output.selection.check_printed(len(printed), cut=cut and end is None)
        for position, line in enumerate(printed):
            index_at_line[line] = output.selection.index_at(position)
        note = output.selection.unknown_index_note(identified=True)
        if note is not None and note not in notes:
            notes.append(note)
    given = [index_at_line.get(line) for line in opening_lines]
    _refuse_one_index_twice(given, outputs)
    for builder, index in zip(builders, given, strict=True):
        builder.set("index", index)
    return notes


def _refuse_one_index_twice(indices: list[int | None], outputs: Sequence[SelectedOutput]) -> None:
    """Two GPUs (two reports that are not one GPU's) given one index by their commands cannot be
    the GPUs of one node: the paste's commands and its reports disagree."""
    known = [i for i in indices if i is not None]
    twice = next((i for i in known if known.count(i) > 1), None)
    if twice is None:
        return
    options = ", ".join(o.selection.option for o in outputs if o.selection is not None)
    raise SmiOutputError(
        None,
        f"two different GPUs printed as GPU {twice} by the commands of the paste ({options})",
        hint=WRONG_COMMAND_HINT,
    )


def _kind(gpu_id: str) -> str:
    if _INDEX.fullmatch(gpu_id):
        return "index"
    if gpu_id.upper().startswith(_UUID_PREFIX):
        return "uuid"
    if ":" in gpu_id:
        return "pci_bus_id"
    return "serial"


def selection_of(values: list[str]) -> GpuSelection | None:
    """The selection of the ``-i`` values a command holds: None for none, or for several
    different ones (its man page does not say which one counts)."""
    if len(set(values)) != 1:
        return None
    ids: dict[str, None] = {}
    for part in values[0].split(",", _MAX_IDS)[:_MAX_IDS]:
        if part.strip():
            ids.setdefault(part.strip(), None)
    return GpuSelection(tuple(ids)) if ids else None
