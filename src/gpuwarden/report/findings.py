"""Findings and checks as JSON records and short labels — one shape for every verb that shows them
(`snapshot`, `doctor`, `watch`, `explain`).

A finding record follows diagnosis.md §3 (`gpuwarden.doctor/1` findings: code, severity, device
{index, uuid, pci_bus_id}, evidence, cause, remedy, action) plus title, confidence, method,
references and the time span a windowed verdict covers. ``null`` = unknown.
"""

from __future__ import annotations

from typing import Any

from gpuwarden.types.health import Check, DeviceRef, Evidence, Finding, Severity

# How every terminal table marks a severity (rich style names; words four letters wide).
SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
SEVERITY_MARK = {Severity.CRITICAL: "CRIT", Severity.WARNING: "WARN", Severity.INFO: "info"}


def device_label(device: DeviceRef | None) -> str:
    """ "GPU 3", "GPU 0 MIG 1g.10gb (GI 7)", "GPU 00000000:3B:00.0", or "node"."""
    if device is None:
        return "node"
    if device.index is not None:
        label = f"GPU {device.index}"
    else:
        label = f"GPU {device.pci_bus_id or device.uuid or '?'}"
    if device.mig_profile is not None or device.gpu_instance_id is not None:
        gi = f" (GI {device.gpu_instance_id})" if device.gpu_instance_id is not None else ""
        label += f" MIG {device.mig_profile or '?'}{gi}"
    return label


def device_record(device: DeviceRef | None) -> dict[str, Any] | None:
    if device is None:
        return None
    return {
        "index": device.index,
        "uuid": device.uuid,
        "pci_bus_id": device.pci_bus_id,
        "name": device.name,
        "host": device.host,
        "mig_profile": device.mig_profile,
        "gpu_instance_id": device.gpu_instance_id,
    }


def evidence_record(evidence: Evidence) -> dict[str, Any]:
    return {
        "field": evidence.field,
        "value": evidence.value,
        "source": evidence.source,
        "detail": evidence.detail,
    }


def finding_record(finding: Finding) -> dict[str, Any]:
    return {
        "code": finding.code,
        "severity": finding.severity.value,
        "title": finding.title,
        "device": device_record(finding.device),
        "evidence": [evidence_record(e) for e in finding.evidence],
        "cause": finding.cause,
        "remedy": finding.remedy,
        "action": finding.action,
        "confidence": finding.confidence.value,
        "method": finding.method,
        "references": list(finding.references),
        "first_seen_s": finding.first_seen_s,
        "last_seen_s": finding.last_seen_s,
        "count": finding.count,
    }


def check_record(check: Check) -> dict[str, Any]:
    return {
        "name": check.name,
        "status": check.status.value,
        "detail": check.detail,
        "codes": list(check.codes),
    }
