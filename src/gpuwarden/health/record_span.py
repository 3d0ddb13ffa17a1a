"""Where a group of kernel-log records stands in the log, as the SXid, PCIe AER and IOMMU groups
keep it: its first and last line, the first and last time each clock gave, and its first few lines
as evidence (bounded in count and length)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuwarden.health.xid_groups import MAX_LINE_CHARS
from gpuwarden.types.health import Evidence


@dataclass(slots=True)
class RecordSpan:
    max_lines: int
    first_line: int = 0
    last_line: int = 0
    first_seen_s: float | None = None
    last_seen_s: float | None = None
    first_uptime_s: float | None = None
    last_uptime_s: float | None = None
    lines: list[str] = field(default_factory=list)

    def seen(
        self, line_number: int, line: str, timestamp_s: float | None, uptime_s: float | None
    ) -> None:
        """One more record line: the first one sets the start, a time only moves the end when
        the line has one."""
        if not self.first_line:
            self.first_line = line_number
            self.first_seen_s, self.first_uptime_s = timestamp_s, uptime_s
        self.last_line = line_number
        if timestamp_s is not None:
            self.last_seen_s = timestamp_s
        if uptime_s is not None:
            self.last_uptime_s = uptime_s
        if len(self.lines) < self.max_lines:
            self.lines.append(line[:MAX_LINE_CHARS])  # a longer "line" is no kernel message

    def fields(self) -> dict[str, Any]:
        """The span as the group types spell it (first_line ... lines)."""
        return {
            "first_line": self.first_line,
            "last_line": self.last_line,
            "first_seen_s": self.first_seen_s,
            "last_seen_s": self.last_seen_s,
            "first_uptime_s": self.first_uptime_s,
            "last_uptime_s": self.last_uptime_s,
            "lines": tuple(self.lines),
        }


class SpannedGroup(Protocol):
    """A built group that carries its span (PcieAerGroup, IommuFaultGroup)."""

    @property
    def first_seen_s(self) -> float | None: ...
    @property
    def first_uptime_s(self) -> float | None: ...
    @property
    def lines(self) -> tuple[str, ...]: ...


def span_evidence(group: SpannedGroup, source: str) -> list[Evidence]:
    """When a group started (each clock the log gave) and its first lines, verbatim."""
    proof = []
    if group.first_seen_s is not None:
        proof.append(Evidence("first_seen_s", group.first_seen_s, source, "Unix seconds"))
    if group.first_uptime_s is not None:
        proof.append(Evidence("first_uptime_s", group.first_uptime_s, source, "seconds since boot"))
    proof.extend(Evidence("line", line, source, "verbatim") for line in group.lines)
    return proof
