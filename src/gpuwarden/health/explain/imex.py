"""CUDA fabric memory refused: the process has no IMEX channel (multi-node NVLink, GB200 NVL).

Memory shared over an NVLink fabric — across the trays of a GB200/GB300 NVL72 rack, or between
processes through CU_MEM_HANDLE_TYPE_FABRIC handles (NCCL's MNNVL and cuMem paths, NVSHMEM,
DeepEP, MSCCL++, nvbandwidth's multinode tests) — is brokered by the IMEX daemon (nvidia-imex) of
the NVLink domain, and a process may create, export or import such memory only if it can open an
IMEX channel: a character device under /dev/nvidia-caps-imex-channels/ (the CUDA driver API's
Virtual Memory Management notes; NVIDIA's IMEX guide). A container gets channels only when asked
(NVIDIA_IMEX_CHANNELS, or a ComputeDomain claim of the DRA driver). Without one, cuMemCreate,
cuMemExportToShareableHandle or cuMemImportFromShareableHandle fail with
CUDA_ERROR_NOT_PERMITTED ("operation not permitted"), even though the device attribute says
fabric handles are supported.

A paste that names the missing channel, or the IMEX service down, states the cause. A bare
NOT_PERMITTED from those calls is the usual reading, but not the only one: GPUs that are not on
an NVLink fabric at all cannot use fabric memory either — so it is medium and says what decides,
and a paste that shows a machine without an NVSwitch fabric (GeForce, PCIe boards) reads nothing.
Not this: the Fabric Manager of an NVSwitch baseboard (fabric-manager-down), a container
toolkit that cannot parse NVIDIA_IMEX_CHANNELS, or a healthy IMEX daemon's start-up log.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.fabric import no_nvswitch_ceiling
from gpuwarden.health.explain.match import first_tier, reading_vote
from gpuwarden.health.explain.text import Paste
from gpuwarden.health.explain.votes import Vote

CAUSE = "imex-channel-unavailable"
# A paste mentions one (lower case) before the patterns are tried.
WORDS = ("imex", "not_permitted", "not permitted")

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium).
STATED = 0.9
USUAL = 0.6

# The channel named missing or inaccessible, or the IMEX service down. The path's tail (a
# channel's name, a quote) is bounded: an unbounded \S* rescans a long unbroken token from every
# occurrence of the path (quadratic).
_STATED = re.compile(
    r"(?:without|no|missing|lacks?)\s+(?:an?\s+|any\s+)?IMEX channels?\b|"
    r"/dev/nvidia-caps-imex-channels\S{0,64}:?\s*(?:No such file|cannot access|does not exist|"
    r"Permission denied)|"
    r"cannot access '?/dev/nvidia-caps-imex-channels|"
    r"nvidia-imex(?:\.service)?\W{1,4}(?:\w+\W{1,3}){0,3}(?:failed|inactive|not running|dead)",
    re.IGNORECASE,
)
# CUDA_ERROR_NOT_PERMITTED from the calls that create, export or import fabric memory, within a
# few words of each other (either order: the error first in nvbandwidth's and NCCL's messages).
_FABRIC_CALL = r"cuMem(?:Create|ExportToShareableHandle|ImportFromShareableHandle)\b"
_NOT_PERMITTED = r"(?:CUDA_ERROR_NOT_PERMITTED|operation not permitted)"
# With the error first, only CUDA's own token: a shell's or a syscall's "Operation not
# permitted" (mkdir, setpriority, perf_event_open) a line before a cuMemCreate that worked is not
# CUDA refusing the call.
_REFUSED = re.compile(
    _FABRIC_CALL
    + r".{0,120}?"
    + _NOT_PERMITTED
    + r"|CUDA_ERROR_NOT_PERMITTED.{0,120}?"
    + _FABRIC_CALL,
    re.IGNORECASE,
)

_MEANINGS = {
    STATED: "the process has no IMEX channel (or the IMEX service is down): CUDA refuses "
    "fabric memory",
    USUAL: "CUDA refused fabric memory (CUDA_ERROR_NOT_PERMITTED): usually no IMEX channel "
    "open to the process",
}
DECIDES = (
    "`ls -l /dev/nvidia-caps-imex-channels/` in the process's container (a channel, e.g. "
    "channel0, readable by its user; NVIDIA_IMEX_CHANNELS or a ComputeDomain claim gives one), "
    "`systemctl status nvidia-imex` / `nvidia-imex-ctl -N` (every node of the domain Connected), "
    "and `nvidia-smi -q | grep -A4 -i fabric` (a ClusterUUID and CliqueId: the GPUs are on a "
    "multi-node NVLink fabric at all)"
)


def imex_votes(paste: Paste) -> list[Vote]:
    """The vote for ``imex-channel-unavailable`` in a paste (at most one)."""
    flat = paste.flat
    found = first_tier(flat, ((_STATED, STATED),))
    if found is None and no_nvswitch_ceiling(paste) is None:
        found = first_tier(flat, ((_REFUSED, USUAL),))
    return reading_vote(CAUSE, found, _MEANINGS, DECIDES)
