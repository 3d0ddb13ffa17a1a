"""NVLink verdicts from `nvidia-smi nvlink -s` and `nvidia-smi topo -m`.

A link is judged against its peers, never against a number from a datasheet alone: a GPU whose
links are partly inactive while the others are up, a GPU with fewer active links than the other
GPUs of the same model, or a GPU pair bonded by fewer NVLinks than every other pair (on an
NVSwitch board every pair shows the same NV#) has lost links. A single GPU whose links are all
up, a consumer card without NVLink, and a MIG GPU (nvlink queries are refused in MIG mode) are
healthy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from gpuwarden.health.checks import check_of
from gpuwarden.types.health import Check, CheckStatus, DeviceRef, Evidence, Finding, Severity
from gpuwarden.types.telemetry import DeviceInfo
from gpuwarden.types.topology import GpuNvLinks, LinkKind, NvLinkStatus, NvLinkSupport, Topology

CHECK = "nvlink-topology"
_CAUSE = (
    "an NVLink the GPU has is not trained: a failed link, a bad NVSwitch port or cable tray, or "
    "a fabric that did not come up; traffic between these GPUs falls back to fewer links or PCIe"
)
_REMEDY = (
    "reset the GPU (nvidia-smi -r) or reboot the node; check `nvidia-smi nvlink -e` error "
    "counters and Fabric Manager (`systemctl status nvidia-fabricmanager`); run field "
    "diagnostics (dcgmi diag -r 3); if the link stays down, open an RMA"
)


def _device(
    index: int | None, uuid: str | None, name: str | None, devices: Sequence[DeviceInfo]
) -> DeviceRef:
    """The GPU a topology output names (by UUID, else by index), as the devices know it."""
    info = next((d for d in devices if uuid and d.uuid == uuid), None)
    info = info or next((d for d in devices if d.index == index), None)
    if info is None:
        return DeviceRef(index=index, uuid=uuid, name=name)
    return DeviceRef(index=info.index, uuid=info.uuid, pci_bus_id=info.pci_bus_id, name=info.name)


def _active(gpu: GpuNvLinks) -> int:
    return sum(1 for link in gpu.links if link.active)


def _status_findings(status: NvLinkStatus, devices: Sequence[DeviceInfo]) -> list[Finding]:
    reported = [g for g in status.gpus if g.support is NvLinkSupport.REPORTED and g.links]
    most_by_model: Counter[str] = Counter()
    for gpu in reported:
        most_by_model[gpu.name] = max(most_by_model[gpu.name], _active(gpu))
    found: list[Finding] = []
    for gpu in status.gpus:
        peers_up = most_by_model.get(gpu.name, 0)
        if gpu.support is NvLinkSupport.ALL_INACTIVE and peers_up > 0:
            found.append(_down(gpu, devices, 0, peers_up, "every link inactive"))
            continue
        if gpu.support is not NvLinkSupport.REPORTED or not gpu.links:
            continue
        active = _active(gpu)
        inactive = [link.link for link in gpu.links if link.active is False]
        if active == 0 and peers_up == 0:
            continue  # no GPU of this model has a link up: PCIe-only, or NVLink not in use
        if inactive or active < peers_up:
            what = f"links {', '.join(map(str, inactive))} inactive" if inactive else "fewer links"
            found.append(_down(gpu, devices, active, max(peers_up, len(gpu.links)), what))
    return found


def _down(
    gpu: GpuNvLinks, devices: Sequence[DeviceInfo], active: int, expected: int, what: str
) -> Finding:
    return Finding(
        code="nvlink-down",
        severity=Severity.CRITICAL,
        title=f"GPU {gpu.index}: {active} of {expected} NVLinks active ({what})",
        cause=_CAUSE,
        remedy=_REMEDY,
        device=_device(gpu.index, gpu.uuid, gpu.name, devices),
        evidence=(
            Evidence(
                "nvlink_active_links",
                active,
                "nvidia-smi nvlink -s",
                f"{expected} active on the other {gpu.name} GPUs / printed for this one",
            ),
        ),
        action="RESET_GPU",
    )


def _topology_findings(topology: Topology, devices: Sequence[DeviceInfo]) -> list[Finding]:
    """GPU pairs bonded by fewer NVLinks than the node's usual pair."""
    gpu_labels = {g.label for g in topology.gpus}
    pairs = [link for link in topology.links if link.a in gpu_labels and link.b in gpu_labels]
    nv = [p for p in pairs if p.kind is LinkKind.NVLINK and p.nvlinks is not None]
    if len(nv) < 2:
        return []
    usual = Counter(p.nvlinks for p in nv).most_common(1)[0][0]
    if usual is None:
        return []
    found: list[Finding] = []
    for pair in pairs:
        weaker = pair.kind is not LinkKind.NVLINK or (pair.nvlinks or 0) < usual
        if not weaker or len(nv) < len(pairs) // 2:
            continue  # NVLink on a minority of pairs is a bridge layout, not a fault
        index = int(pair.a.removeprefix("GPU")) if pair.a.removeprefix("GPU").isdecimal() else None
        found.append(
            Finding(
                code="nvlink-down",
                severity=Severity.WARNING,
                title=f"{pair.a}–{pair.b} bonded by {pair.code} where the other pairs have "
                f"NV{usual}",
                cause=_CAUSE,
                remedy=_REMEDY,
                device=_device(index, None, None, devices),
                evidence=(
                    Evidence(
                        "topology_link", pair.code, "nvidia-smi topo -m", f"usual pair: NV{usual}"
                    ),
                ),
                action="RESET_GPU",
            )
        )
    return found


def topology_findings(
    topologies: Sequence[Topology],
    nvlinks: Sequence[NvLinkStatus],
    devices: Sequence[DeviceInfo] = (),
) -> tuple[tuple[Finding, ...], tuple[Check, ...]]:
    """Findings about lost NVLinks and the `nvlink-topology` check."""
    if not topologies and not nvlinks:
        detail = "no `nvidia-smi nvlink -s` or `topo -m` output read"
        return (), (Check(CHECK, CheckStatus.SKIP, detail),)
    found: list[Finding] = []
    for status in nvlinks:
        found += _status_findings(status, devices)
    for topology in topologies:
        found += _topology_findings(topology, devices)
    if not found:
        links = sum(_active(g) for s in nvlinks for g in s.gpus)
        mig = any(g.support is NvLinkSupport.MIG_MODE for s in nvlinks for g in s.gpus)
        parts = [f"{links} NVLink(s) active, none lost"] if links else ["no NVLink lost"]
        if mig:
            parts.append("MIG GPUs do not report NVLink state")
        return (), (Check(CHECK, CheckStatus.PASS, "; ".join(parts)),)
    detail = "; ".join(f.title for f in found[:4])
    return tuple(found), (check_of(CHECK, found, detail),)
