"""Xid groups → findings (``xid``, ``gpu-lost``, ``rma-candidate``, the memory-repair codes), and
Xid events → groups.

One finding per (GPU, Xid) group: severity from the catalog (or the decoded payload), NVIDIA's
immediate-action bucket as ``action``, the count and first/last seen as evidence, the catalog's
meaning as the cause and its recommended action plus the escalation as the remedy. Xid 79 and the
"fallen off the bus" messages without an Xid are ``gpu-lost``; an escalation to CONTACT_SUPPORT
(a fatal Xid recurring within 24 h) adds an ``rma-candidate`` finding (diagnosis.md §2).

Xid 63 (a page retirement or row remap recorded, pending a reset) and Xid 64 (one that failed)
also give the memory finding of diagnosis.md §2 they are, next to the ``xid`` finding (which the
specific code does not replace, unlike Xid 79's ``gpu-lost``): ``row-remap-pending`` /
``retired-pages-pending`` and ``row-remap-failure`` / ``retired-pages-limit`` (a failed page
retirement is the pre-Ampere RMA criterion). Which one: the message's words, else the GPU's
architecture, else the Ampere+ code at medium confidence, naming the other as possible.

NVML (``nvmlEventTypeXidCriticalError``) and dcgm-exporter report Xids as
``DeviceEvent(kind=XID)``: ``groups_from_events`` folds them with the same builders, so they are
classified and escalated exactly like kernel-log lines (no lines; the count is the events').
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from gpuwarden.catalog.compat import gpu_arch_for
from gpuwarden.catalog.pci_bus import normalize_pci_bus_id
from gpuwarden.catalog.xid import (
    CATALOG_URL,
    GPU_LOST_XID,
    MEMORY_REPAIR_XIDS,
    PAGE_RETIREMENT,
    ROW_REMAPPING,
    UNKNOWN_XID_SEVERITY,
    bucket_guidance,
    memory_repair_of_architecture,
    xid_info,
)
from gpuwarden.health.iommu_findings import iommu_findings
from gpuwarden.health.kernel_log import PCI_INACCESSIBLE
from gpuwarden.health.pcie_aer_findings import pcie_aer_findings
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.xid_decode import NVLINK5_XIDS
from gpuwarden.health.xid_groups import (
    ESCALATE_SUPPORT,
    XidGroupBuilder,
    build_groups,
    escalation_advice,
    escalation_bucket,
    escalation_time_unknown,
)
from gpuwarden.health.xid_nvswitch_findings import nvswitch_findings
from gpuwarden.types.health import (
    Confidence,
    DeviceRef,
    Evidence,
    Finding,
    KernelLogReport,
    Severity,
    XidGroup,
)
from gpuwarden.types.telemetry import DeviceEvent, DeviceInfo, DeviceSample, DeviceState, EventKind

__all__ = [
    "GPU_LOST_XID",
    "MEMORY_REPAIR_CODES",
    "RMA_REMEDY",
    "groups_from_events",
    "last_xid_findings",
    "xid_findings",
]

RMA_REMEDY = (
    "drain the GPU; run the field diagnostics (or dcgmi diag -r 4); collect nvidia-bug-report.sh "
    "and open a support / RMA case with the Xid lines"
)


def _where(group: XidGroup) -> str:
    return group.pci_bus_id or group.uuid or "a GPU whose bus id the log redacts"


def _device(group: XidGroup) -> DeviceRef:
    return DeviceRef(uuid=group.uuid, pci_bus_id=group.pci_bus_id)


def _seen(group: XidGroup, source: str) -> Iterator[Evidence]:
    if group.first_seen_s is not None:
        yield Evidence("first_seen_s", group.first_seen_s, source, "Unix seconds")
        yield Evidence("last_seen_s", group.last_seen_s, source, "Unix seconds")
    if group.first_uptime_s is not None:
        yield Evidence("first_uptime_s", group.first_uptime_s, source, "seconds since boot")
        yield Evidence("last_uptime_s", group.last_uptime_s, source, "seconds since boot")


def _evidence(group: XidGroup, source: str) -> tuple[Evidence, ...]:
    lines = f"lines {group.first_line}–{group.last_line}" if group.lines else "events"
    found = [Evidence("xid", group.xid, source, f"{group.count} occurrence(s), {lines}")]
    found.extend(_seen(group, source))
    found.extend(
        Evidence(key, value, source, "decoded from the message") for key, value in group.decoded
    )
    if group.lines:
        found.append(Evidence("line", group.lines[0], source, "first line, verbatim"))
    return tuple(found)


def _decoded(group: XidGroup, key: str) -> str | None:
    return next((value for k, value in group.decoded if k == key), None)


def _cause(group: XidGroup) -> str:
    info = xid_info(group.xid)
    if info is None:
        return (
            f"Xid {group.xid} is not in NVIDIA's Xid catalog for Ampere and newer GPUs: "
            "gpuwarden cannot classify it; the message text says more"
        )
    if info.listed_unused:
        return (
            f"Xid {group.xid} ({info.mnemonic}) is {info.meaning}: gpuwarden cannot classify "
            "it; the message text says more"
        )
    cause = info.meaning
    if group.severity is not Severity.INFO:
        # the catalog calls Xid 154 "Informational"; a change to a reset or a reboot is not
        cause = _sentence_start(cause.removeprefix("Informational: "))
    if info.likely_cause:
        cause += f". Likely cause: {info.likely_cause}"
    caused_by = _decoded(group, "caused_by")
    if caused_by is not None:
        cause += f". The driver says it was caused by a previous Xid {caused_by}"
    return cause


def _sentence_start(text: str) -> str:
    return text[:1].upper() + text[1:]


def _remedy(group: XidGroup) -> str:
    """The escalation first, then what the payload or the catalog says to do."""
    info = xid_info(group.xid)
    steps: list[str] = []
    advice = escalation_advice(group)
    if advice is not None:
        steps.append(advice)
    recommended = None if info is None else info.recommended_action
    catalog_action = None if info is None else info.immediate_action
    if group.action is not None and group.action != catalog_action:  # the payload decided
        steps.append(f"{group.action}: {bucket_guidance(group.action) or group.action}")
    elif recommended:
        steps.append(recommended)  # the catalog's own words already cover a recurrence
    else:
        if group.action is not None:
            steps.append(bucket_guidance(group.action) or group.action)
        investigate = bucket_guidance(group.investigatory_action)
        if investigate is not None and group.investigatory_action != group.action:
            steps.append(f"if it recurs: {investigate}")
    if not steps:
        steps.append("collect nvidia-bug-report.sh and look the message up with NVIDIA support")
    return "; ".join(steps)


def _confidence(group: XidGroup) -> Confidence:
    """The occurrence is certain; how sure the classification is depends on the catalog."""
    info = xid_info(group.xid)
    if info is None or info.listed_unused:
        return Confidence.LOW  # the severity is a default, not NVIDIA's
    undecoded = any(v.startswith("undecoded") for _, v in group.decoded)
    if group.xid in NVLINK5_XIDS and (undecoded or not group.decoded):
        return Confidence.MEDIUM  # the catalog needs the payload decoded to decide
    return Confidence.HIGH


def _title(group: XidGroup) -> str:
    name = group.mnemonic or "not in NVIDIA's Xid catalog"
    return f"Xid {group.xid} ({name}) ×{group.count} on GPU {_where(group)}"


def _finding(group: XidGroup, source: str, *, lost_too: XidGroup | None = None) -> Finding:
    lost = group.xid == GPU_LOST_XID
    evidence = _evidence(group, source)
    count = group.count
    if lost_too is not None:  # the same GPU also printed "fallen off the bus" without an Xid
        evidence += _evidence(lost_too, source)
        count += lost_too.count
    return Finding(
        code="gpu-lost" if lost else "xid",
        severity=Severity.CRITICAL if lost else group.severity,
        title=_title(group),
        cause=_cause(group),
        remedy=_remedy(group),
        device=_device(group),
        evidence=evidence,
        action=group.action,
        confidence=_confidence(group),
        references=(CATALOG_URL,),
        first_seen_s=group.first_seen_s,
        last_seen_s=group.last_seen_s,
        count=count,
    )


# (repair, Xid) → diagnosis.md §2 code. A page retirement that fails leaves the page in use: the
# retired-page table is full, the pre-Ampere RMA criterion (retired-pages-limit).
MEMORY_REPAIR_CODES = {
    (ROW_REMAPPING, 63): "row-remap-pending",
    (PAGE_RETIREMENT, 63): "retired-pages-pending",
    (ROW_REMAPPING, 64): "row-remap-failure",
    (PAGE_RETIREMENT, 64): "retired-pages-limit",
}
_GENERATION = {ROW_REMAPPING: "Ampere and newer", PAGE_RETIREMENT: "pre-Ampere"}
_OTHER = {ROW_REMAPPING: PAGE_RETIREMENT, PAGE_RETIREMENT: ROW_REMAPPING}
_REPAIR_EVENT = {  # NVIDIA's Xid catalog, Xid 63 and 64
    63: "the driver recorded a {repair} that takes effect at the next GPU reset",
    64: "the driver could not record a {repair}",
}
# Evidence sources of a GPU's architecture: the reader's device info, or the catalog by GPU name
_READER, _CATALOG = "device-info", "catalog"
MEMORY_REPAIR_DECIDES = (
    "`nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT` on that GPU says which (Ampere and newer "
    "report remapped rows, older GPUs retired pages)"
)


def _architecture(group: XidGroup, devices: Sequence[DeviceInfo]) -> tuple[str | None, str]:
    """The GPU's architecture as its reader gave it, else as the catalog knows its name (a
    dcgm-exporter page names the model only), and which of the two said it (an evidence
    source)."""
    for device in devices:
        same_uuid = group.uuid is not None and device.uuid == group.uuid
        same_bus = (
            group.pci_bus_id is not None
            and normalize_pci_bus_id(device.pci_bus_id) == group.pci_bus_id
        )
        if not (same_uuid or same_bus):
            continue
        # the reader's word first, unless it names an architecture the repair table does not
        # know (NVML's "Unknown", a newer name): then the catalog's, by the GPU's name
        if device.architecture and memory_repair_of_architecture(device.architecture):
            return device.architecture, _READER
        arch = gpu_arch_for(device.name) if device.name else None
        if arch is not None:
            return arch.architecture, f"{_CATALOG}:{device.name}"
        if device.architecture:
            return device.architecture, _READER
    return None, _READER


def _repair(group: XidGroup, architecture: str | None) -> tuple[str, str | None]:
    """(the repair, what says so: "message", "architecture" or None when nothing does)."""
    named = _decoded(group, "memory_repair")
    if named is not None:
        return named, "message"
    by_architecture = memory_repair_of_architecture(architecture)
    if by_architecture is not None:
        return by_architecture, "architecture"
    return ROW_REMAPPING, None  # NVIDIA's current Xid catalog is the Ampere+ one


def _repair_basis(group: XidGroup, repair: str, basis: str | None, arch: str | None) -> str:
    if basis == "message":
        return f"the driver's message names the {repair}"
    if basis == "architecture":
        return f"the GPU is {arch}: {_GENERATION[repair]} GPUs use {repair}"
    other = _OTHER[repair]
    return (
        f"neither the message nor a known GPU architecture says which: {repair} "
        f"({_GENERATION[repair]}) or {other} ({_GENERATION[other]}, "
        f"`{MEMORY_REPAIR_CODES[(other, group.xid)]}`); {MEMORY_REPAIR_DECIDES}"
    )


def _repair_finding(
    group: XidGroup, source: str, architecture: str | None, architecture_source: str
) -> Finding:
    repair, basis = _repair(group, architecture)
    code = MEMORY_REPAIR_CODES[(repair, group.xid)]
    info = CODES[code]
    said = _repair_basis(group, repair, basis, architecture)
    evidence = _evidence(group, source)
    if basis == "architecture":
        evidence += (Evidence("architecture", architecture, architecture_source, said),)
    outcome = "pending a GPU reset" if group.xid == 63 else "failed"
    return Finding(
        code=code,
        severity=info.severity,
        title=f"Xid {group.xid}: {repair} {outcome} on GPU {_where(group)} ×{group.count}",
        cause=f"{_REPAIR_EVENT[group.xid].format(repair=repair)}: {info.cause} ({said})",
        remedy=info.remedy,
        device=_device(group),
        evidence=evidence,
        action=info.action,
        confidence=Confidence.MEDIUM if basis is None else Confidence.HIGH,
        references=(CATALOG_URL,),
        first_seen_s=group.first_seen_s,
        last_seen_s=group.last_seen_s,
        count=group.count,
    )


def _lost_on_power_up(group: XidGroup) -> bool:
    """Whether only the PCI core's "device inaccessible" lines say the GPU is lost (it could not
    power the GPU up: kernel_log's ``PCI_INACCESSIBLE``), no line of the driver's."""
    return bool(group.lines) and all(PCI_INACCESSIBLE in line for line in group.lines)


def _lost_words(group: XidGroup) -> str:
    """What the log said of the GPU: the driver's "fallen off the bus" or nv_pci_probe's "GPU is
    lost", or the PCI core's "device inaccessible"."""
    if any("fallen off the bus" in line for line in group.lines) or not group.lines:
        return "has fallen off the bus"
    if _lost_on_power_up(group):
        return "did not power up: the PCI core found it inaccessible"
    return "is lost"


