"""GPUDirect RDMA unavailable: the NIC (or GDRCopy) cannot reach GPU memory directly.

For a NIC to read and write GPU memory (NCCL's GDRDMA path, UCX, perftest's --use_cuda, MPI) the
memory must be registered with the RDMA stack through a peer-memory kernel module — the driver's
nvidia-peermem (formerly Mellanox's nv_peer_mem), which registers with ib_core's peer-memory
interface — or through DMA-BUF (Linux ≥ 5.12, the open kernel modules, an rdma-core and NIC
driver with ibv_reg_dmabuf_mr) (NVIDIA's GPUDirect RDMA guide, the NCCL troubleshooting guide).
GDRCopy maps GPU memory into the CPU's address space through its own module, gdrdrv, on the same
nvidia_p2p interface. When neither path exists, registering a GPU buffer fails (perftest's
"Couldn't allocate MR" after "cuMemAlloc() … GPU buffer", EFAULT), UCX refuses
UCX_IB_GPU_DIRECT_RDMA=y, and GDRCopy cannot open its driver. A module that will not insert
("could not insert 'nv_peer_mem': Invalid argument", "Unknown symbol ib_register_peer_memory_
client", gdrdrv's "disagrees about version of symbol nvidia_p2p_get_pages") was built against
another OFED or driver than the one running: the same outcome.

NCCL itself does not fail: it reports "NET/IB : GPU Direct RDMA Disabled for HCA …" (an INFO
line) and stages every inter-node transfer through host memory — slower, not broken. That line
is the usual reason for low inter-node bandwidth, so it reads medium when it is the only thing
in the paste, and low beside an error of its own (a hang, a WARN): a side note there. A log that
merely says "GDR 0" or shows "/GDRDMA" channels states nothing wrong and reads nothing.

Not this: NCCL's IB transport failing between the NICs (completion errors, retry timeouts:
nccl-ib-transport), a registration refused for its size (BAR1) or for VMM memory, which the
paste must name.
"""

from __future__ import annotations

import itertools
import re

from gpuwarden.health.explain.match import first_tier, reading_vote
from gpuwarden.health.explain.votes import Vote

CAUSE = "gpudirect-rdma-unavailable"
# A paste mentions one (lower case) before the patterns are tried.
WORDS = (
    "peer_mem",
    "peermem",
    "gdrdrv",
    "gdr driver",
    "gpu direct rdma",
    "gpudirect rdma",
    "allocate mr",
    "register gpu mr",
    "create mr",
    "dmabuf",
)

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium): the module's or library's own refusal states
# the cause; a GPU buffer the NIC could not register, or NCCL's "Disabled", is the usual reading;
# NCCL's "Disabled" beside another error is one candidate.
STATED = 0.9
USUAL = 0.65
SIDE_NOTE = 0.35

