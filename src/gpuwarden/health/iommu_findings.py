"""``iommu-fault`` findings from the IOMMU's DMA faults on an NVIDIA GPU. Pure.

Only devices the log ties to NVIDIA are judged (``IommuFaultGroup.nvidia``): a NIC, an NVMe
drive, an integrated or another vendor's GPU faulting names no NVIDIA GPU. A fault is a DMA of the
GPU that the IOMMU blocked: the data the GPU read is lost or the write dropped, so the job that
made it gets wrong data, hangs, or fails (CUDA peer copies returning zeros, NCCL hangs, Xid 31 or
13 after it). Documented causes (NCCL troubleshooting guide, "PCI Access Control Services
(ACS)"; GPUDirect RDMA documentation; the NVIDIA driver's README): GPU peer-to-peer or GPUDirect
RDMA traffic translated by an IOMMU that is not in passthrough mode, or redirected to the root
complex by PCIe ACS; otherwise a driver or application bug that DMAs to memory it did not map.
Warning: the GPU works but its DMA does not; one reading is enough, the cause is the setup.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuwarden.health.record_span import span_evidence
from gpuwarden.health.rules.codes import CODES
from gpuwarden.types.health import Confidence, DeviceRef, Evidence, Finding, IommuFaultGroup

CODE = "iommu-fault"
NCCL_ACS_URL = (
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
    "#pci-access-control-services-acs"
)
GPUDIRECT_RDMA_URL = "https://docs.nvidia.com/cuda/gpudirect-rdma/index.html"
_IOMMU_NAMES = {"dmar": "Intel VT-d (DMAR)", "amd-vi": "AMD-Vi", "smmu-v3": "Arm SMMUv3"}
# a tie made by matching a VT-d bus (printed without its PCI domain) to one GPU's bus
_DOMAINLESS = "without its PCI domain"


def _evidence(group: IommuFaultGroup, source: str) -> list[Evidence]:
    proof = [
        Evidence("iommu", _IOMMU_NAMES.get(group.iommu, group.iommu), source),
        Evidence(
            "iommu_faults", group.faults, source, f"lines {group.first_line}-{group.last_line}"
        ),
        Evidence("iommu_fault_reasons", "; ".join(group.reasons), source),
        Evidence("gpu_tied_by", group.nvidia, source),
    ]
    if group.accesses:
        proof.append(Evidence("dma_access", ", ".join(group.accesses), source))
    proof.extend(span_evidence(group, source))
    return proof


def _finding(group: IommuFaultGroup, source: str) -> Finding:
    info = CODES[CODE]
    sure = Confidence.MEDIUM if _DOMAINLESS in (group.nvidia or "") else Confidence.HIGH
    reasons = f" ({'; '.join(group.reasons)})" if group.reasons else ""
    return Finding(
        code=CODE,
        severity=info.severity,
        title=(
            f"the IOMMU blocked DMA of GPU {group.pci_bus_id}: "
            f"{_IOMMU_NAMES.get(group.iommu, group.iommu)} faults{reasons} ×{group.faults}"
        ),
        cause=info.cause,
        remedy=info.remedy,
        device=DeviceRef(pci_bus_id=group.pci_bus_id),
        evidence=tuple(_evidence(group, source)),
        action=info.action,
        confidence=sure,
        references=(NCCL_ACS_URL, GPUDIRECT_RDMA_URL),
        first_seen_s=group.first_seen_s,
        last_seen_s=group.last_seen_s,
        count=group.faults,
    )


def iommu_findings(groups: Iterable[IommuFaultGroup], *, source: str) -> list[Finding]:
    """One ``iommu-fault`` finding per device the log ties to an NVIDIA GPU."""
    return [_finding(group, source) for group in groups if group.nvidia is not None]
