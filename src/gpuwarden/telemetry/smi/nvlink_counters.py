"""``nvidia-smi nvlink -e`` / ``nvlink --errorcounters``: each link's error counters.

nvidia-smi prints one block per GPU, a header line then one line per (link, counter)::

    GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-fde0a018-...)
    <tab> Link 0: Replay Errors: 0
    <tab> Link 0: Recovery Errors: 0
    <tab> Link 0: CRC Errors: 0

Drivers differ in the counters: "Replay / Recovery / CRC Errors" (Volta to Hopper, one CRC
count), "CRC Flit Errors" and "CRC Data Errors" apart (older drivers, DCGM's FLIT/DATA fields),
and NVLink 5 (GB200, B300, driver 570+) a longer list: "Tx packets", "Malformed packet Errors",
"Link recovery failed events", "Effective Errors", "Symbol Errors", "FEC Errors - 0" .. "- 15",
"Effective BER: 15e-255". Every counter is read, known or not, under a stable snake_case key;
a value that is not a count (a BER, "N/A") is kept as printed. A GPU header may carry a UUID,
only the name (a GB300 node), or the PCI bus id alone ("GPU 00000008:06:00.0"); a block
emptied by an elision ("[...]") or a blank line between links reads as what is there.
Text around the output (a loop that ran it per GPU, the echo lines between) is not counters and
is left alone; an ``nvlink -s`` link state where a counter belongs is refused as what it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi.cells import LineError
from gpuwarden.telemetry.smi.paste import command_output_lines, pasted_commands
from gpuwarden.telemetry.smi.topo import (
    GPU_HEADER,
    GPU_HEADER_BARE,
    GPU_HEADER_BUS,
    GPU_LINE_START,
    LINK_LINE,
    NvLinkListing,
    is_link_state,
    nvlink_listing,
)
from gpuwarden.types.nvlink_counters import GpuLinkCounters, LinkCounters, NvLinkCounters

NVLINK_COUNTERS_HINT = (
    "save the output of `nvidia-smi nvlink -e` (or `nvlink --errorcounters`) unchanged and pass "
    "that file; `nvlink -s` prints link states, `nvlink -e` their error counters"
)
_REFERENCE = "nvlink-counters-unreadable"

# `nvlink -e` / `--errorcounters` among the command's options ("nvlink -e -i 0", "nvlink -i 0 -e")
_COMMAND = re.compile(r"nvidia-smi(?:\.exe)?\s+nvlink\b(?=.*?\s(?:-e|--errorcounters)(?:\s|$))")
# indices and counts are bounded: int() never sees a 5,000-digit number
_COUNT = re.compile(r"^\d{1,20}$")
_NAME = re.compile(r"^[A-Za-z][\w /().+-]{0,79}$")
_KEY_PARTS = re.compile(r"[^a-z0-9]+")
# what an error counter's key ends with: "..._errors", "..._events", "tx_discards", "fec_errors_3"
_ERROR_KEY = re.compile(r"(?:errors|events|discards)(?:_\d+)?$")
_MAX_VALUE_CHARS = 80


def counter_key(name: str) -> str:
    """A counter's stable key: "CRC Flit Errors" → crc_flit_errors, "FEC Errors - 3" →
    fec_errors_3, "Link recovery failed events" → link_recovery_failed_events."""
    return _KEY_PARTS.sub("_", name.lower()).strip("_")


def _output_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the `nvlink -e` output, each line stripped (indents carry no
    meaning here); of a paste that also holds `nvlink -s`, the counters' part."""
    lines = nvlink_listing(command_output_lines(text, _COMMAND), NvLinkListing.KEYED)
    return [(n, line.strip()) for n, line in lines]


def holds_nvlink_counters(text: str, *, looked: bool = False) -> bool:
    """``text`` holds an ``nvlink -e`` output, alone or beside ``nvlink -s``: its command line,
    or a GPU line with error counters under it. ``looked``: ``looks_like_nvlink_counters`` said
    no of ``text`` already (doctor's classify), so only its command line is looked for."""
    commands = pasted_commands(text)
    found = any(_COMMAND.search(c) for c in commands)
    return found or (not looked and looks_like_nvlink_counters(text))


@dataclass
class _Gpu:
    index: int | None
    name: str | None
    uuid: str | None
    pci_bus_id: str | None = None
    links: dict[int, tuple[dict[str, int], dict[str, str]]] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)

    def build(self) -> GpuLinkCounters:
        links = tuple(
            LinkCounters(link, counts, values)
            for link, (counts, values) in sorted(self.links.items())
        )
        message = None if links or not self.messages else " ".join(self.messages)
        return GpuLinkCounters(self.index, self.name, self.uuid, self.pci_bus_id, links, message)


def _gpu_header(line: str, following: str | None) -> _Gpu | None:
    """The GPU a header opens; a "GPU n: name" line without UUID only where a link line or a
    statement follows it (other tools print "GPU n: name" lines too)."""
    found = GPU_HEADER.match(line)
    if found:
        return _Gpu(int(found.group(1)), found.group(2).strip(), found.group(3).strip() or None)
    found = GPU_HEADER_BUS.match(line)
    if found:
        return _Gpu(None, None, None, found.group(1))
    found = GPU_HEADER_BARE.match(line)
    if found and following is not None and _opens_block(following):
        return _Gpu(int(found.group(1)), found.group(2).strip(), None)
    return None


