"""``pcie-errors`` findings from the kernel's PCIe AER records on an NVIDIA GPU's link. Pure.

Only devices the log ties to NVIDIA are judged (``PcieAerGroup.nvidia``): a root port, a NIC or an
NVMe drive erring alone names no GPU. Judgement (Documentation/PCI/pcieaer-howto.rst, NVIDIA's Xid
catalog, DCGM's limits):

* uncorrectable fatal: "the link is unreliable" and the kernel resets it; the NVIDIA driver has no
  AER callbacks ("can't recover"), so the GPU is gone from its jobs until a reset or a reboot -
  the condition of Xid 79 ("fallen off the bus"), whose bucket (RESTART_BM) it takes: critical;
* uncorrectable non-fatal: "the particular transaction is unreliable, but the link itself is fully
  functional": warning; an uncorrected error whose kind the log omits is the same, medium sure;
* corrected: "no impacts on the functionality of the interface" per error; but each Receiver
  Error, Bad TLP or Bad DLLP makes the link replay a packet, so a record rate is a lower bound of
  the PCIe replay rate. Above DCGM's replay limit (``pcie_replay_max_per_minute``, 8 a minute:
  "the maximum recommended by RM") in some minute: warning, like the replay counter. The kernel's
  own log ratelimit (Linux 6.16+: 10 records per 5 s per device, i.e. up to 120 a minute) prints
  more than that limit, so a crossing stays visible in the log. A burst under it: info. Without
  times, a count above the limit cannot tell one burst from a steady rate: info, low confidence,
  with what decides.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuwarden.catalog.xid import CATALOG_URL, GPU_LOST_XID, xid_info
from gpuwarden.health.judgement import Judgement
from gpuwarden.health.pcie_aer import CORRECTED, FATAL, NON_FATAL
from gpuwarden.health.record_span import span_evidence
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, THRESHOLD_SOURCES
from gpuwarden.types.health import Confidence, DeviceRef, Evidence, Finding, PcieAerGroup, Severity

CODE = "pcie-errors"
AER_HOWTO_URL = "https://docs.kernel.org/PCI/pcieaer-howto.html"
REPLAY_LIMIT_PER_MINUTE = DEFAULT_THRESHOLDS.pcie_replay_max_per_minute
REPLAY_LIMIT_SOURCE = THRESHOLD_SOURCES["pcie_replay_max_per_minute"]

_CAUSE = {
    FATAL: (
        "an uncorrectable fatal PCIe error on the GPU's link: the link is unreliable, the kernel "
        "resets it, and the NVIDIA driver (no AER callbacks) cannot recover the GPU - the GPU is "
        "lost to its jobs, as with Xid 79 'fallen off the bus'"
    ),
    NON_FATAL: (
        "an uncorrectable non-fatal PCIe error on the GPU's link: that transaction is unreliable "
        "(data may be lost), the link itself keeps working"
    ),
    CORRECTED: (
        "corrected PCIe errors on the GPU's link: the hardware recovered each one (no data lost), "
        "by replaying packets - a steady rate is the signal of the PCIe replay counter "
        "(signal integrity: riser, slot, cable, seating)"
    ),
}
_UNKNOWN_CAUSE = (
    "an uncorrectable PCIe error below the GPU's port whose recovery failed for the GPU (the "
    "NVIDIA driver has no AER callbacks); the log does not say whether it was fatal"
)
_WATCH_REMEDY = (
    "none needed for a single burst; watch whether the errors return (journalctl -k, "
    "nvidia-smi -q -d PCIE replay counter); if they keep returning, reseat the GPU and check "
    "the riser, cable and slot"
)


def _judge(group: PcieAerGroup) -> Judgement:
    if group.severity == FATAL:
        return Judgement(Severity.CRITICAL, Confidence.HIGH, "uncorrectable fatal")
    if group.severity == NON_FATAL:
        return Judgement(Severity.WARNING, Confidence.HIGH, "uncorrectable non-fatal")
    if group.severity != CORRECTED:
        decides = "the 'PCIe Bus Error: severity=' record of the same incident (journalctl -k)"
        return Judgement(Severity.WARNING, Confidence.MEDIUM, "uncorrectable", decides)
    return _judge_corrected(group)


def _judge_corrected(group: PcieAerGroup) -> Judgement:
    limit = REPLAY_LIMIT_PER_MINUTE
    busiest = group.busiest_minute
    if busiest is not None and busiest > limit:
        said = f"corrected, {busiest} in one minute (> {limit:g} a minute)"
        return Judgement(Severity.WARNING, Confidence.HIGH, said)
    if busiest is None and group.count > limit:
        decides = "the lines' timestamps (dmesg -T, journalctl -k): one burst or a steady rate"
        said = "corrected (time unknown: one burst or a steady rate cannot be told)"
        return Judgement(Severity.INFO, Confidence.LOW, said, decides)
    return Judgement(Severity.INFO, Confidence.HIGH, "corrected, one burst under the limit")


def _evidence(group: PcieAerGroup, judgement: Judgement, source: str) -> list[Evidence]:
    proof = [
        Evidence("pcie_aer_severity", group.severity, source, f"device tied by {group.nvidia}"),
        Evidence(
            "pcie_aer_errors",
            group.count,
            source,
            f"records {group.records}, messages {group.messages} (multiple {group.multiple}), "
            f"failed recoveries {group.recovery_failed}; lines {group.first_line}-"
            f"{group.last_line}",
        ),
        Evidence("pcie_aer_error_types", ", ".join(group.error_types) or "not printed", source),
    ]
    if group.severity == CORRECTED:
        proof.append(
            Evidence(
                "pcie_aer_busiest_minute",
                group.busiest_minute,
                source,
                f"limit {REPLAY_LIMIT_PER_MINUTE:g} a minute: {REPLAY_LIMIT_SOURCE}",
            )
        )
    proof.extend(span_evidence(group, source))
    proof.extend(judgement.decides_evidence(source))
    return proof


def _action(judgement: Judgement, fatal: bool) -> str | None:
    """Xid 79's bucket for a fatal error (the GPU is lost), the code's (CHECK_MECHANICALS) for a
    warning, none for info."""
    if fatal:
        lost = xid_info(GPU_LOST_XID)
        return lost.immediate_action if lost else None
    return CODES[CODE].action if judgement.severity is Severity.WARNING else None


def _finding(group: PcieAerGroup, source: str) -> Finding:
    judgement = _judge(group)
    fatal = group.severity == FATAL
    types = f" ({', '.join(group.error_types)})" if group.error_types else ""
    if judgement.severity is Severity.INFO:
        remedy = _WATCH_REMEDY
    else:
        remedy = CODES["gpu-lost"].remedy if fatal else CODES[CODE].remedy
    return Finding(
        code=CODE,
        severity=judgement.severity,
        title=f"PCIe AER on GPU {group.pci_bus_id}: {judgement.said}{types} ×{group.count}",
        cause=_CAUSE.get(group.severity, _UNKNOWN_CAUSE),
        remedy=remedy,
        device=DeviceRef(pci_bus_id=group.pci_bus_id),
        evidence=tuple(_evidence(group, judgement, source)),
        action=_action(judgement, fatal),
        confidence=judgement.confidence,
        references=(AER_HOWTO_URL, CATALOG_URL) if fatal else (AER_HOWTO_URL,),
        first_seen_s=group.first_seen_s,
        last_seen_s=group.last_seen_s,
        count=group.count,
    )


def pcie_aer_findings(groups: Iterable[PcieAerGroup], *, source: str) -> list[Finding]:
    """One ``pcie-errors`` finding per (GPU, severity) group the log ties to NVIDIA."""
    return [_finding(group, source) for group in groups if group.nvidia is not None]
