"""PyTorch's capability-range warning, read by its numbers.

torch/cuda/__init__.py (``_check_capability``) warns when a GPU's compute capability lies
outside the range its build was compiled for: "Found GPU0 NVIDIA GB10 which is of cuda capability
12.1. Minimum and Maximum cuda capability supported by this version of PyTorch is (8.0) - (12.0)".
The warning alone does not say the build cannot run on the GPU:

- below the minimum (a Pascal card and a cu128 wheel, whose range starts at 7.0): the build has
  no code for the GPU — the architecture is unsupported;
- above the maximum in a newer major (12.0 against a range ending at 9.0): no cubin of the GPU's
  major, the same;
- above the maximum in the same major (12.1 against 12.0): cubins are binary-compatible within a
  major (CUDA C++ Programming Guide, "Binary Compatibility": code for X.y runs on X.z, z ≥ y), so
  the build's 12.0 code runs on the 12.1 GPU and the warning is no failure (pytorch#172629, the
  maintainers' fix pytorch#166185) — no vote.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.votes import Vote

WORDS = ("minimum and maximum cuda capability",)  # literal prefilter (lower case)
# A capability's major and minor have one or two digits (1.0 to 12.x): at most three are read,
# so a number of thousands of digits is no match rather than an int() that raises.
_PART = r"\d{1,3}"
_RANGE = re.compile(
    rf"which is of cuda capability (?P<major>{_PART})\.(?P<minor>{_PART})\.?\s*"
    r"Minimum and Maximum cuda capability supported by this version of PyTorch is\s*"
    rf"\((?P<lo_major>{_PART})\.(?P<lo_minor>{_PART})\)\s*-\s*"
    rf"\((?P<hi_major>{_PART})\.(?P<hi_minor>{_PART})\)",
    re.IGNORECASE,
)
_BELOW = 0.9  # the message states it: the GPU is older than any code in the build
_NEWER_MAJOR = 0.85  # no cubin of the GPU's major; PTX in the build could still JIT
_DECIDES = (
    'python -c "import torch; print(torch.cuda.get_arch_list(), '
    'torch.cuda.get_device_capability())"'
)


def _pair(match: re.Match[str], major: str, minor: str) -> tuple[int, int]:
    return int(match[major]), int(match[minor])


def capability_range_votes(flat: str) -> list[Vote]:
    """A vote for ``gpu-arch-unsupported`` when PyTorch's capability-range warning puts the GPU
    below the build's minimum or in a newer major than its maximum; none for a GPU in the
    maximum's major (its code runs there) or inside the range."""
    match = _RANGE.search(flat)
    if match is None:
        return []
    gpu = _pair(match, "major", "minor")
    lowest = _pair(match, "lo_major", "lo_minor")
    highest = _pair(match, "hi_major", "hi_minor")
    shown = f"compute capability {gpu[0]}.{gpu[1]}"
    built = f"({lowest[0]}.{lowest[1]}) - ({highest[0]}.{highest[1]})"
    if gpu < lowest:
        weight, relation = _BELOW, "is below"
    elif gpu[0] > highest[0]:
        weight, relation = _NEWER_MAJOR, "is a newer major than"
    else:
        return []
    evidence = f"PyTorch: the GPU's {shown} {relation} the build's range {built}"
    return [Vote("gpu-arch-unsupported", weight, evidence, _DECIDES)]