def _opens_block(line: str) -> bool:
    return LINK_LINE.match(line) is not None or line.startswith("NVML:")


def _counter(number: int, link: re.Match[str]) -> tuple[int, str, str, str]:
    """(link, key, name as printed, value) of a "Link n: <name>: <value>" line."""
    rest = link.group(2).strip()
    name, colon, value = rest.rpartition(":")
    name, value = name.strip(), value.strip()
    if not colon or not name:
        if is_link_state(rest):  # an `nvlink -s` state where a counter belongs
            problem = f"a link state ({rest!r}): `nvidia-smi nvlink -s` output, not error counters"
            raise LineError(number, problem)
        raise LineError(number, f"link {link.group(1)}: {rest[:60]!r} is not a counter")
    if not _NAME.match(name):
        raise LineError(number, f"link {link.group(1)}: {name[:60]!r} is not a counter's name")
    return int(link.group(1)), counter_key(name), name, value[:_MAX_VALUE_CHARS]


def _add(gpu: _Gpu, number: int, counter: tuple[int, str, str, str]) -> None:
    link, key, _, value = counter
    counts, values = gpu.links.setdefault(link, ({}, {}))
    if key in counts or key in values:
        raise LineError(
            number,
            f"{key} of link {link} printed twice for one GPU: two readings in one file? pass "
            "each reading as a file of its own",
        )
    if _COUNT.match(value):
        counts[key] = int(value)
    else:
        values[key] = value


def _parse(lines: list[tuple[int, str]]) -> NvLinkCounters:
    gpus: list[_Gpu] = []
    labels: dict[str, str] = {}
    printed = [(number, line) for number, line in lines if line]
    for at, (number, line) in enumerate(printed):
        following = printed[at + 1][1] if at + 1 < len(printed) else None
        gpu = _gpu_header(line, following)
        link = LINK_LINE.match(line)
        if gpu is not None:
            gpus.append(gpu)
        elif link is not None:
            if not gpus:
                raise LineError(number, "a link line before any GPU line")
            counter = _counter(number, link)
            _add(gpus[-1], number, counter)
            labels.setdefault(counter[1], counter[2])
        elif gpus and not gpus[-1].links:
            gpus[-1].messages.append(line)  # nvidia-smi's sentence where it lists no link
    if not any(g.links for g in gpus):
        raise LineError(None, "no `nvidia-smi nvlink -e` error counter in it")
    return NvLinkCounters(gpus=_merged(gpus), labels=labels)


def _merged(gpus: list[_Gpu]) -> tuple[GpuLinkCounters, ...]:
    """One block per GPU: `nvlink -e -i N` run per GPU, or per link (`-l`), prints a GPU's
    header again for each part."""
    by_gpu: dict[tuple[int | None, str | None], _Gpu] = {}
    for gpu in gpus:
        key = (gpu.index, gpu.pci_bus_id)
        kept = by_gpu.setdefault(key, gpu)
        if kept is gpu:
            continue
        for link, (counts, values) in gpu.links.items():
            kept_counts, kept_values = kept.links.setdefault(link, ({}, {}))
            if set(counts) & set(kept_counts) or set(values) & set(kept_values):
                raise LineError(
                    None,
                    f"{gpu.index if gpu.index is not None else gpu.pci_bus_id}: link {link} "
                    "printed twice: two readings in one file? pass each as a file of its own",
                )
            kept_counts.update(counts)
            kept_values.update(values)
    return tuple(g.build() for g in by_gpu.values())


def parse_nvlink_counters(text: str) -> NvLinkCounters:
    """Per GPU (index, name, UUID or bus id as printed), per link, every counter by its key.
    Bad input raises CorruptInputError (``about`` names the file at the caller)."""
    try:
        return _parse(_output_lines(text))
    except LineError as error:
        where = f"line {error.line}: " if error.line is not None else ""
        raise CorruptInputError(
            f"{where}{error.problem}", reference=_REFERENCE, hint=NVLINK_COUNTERS_HINT
        ) from None


def looks_like_nvlink_counters(head: str) -> bool:
    """``nvlink -e``: a GPU header, then a "Link n: <counter> Errors|events|discards: ..." line
    (``-gt`` throughput and ``-R`` peers are keyed by link too, but count no error)."""
    seen_gpu = False
    printed = [line for _, line in _output_lines(head) if line]
    for at, line in enumerate(printed):
        if line.startswith(GPU_LINE_START):  # what every header opens with: most lines are not
            following = printed[at + 1] if at + 1 < len(printed) else None
            if _gpu_header(line, following) is not None:
                seen_gpu = True
                continue
        link = LINK_LINE.match(line) if seen_gpu else None
        if link is None:
            continue
        name = link.group(2).rpartition(":")[0].strip()
        if name and _NAME.match(name) and _ERROR_KEY.search(counter_key(name)):
            return True
    return False
