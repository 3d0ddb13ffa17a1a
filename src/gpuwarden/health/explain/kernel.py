"""Kernel-log lines in a paste: the Xid scanner's groups, and what each Xid says about the error.

The scanner (``gpuwarden.health.kernel_log``) reads the ``NVRM: Xid`` lines; this module maps
the Xids that name a cause of §1 (NVIDIA's Xid catalog, docs.nvidia.com/deploy/xid-errors):
79 the GPU fell off the bus; 48 (DBE), 63/64 (row remapping/page retirement events), 94/95
(contained/uncontained memory errors) an uncorrectable ECC error; 13 (graphics exception) and
31 (MMU fault) a kernel's bad access — an application fault unless it follows one GPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.health import KernelLogReport, Severity, XidGroup

XID_CAUSES: dict[int, tuple[str, float]] = {
    79: ("gpu-fallen-off-bus", 0.95),
    48: ("ecc-uncorrectable", 0.95),
    95: ("ecc-uncorrectable", 0.95),
    94: ("ecc-uncorrectable", 0.9),
    64: ("ecc-uncorrectable", 0.8),
    63: ("ecc-uncorrectable", 0.7),
    31: ("illegal-memory-access", 0.65),
    13: ("illegal-memory-access", 0.6),
}
KERNEL_WORDS = ("nvrm", "xid", "fallen off the bus")  # a kernel log mentions one of these
# "Xid 79" as people write it in prose; kernel-log lines ("NVRM: Xid (PCI:…): 79, …") are the
# scanner's to read.
_PROSE_XID = re.compile(r"\bXid\W{0,3}(?:error\W{0,3})?(?P<xid>\d{1,3})\b", re.IGNORECASE)
# An Xid that names no cause of §1: a diagnosis "xid" weighted by the catalog's severity.
_SEVERITY_WEIGHT = {Severity.CRITICAL: 0.7, Severity.WARNING: 0.5, Severity.INFO: 0.3}


def scan(text: str) -> KernelLogReport | None:
    """The kernel-log scanner's reading of the paste (call it when the paste mentions one of
    KERNEL_WORDS); None when it found no Xid and no lost GPU."""
    from gpuwarden.health.kernel_log import scan_kernel_log  # its catalog loads only when needed

    report = scan_kernel_log(text)
    return report if report.groups or report.fallen_off_bus else None


def _group_vote(group: XidGroup) -> Vote:
    where = f" on {group.pci_bus_id}" if group.pci_bus_id else ""
    what = f"Xid {group.xid}{where}"
    if group.mnemonic:
        what += f" ({group.mnemonic})"
    what += f", {group.count}×" if group.count > 1 else ""
    mapped = XID_CAUSES.get(group.xid)
    if mapped is not None:
        return Vote(mapped[0], mapped[1], f"kernel log: {what}")
    action = f"; NVIDIA's action: {group.action}" if group.action else ""
    meaning = f": {group.meaning}" if group.meaning else ""
    return Vote("xid", _SEVERITY_WEIGHT[group.severity], f"kernel log: {what}{meaning}{action}")


def xid_votes(report: KernelLogReport | None, flat: str) -> list[Vote]:
    votes: list[Vote] = []
    groups: Iterable[XidGroup] = () if report is None else report.groups
    votes += [_group_vote(group) for group in groups]
    if report is not None and report.fallen_off_bus:
        votes.append(Vote("gpu-fallen-off-bus", 0.95, "kernel log: a GPU fell off the bus"))
    seen: set[int] = set()
    for match in _PROSE_XID.finditer(flat):
        xid = int(match["xid"])
        mapped = XID_CAUSES.get(xid)
        if mapped is not None and xid not in seen:  # a burst of 800k lines is one vote
            seen.add(xid)
            votes.append(Vote(mapped[0], mapped[1] - 0.05, f'"{match[0]}" in the text'))
    return votes
