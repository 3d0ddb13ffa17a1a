"""Kernel-log lines in a paste: the Xid scanner's groups, and what each Xid says about the error.

The scanner (``gpuwarden.health.kernel_log``) reads the ``NVRM: Xid`` lines; this module maps
the Xids that name a cause of §1 (NVIDIA's Xid catalog, docs.nvidia.com/deploy/xid-errors):
79 the GPU fell off the bus; 48 (DBE), 63/64 (row remapping/page retirement events), 94/95
(contained/uncontained memory errors) an uncorrectable ECC error; 13 (graphics exception) and
31 (MMU fault) a kernel's bad access — an application fault unless it follows one GPU.
dcgm-exporter's DCGM_FI_DEV_XID_ERRORS series (the last Xid DCGM saw on a GPU) is read the same
way when a paste quotes it.
"""

from __future__ import annotations

import re

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
# dcgm-exporter's DCGM_FI_DEV_XID_ERRORS series: its value is the last Xid DCGM saw on the GPU,
# 0 for none (etc/default-counters.csv: "Value of the last XID error encountered"); the
# exporter also writes it in an err_code label beside the catalog's err_msg
# (collector/gpu_collector.go). A pasted series is the driver's Xid as DCGM read it, not prose.
_EXPORTER_LAST_XID = re.compile(
    r"\bDCGM_FI_DEV_XID_ERRORS\{(?P<labels>[^{}]*)\}(?:[ \t]+(?P<value>\d{1,3})(?![\d.eE]))?"
)
_ERR_CODE_LABEL = re.compile(r'\berr_code="(?P<xid>\d{1,3})"')
_EXPORTER_DECIDES = (
    "`dmesg -T | grep -i xid` on the node: when the Xid came and what preceded it "
    "(the exporter keeps a GPU's last Xid until it restarts)"
)


def scan(text: str) -> KernelLogReport | None:
    """The kernel-log scanner's reading of the paste (call it when the paste mentions one of
    KERNEL_WORDS); None when it found no Xid and no lost GPU."""
    from gpuwarden.health.kernel_log import scan_kernel_log  # its catalog loads only when needed

    report = scan_kernel_log(text)
    return report if report.groups or report.fallen_off_bus else None


def _xid_vote(
    xid: int,
    what: str,
    *,
    meaning: str | None,
    action: str | None,
    severity: Severity,
    decides: str | None = None,
) -> Vote:
    """The cause an Xid names (XID_CAUSES), else "xid" weighted by its severity; ``what`` says
    where it was read."""
    mapped = XID_CAUSES.get(xid)
    if mapped is not None:
        return Vote(mapped[0], mapped[1], what, decides)
    action_said = f"; NVIDIA's action: {action}" if action else ""
    meaning_said = f": {meaning}" if meaning else ""
    return Vote("xid", _SEVERITY_WEIGHT[severity], f"{what}{meaning_said}{action_said}", decides)


def _group_vote(group: XidGroup) -> Vote:
    where = f" on {group.pci_bus_id}" if group.pci_bus_id else ""
    what = f"Xid {group.xid}{where}"
    if group.mnemonic:
        what += f" ({group.mnemonic})"
    what += f", {group.count}×" if group.count > 1 else ""
    return _xid_vote(
        group.xid,
        f"kernel log: {what}",
        meaning=group.meaning,
        action=group.action,
        severity=group.severity,
    )


def _exporter_last_xids(flat: str) -> list[int]:
    """The Xids dcgm-exporter's DCGM_FI_DEV_XID_ERRORS series in the paste report (its err_code
    label, else its value), once each and without 0 (no Xid)."""
    xids: list[int] = []
    for series in _EXPORTER_LAST_XID.finditer(flat):
        label = _ERR_CODE_LABEL.search(series["labels"])
        code = label["xid"] if label is not None else series["value"]
        if code is not None and int(code) != 0 and int(code) not in xids:
            xids.append(int(code))
    return xids


def _exporter_vote(xid: int) -> Vote:
    # the Xid catalog loads only for a pasted series (as ``scan``'s scanner does)
    from gpuwarden.catalog.xid import UNKNOWN_XID_SEVERITY, xid_info

    info = xid_info(xid)
    what = f"dcgm-exporter: the GPU's last Xid is {xid}"
    if info is not None:
        what += f" ({info.mnemonic})"
    return _xid_vote(
        xid,
        what,
        meaning=None if info is None else info.meaning,
        action=None if info is None else info.immediate_action,
        severity=UNKNOWN_XID_SEVERITY if info is None else info.severity,
        decides=_EXPORTER_DECIDES,
    )


# A GPU lost said only by the status the driver's calls returned (NV_ERR_GPU_IS_LOST): medium,
# as doctor's finding is (a full-chip reset in progress fails the calls too).
_LOST_BY_STATUS_WEIGHT = 0.65


def _lost_vote(lost: tuple[XidGroup, ...]) -> Vote:
    if all(group.lost_by_status for group in lost):  # as the scanner read it
        return Vote(
            "gpu-fallen-off-bus",
            _LOST_BY_STATUS_WEIGHT,
            "kernel log: the driver's calls returned NV_ERR_GPU_IS_LOST (GPU lost from the bus)",
            "`dmesg -T | grep -iE 'nvrm|xid'` from before these lines: an Xid 79 or a "
            "'fallen off the bus' line, or a reset the driver started",
        )
    return Vote("gpu-fallen-off-bus", 0.95, "kernel log: a GPU fell off the bus")


def xid_votes(report: KernelLogReport | None, flat: str) -> list[Vote]:
    votes: list[Vote] = []
    groups: tuple[XidGroup, ...] = () if report is None else report.groups
    votes += [_group_vote(group) for group in groups]
    if report is not None and report.fallen_off_bus:
        votes.append(_lost_vote(report.fallen_off_bus))
    read_in_groups = {group.xid for group in groups}
    votes += [_exporter_vote(x) for x in _exporter_last_xids(flat) if x not in read_in_groups]
    seen: set[int] = set()
    for match in _PROSE_XID.finditer(flat):
        xid = int(match["xid"])
        mapped = XID_CAUSES.get(xid)
        if mapped is not None and xid not in seen:  # a burst of 800k lines is one vote
            seen.add(xid)
            votes.append(Vote(mapped[0], mapped[1] - 0.05, f'"{match[0]}" in the text'))
    return votes
