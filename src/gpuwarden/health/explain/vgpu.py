"""Texts from the hypervisor side of NVIDIA vGPU, where CUDA does not run.

Under NVIDIA vGPU the hypervisor host runs the vGPU Manager (the ``-vgpu-kvm`` driver package,
the ``nvidia-vgpu-mgr`` daemon) and each VM runs the vGPU guest driver of the same release; the
vGPU user guide pairs guest and host drivers by release and CUDA runs in the guests. The vGPU
Manager carries no CUDA (its ``nvidia-smi`` shows no CUDA version), so "CUDA driver version is
insufficient" on the host — or in a VM where the host package was installed by mistake — does
not mean a driver too old for the toolkit: the wrong driver flavour is installed. Those readings
stay below certainty there and say what decides.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.rank import Ceiling
from gpuwarden.health.explain.text import Paste

# The vGPU Manager named: its package, its daemon, its name.
_VGPU_MANAGER = re.compile(
    r"-vgpu-kvm\b|\bvgpu[- ]kvm\b|nvidia-vgpu-mgr|\bvGPU manager\b",
    re.IGNORECASE,
)
_WORDS = ("vgpu",)

# The readings that presume a CUDA-capable driver was installed.
CUDA_DRIVER_CAUSES = frozenset(
    {"driver-too-old", "driver-not-loaded", "nvml-driver-mismatch", "container-runtime-not-nvidia"}
)

VGPU_MANAGER_CEILING = Ceiling(
    score=0.5,  # one candidate: the vGPU Manager has no CUDA at all
    why="the text names the vGPU Manager (the hypervisor's driver), which carries no CUDA",
    decides="where it runs: on the hypervisor host CUDA is not available (run it in a VM); in "
    "a VM, install the vGPU guest driver of the host's vGPU release, not the -vgpu-kvm "
    "package (`nvidia-smi` in the guest then shows a CUDA Version, and `nvidia-smi -q | grep "
    "-i 'virtualization mode'` says VGPU)",
    causes=CUDA_DRIVER_CAUSES,
)


def vgpu_manager_ceiling(paste: Paste) -> Ceiling | None:
    """The ceiling on the CUDA-driver readings of a text that names the vGPU Manager; None
    otherwise."""
    if not paste.shows(_WORDS, _VGPU_MANAGER):
        return None
    return VGPU_MANAGER_CEILING