# The peer-memory module missing or refused by the kernel, UCX's refusal, GDRCopy's library and
# module, an IB stack without DMA-BUF registration (NCCL's ibvwrap WARN), Mooncake's transfer
# engine refusing an RNIC: built for DMA-BUF (without WITH_NVIDIA_PEERMEM), it checks each GPU's
# CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED when it opens the RNIC and logs this when it is 0
# (kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp,
# RdmaContext::openRdmaDevice; newer releases add " on CUDA device N mapped to RNIC X").
_STATED = re.compile(
    r"Module (?:nvidia[-_]peermem|nv_peer_mem) not found|"
    r"could not insert '(?:nv_peer_mem|nvidia_peermem|nvidia-peermem)'|"
    r"(?:nv_peer_mem|nvidia_peermem): Unknown symbol \w*peer_memory_client|"
    r"Couldn't enable GPUDirect RDMA|"
    r"unable to open GDR driver|Is gdrdrv driver installed and loaded|"
    r"could not (?:insert|load) module \S*gdrdrv\S*|"
    r"gdrdrv: (?:disagrees about version of symbol|Unknown symbol) nvidia_p2p|"
    r"ibv_reg_dmabuf_mr failed with error Operation not supported|"
    r"DMA BUF supported required for GPU RDMA without nvidia-peermem",
    re.IGNORECASE,
)
# A GPU buffer the NIC could not register (perftest, Mellanox's gpu_direct_rdma_access sample):
# the GPU words within a few lines of the failed registration (perftest prints its --use_cuda
# command, "cuMemAlloc() of a N bytes GPU buffer", then "Couldn't allocate MR"), not a GPU buffer
# anywhere in a long log beside a host-memory registration that failed.
_GPU_BUFFER = re.compile(r"GPU buffer|GPU MR|--use_cuda|cuMemAlloc", re.IGNORECASE)
_NEAR_CHARS = 500
_REGISTRATIONS_READ = 50  # a log repeating the failure thousands of times says it once
_REGISTRATION_FAILED = re.compile(
    r"Couldn't (?:allocate|register) (?:GPU )?MR\b|failed to create mr\b", re.IGNORECASE
)
# NCCL's INFO line when neither peermem nor DMA-BUF is usable: "NET/IB : GPU Direct RDMA
# Disabled for HCA %d '%s' (no module)" (src/transport/net_ib.cc, ncclIbGetProperties; the
# Mellanox plugin's p2p_plugin.c prints it too, its ucx_plugin.c with "NET/UCX"). The phrase is
# printed only there, so it reads without its prefix (an issue's title quotes it bare); NCCL's
# older "Disabled for GPU <bus> / HCA <n> (distance …)" is a topology choice, not this.
_NCCL_DISABLED = re.compile(
    r"(?:NET/(?:IB|UCX)\s*:\s*)?GPU Direct RDMA Disabled for HCA", re.IGNORECASE
)
# An error of the paste's own beside that INFO line.
_OTHER_ERROR = re.compile(r"NCCL WARN|\berror\b|\bfailed\b|\bhang|timed? ?out", re.IGNORECASE)

_MEANINGS = {
    STATED: "GPUDirect RDMA's kernel side is missing: the peer-memory module (nvidia-peermem / "
    "nv_peer_mem), DMA-BUF registration or GDRCopy's gdrdrv is not loaded or will not load",
    USUAL: "GPU memory cannot be registered with the NIC (no nvidia-peermem / DMA-BUF): "
    "transfers stage through host memory or fail",
    SIDE_NOTE: "NCCL runs without GPUDirect RDMA (staging through host memory: slower, not "
    "broken) — beside another error, not its cause",
}
DECIDES = (
    "`lsmod | grep -E 'nvidia_peermem|nv_peer_mem|gdrdrv'` and `ls /sys/kernel/mm/memory_peers/` "
    "(empty = peermem not registered with ib_core); `dmesg | grep -iE 'peer|gdrdrv'` (Unknown "
    "symbol = built against another OFED / driver); NCCL_DEBUG=INFO: 'GPU Direct RDMA Enabled' "
    "and channels 'via NET/IB/N/GDRDMA'; for DMA-BUF, the open kernel modules and "
    "`ibv_reg_dmabuf_mr` in rdma-core"
)


def _nccl_disabled(flat: str) -> tuple[str, float] | None:
    found = _NCCL_DISABLED.search(flat)
    if found is None:
        return None
    return found[0], SIDE_NOTE if _OTHER_ERROR.search(flat) is not None else USUAL


def _registration(flat: str) -> tuple[str, float] | None:
    """The first failed registration with GPU-buffer words near it, and its weight."""
    for found in itertools.islice(_REGISTRATION_FAILED.finditer(flat), _REGISTRATIONS_READ):
        start = max(0, found.start() - _NEAR_CHARS)
        if _GPU_BUFFER.search(flat, start, found.end() + _NEAR_CHARS) is not None:
            return found[0], USUAL
    return None


def gpudirect_votes(flat: str) -> list[Vote]:
    """The vote for ``gpudirect-rdma-unavailable`` in a flattened paste (at most one)."""
    found = first_tier(flat, ((_STATED, STATED),)) or _registration(flat) or _nccl_disabled(flat)
    return reading_vote(CAUSE, found, _MEANINGS, DECIDES)
