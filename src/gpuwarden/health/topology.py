"""NVLink verdicts from `nvidia-smi nvlink -s` and `nvidia-smi topo -m`.

A link is judged against its peers, never against a number from a datasheet alone: a GPU whose
links are partly inactive while the others are up, a GPU with fewer active links than the other
GPUs of the same model, or a GPU pair bonded by fewer NVLinks than every other pair (on an
NVSwitch board every pair shows the same NV#) has lost links. A single GPU whose links are all
up, a consumer card without NVLink, and a MIG GPU (nvlink queries are refused in MIG mode) are
healthy. A GPU that lists no link ("all links are inActive") is judged by its peers too; with
no peer link up it is a lost-NVLink fault only where the board itself wires the links: a server
module (SXM / HGX / Superchip) on a node with several GPUs. A lone GPU, or a PCIe card whose links
need a bridge, cannot tell. A PCIe card with no link up beside bridged peers of its model is most
likely a card without a bridge (a bridge joins two cards: of three, one has none): an info
finding that says to reseat its bridge if it has one, not a lost link.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from gpuwarden.catalog.gpus import gpu_by_smi_name
from gpuwarden.health.checks import check_of
from gpuwarden.types.health import Check, CheckStatus, DeviceRef, Evidence, Finding, Severity
from gpuwarden.types.telemetry import DeviceInfo
from gpuwarden.types.topology import (
    GpuNvLinks,
    LinkKind,
    NvLinkStatus,
    NvLinkSupport,
    Topology,
)

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


# The catalog variants whose NVLinks are traces of the baseboard (to NVSwitches or to the peer
# modules: NVIDIA HGX / DGX and Grace superchip designs), not bridges a PCIe card may lack.
_BOARD_WIRED_VARIANTS = ("SXM", "HGX", "Superchip")


def _board_wires_nvlink(gpu: GpuNvLinks, status: NvLinkStatus) -> bool:
    """A server-module GPU with NVLink, seen on a node with several GPUs (another GPU listed, or
    an index above 0: NVML numbers the GPUs it sees from 0). A module alone in a node or a VM
    may have nothing to link to, so one GPU 0 is not judged."""
    spec = gpu_by_smi_name(gpu.name)
    module = spec is not None and spec.variant.startswith(_BOARD_WIRED_VARIANTS)
    has_nvlink = spec is not None and bool(spec.nvlink_bytes_per_s)
    return module and has_nvlink and (len(status.gpus) > 1 or gpu.index > 0)


def _bridge_linked(gpu: GpuNvLinks) -> bool:
    """A PCIe card with NVLink (RTX / Quadro / A40 / A100 PCIe / H100 PCIe): its links are a
    bridge's, which the card may not have."""
    spec = gpu_by_smi_name(gpu.name)
    return (
        spec is not None
        and bool(spec.nvlink_bytes_per_s)
        and not spec.variant.startswith(_BOARD_WIRED_VARIANTS)
    )


def _active(gpu: GpuNvLinks) -> int:
    return sum(1 for link in gpu.links if link.active)


# nvidia-smi prints a link's rate per direction to 3 decimals ("14.062 GB/s" of the 14.0625 an
# RTX 3090's four links sum to the datasheet's 112.5 GB/s both ways with): a rounding margin, far
# below one link of the at most 12 a bridge wires (each printed at 1.0-1.0625 × the datasheet's
# per-link rate, so one link fewer falls short by >= 2.6 %)
_PRINTED_ROUNDING = 0.99


