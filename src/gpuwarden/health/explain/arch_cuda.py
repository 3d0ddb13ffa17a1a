"""A GPU named in the paste against the CUDA toolkit named in it: a GPU newer than every CUDA in
the text has no kernels (nor cuBLAS/cuDNN code) in that build, whatever the error says.

The classic case is an Ampere card (sm_86, CUDA ≥ 11.1) with a CUDA 10 / cudatoolkit 10.x
framework: cuBLAS fails with CUBLAS_STATUS_EXECUTION_FAILED, cuDNN with NOT_INITIALIZED, or a
kernel with "no kernel image". The first CUDA per architecture comes from the catalog
(``catalog/data/gpu_arch.csv``: NVIDIA's compute-capability pages, clang's minimum CUDA per
sm_XX). Conservative: it votes only when every CUDA version the text names is older than the
first CUDA with code that runs on the GPU (a paste that also names a recent CUDA — an
``nvidia-smi`` header, an upgrade already tried — says nothing for sure). That first CUDA is the
one for the first sm of the GPU's major: cubins are binary-compatible within a major (CUDA C++
Programming Guide, "Binary Compatibility": code for X.y runs on X.z, z ≥ y), so a CUDA 11.7
build's sm_86 cubins run on an RTX 4090 (sm_89, first targeted natively by CUDA 11.8).
cuFFT is the exception: it does not keep that guarantee (pytorch#88038: CUDA 11.7's cuFFT fails
with CUFFT_INTERNAL_ERROR on an RTX 4090, 11.8's works), so beside a cuFFT error the GPU needs
the first CUDA of its own sm.
"""

from __future__ import annotations

import itertools
import re

from gpuwarden.catalog.compat import first_cuda_for_major, gpu_arch_for, parse_version
from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.environment import ArchInfo

_I = re.IGNORECASE
# the search runs only when one of these is in the (lower-case) text
GPU_WORDS = ("rtx", "gtx", "a100", "a10", "a30", "a40", "h100", "h200", "h800", "l40", "b200")
# product names as people and nvidia-smi write them: "GeForce RTX 3080 Ti", "RTX 4090",
# "A100-SXM4-40GB", "H100 80GB HBM3", "L40S"
_GPU = re.compile(
    r"(?<![a-z0-9])(?:(?:geforce\s*)?(?:rtx|gtx)\s*\d{4}(?:\s*ti)?|"
    r"(?:a100|a10g?|a30|a40|h100|h200|h800|gh200|l40s?|b200))(?![a-z0-9])",
    _I,
)
# a toolkit version: "CUDA 10.0", "cudatoolkit 10.0", "cuda=11.3", "CUDA Version: 12.2",
# "cuda-toolkit 10.2", "cu102" (a wheel tag: 3 digits = major.minor)
_CUDA = re.compile(
    r"(?<![a-z0-9])(?:cuda\s*+(?:-?\s*+toolkit|tookit|version)?|cudatoolkit)\s*+[:=]?\s*+"
    r"(?P<v>\d{1,2}\.\d)(?![\d])|(?<![a-z0-9])cu(?P<tag>\d{2})(?P<minor>\d)(?![\d])",
    _I,
)
# a cuFFT error: the library that needs a CUDA with the GPU's own sm (module docstring)
_NATIVE_ONLY = re.compile(r"cufft", _I)
_SPACED = re.compile(r"(?<=rtx|gtx)(?=\d)", _I)  # "rtx4090" written for "RTX 4090"
_WEIGHT = 0.75  # the usual reading: the build cannot run on the GPU; the error is its symptom
_MATCHES_READ = 50  # a log repeating one GPU name thousands of times names it once


def cuda_versions(flat: str) -> list[str]:
    """The CUDA toolkit versions the text names ("CUDA 12.4", "cu121" as "12.1"), in order."""
    found = []
    for m in itertools.islice(_CUDA.finditer(flat), _MATCHES_READ):
        found.append(m["v"] if m["v"] else f"{int(m['tag'])}.{m['minor']}")
    return found


def _gpus(flat: str) -> dict[str, ArchInfo]:
    names = dict.fromkeys(
        " ".join(_SPACED.sub(" ", m[0]).split())
        for m in itertools.islice(_GPU.finditer(flat), _MATCHES_READ)
    )
    gpus: dict[str, ArchInfo] = {}
    for name in names:
        info = gpu_arch_for(name)
        if info is not None and info.first_cuda is not None:
            gpus[name] = info
    return gpus


def first_cuda_with_code_for(info: ArchInfo) -> str | None:
    """The first CUDA whose cubins run on the GPU: its major's first sm, or its own when the
    major is not in the table."""
    major = info.compute_capability.split(".")[0]
    return (first_cuda_for_major(int(major)) or info.first_cuda) if major.isdigit() else None


def _needs(info: ArchInfo, first: str | None) -> str:
    if first == info.first_cuda:
        return f"needs CUDA ≥ {first}"
    return f"needs CUDA ≥ {first} (≥ {info.first_cuda} natively, {first} through an earlier sm)"


def arch_cuda_votes(flat: str) -> list[Vote]:
    """A vote for ``gpu-arch-unsupported`` when a GPU the paste names is newer than every CUDA
    toolkit version the paste names."""
    versions = [(parse_version(v), v) for v in cuda_versions(flat)]
    known = [(parsed, v) for parsed, v in versions if parsed is not None]
    if not known:
        return []
    newest, newest_text = max(known)
    native_only = _NATIVE_ONLY.search(flat) is not None
    votes = []
    for name, info in _gpus(flat).items():
        first_text = info.first_cuda if native_only else first_cuda_with_code_for(info)
        first = parse_version(first_text)
        if first is None or newest >= first:
            continue
        votes.append(
            Vote(
                "gpu-arch-unsupported",
                _WEIGHT,
                f"{name} ({info.architecture}, {info.sm}) {_needs(info, first_text)}; the newest "
                f"CUDA named here is {newest_text}: that build has no code for this GPU",
            )
        )
    return votes
