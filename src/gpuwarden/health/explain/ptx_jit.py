"""PyTorch's "not compatible" warning for a build that carries PTX the GPU can run.

torch/cuda/__init__.py (``_check_cubins``) warns "<GPU> with CUDA capability sm_NNN is not
compatible with the current PyTorch installation. The current PyTorch install supports CUDA
capabilities <arch list>." when no ``sm_`` entry of the build's arch list has the GPU's major:
it counts the cubins only (``supported_sm = [... for arch in arch_list if "sm_" in arch]``) and
prints the whole list, the ``compute_NN`` entries — the PTX the build also carries — included.
PTX is forward compatible: "PTX code produced for some specific compute capability can always be
compiled to binary code of greater or equal compute capability" (CUDA C++ Programming Guide,
"Binary Compatibility" / "PTX Compatibility"); the driver JIT-compiles it when the kernel is first
loaded. So a build whose list holds ``compute_90`` runs on an sm_120 GPU (conda-forge's CUDA 12.6
PyTorch on Blackwell: pytorch-cpu-feedstock#390, where the maintainers say only the newer
architecture's optimizations are missing). Not so for architecture-specific PTX (``compute_90a``:
its features exist on that architecture only, NVIDIA's "family-specific architecture features"),
nor for PTX of a newer capability than the GPU's (a cu128 wheel's ``compute_120`` on a Pascal
card): those leave the warning's reading as it is.

The warning alone then does not say the GPU is unsupported: the reading is capped at low, with
what decides. A failure the text's own words read as the architecture's (at medium or above)
lifts the cap: a kernel without code for this GPU — CUDA error 209 "no kernel image is available"
(a library or extension without that PTX) by its string, name or number, error 98 "invalid
device function" ("The requested device function does not exist or is not compiled for the
proper device architecture", CUDA Runtime API, cudaError) — a compiler that does not know the
GPU's architecture (ptxas, NVRTC), a library's own kernels without it. The build's PTX helps none
of these. The warning's other readings (its arch list by arithmetic, the capability-range warning,
the CUDA named beside the GPU) say what the warning says, and stay capped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpuwarden.health.explain.rank import MEDIUM, Ceiling
from gpuwarden.health.explain.text import Paste
from gpuwarden.health.explain.votes import Vote

ARCH_CAUSE = "gpu-arch-unsupported"
_WARNING_WORDS = "not compatible with the current pytorch installation"
_WARNINGS_READ = 8  # a log repeating the warning per process says the same each time
# the warning's two first lines; an arch list is at most a few dozen entries
_WARNING = re.compile(
    r"capability sm_(?P<sm>\d{2,3})a? is not compatible with the current PyTorch installation\."
    r"\s*The current PyTorch install supports CUDA capabilities\s*"
    r"(?P<archs>(?:(?:sm|compute)_\d{2,3}[a-z]?[\s,]{0,4}){1,40})",
    re.IGNORECASE,
)
# PTX for one capability, not an architecture-specific one (compute_90a, compute_100f)
_PORTABLE_PTX = re.compile(r"\bcompute_(\d{2,3})(?![a-z\d])", re.IGNORECASE)


def _runs_by_ptx(sm: int, archs: str) -> int | None:
    """The newest portable PTX capability of ``archs`` the GPU ``sm`` can JIT-compile, if any."""
    fitting = [int(m[1]) for m in _PORTABLE_PTX.finditer(archs) if int(m[1]) <= sm]
    return max(fitting, default=None)


def _failed_for_the_arch(worded: Iterable[Vote]) -> bool:
    """Whether a phrase of the text other than the warning (whose own vote quotes its words)
    reads the architecture at medium or above (``worded``: the votes the text's own phrases
    give, signatures and CUDA error numbers)."""
    return any(
        vote.cause == ARCH_CAUSE
        and vote.weight >= MEDIUM
        and _WARNING_WORDS not in vote.evidence.lower()
        for vote in worded
    )


def ptx_jit_ceiling(paste: Paste, worded: Iterable[Vote]) -> Ceiling | None:
    """The ceiling on the architecture reading of a text whose every "not compatible" warning
    lists PTX the GPU can JIT-compile, and no failure in ``worded`` (the votes the text's own
    phrases give) reads the architecture; None otherwise."""
    if not paste.mentions(_WARNING_WORDS) or _failed_for_the_arch(worded):
        return None
    covered: list[tuple[int, int]] = []
    for warning in _WARNING.finditer(paste.flat):
        sm = int(warning["sm"])
        ptx = _runs_by_ptx(sm, warning["archs"])
        if ptx is None:
            return None
        covered.append((sm, ptx))
        if len(covered) == _WARNINGS_READ:
            break
    if not covered:
        return None
    sm, ptx = covered[0]
    return Ceiling(
        score=0.4,  # one candidate: the PTX runs, unless a library without it fails
        why=f"the build's arch list holds PTX for compute_{ptx}, which the driver JIT-compiles "
        f"for sm_{sm} (PTX runs on any equal or newer capability); PyTorch's check counts only "
        "the sm_ cubins",
        decides="whether the job then fails with 'no kernel image is available' (a library or "
        "extension built without that PTX) or runs, slower at first while the driver compiles; "
        "a build with this GPU's sm_ in `torch.cuda.get_arch_list()` removes the warning",
        causes=frozenset({ARCH_CAUSE}),
    )