def _bridge_fully_up(gpu: GpuNvLinks) -> bool:
    """Whether a bridge-linked card's active links carry all of the NVLink bandwidth its
    datasheet gives the bridge: its `<inactive>` links are then links the bridge does not wire
    (an H100 PCIe's bridges wire 12 of the chip's 18). The datasheet only clears a card here,
    never accuses one."""
    spec = gpu_by_smi_name(gpu.name)
    speeds = [link.speed_bytes_per_s for link in gpu.links if link.active]
    if spec is None or not spec.nvlink_bytes_per_s or not speeds or None in speeds:
        return False
    both_ways = 2 * sum(speed for speed in speeds if speed is not None)
    return _bridge_linked(gpu) and both_ways >= _PRINTED_ROUNDING * spec.nvlink_bytes_per_s


def _status_findings(status: NvLinkStatus, devices: Sequence[DeviceInfo]) -> list[Finding]:
    """nvidia-smi prints every link of a GPU, up or `<inactive>`. GPUs of one model are judged
    against each other: links inactive on every one of them are links the board does not wire
    (an H100 PCIe bridges 12 of its 18), a GPU with fewer links up than its peers lost some. A
    GPU listed with fewer links than its peers was cut out of the paste ("..."): only its own
    `<inactive>` links count against it. A GPU without peers is judged by its own listing, its
    `<inactive>` links lost unless they are a bridge's unwired ones (_bridge_fully_up)."""
    reported = [g for g in status.gpus if g.support is NvLinkSupport.REPORTED and g.links]
    most_up: Counter[str] = Counter()
    most_listed: Counter[str] = Counter()
    models: Counter[str] = Counter(g.name for g in reported)
    for gpu in reported:
        most_up[gpu.name] = max(most_up[gpu.name], _active(gpu))
        most_listed[gpu.name] = max(most_listed[gpu.name], len(gpu.links))
    found: list[Finding] = []
    for gpu in status.gpus:
        peers_up = most_up.get(gpu.name, 0)
        if gpu.support is NvLinkSupport.ALL_INACTIVE and peers_up > 0:
            found.append(_none_up(gpu, devices, peers_up, "every link inactive"))
            continue
        if gpu.support is NvLinkSupport.ALL_INACTIVE and _board_wires_nvlink(gpu, status):
            found.append(_unpeered_down(gpu, devices))
            continue
        if gpu.support is not NvLinkSupport.REPORTED or not gpu.links:
            continue
        active = _active(gpu)
        inactive = [link.link for link in gpu.links if link.active is False]
        if active == 0 and peers_up == 0:
            continue  # no GPU of this model has a link up: PCIe-only, or NVLink not in use
        listed_in_full = len(gpu.links) >= most_listed[gpu.name]
        if models[gpu.name] > 1:
            lost = active < peers_up and (listed_in_full or bool(inactive))
        else:  # judged by its own listing, where its datasheet does not show them unwired
            lost = bool(inactive) and not _bridge_fully_up(gpu)
        if lost:
            what = f"links {', '.join(map(str, inactive))} inactive" if inactive else "fewer links"
            expected = peers_up if models[gpu.name] > 1 else len(gpu.links)
            if active == 0:
                found.append(_none_up(gpu, devices, expected, what))
            else:
                found.append(_down(gpu, devices, active, expected, what))
    return found


_UNBRIDGED_CAUSE = (
    "a PCIe card's NVLinks are those of an NVLink bridge to another card: a card without one "
    "(of three cards, one has no partner) has no link up, as built; a bridge that is not seated "
    "looks the same"
)
_UNBRIDGED_REMEDY = (
    "if this card has an NVLink bridge, power the node off and reseat the bridge; if it has "
    "none, nothing to do (its traffic to the other GPUs goes over PCIe)"
)


def _none_up(gpu: GpuNvLinks, devices: Sequence[DeviceInfo], peers_up: int, what: str) -> Finding:
    """No link up on a GPU whose peers of its model have theirs: lost links on a board-wired
    module (or a model the catalog does not know), a card without a bridge on a PCIe card."""
    if not _bridge_linked(gpu):
        return _down(gpu, devices, 0, peers_up, what)
    return _unbridged_card(
        f"GPU {gpu.index}: no NVLink up on this {gpu.name} ({peers_up} up on the others): "
        "no bridge on it, or its bridge is not seated",
        _device(gpu.index, gpu.uuid, gpu.name, devices),
        Evidence(
            "nvlink_active_links",
            0,
            "nvidia-smi nvlink -s",
            f"{peers_up} active on the other {gpu.name} GPUs; a PCIe card's links are its bridge's",
        ),
    )


