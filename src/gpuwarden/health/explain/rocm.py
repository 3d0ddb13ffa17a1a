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

# What only a HIP runtime prints (PyTorch's ROCm build, HIP's own error names, and the ROCm
# stream executor of TensorFlow and XLA, whose rocm_driver.cc, ToString(hipError_t), names an
# error "HIP_ERROR_" + its hipError name: "failed to allocate … from device:
# HIP_ERROR_OutOfMemory"), and ROCm's HSA runtime (ROCR-Runtime, core/runtime/runtime.cpp,
# Runtime::FreeMemory: when the kernel driver fails to free an allocation it prints "Memory
# critical error by agent node-%u (Agent handle: %p) on address %p. Reason: Memory in use." and
# aborts). Not "ROCm" alone: PyTorch's collect_env prints "ROCM used to build PyTorch: N/A" in
# NVIDIA reports too.
_HIP_TEXT = re.compile(
    r"\bHIP out of memory|PYTORCH_HIP_ALLOC_CONF|\bhipError[A-Z]\w*|\bHIP error\b|"
    r"\bHIP kernel errors\b|HIP_LAUNCH_BLOCKING|\bNo HIP GPUs\b|\bhipMalloc\w*|"
    r"\bHIP_ERROR_[A-Z]\w*|\bMemory critical error by agent node-\d"
)
_WORDS = ("hip", "agent node-")  # literal prefilter (lower case)

# When nothing matched a ROCm text: what to capture there. explainer.NEXT_STEPS names NVIDIA's
# kernel messages (NVRM, Xid), nvidia-smi and torch.version.cuda, which a ROCm machine has not;
# the amdgpu driver logs its resets, page faults and ring timeouts under "amdgpu", and a ROCm
# build of PyTorch sets torch.version.hip (torch.version.cuda is None there).
ROCM_NEXT_STEPS = (
    "the full traceback, from the first error line (the last lines are often an echo)",
    "`dmesg -T | grep -i amdgpu` on the node (the amdgpu driver's GPU resets, page faults and "
    "ring timeouts)",
    "`rocminfo` (the GPU's gfx target, and whether it is an APU sharing system memory) and "
    "`rocm-smi --showmeminfo vram --showpids` (who holds the memory)",
    'the versions: python -c "import torch; print(torch.__version__, torch.version.hip)" '
    "(the ROCm release the build targets)",
)

ROCM_CEILING = Ceiling(
    score=0.8,  # below rank.HIGH: the usual reading at best
    why="a ROCm/HIP message: the reading follows the CUDA one, whose evidence and fixes are "
    "NVIDIA's",
    decides="ROCm's own tools: `rocm-smi --showmeminfo vram --showpids` (who holds the memory), "
    "`rocminfo` (the gfx target, and whether the device is an APU sharing system memory)",
    next_steps=ROCM_NEXT_STEPS,
)


def rocm_ceiling(paste: Paste) -> Ceiling | None:
    """The ceiling on a ROCm text's diagnoses; None for any other text."""
    if not paste.shows(_WORDS, _HIP_TEXT):
        return None
    return ROCM_CEILING