def _lost_cause(group: XidGroup) -> str:
    """Why the GPU is lost, as the line that said it tells: the PCI core's or the driver's."""
    if _lost_on_power_up(group):
        return (
            "the GPU stopped answering on PCIe: powering it up from D3, the kernel's PCI core read "
            "its power-management register as all ones (no Xid printed; the same condition as "
            "Xid 79)"
        )
    return (
        "the GPU stopped answering on PCIe; the driver said so without an Xid "
        "(the same condition as Xid 79)"
    )


def _fallen_finding(group: XidGroup, source: str) -> Finding:
    # a loss said only by the status the driver's failed calls returned (NV_ERR_GPU_IS_LOST),
    # not by a line on the loss itself: the calls name the driver's GPU instance, not a bus, and
    # a full-chip reset in progress fails them too (the assertions beside them allow for one).
    # The scanner records it: the lines a group keeps are a bounded sample a reader may cut
    by_status = group.lost_by_status
    title = (
        "a GPU is lost from the bus: the driver's calls returned NV_ERR_GPU_IS_LOST "
        f"(no Xid printed) ×{group.count}"
        if by_status
        else f"GPU {_where(group)} {_lost_words(group)} (no Xid printed) ×{group.count}"
    )
    return Finding(
        code="gpu-lost",
        severity=Severity.CRITICAL,
        title=title,
        cause=_lost_cause(group),
        remedy=_remedy(group),
        device=_device(group),
        evidence=_evidence(group, source),
        action=group.action,
        confidence=Confidence.MEDIUM if by_status else Confidence.HIGH,
        references=(CATALOG_URL,),
        first_seen_s=group.first_seen_s,
        last_seen_s=group.last_seen_s,
        count=group.count,
    )