def _unbridged_card(title: str, device: DeviceRef, evidence: Evidence) -> Finding:
    """A PCIe card with no NVLink up where its bridge would be: as built without one, or a bridge
    not seated (info: not a lost link)."""
    return Finding(
        code="nvlink-down",
        severity=Severity.INFO,
        title=title,
        cause=_UNBRIDGED_CAUSE,
        remedy=_UNBRIDGED_REMEDY,
        device=device,
        evidence=(evidence,),
    )


def _down(
    gpu: GpuNvLinks, devices: Sequence[DeviceInfo], active: int, expected: int, what: str
) -> Finding:
    return _nvlink_down(
        gpu,
        devices,
        Severity.CRITICAL,
        f"GPU {gpu.index}: {active} of {expected} NVLinks active ({what})",
        active,
        f"{expected} active on the other {gpu.name} GPUs / printed for this one",
    )


def _unpeered_down(gpu: GpuNvLinks, devices: Sequence[DeviceInfo]) -> Finding:
    """Every link of a board-wired GPU inactive, no peer's links shown to compare: a warning,
    since the count it should have is the board's, not one read off its peers."""
    return _nvlink_down(
        gpu,
        devices,
        Severity.WARNING,
        f"GPU {gpu.index}: every NVLink inactive on a {gpu.name} of a multi-GPU node",
        0,
        "a server module's NVLinks are wired by its board; the other GPUs' `nvlink -s` "
        "would show how many are up on a healthy one",
    )


def _nvlink_down(
    gpu: GpuNvLinks,
    devices: Sequence[DeviceInfo],
    severity: Severity,
    title: str,
    active: int,
    detail: str,
) -> Finding:
    return Finding(
        code="nvlink-down",
        severity=severity,
        title=title,
        cause=_CAUSE,
        remedy=_REMEDY,
        device=_device(gpu.index, gpu.uuid, gpu.name, devices),
        evidence=(Evidence("nvlink_active_links", active, "nvidia-smi nvlink -s", detail),),
        action="RESET_GPU",
    )


def _gpu_index(label: str) -> int | None:
    number = label.removeprefix("GPU")
    return int(number) if number.isdecimal() else None


def _nvlinks_of(topology: Topology, label: str, others: Sequence[str]) -> int:
    """The NVLinks a GPU's own row shows towards the other GPUs (the sum of its NV#)."""
    total = 0
    for other in others:
        link = topology.link(label, other)
        if link is not None and link.kind is LinkKind.NVLINK:
            total += link.nvlinks or 0
    return total


