"""NVSwitch SXid records: reading one kernel-log line and folding them per (switch, SXid); the
findings are in xid_nvswitch_findings. Pure.

The NVSwitch driver prints an error as "nvidia-nvswitch<N>: SXid (PCI:<bus>): <SXid>, <words>":
the record's line says "Fatal" or "Non-fatal", the NVLink port ("Link 44") and what happened;
newer drivers add a "Data {...}" line and a "Severity <n> Engine instance ..." line to the same
record. Some records name no severity or port ("SOE Watchdog error").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuwarden.health.record_span import RecordSpan
from gpuwarden.health.xid_groups import MAX_LINE_CHARS, Incidents
from gpuwarden.types.health import NvSwitchErrorGroup

# the literal every SXid line holds: a scanner looks for it before trying the regex
SXID_WORD = "SXid"
# What one group keeps, so its memory is bounded by these, not by how many lines a burst prints
# (the number of groups is bounded by the kernel-log reader).
MAX_LINES_PER_SWITCH_GROUP = 5  # the first lines, as evidence
MAX_LINKS_PER_GROUP = 64  # an NVSwitch has 64 NVLink ports (third generation)

# "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion ..."; the switch
# name, the PCI prefix and the colon after the parenthesis are optional (pastes and older forms).
_SXID = re.compile(
    r"(?:(?P<switch>nvidia-nvswitch\d{1,4})\s*:\s*)?SXid\s*\((?:PCI:)?(?P<bus>[^()\n]{0,64})\)"
    r"\s*:?\s*(?P<sxid>\d{1,10})\b\s*,?\s*(?P<rest>[^\n]*)"
)
_SEVERITY = re.compile(
    r"(?P<severity>non-?fatal|fatal)\b\s*,?\s*(?:link\s*(?P<link>\d{1,4})\b)?\s*(?P<words>.*)",
    re.IGNORECASE,
)
# The lines a record adds after its first: "Data {0x..., ...}", "Severity 0 Engine instance 44
# Sub-engine instance 00"
_DETAIL = re.compile(r"(?:Data\s*\{|Severity\s+\d+\s+Engine\b)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SXidLine:
    """What one SXid line says."""

    sxid: int
    switch: str | None
    bus: str  # as printed inside the parentheses, without "PCI:"
    fatal: bool | None  # None: the line states no severity
    link: int | None
    message: str  # the words after the severity and the port
    detail: bool  # a Data / Severity line of a record, not the record's own line


def parse_sxid_line(line: str) -> SXidLine | None:
    """The SXid a kernel-log line states, or None when it states none."""
    found = _SXID.search(line)
    if found is None:
        return None
    rest = found["rest"].strip()
    severity = _SEVERITY.match(rest)
    detail = severity is None and _DETAIL.match(rest) is not None
    fatal = link = None
    message = rest
    if severity is not None:
        fatal = not severity["severity"].lower().startswith("non")
        link = int(severity["link"]) if severity["link"] else None
        message = severity["words"].strip()
    return SXidLine(
        sxid=int(found["sxid"]),
        switch=found["switch"],
        bus=found["bus"].strip(),
        fatal=fatal,
        link=link,
        message=message,
        detail=detail,
    )


@dataclass(slots=True)
class NvSwitchGroupBuilder:
    """Every record of one SXid on one switch, folded as they come (in log order)."""

    sxid: int
    switch: str | None
    pci_bus_id: str | None
    records: int = 0
    detail_lines: int = 0
    fatal: int = 0
    non_fatal: int = 0
    links: set[int] = field(default_factory=set)
    # the Xid groups' incident rule, on the clock each record gives (uptime, else calendar)
    clock: Incidents = field(default_factory=Incidents)
    message: str | None = None
    span: RecordSpan = field(default_factory=lambda: RecordSpan(MAX_LINES_PER_SWITCH_GROUP))

    def add(
        self,
        record: SXidLine,
        line_number: int,
        line: str,
        timestamp_s: float | None,
        uptime_s: float | None,
    ) -> None:
        self.span.seen(line_number, line, timestamp_s, uptime_s)
        t = uptime_s if uptime_s is not None else timestamp_s
        if t is not None:  # a line without a time starts no incident
            self.clock.add(t, None)
        if record.detail:
            self.detail_lines += 1
            return
        self.records += 1
        self.fatal += record.fatal is True
        self.non_fatal += record.fatal is False
        if record.link is not None and len(self.links) < MAX_LINKS_PER_GROUP:
            self.links.add(record.link)
        if self.message is None and record.message:
            self.message = record.message[:MAX_LINE_CHARS]

    def build(self) -> NvSwitchErrorGroup:
        return NvSwitchErrorGroup(
            sxid=self.sxid,
            switch=self.switch,
            pci_bus_id=self.pci_bus_id,
            # a record printed as Data/Severity lines only is still one record at least
            count=self.records or 1,
            fatal_count=self.fatal,
            non_fatal_count=self.non_fatal,
            links=tuple(sorted(self.links)),
            incidents=self.clock.count or None,  # none counted: no line carried a time
            message=self.message,
            **self.span.fields(),
        )
