"""``nvswitch-error`` findings from the NVSwitch SXid groups of a kernel log. Pure.

Judgement (Fabric Manager user guide, "NVSwitch SXid errors"):

* a fatal SXid aborts the CUDA jobs of the GPUs behind the port and needs the GPUs and
  NVSwitches reset (a reboot if that fails): critical, RESET_GPU;
* non-fatal SXids are informational and jobs continue: one burst is info; the same SXid on one
  switch in ``REPEAT_INCIDENTS`` separate incidents (bursts more than ``INCIDENT_GAP_S`` apart,
  the Xid rules' definition) is a link that keeps erring: warning. gpud's SXid component says the
  same: "repeated messages may indicate more persistent issue on the inter-GPU communication";
* a record whose severity was not printed (a Data line alone, an SOE message) is info with low
  confidence: its "Fatal"/"Non-fatal" line or the Fabric Manager log decides.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuwarden.health.judgement import Judgement
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.xid_groups import INCIDENT_GAP_S, REPEAT_INCIDENTS
from gpuwarden.types.health import (
    Confidence,
    DeviceRef,
    Evidence,
    Finding,
    NvSwitchErrorGroup,
    Severity,
)

CODE = "nvswitch-error"

# the code's remedy is for a fatal record; a non-fatal one is watched first
_NON_FATAL_REMEDY = (
    "non-fatal SXids are informational (the jobs continue): watch whether the same SXid returns "
    "on the same link; if it keeps returning, drain the node at a convenient time, reset the GPUs "
    "and NVSwitches and check the NVLink cabling/baseboard; look the SXid up in the Fabric Manager "
    "user guide"
)


def _judge(group: NvSwitchErrorGroup) -> Judgement:
    if group.fatal_count:
        return Judgement(Severity.CRITICAL, Confidence.HIGH, f"fatal ×{group.fatal_count}")
    if group.non_fatal_count:
        incidents = group.incidents
        if incidents is not None and incidents >= REPEAT_INCIDENTS:
            said = f"non-fatal, repeated in {incidents} incidents"
            return Judgement(Severity.WARNING, Confidence.HIGH, said)
        if incidents is None:
            said = "non-fatal (time unknown: one burst or a repeat cannot be told)"
            decides = "the log's timestamps (dmesg -T) show whether it recurs"
            return Judgement(Severity.INFO, Confidence.MEDIUM, said, decides)
        return Judgement(Severity.INFO, Confidence.HIGH, "non-fatal, one incident")
    decides = "the record's Fatal/Non-fatal line, or the Fabric Manager log"
    return Judgement(Severity.INFO, Confidence.LOW, "severity not printed", decides)


def nvswitch_findings(groups: Iterable[NvSwitchErrorGroup], *, source: str) -> list[Finding]:
    """One ``nvswitch-error`` finding per (switch, SXid) group."""
    return [_finding(group, source) for group in groups]


def _evidence(group: NvSwitchErrorGroup, judgement: Judgement, source: str) -> list[Evidence]:
    proof = [
        Evidence("sxid", group.sxid, source, group.message or ""),
        Evidence(
            "records",
            group.count,
            source,
            f"fatal {group.fatal_count}, non-fatal {group.non_fatal_count}",
        ),
        Evidence("links", _links(group), source, "NVLink ports of the switch"),
        Evidence(
            "incidents", group.incidents, source, f"bursts more than {INCIDENT_GAP_S:g} s apart"
        ),
    ]
    proof.extend(judgement.decides_evidence(source))
    return proof


def _links(group: NvSwitchErrorGroup) -> str:
    return ", ".join(str(link) for link in group.links) or "not printed"


def _finding(group: NvSwitchErrorGroup, source: str) -> Finding:
    row = CODES[CODE]
    judgement = _judge(group)
    switch = group.switch or "an NVSwitch"
    where = f"{switch} ({group.pci_bus_id or 'bus not printed'})"
    title = f"NVSwitch SXid {group.sxid} on {where}: {judgement.said}, links {_links(group)}"
    critical = judgement.severity is Severity.CRITICAL
    return Finding(
        code=CODE,
        severity=judgement.severity,
        title=title,
        cause=row.cause,
        remedy=row.remedy if critical else _NON_FATAL_REMEDY,
        device=DeviceRef(pci_bus_id=group.pci_bus_id, name=group.switch),
        evidence=tuple(_evidence(group, judgement, source)),
        action=row.action if critical else None,
        confidence=judgement.confidence,
        first_seen_s=group.first_seen_s,
        last_seen_s=group.last_seen_s,
        count=group.count,
    )
