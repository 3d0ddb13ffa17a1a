"""Numbers the version and compatibility messages state, read into evidence: the CUDA the driver
supports, the GPU's architecture against the build's, the cuDNN built against and loaded."""

from __future__ import annotations

import re

from gpuwarden.health.explain.votes import Vote

_I = re.IGNORECASE
# the parsers below run only when one of these is in the text (anchors.py: cost per MB)
DETAIL_WORDS = (
    "too old", "not compatible", "capability", "unsatisfied condition", "compiled against",
    "compiled with", "client has the version", "nvml library version",
)  # fmt: skip
_FOUND_VERSION = re.compile(r"too old \(found version (?P<v>\d{4,6})\)", _I)
_SM = re.compile(
    r"(?P<sm>sm_\d+a?) is not compatible with the current PyTorch installation.{0,200}?"
    r"supports CUDA capabilities\s*(?P<built>(?:sm_\d+a?[\s,]*)+)",
    _I,
)
_CAPABILITY = re.compile(
    r"cuda capability (?P<have>\d+\.\d+).{0,300}?minimum cuda capability (?:supported by this "
    r"library is|that we support is)\s*(?P<min>\d+\.\d+)",
    _I,
)
_CLI_CUDA = re.compile(r"unsatisfied condition:?\s*cuda\s*>=?\s*(?P<v>[\d.]+\d)", _I)
_CUDNN = re.compile(
    r"compiled against \((?P<a>[\d, ]+)\) but linked against \((?P<b>[\d, ]+)\)|"
    r"Loaded runtime CuDNN library:?\s*(?P<c>[\d.]+\d)\s*but source was compiled with:?\s*"
    r"(?P<d>[\d.]+\d)",
    _I,
)
_API_MISMATCH = re.compile(
    r"client has the version (?P<lib>[\d.]+\d),? but\s*this kernel module has the version "
    r"(?P<mod>[\d.]+\d)",
    _I,
)
_NVML_LIBRARY = re.compile(r"NVML library version:?\s*(?P<v>[\d.]+\d)", _I)


def _cuda_of(found: int) -> str:
    """cudaDriverGetVersion's integer: 1000 × major + 10 × minor (11040 → 11.4)."""
    return f"{found // 1000}.{(found % 1000) // 10}"


def _dotted(text: str) -> str:
    return ".".join(part.strip() for part in text.split(","))


def detail_votes(flat: str) -> list[Vote]:
    votes: list[Vote] = []
    if (m := _FOUND_VERSION.search(flat)) is not None:
        votes.append(
            Vote(
                "driver-too-old",
                0.95,
                f"found version {m['v']}: the driver supports "
                f"CUDA up to {_cuda_of(int(m['v']))}, older than this build's CUDA",
            )
        )
    if (m := _CLI_CUDA.search(flat)) is not None:
        votes.append(
            Vote(
                "driver-too-old",
                0.95,
                f"the image requires CUDA ≥ {m['v']}, more than the host driver supports",
            )
        )
    if (m := _SM.search(flat)) is not None:
        built = " ".join(m["built"].replace(",", " ").split())
        votes.append(
            Vote(
                "gpu-arch-unsupported",
                0.95,
                f"the GPU is {m['sm']}; this build has kernels for {built}",
            )
        )
    if (m := _CAPABILITY.search(flat)) is not None:
        votes.append(
            Vote(
                "gpu-arch-unsupported",
                0.95,
                f"the GPU's compute capability {m['have']} is below the build's minimum {m['min']}",
            )
        )
    if (m := _CUDNN.search(flat)) is not None:
        built, loaded = (_dotted(m["a"]), _dotted(m["b"])) if m["a"] else (m["d"], m["c"])
        votes.append(
            Vote(
                "library-conflict",
                0.95,
                f"built against cuDNN {built}, but cuDNN {loaded} was loaded",
            )
        )
    if (m := _API_MISMATCH.search(flat)) is not None:
        votes.append(
            Vote("nvml-driver-mismatch", 0.95, f"libraries {m['lib']}, kernel module {m['mod']}")
        )
    elif (m := _NVML_LIBRARY.search(flat)) is not None and "mismatch" in flat.lower():
        votes.append(
            Vote(
                "nvml-driver-mismatch",
                0.95,
                f"NVML library {m['v']} does not match the loaded kernel module",
            )
        )
    return votes