def _rma_finding(group: XidGroup, source: str) -> Finding:
    unknown = escalation_time_unknown(group)
    return Finding(
        code="rma-candidate",
        severity=Severity.CRITICAL,
        title=f"GPU {_where(group)} is an RMA candidate: fatal Xid {group.xid} keeps recurring",
        cause=escalation_advice(group) or "",
        remedy=RMA_REMEDY,
        device=_device(group),
        evidence=_evidence(group, source),
        action=ESCALATE_SUPPORT,
        # without timestamps the lines may be one burst rather than five incidents
        confidence=Confidence.LOW if unknown else Confidence.HIGH,
        references=(CATALOG_URL,),
        first_seen_s=group.first_seen_s,
        last_seen_s=group.last_seen_s,
        count=group.count,
    )


def xid_findings(
    report: KernelLogReport, *, source: str, devices: Iterable[DeviceInfo] = ()
) -> tuple[Finding, ...]:
    """One finding per Xid group, per GPU lost without an Xid, per NVSwitch SXid group and per
    PCIe AER group on a GPU's link (``pcie-errors``), per GPU whose DMA the IOMMU blocked
    (``iommu-fault``), plus
    ``rma-candidate`` findings and the memory-repair finding of each Xid 63/64 group; most
    severe first, then in log order. ``source`` names where the report came from
    ("kernel-log:/var/log/kern.log", "nvml", "dcgm:URL"); ``devices`` (by UUID or bus id) give
    the GPUs' architectures, which decide an Xid 63/64 whose message does not."""
    known = tuple(devices)
    lost_without_xid = {g.pci_bus_id: g for g in report.fallen_off_bus if g.pci_bus_id}
    findings: list[tuple[int, Finding]] = []
    merged: set[str] = set()
    for group in report.groups:
        lost_too = None
        if group.xid == GPU_LOST_XID and group.pci_bus_id in lost_without_xid:
            lost_too = lost_without_xid[group.pci_bus_id]
            merged.add(group.pci_bus_id)
        findings.append((group.first_line, _finding(group, source, lost_too=lost_too)))
        if escalation_bucket(group) == ESCALATE_SUPPORT:
            findings.append((group.first_line, _rma_finding(group, source)))
        if group.xid in MEMORY_REPAIR_XIDS:
            repair = _repair_finding(group, source, *_architecture(group, known))
            findings.append((group.first_line, repair))
    for group in report.fallen_off_bus:
        if group.pci_bus_id not in merged:
            findings.append((group.first_line, _fallen_finding(group, source)))
            if escalation_bucket(group) == ESCALATE_SUPPORT:
                findings.append((group.first_line, _rma_finding(group, source)))
    switches = report.nvswitch_errors
    lines = (g.first_line for g in switches)
    findings += zip(lines, nvswitch_findings(switches, source=source), strict=True)
    # the kernel's PCIe AER records on a GPU's link (pcie-errors), next to its Xids
    aer = [g for g in report.pcie_errors if g.nvidia is not None]
    findings += zip((g.first_line for g in aer), pcie_aer_findings(aer, source=source), strict=True)
    # the IOMMU's DMA faults of a GPU (iommu-fault)
    iommu = [g for g in report.iommu_faults if g.nvidia is not None]
    findings += zip(
        (g.first_line for g in iommu), iommu_findings(iommu, source=source), strict=True
    )
    findings.sort(key=lambda pair: (-pair[1].severity.rank, pair[0]))
    return tuple(finding for _, finding in findings)


