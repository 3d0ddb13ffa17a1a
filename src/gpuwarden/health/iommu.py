"""The IOMMU's DMA fault lines of a kernel log, folded per device. Pure.

An IOMMU translates every DMA a device makes; one with no mapping that allows it is blocked and
logged. The kernel's drivers print, per fault:

* Intel VT-d (drivers/iommu/intel/dmar.c, ``dmar_fault_do_one``): "DMAR: [DMA Read NO_PASID]
  Request device [41:00.0] fault addr 0x7cd80000 [fault reason 0x06] PTE Read access is not set"
  (5.16+); "DMAR: [DMA Write] Request device [06:00.0] PASID ffffffff fault addr 1a5e12000 [fault
  reason 05] PTE Write access is not set" (4.x-5.x); "[0x00:0x02.0]" (5.13-5.15); before 4.x
  "DMAR:[DMA Read] Request device [03:00.0] fault addr ..." with the reason on the next line. The
  bus is printed without its PCI domain (one DMAR unit serves one segment): domain 0000 is read.
* AMD-Vi (drivers/iommu/amd/iommu.c, ``amd_iommu_report_page_fault``): "nvidia 0000:07:00.0:
  AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]" (5.x+: the
  device before the colon); "AMD-Vi: Event logged [IO_PAGE_FAULT device=20:00.0 domain=..." (4.x,
  and 5.x+ when no driver holds the device: "device=0000:41:00.0"); before 4.x the event split
  over two lines ("Event logged [" / "IO_PAGE_FAULT device=05:00.0 ..."). Flags bit 5 (RW) says
  a write, bit 3 (I) an interrupt request (amd_iommu_types.h EVENT_FLAG_RW / EVENT_FLAG_I).
* Arm SMMUv3 (drivers/iommu/arm/arm-smmu-v3, 6.15+ ``arm_smmu_dump_event``): "event:
  F_TRANSLATION client: 0019:01:00.0 sid: 0x10100 ssid: 0x0 iova: ... ipa: ...". Older kernels
  print "event 0x10 received:" and raw words whose stream id maps to a device only through the
  firmware's IORT table, which the log does not hold: those name no device and are not read.

Only IO page faults are read (INVALID_DEVICE_REQUEST, interrupt-remapping faults are other
events). A device is an NVIDIA GPU's when the log ties it to NVIDIA (``pcie_aer.NvidiaTies``:
the ``nvidia`` driver's lines, the PCI core's vendor-10de enumeration, an Xid or NVRM line for
that bus). Lines are taken in log order, so a log fed in chunks folds as it does whole. Memory
is bounded by devices, not by lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuwarden.catalog.pci_bus import bus_id, whole_bus_id
from gpuwarden.health.pcie_aer import MAX_DEVICES, NvidiaTies, device_of
from gpuwarden.health.record_span import RecordSpan
from gpuwarden.types.health import IommuFaultGroup

# Literals one of which every fault line this module reads holds: the scanner hands the lines
# that have one to ``IommuAccumulator.line``.
IOMMU_MARKERS = ("IO_PAGE_FAULT", "[DMA ", "event: F_")  # "[DMA ": VT-d, any spacing
Stamp = tuple[float | None, float | None]  # (Unix seconds, uptime seconds) of a line
MAX_LINES = 5
MAX_REASONS = 4
DMAR, AMD_VI, SMMU_V3 = "dmar", "amd-vi", "smmu-v3"
_FLAG_INTERRUPT = 0x008  # AMD-Vi event flag I: an interrupt request, not a memory access
_FLAG_WRITE = 0x020  # AMD-Vi event flag RW: a write

_HEX = "[0-9a-fA-F]"
_DMAR = re.compile(
    rf"DMAR: ?\[DMA (?P<access>Read|Write)[^\]]*\] Request device \["
    rf"(?:(?P<domain>{_HEX}{{4}}):)?(?:0x)?(?P<bus>{_HEX}{{2}}):(?:0x)?(?P<device>{_HEX}{{2}})"
    rf"\.(?P<function>[0-7])\](?:.*?\[fault reason (?:0x)?{_HEX}+\]\s*(?P<reason>.*\S))?"
)
_AMD_VI = re.compile(
    rf"IO_PAGE_FAULT(?: device=(?:(?P<domain>{_HEX}{{4}}):)?(?P<bus>{_HEX}{{2}}):"
    rf"(?P<device>{_HEX}{{2}})\.(?P<function>[0-7]))?.*?\bflags=0x(?P<flags>{_HEX}+)"
)
_SMMU = re.compile(
    rf"event: (?P<event>F_\w+) client: (?P<client>{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}\.[0-7])\b"
)


@dataclass(frozen=True, slots=True)
class _Fault:
    bus: str
    iommu: str
    reason: str
    access: str | None


def _dmar(line: str) -> _Fault | None:
    found = _DMAR.search(line)
    if found is None:
        return None
    bus = bus_id(found["domain"] or "0", found["bus"], found["device"], found["function"])
    reason = found["reason"] or "fault reason not printed"
    return _Fault(bus, DMAR, reason, found["access"].lower())


def _amd_vi(line: str) -> _Fault | None:
    found = _AMD_VI.search(line)
    if found is None:
        return None
    if found["bus"] is not None:
        bus = bus_id(found["domain"] or "0", found["bus"], found["device"], found["function"])
    else:
        named = device_of(line[: found.start()])
        if named is None:
            return None
        bus = whole_bus_id(named["bus"])
    flags = int(found["flags"], 16)
    access = None if flags & _FLAG_INTERRUPT else ("write" if flags & _FLAG_WRITE else "read")
    return _Fault(bus, AMD_VI, "IO_PAGE_FAULT", access)


def _smmu(line: str) -> _Fault | None:
    found = _SMMU.search(line)
    if found is None:
        return None
    return _Fault(whole_bus_id(found["client"]), SMMU_V3, found["event"], None)


_READERS = (("DMAR", _dmar), ("IO_PAGE_FAULT", _amd_vi), ("event: F_", _smmu))


def read_fault(line: str) -> _Fault | None:
    """The IOMMU fault a line prints, if it is one that names its device."""
    for marker, reader in _READERS:
        if marker in line:
            fault = reader(line)
            if fault is not None:
                return fault
    return None


@dataclass(slots=True)
class _Builder:
    bus: str
    iommu: str
    faults: int = 0
    reasons: list[str] = field(default_factory=list)
    accesses: list[str] = field(default_factory=list)
    span: RecordSpan = field(default_factory=lambda: RecordSpan(MAX_LINES))

    def add(self, fault: _Fault, number: int, line: str, stamp: Stamp) -> None:
        self.faults += 1
        if fault.reason not in self.reasons and len(self.reasons) < MAX_REASONS:
            self.reasons.append(fault.reason)
        if fault.access is not None and fault.access not in self.accesses:
            self.accesses.append(fault.access)
        self.span.seen(number, line, *stamp)

    def build(self, nvidia: str | None) -> IommuFaultGroup:
        return IommuFaultGroup(
            pci_bus_id=self.bus,
            iommu=self.iommu,
            nvidia=nvidia,
            faults=self.faults,
            reasons=tuple(self.reasons),
            accesses=tuple(sorted(self.accesses)),
            **self.span.fields(),
        )


def _tie_of(bus: str, iommu: str, known: dict[str, str]) -> str | None:
    """How the log ties ``bus`` to NVIDIA. VT-d prints no PCI domain: its bus matches a tied
    bus of any domain with the same bus, device and function when only one does."""
    how = known.get(bus)
    if how is not None or iommu != DMAR:
        return how
    same = [tied for tied in known if tied.endswith(bus[4:])]
    return f"{known[same[0]]} (bus printed without its PCI domain)" if len(same) == 1 else None


class IommuAccumulator:
    """Folds IOMMU fault lines (in log order) into groups by (device, IOMMU)."""

    def __init__(self, ties: NvidiaTies | None = None) -> None:
        self._groups: dict[tuple[str, str], _Builder] = {}
        self._ties = NvidiaTies() if ties is None else ties

    def line(self, line: str, number: int, clock: Callable[[str], Stamp]) -> bool:
        """Read one line (``clock``: its prefix → its stamp); False when it is no IOMMU fault
        naming a device."""
        fault = read_fault(line)
        if fault is None:
            return False
        named = device_of(line)
        if named is not None:
            self._ties.read(named["driver"], whole_bus_id(named["bus"]), line[named.end() :])
        key = (fault.bus, fault.iommu)
        builder = self._groups.get(key)
        if builder is None:
            if len(self._groups) >= MAX_DEVICES:
                return True
            builder = self._groups[key] = _Builder(fault.bus, fault.iommu)
        cut = named.start() if named is not None else _message_start(line)
        builder.add(fault, number, line, clock(line[:cut]))
        return True

    def build(self, ties: dict[str, str]) -> tuple[IommuFaultGroup, ...]:
        """The groups, in log order; ``ties``: buses the rest of the log ties to NVIDIA (an Xid,
        an NVRM line) with how."""
        known = self._ties.known(ties)
        built = [b.build(_tie_of(b.bus, b.iommu, known)) for b in self._groups.values()]
        return tuple(sorted(built, key=lambda g: g.first_line))


def _message_start(line: str) -> int:
    """Where the IOMMU's own words start (the stamp and prefix before them)."""
    starts = [at for at in (line.find(w) for w in ("DMAR", "AMD-Vi", "IO_PAGE_FAULT")) if at >= 0]
    return min(starts) if starts else 0
