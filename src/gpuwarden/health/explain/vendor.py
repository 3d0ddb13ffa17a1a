"""Texts from a machine whose only graphics adapter the paste names is not NVIDIA's.

explain's causes presuppose an NVIDIA GPU: "could not select device driver ... [[gpu]]" reads as
a missing NVIDIA Container Toolkit, "no CUDA-capable device" as a driver or runtime problem. On a
laptop with only Intel (or AMD) graphics the same messages have a simpler cause: there is no
NVIDIA GPU to give the container. When the paste describes the machine's graphics as another
vendor's and never mentions NVIDIA hardware, its readings stay below certainty and say what
decides.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.rank import Ceiling
from gpuwarden.health.explain.text import Paste

# How Linux (Mesa's renderer string, lspci) and Windows name the integrated and discrete
# adapters of the other vendors.
_OTHER_VENDOR_GPU = re.compile(
    r"\bMesa Intel\b|"
    r"\bIntel(?:®|\(R\))?\s*(?:Corporation\s+)?(?:UHD|HD|Iris(?:\s*(?:Xe|Plus|Pro))?|Xe|Arc)"
    r"(?:\s*\w+)?\s*Graphics\b|"
    r"\bAMD\s+Radeon\b|\bRadeon\s*(?:RX|Pro|Vega|Graphics)\b",
    re.IGNORECASE,
)
_WORDS = ("intel", "radeon")  # literal prefilter (lower case)
# Any sign of an NVIDIA GPU or its driver in the paste: then the other adapter is a second one.
_NVIDIA_HARDWARE = re.compile(
    r"nvidia|geforce|quadro|tesla|\b[rg]tx\s*\d|\b[ahlvtbk]\d{2,3}\b|cuda version|"
    r"driver version",
    re.IGNORECASE,
)

NON_NVIDIA_CEILING = Ceiling(
    score=0.6,  # the usual reading at best: the machine may have no NVIDIA GPU at all
    why="the paste names only a non-NVIDIA graphics adapter (Intel/AMD): the reading presumes "
    "an NVIDIA GPU",
    decides="`lspci | grep -i nvidia` on the machine (nothing = no NVIDIA GPU: run on the CPU "
    "or on a machine with one)",
)


# Ascend's torch_npu: its caching allocator's "NPU out of memory. Tried to allocate …"
# (torch_npu/csrc/core/npu/NPUCachingAllocator.cpp) and the variable its hint names,
# PYTORCH_NPU_ALLOC_CONF. The message is PyTorch's CUDA one with NPU in place of GPU, so the
# readings carry over, but their evidence and fixes presume NVIDIA's stack (nvidia-smi, the CUDA
# context): at most the usual reading, and Ascend's own tools decide.
_ASCEND_TEXT = re.compile(r"\bNPU out of memory\b|\bPYTORCH_NPU_ALLOC_CONF\b")
_ASCEND_WORDS = ("npu",)  # literal prefilter (lower case)

ASCEND_CEILING = Ceiling(
    score=0.8,  # below rank.HIGH: the usual reading at best
    why="an Ascend NPU message (torch_npu): the reading follows the CUDA one, whose evidence and "
    "fixes are NVIDIA's",
    decides="Ascend's own tools: `npu-smi info` (each NPU's HBM in use and the processes on it), "
    "torch_npu.npu.memory_summary() at the failure",
)


def ascend_ceiling(paste: Paste) -> Ceiling | None:
    """The ceiling on a text from Ascend's torch_npu; None for any other text."""
    if not paste.shows(_ASCEND_WORDS, _ASCEND_TEXT):
        return None
    return ASCEND_CEILING


def non_nvidia_ceiling(paste: Paste) -> Ceiling | None:
    """The ceiling on a text from a machine with only another vendor's GPU; None otherwise."""
    if not paste.shows(_WORDS, _OTHER_VENDOR_GPU):
        return None
    if _NVIDIA_HARDWARE.search(paste.flat) is not None:
        return None
    return NON_NVIDIA_CEILING
