"""A doctor check from the findings behind it: one rule for every check (the health rule families,
the version chain, the NVLink topology, the kernel log's Xids).

A critical finding fails the check and a warning warns it; information does neither. With no
finding above information the check passes, or skips when nothing could be judged (NVIDIA's
health validation: a signal that cannot be read is never a pass) or when a device could not be
read at all: the check then judged only the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwarden.types.health import Check, CheckStatus, Finding, Severity

# The finding (information, not a fault) that NVML refused this user or container access to a
# GPU (NVML_ERROR_NO_PERMISSION): none of that GPU's readings were taken.
DEVICE_NOT_READ = "gpu-access-denied"


def status_of(findings: Sequence[Finding], *, judged: bool = True) -> CheckStatus:
    worst = max((f.severity.rank for f in findings), default=Severity.INFO.rank)
    if worst >= Severity.CRITICAL.rank:
        return CheckStatus.FAIL
    if worst >= Severity.WARNING.rank:
        return CheckStatus.WARN
    unread = any(f.code == DEVICE_NOT_READ for f in findings)
    return CheckStatus.PASS if judged and not unread else CheckStatus.SKIP


def codes_of(findings: Sequence[Finding]) -> tuple[str, ...]:
    """The codes that made the check warn or fail, in the findings' order, each once."""
    return tuple(dict.fromkeys(f.code for f in findings if f.severity.rank > Severity.INFO.rank))


def check_of(name: str, findings: Sequence[Finding], detail: str, *, judged: bool = True) -> Check:
    return Check(name, status_of(findings, judged=judged), detail, codes_of(findings))
