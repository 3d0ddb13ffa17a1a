"""The kernel's PCIe AER lines of a kernel log, folded per (device, severity). Pure.

The AER driver (drivers/pci/pcie/aer.c, Documentation/PCI/pcieaer-howto.rst) prints, per error:

* at the root port, the message it received and from whom: "pcieport 0000:00:03.0: AER:
  Corrected error received: 0000:3b:00.0" (3.x-4.x: "...: id=3b00"; 6.x: "Correctable error
  message received from 0000:3b:00.0"; "Multiple ..." when more errors came than one message);
* at the device that logged it, the record: "nvidia 0000:3b:00.0: PCIe Bus Error:
  severity=Corrected, type=Physical Layer, (Receiver ID)" (6.x puts "AER: " before it), its
  "device [10de:2330] error status/mask=..." line and one line per status bit ("[ 0] RxErr",
  older kernels "[ 0] Receiver Error", "[14] CmpltTO (First)");
* for an uncorrected error, its recovery of every device below the port: a driver without AER
  callbacks (the NVIDIA driver) makes it say "nvidia 0000:03:00.0: AER: can't recover (no
  error_detected callback)" (before 5.x: "device has no AER-aware driver").

The device a line names is the one before the colon ("nvidia 0000:3b:00.0:"); a root port
reporting alone names no GPU. A device is an NVIDIA GPU's when the log ties it to NVIDIA: the
``nvidia`` driver prints its lines, its status line gives vendor 10de (PCI-SIG's id of NVIDIA),
or the scanner saw an Xid or NVRM line for that bus (``AerAccumulator.build(ties=...)``); the
PCI core's enumeration line of a vendor-10de display controller ties it too (``NvidiaTies``,
which the IOMMU reader shares).

A message naming the zero requester id ("received from 0000:00:00.0", "id=0000") names no
device: the root port's Error Source register held no id (aer.c's is_error_source: "When bus id
is equal to 0, it might be a bad id reported by root port"; older kernels then say "can't find
device of ID0000"), and the kernel finds the source by its status bits and prints that device's
record. Such a message is counted at the port that printed it, not at the host bridge 00:00.0.
An "id=" is read in the port's own domain, whatever its width (a VMD domain is "10003").

A "can't recover" line carries no severity: it takes the one of the uncorrected record before it
(the kernel prints the record, then recovers), or of the first one after it when an excerpt
starts mid-recovery; "uncorrected" when the log prints none. Lines are taken in log order, so a
log fed in chunks folds as it does whole. Memory is bounded by devices, not by lines.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpuwarden.catalog.pci_bus import normalize_pci_bus_id, whole_bus_id
from gpuwarden.health.record_span import RecordSpan
from gpuwarden.types.health import PcieAerGroup

# Literals one of which every AER line holds: the scanner hands the lines that have one to
# ``AerAccumulator.line``. ":    [" is a status-bit line of kernels before 6.x.
AER_MARKERS = ("AER", "PCIe Bus Error", "status/mask=", ":    [")
NVIDIA_VENDOR_ID = "10de"  # PCI-SIG vendor id of NVIDIA Corporation
# The PCI core's enumeration line names each function's vendor and class: "pci 0000:41:00.0:
# [10de:2330] type 00 class 0x030200" (drivers/pci/probe.c). Class 0x03 is a display/3D
# controller: a GPU (an NVIDIA function of another class is its audio, USB or a bridge).
TIE_MARKERS = (f"[{NVIDIA_VENDOR_ID}:",)
_ENUMERATED = re.compile(
    rf"^\[{NVIDIA_VENDOR_ID}:[0-9a-fA-F]{{4}}\] type [0-9a-fA-F]{{2}} class 0x03[0-9a-fA-F]{{4}}"
)
MINUTE_S = 60.0
Stamp = tuple[float | None, float | None]  # (Unix seconds, uptime seconds) of a line
# The busiest minute is counted up to this many records: far above the limits it is judged by
# (DCGM's 8 replays a minute), small enough to keep per group.
MINUTE_COUNT_CAP = 64
MAX_ERROR_TYPES = 8
MAX_LINES = 5
MAX_DEVICES = 256  # (device, severity) groups and ties kept: a log names a few devices

CORRECTED = "corrected"
NON_FATAL = "non-fatal"
FATAL = "fatal"
UNCORRECTED = "uncorrected"  # the log says the error was uncorrected but not which kind

# "nvidia 0000:3b:00.0: ", "pcieport 0000:00:03.0: ", 2.6-era "aer 0000:00:1c.5:pcie02: ". The
# driver's name starts a run of its characters: a long run no bus follows is then tried once, not
# from each of its characters (quadratic); a start inside a run matched only where its start did.
_DEVICE = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<driver>[A-Za-z0-9_.-]+) "
    r"(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
    r"(?P<service>:pcie\d+)?:\s"
)
_RECORD = re.compile(
    r"PCIe Bus Error: severity=(?P<severity>[^,]+)(?:.*?\bid=(?P<id>[0-9a-fA-F]{4}))?"
)
_RECEIVED = re.compile(
    r"(?P<multiple>Multiple )?(?P<severity>Correct(?:ed|able)|Uncorrect(?:ed|able) \([^)]*\))"
    r" error (?:message )?received(?::| from)\s*"
    r"(?:id=(?P<id>[0-9a-fA-F]{4})|(?P<bus>[0-9a-fA-F:.]+))"
)
_RECOVERY_FAILED = ("can't recover", "no AER-aware driver")
_STATUS = re.compile(r"device \[(?P<vendor>[0-9a-fA-F]{4}):[0-9a-fA-F]{4}\] error status/mask=")
# The name ends with a non-blank and the blanks after it are read once: a name that may end in
# blanks, or blanks on both sides of an optional "(First)", split a long run of them n ways.
_STATUS_BIT = re.compile(
    r"\[\s*\d{1,2}\]\s+(?P<name>[A-Za-z](?:[\w ()/-]*?[\w()/-])?)\s*(?:\(First\)\s*)?$"
)


class NvidiaTies:
    """The buses a log ties to an NVIDIA GPU, and how, from the kernel lines that name a device
    ("<driver> 0000:3b:00.0: ..."): the ``nvidia`` driver's own lines, the PCI core's enumeration
    of a vendor-10de display controller, an AER status line with vendor 10de. Shared by the PCIe
    AER and IOMMU readers, so a bus tied by one kind of line is tied for both."""

    def __init__(self) -> None:
        self._ties: dict[str, str] = {}

    def tie(self, bus: str, how: str) -> None:
        if bus not in self._ties and len(self._ties) < MAX_DEVICES:
            self._ties[bus] = how

    def read(self, driver: str, bus: str, rest: str) -> None:
        """A line ``driver bus: rest`` (``bus`` normalised)."""
        if driver == "nvidia":
            self.tie(bus, "nvidia driver")
        elif driver == "pci" and _ENUMERATED.match(rest):
            self.tie(bus, f"vendor {NVIDIA_VENDOR_ID}")

    def known(self, others: dict[str, str]) -> dict[str, str]:
        """These ties over ``others`` (an Xid or NVRM line's bus, from the scanner)."""
        return {**others, **self._ties}


def device_of(line: str) -> re.Match[str] | None:
    """The device a kernel line names before its colon ("nvidia 0000:3b:00.0: "), if any."""
    return _DEVICE.search(line)


def aer_severity(text: str) -> str:
    """ "Corrected" / "Correctable" / "Uncorrected (Non-Fatal)" / "Uncorrected (Fatal)" → ours."""
    if text.startswith("Correct"):
        return CORRECTED
    if "Non-Fatal" in text:
        return NON_FATAL
    return FATAL if "Fatal" in text else UNCORRECTED


def _bus_of_id(port: str, requester_id: str) -> str:
    """Older kernels' "id=3b00": bus << 8 | device << 3 | function, in the domain of ``port``
    (the device that printed it, "10003:00:00.0": the domain is all before the bus)."""
    domain = port.rsplit(":", 2)[0]
    value = int(requester_id, 16)
    return f"{domain}:{value >> 8:02x}:{(value >> 3) & 0x1F:02x}.{value & 7}"


def _is_zero_id(bus: str) -> bool:
    """The zero requester id (bus 0, device 0, function 0) in any domain: no source named."""
    return bus.rsplit(":", 2)[1:] == ["00", "00.0"]


@dataclass(slots=True)
class _Builder:
    bus: str
    severity: str
    records: int = 0
    messages: int = 0
    multiple: int = 0
    recovery_failed: int = 0
    error_types: list[str] = field(default_factory=list)
    window: deque[float] = field(default_factory=lambda: deque(maxlen=MINUTE_COUNT_CAP))
    busiest: int | None = None
    span: RecordSpan = field(default_factory=lambda: RecordSpan(MAX_LINES))

    def seen(self, number: int, line: str, stamp: Stamp) -> None:
        self.span.seen(number, line, *stamp)

    def timed(self, at: float | None) -> None:
        """One more error at ``at`` (uptime, else Unix seconds) in the busiest-minute count."""
        if at is None:
            return
        window = self.window
        if window and at < window[-1]:  # a reboot or a joined log: a new count
            window.clear()
        while window and at - window[0] > MINUTE_S:
            window.popleft()
        window.append(at)
        self.busiest = max(self.busiest or 0, len(window))

    def build(self, nvidia: str | None) -> PcieAerGroup:
        return PcieAerGroup(
            pci_bus_id=self.bus,
            severity=self.severity,
            nvidia=nvidia,
            records=self.records,
            messages=self.messages,
            multiple=self.multiple,
            recovery_failed=self.recovery_failed,
            error_types=tuple(self.error_types),
            busiest_minute=self.busiest,
            **self.span.fields(),
        )


class AerAccumulator:
    """Folds AER lines (in log order) into groups by (device, severity)."""

    def __init__(self, ties: NvidiaTies | None = None) -> None:
        self._groups: dict[tuple[str, str], _Builder] = {}
        self._ties = NvidiaTies() if ties is None else ties  # buses the log ties to NVIDIA
        self._last_severity: dict[str, str] = {}  # bus → severity of its last record
        self._last_uncorrected: str | None = None
        # recoveries that failed before any uncorrected record: (bus, line number, line, stamp)
        self._pending: list[tuple[str, int, str, Stamp]] = []

    def line(self, line: str, number: int, clock: Callable[[str], Stamp]) -> bool:
        """Read one line (``clock``: its prefix → its stamp); False when it is no AER line of a
        named device."""
        device = _DEVICE.search(line)
        if device is None:
            return False
        stamp = clock(line[: device.start()])
        bus = whole_bus_id(device["bus"])
        rest = line[device.end() :]
        self._ties.read(device["driver"], bus, rest)
        record = _RECORD.search(rest)
        if record is not None:
            if device["service"] and record["id"]:  # the port service printed it: id= names it
                named = _bus_of_id(bus, record["id"])
                bus = bus if _is_zero_id(named) else named
            self._record(bus, aer_severity(record["severity"].strip()), number, line, stamp)
            return True
        received = _RECEIVED.search(rest)
        if received is not None:
            self._received(bus, received, number, line, stamp)
            return True
        if any(words in rest for words in _RECOVERY_FAILED):
            self._recovery_failed(bus, number, line, stamp)
            return True
        status = _STATUS.search(rest)
        if status is not None:
            # the pcieport driver binds bridges only (root and switch ports): an NVIDIA port
            # (a Tegra root port, 10de:0fae) is no GPU
            if status["vendor"].lower() == NVIDIA_VENDOR_ID and device["driver"] != "pcieport":
                self._ties.tie(bus, f"vendor {NVIDIA_VENDOR_ID}")
            return True
        bit = _STATUS_BIT.search(rest)
        severity = self._last_severity.get(bus)
        if bit is None or severity is None:
            return False
        builder = self._groups.get((bus, severity))
        name = bit["name"]
        known = builder.error_types if builder is not None else None
        if known is not None and name not in known and len(known) < MAX_ERROR_TYPES:
            known.append(name)
        return True

    def _builder(self, bus: str, severity: str) -> _Builder | None:
        builder = self._groups.get((bus, severity))
        if builder is None and len(self._groups) < MAX_DEVICES:
            builder = self._groups[(bus, severity)] = _Builder(bus, severity)
        return builder

    def _record(self, bus: str, severity: str, number: int, line: str, stamp: Stamp) -> None:
        if len(self._last_severity) < MAX_DEVICES or bus in self._last_severity:
            self._last_severity[bus] = severity
        if severity != CORRECTED:
            self._uncorrected(severity)
        builder = self._builder(bus, severity)
        if builder is None:
            return
        builder.records += 1
        builder.seen(number, line, stamp)
        # a record follows its "error received" message: time it once, unless the log printed
        # more records than messages
        if builder.records > builder.messages:
            builder.timed(stamp[1] if stamp[1] is not None else stamp[0])

    def _received(
        self,
        port: str,
        found: re.Match[str],
        number: int,
        line: str,
        stamp: Stamp,
    ) -> None:
        severity = aer_severity(found["severity"])
        if found["id"]:
            source = _bus_of_id(port, found["id"])
        else:
            bus = found["bus"].rstrip(".:")
            whole = bus.count(":") == 2 and "." in bus  # else a port's partial id: the port
            source = (normalize_pci_bus_id(bus) if whole else None) or port
        if _is_zero_id(source):  # the port's source register held no id: count it at the port
            source = port
        if severity != CORRECTED:
            self._uncorrected(severity)
        builder = self._builder(source, severity)
        if builder is None:
            return
        builder.messages += 1
        builder.multiple += found["multiple"] is not None
        builder.seen(number, line, stamp)
        if builder.messages > builder.records:
            builder.timed(stamp[1] if stamp[1] is not None else stamp[0])

    def _uncorrected(self, severity: str) -> None:
        self._last_uncorrected = severity
        pending, self._pending = self._pending, []
        for bus, number, line, stamp in pending:
            self._recovery_failed(bus, number, line, stamp)

    def _recovery_failed(self, bus: str, number: int, line: str, stamp: Stamp) -> None:
        severity = self._last_uncorrected
        if severity is None:
            if len(self._pending) < MAX_DEVICES:
                self._pending.append((bus, number, line, stamp))
            return
        builder = self._builder(bus, severity)
        if builder is not None:
            builder.recovery_failed += 1
            builder.seen(number, line, stamp)

    def build(self, ties: dict[str, str]) -> tuple[PcieAerGroup, ...]:
        """The groups, in log order; ``ties``: buses the rest of the log ties to NVIDIA (an Xid,
        an NVRM line) with how. Recoveries no record explains count as "uncorrected"."""
        groups = dict(self._groups)
        for bus, number, line, stamp in self._pending:
            builder = groups.get((bus, UNCORRECTED))
            if builder is None:
                builder = groups[(bus, UNCORRECTED)] = _Builder(bus, UNCORRECTED)
            builder = _copy(builder)
            groups[(bus, UNCORRECTED)] = builder
            builder.recovery_failed += 1
            builder.seen(number, line, stamp)
        known = self._ties.known(ties)
        built = [b.build(known.get(b.bus)) for b in groups.values()]
        return tuple(sorted(built, key=lambda g: g.first_line))


def _copy(builder: _Builder) -> _Builder:
    """A builder to change in ``build`` without changing the accumulator (it may be fed more)."""
    return replace(
        builder,
        error_types=list(builder.error_types),
        window=deque(builder.window, maxlen=MINUTE_COUNT_CAP),
        span=replace(builder.span, lines=list(builder.span.lines)),
    )
