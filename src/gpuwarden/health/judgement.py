"""What a kernel-log group's rule decided before it becomes a finding: the severity, how sure,
the words for the title, and what would decide when the log cannot (the SXid and PCIe AER
findings share it)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.types.health import Confidence, Evidence, Severity


@dataclass(frozen=True, slots=True)
class Judgement:
    severity: Severity
    confidence: Confidence
    said: str  # the severity read, for the title
    decides: str | None = None  # what would decide, when the reading cannot

    def decides_evidence(self, source: str) -> list[Evidence]:
        """The "decides" evidence line, when the reading could not decide."""
        return [Evidence("decides", self.decides, source)] if self.decides else []