def _topology_findings(topology: Topology, devices: Sequence[DeviceInfo]) -> list[Finding]:
    """GPUs with fewer NVLinks to the other GPUs than most GPUs of the node. Judged per GPU, not
    per pair: a DGX-1 hybrid cube mesh bonds some pairs by NV1, some by NV2 and leaves others
    on PCIe, yet every GPU has the same 6 links. A GPU is short only when it is a minority: two
    bridged pairs of four GPUs with one bridge missing cannot tell which layout was meant."""
    labels = [g.label for g in topology.gpus]
    gpus = set(labels)
    nv = [
        p
        for p in topology.links
        if p.a in gpus and p.b in gpus and p.kind is LinkKind.NVLINK and p.nvlinks
    ]
    if len(nv) < 2:
        return []
    missing = set(topology.missing_rows)
    judged = [label for label in labels if label not in missing]
    sums = {a: _nvlinks_of(topology, a, [b for b in labels if b != a]) for a in judged}
    usual_sum = Counter(sums.values()).most_common(1)[0][0]
    short = [a for a in judged if sums[a] < usual_sum]
    if not short or len(short) * 2 >= len(judged):
        return []
    shorts = set(short)
    usual_pair = Counter(p.nvlinks for p in nv if p.a not in shorts and p.b not in shorts)
    usual = usual_pair.most_common(1)[0][0] if usual_pair else None
    found: list[Finding] = []
    pairs = _bridged_pairs(labels, topology, [a for a in judged if a not in shorts])
    for a in short:
        if pairs and sums[a] == 0:
            found.append(_unbridged(a, usual_sum, devices))
            continue
        weaker = [
            (b, link)
            for b in labels
            if b != a
            and (link := topology.link(a, b)) is not None
            and usual is not None
            and (link.kind is not LinkKind.NVLINK or (link.nvlinks or 0) < usual)
            and b not in shorts
        ]
        for b, link in weaker:
            title = f"{a}–{b} bonded by {link.code} where the other pairs have NV{usual}"
            found.append(_weak(a, title, link.code, f"usual pair: NV{usual}", devices))
        if not weaker:
            title = f"{a}: {sums[a]} NVLinks to the other GPUs where most GPUs have {usual_sum}"
            found.append(_weak(a, title, sums[a], f"usual per GPU: {usual_sum}", devices))
    return found


def _bridged_pairs(labels: Sequence[str], topology: Topology, bonded: Sequence[str]) -> bool:
    """Whether the GPUs with their links each bond to exactly one other GPU: bridged pairs of
    PCIe cards (a bridge joins two cards), not a board's mesh or NVSwitch, where every GPU bonds
    to several. Beside such pairs a GPU with no NVLink is a card without a bridge, as built."""

    def peers(a: str) -> int:
        return sum(
            1
            for b in labels
            if b != a and (link := topology.link(a, b)) is not None and link.kind is LinkKind.NVLINK
        )

    return bool(bonded) and all(peers(a) == 1 for a in bonded)


def _unbridged(label: str, usual: int, devices: Sequence[DeviceInfo]) -> Finding:
    return _unbridged_card(
        f"{label}: no NVLink, beside bridged pairs of {usual} links: no bridge on this card, or "
        "its bridge is not seated",
        _device(_gpu_index(label), None, None, devices),
        Evidence(
            "topology_link",
            0,
            "nvidia-smi topo -m",
            f"every other GPU bonds to one peer by NV{usual}: PCIe cards' bridges",
        ),
    )


def _weak(
    label: str, title: str, value: str | int, expected: str, devices: Sequence[DeviceInfo]
) -> Finding:
    return Finding(
        code="nvlink-down",
        severity=Severity.WARNING,
        title=title,
        cause=_CAUSE,
        remedy=_REMEDY,
        device=_device(_gpu_index(label), None, None, devices),
        evidence=(Evidence("topology_link", value, "nvidia-smi topo -m", expected),),
        action="RESET_GPU",
    )


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
    inferred = sum(len(t.inferred_columns) for t in topologies)
    # a GPU column named from the rows could be a NIC's, and a GPU without a row unseen: said
    caveat = [f"{inferred} `topo -m` column(s) named without a header row"] if inferred else []
    if not found:
        links = sum(_active(g) for s in nvlinks for g in s.gpus)
        mig = any(g.support is NvLinkSupport.MIG_MODE for s in nvlinks for g in s.gpus)
        parts = [f"{links} NVLink(s) active, none lost"] if links else ["no NVLink lost"]
        if mig:
            parts.append("MIG GPUs do not report NVLink state")
        return (), (Check(CHECK, CheckStatus.PASS, "; ".join(parts + caveat)),)
    detail = "; ".join([f.title for f in found[:4]] + caveat)
    return tuple(found), (check_of(CHECK, found, detail),)
