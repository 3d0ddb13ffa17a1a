"""Review r26c of this stop's explain readings: Windows' "procedure entry point" message read for
a CUDA library only when the missing function begins with that library's prefix, and a PyTorch
OOM's shortfall judged "covered by another holder" only from bytes the message does not give to
this process."""

from __future__ import annotations

import pytest

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, causes_read


@pytest.mark.parametrize(
    "text",
    [
        # Unity's Barracuda (a non-CUDA inference library): "cuda" inside another word
        "The procedure entry point BarracudaInit could not be located in the dynamic link "
        "library Barracuda.dll.",
        # "curand" inside another word
        "The procedure entry point ProcurandomSeed could not be located in the dynamic link "
        "library helpers.dll.",
        # "cupti" inside another word
        "The procedure entry point OcuptionInit could not be located in the dynamic link "
        "library occ.dll.",
    ],
    ids=["barracuda", "procurand", "ocupti"],
)
def test_entry_point_with_a_cuda_word_inside_another_name_is_no_library_conflict(
    text: str,
) -> None:
    # failed before: library-conflict high (the library prefix matched anywhere in the name)
    assert "library-conflict" not in causes_read(text)


@pytest.mark.parametrize(
    ("function", "library"),
    [
        ("cublasLt_for_cublas_TST", "D:\\CUDA\\bin\\cublas64_11.dll"),
        ("cudnnGetLibConfig", "C:\\CUDA\\v11.8\\bin\\cudnn_ops_infer64_8.dll"),
        ("__nvJitLinkCreate_12_0", "C:\\CUDA\\v12.0\\bin\\nvJitLink_120_0.dll"),
        ("ncclCommInitRank", "C:\\nccl\\nccl.dll"),
    ],
)
def test_entry_point_of_a_cuda_library_still_reads_library_conflict(
    function: str, library: str
) -> None:
    text = (
        f"The procedure entry point {function} could not be located in the dynamic link "
        f"library {library}."
    )
    assert cause_readings(text) == [("library-conflict", Confidence.HIGH)]


# PyTorch 2.x's numbers with the non-PyTorch bytes given to this process: 23.65 GiB total, 1.06
# free, 18 reserved (15 allocated + 3 cached), so 4.59 GiB outside PyTorch; 7 GiB tried is 2.94
# short. "this process has 22.58 GiB" (or the one listed process being this one, 22.58 ≥ 18
# reserved) leaves 23.65 − 1.06 − 22.58 = 0.01 GiB to any other holder: nothing else could
# cover the shortfall, the job alone needs more than the GPU.
_NUMBERS = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.00 GiB. GPU 0 has a total "
    "capacity of 23.65 GiB of which 1.06 GiB is free. {holder} Of the allocated memory 15.00 GiB "
    "is allocated by PyTorch, and 3.00 GiB is reserved by PyTorch but unallocated."
)


@pytest.mark.parametrize(
    "holder",
    [
        "Including non-PyTorch memory, this process has 22.58 GiB memory in use.",
        "Process 12345 has 22.58 GiB memory in use.",
    ],
    ids=["this-process", "listed-self"],
)
def test_outside_bytes_of_this_process_do_not_make_the_shortfall_covered(holder: str) -> None:
    # failed before: oom-too-big medium (0.6), and for "this process has" another process
    # ranked first, though the message gives every byte outside PyTorch to this process
    readings = cause_readings(_NUMBERS.format(holder=holder))
    assert readings[0] == ("oom-too-big", Confidence.HIGH)


def test_outside_bytes_nobody_is_given_still_leave_the_shortfall_open() -> None:
    # the same numbers without a holder: 4.59 GiB outside, less a context, covers 2.94 short
    readings = cause_readings(_NUMBERS.format(holder=""))
    assert readings[:2] == [
        ("oom-other-process", Confidence.MEDIUM),
        ("oom-too-big", Confidence.MEDIUM),
    ]