def groups_from_events(
    events: Iterable[DeviceEvent], *, devices: Iterable[DeviceInfo] = ()
) -> tuple[XidGroup, ...]:
    """Xid events (NVML, dcgm-exporter) folded into groups like kernel-log lines.

    ``devices`` gives each UUID (or index) its PCI bus id. ``first_line`` / ``last_line`` are
    the positions of the group's first and last event among the Xid events (in time order);
    ``lines`` stays empty. Events of other kinds are ignored."""
    by_uuid = {d.uuid: d for d in devices}
    by_index = {d.index: d for d in by_uuid.values() if d.mig_parent_uuid is None}
    xids = sorted(
        (e for e in events if e.kind is EventKind.XID and e.code is not None),
        key=lambda e: e.timestamp_s,
    )
    builders: dict[tuple[str, int], XidGroupBuilder] = {}
    for position, event in enumerate(xids, 1):
        device = by_uuid.get(event.uuid or "") or by_index.get(
            event.index if event.index is not None else -1
        )
        uuid = event.uuid or (device.uuid if device is not None else None)
        bus = normalize_pci_bus_id(device.pci_bus_id) if device is not None else None
        gpu = uuid or bus or f"index {event.index}"
        code = int(event.code or 0)
        builder = builders.get((gpu, code))
        if builder is None:
            builder = builders[(gpu, code)] = XidGroupBuilder(code, bus, uuid)
        builder.add(position, None, event.timestamp_s, None, event.message, uuid)
    return build_groups(builders.values())


