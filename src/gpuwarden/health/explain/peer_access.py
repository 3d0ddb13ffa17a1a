"""Two GPUs of one node that cannot map each other's memory: peer-to-peer (P2P) access refused.

CUDA reports a pair without P2P as cudaErrorPeerAccessUnsupported (217; 64 in CUDA <= 10.0;
CUDA_ERROR_PEER_ACCESS_UNSUPPORTED in the driver API): "peer access is not supported between
these two devices", from cudaDeviceEnablePeerAccess or from cudaIpcOpenMemHandle, which maps
another process's buffer on a different GPU through peer access (NCCL's P2P/IPC transport,
vLLM's / sglang's / TensorRT-LLM's custom all-reduce, DeepEP, PyTorch's CUDA tensors shared
between processes). A device also holds at most eight peer mappings, system-wide
(cudaDeviceEnablePeerAccess): the ninth is cudaErrorTooManyPeers (711; 60 in CUDA <= 10.0),
"peer mapping resources exhausted". The pair lacks P2P when the GPUs do not offer it (GeForce
cards since the RTX 40 series, most in virtual machines), when the platform blocks it (GPUs
under different root complexes or sockets on some chipsets; PCIe ACS redirecting peer requests
up to the root complex; the IOMMU translating them), or when a container sees only one of them.

NCCL's troubleshooting guide: a collective that hangs (or corrupts data) on PCIe and runs with
NCCL_P2P_DISABLE=1 points at ACS or the IOMMU (disable ACS in the BIOS or with setpci; iommu=pt).
That is the usual reading, not a statement. A driver's or sample's own report that a pair has no
P2P (`nvidia-smi topo -p2p`, simpleP2P's "Peer access ... : No", p2pBandwidthLatencyTest's
"CANNOT Access Peer", vLLM's "lacks GPU P2P capability") is a capability, not a failure: one
candidate at most, since NCCL falls back to shared memory and vLLM to NCCL. TensorFlow's warning
that it could not enable peer access is one too: it carries on without it.

Not this: "peer access is already enabled" (704) or "has not been enabled" (705) — the
application's bookkeeping, the pair has P2P; an IPC handle refused for another reason
("invalid argument", "invalid device context"); CUDA IPC missing on the platform (Tegra's and
Windows' "operation not supported").
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.match import first_tier, reading_vote
from gpuwarden.health.explain.votes import Vote

CAUSE = "gpu-p2p-unsupported"
# A paste mentions one (lower case) before the patterns are tried.
WORDS = (
    "peer access",
    "peeraccess",
    "peer_access",
    "peer mapping",
    "too_many_peers",
    "toomanypeers",
    "nccl_p2p_disable",
    "acsctl",
    "access peer",
    "gpu p2p",
    "not supported",
)

# Weights (rank.py: >= 0.85 high, >= 0.55 medium): CUDA's own refusal states the cause; a hang
# that NCCL_P2P_DISABLE=1 cures is the usual reading; a capability report, ACS switched on or a
# warning the job carries on after is one candidate.
STATED = 0.9
USUAL = 0.6
CANDIDATE = 0.35

# CUDA's refusal, by its message or its names (runtime and driver API).
_REFUSED = re.compile(
    r"peer access is not supported between (?:these|the) two devices?|"
    r"cudaErrorPeerAccessUnsupported|CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
    re.IGNORECASE,
)
# TensorFlow's warning at start-up (gpu_device.cc): it goes on without peer access.
_TF_WARNING = re.compile(
    r"Unable to enable peer access between device ordinals \d+ and \d+", re.IGNORECASE
)
# The eight-peer limit.
_PEER_LIMIT = re.compile(
    r"peer mapping resources exhausted|cudaErrorTooManyPeers|CUDA_ERROR_TOO_MANY_PEERS",
    re.IGNORECASE,
)
# NCCL_P2P_DISABLE=1 said to cure the job (and no "not" / "n't" / "no" before the verb).
_P2P_DISABLE_CURES = re.compile(
    r"NCCL_P2P_DISABLE\s*=\s*1(?:(?!\bnot\b|n't\b|\bno\b)[^.!?]){0,80}?"
    r"\b(?:did (?:the )?work\s*around|work(?:s|ed)?\s*around|resolve[sd]?|solve[sd]?|"
    r"fix(?:es|ed)?)\b",
    re.IGNORECASE,
)
# ACS redirecting peer requests to the root complex (lspci -vvv on a bridge or switch port).
_ACS_REDIRECT = re.compile(
    r"ACSCtl:\s*SrcValid[+-]\s*TransBlk[+-]\s*(?:ReqRedir\+|ReqRedir-\s*CmpltRedir\+)",
    re.IGNORECASE,
)
# The driver's or a CUDA sample's own report that a pair has no P2P: `nvidia-smi topo -p2p`
# (a cell CNS/GNS/TNS/NS/DR, not the legend's "CNS = ..."), simpleP2P, p2pBandwidthLatencyTest,
# vLLM's notice that it falls back to NCCL.
_NO_P2P_REPORTED = re.compile(
    r"\bGPU\d+\s+(?:(?:X|OK|CNS|GNS|TNS|NS|DR|U)\s+){0,16}(?:CNS|GNS|TNS|NS|DR)\b(?!\s*=)|"
    r"Peer access from [^>]{1,80}-> [^:]{1,80}: No\b|"
    r"Device=\d+ CANNOT Access Peer Device=\d+|"
    r"lacks GPU P2P capability",
    re.IGNORECASE,
)
# The `topo -p2p` legend: a matrix cell is read only where the legend says what it means.
_TOPO_LEGEND = re.compile(r"(?:Chipset|GPU|Topology) not supported", re.IGNORECASE)

_MEANINGS = {
    STATED: "CUDA refused peer access between the two GPUs (no P2P between the pair, or the "
    "device's eight peer mappings are used up)",
    USUAL: "the job runs only with NCCL's P2P transport off: peer-to-peer between the GPUs is "
    "broken on this host (PCIe ACS or the IOMMU in the path, or P2P the GPUs do not do)",
    CANDIDATE: "the GPUs have no (working) P2P between them: a job that needs peer access or "
    "CUDA IPC across them is refused, NCCL and vLLM fall back to slower paths",
}
DECIDES = (
    "`nvidia-smi topo -p2p r` and `-p2p w` (OK, or CNS/GNS/TNS/NS = why not) and `nvidia-smi "
    "topo -m`; `torch.cuda.can_device_access_peer(0, 1)` or CUDA's p2pBandwidthLatencyTest; "
    "`sudo lspci -vvv | grep ACSCtl` (ReqRedir+ / CmpltRedir+ = ACS on) and the kernel command "
    "line (iommu, intel_iommu / amd_iommu); NCCL_DEBUG=INFO with NCCL_P2P_DISABLE=1 and without"
)


# Strongest first; TensorFlow's start-up warning before the limit it quotes (the job goes on).
_TIERS = (
    (_REFUSED, STATED),
    (_TF_WARNING, CANDIDATE),
    (_PEER_LIMIT, STATED),
    (_P2P_DISABLE_CURES, USUAL),
    (_ACS_REDIRECT, CANDIDATE),
)


def _reported(flat: str) -> tuple[str, float] | None:
    found = _NO_P2P_REPORTED.search(flat)
    if found is None:
        return None
    if found[0].upper().startswith("GPU") and _TOPO_LEGEND.search(flat) is None:
        return None
    return found[0], CANDIDATE


def peer_access_votes(flat: str) -> list[Vote]:
    """The vote for ``gpu-p2p-unsupported`` in a flattened paste (at most one)."""
    found = first_tier(flat, _TIERS) or _reported(flat)
    return reading_vote(CAUSE, found, _MEANINGS, DECIDES)
