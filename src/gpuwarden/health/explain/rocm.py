"""Texts from AMD's ROCm/HIP stack.

explain's causes, their evidence rules and fixes are NVIDIA's (CUDA, NVML, nvidia-smi, the NVIDIA
Container Toolkit). PyTorch prints the same messages on ROCm with HIP in place of CUDA ("HIP out
of memory", "HIP error: …", PYTORCH_HIP_ALLOC_CONF), so a reading carries over, but never with
certainty: the fixes name NVIDIA's tools, and what ROCm reports as a device's capacity differs —
an APU (Strix Halo, MI300A) reports memory it shares with the OS and every CPU program, so bytes
"held outside PyTorch" need not be another GPU process. A ROCm text's diagnoses are therefore at
most medium, and say what to look at on ROCm instead.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.rank import Ceiling
from gpuwarden.health.explain.text import Paste

# What only a HIP runtime prints (PyTorch's ROCm build, HIP's own error names). Not "ROCm" alone:
# PyTorch's collect_env prints "ROCM used to build PyTorch: N/A" in NVIDIA reports too.
_HIP_TEXT = re.compile(
    r"\bHIP out of memory|PYTORCH_HIP_ALLOC_CONF|\bhipError[A-Z]\w*|\bHIP error\b|"
    r"\bHIP kernel errors\b|HIP_LAUNCH_BLOCKING|\bNo HIP GPUs\b|\bhipMalloc\w*"
)
_WORDS = ("hip",)  # literal prefilter (lower case)

ROCM_CEILING = Ceiling(
    score=0.8,  # below rank.HIGH: the usual reading at best
    why="a ROCm/HIP message: the reading follows the CUDA one, whose evidence and fixes are "
    "NVIDIA's",
    decides="ROCm's own tools: `rocm-smi --showmeminfo vram --showpids` (who holds the memory), "
    "`rocminfo` (the gfx target, and whether the device is an APU sharing system memory)",
)


def rocm_ceiling(paste: Paste) -> Ceiling | None:
    """The ceiling on a ROCm text's diagnoses; None for any other text."""
    if not paste.shows(_WORDS, _HIP_TEXT):
        return None
    return ROCM_CEILING