# What a last-value Xid reading cannot say, and how to find out.
LAST_XID_REMEDY = (
    "date it: look for the Xid in the kernel log (`journalctl -k | grep -i xid`, or pass the log "
    "to `gpuwarden doctor --from`), which says when and how often; dcgm-exporter keeps the last "
    "Xid until it restarts (dcgm-exporter #190, #500), so a value from before a GPU reset stays"
)


# A last-value Xid may be long past (the GPU answers now): one level below the catalog's.
_ONE_LEVEL_DOWN = {
    Severity.CRITICAL: Severity.WARNING,
    Severity.WARNING: Severity.INFO,
    Severity.INFO: Severity.INFO,
}


def last_xid_findings(samples: Iterable[DeviceSample], source: str) -> list[Finding]:
    """Findings for GPUs whose reading carries only the LAST Xid (dcgm-exporter's
    DCGM_FI_DEV_XID_ERRORS gauge, NVML's event watcher): an Xid happened since the reader
    started, but not when nor how often, so it is one severity level below the catalog's (a
    fatal Xid is a warning, an application Xid information), with medium confidence, asking for
    the kernel log. A GPU that does not answer is judged by the gpu-lost rule."""
    found: list[Finding] = []
    for sample in samples:
        xid = sample.xid_last
        if not xid or sample.state is DeviceState.GPU_LOST:
            continue
        info = xid_info(xid)
        severity = _ONE_LEVEL_DOWN[info.severity if info is not None else UNKNOWN_XID_SEVERITY]
        name = info.mnemonic if info is not None else "not in NVIDIA's Xid catalog"
        cause = info.meaning if info is not None else f"Xid {xid} is not in NVIDIA's Xid catalog"
        recommended = info.recommended_action if info is not None else None
        found.append(
            Finding(
                code="xid",
                severity=severity,
                title=(
                    f"Xid {xid} ({name}) last recorded on GPU {sample.info.index}; "
                    "when and how often unknown"
                ),
                cause=cause,
                remedy="; ".join(x for x in (LAST_XID_REMEDY, recommended) if x),
                device=DeviceRef(
                    index=sample.info.index,
                    uuid=sample.info.uuid,
                    pci_bus_id=sample.info.pci_bus_id,
                    name=sample.info.name,
                ),
                evidence=(
                    Evidence(
                        "xid_last",
                        xid,
                        source,
                        "the last Xid since the reader started (a value, not a count)",
                    ),
                ),
                action=info.immediate_action if info is not None else None,
                confidence=Confidence.MEDIUM,
                references=(CATALOG_URL,),
            )
        )
    return found
