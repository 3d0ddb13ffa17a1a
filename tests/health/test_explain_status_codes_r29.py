"""The held-out sets' known misses that a documented status code or wording decides (h313):
Quadrants' fatbin message with CUDA error 200/209, the memory-efficient attention's "cutlassF:
no kernel found to launch!" and a driver API result printed as "CUresult=N" — each with its
nearest look-alikes and the cost of its pattern."""

from __future__ import annotations

import re

import pytest

from gpuwarden.health.explain import explain_text, signatures
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    causes_read,
    match_after_repeated_prefixes,
    never_raise,
)

ARCH = "gpu-arch-unsupported"


def _signature_pattern(literal: str) -> re.Pattern[str]:
    """The compiled pattern of the one signature whose pattern holds ``literal``."""
    (pattern,) = [s.pattern for s in signatures.SIGNATURES if literal in s.pattern]
    return re.compile(pattern, re.IGNORECASE)


def _quadrants(what: str, number: int, sm: int, plural: str = "") -> str:
    """Quadrants' message for a prebuilt helper kernel whose module did not load
    (quadrants/runtime/cuda/graph_manager.cpp, QD_ERROR_IF after module_load_data)."""
    return (
        f"RuntimeError: Failed to load {what} kernel fatbin{plural} (CUDA error {number}). "
        f"This SM ({sm}) may not be included in the fatbin{plural} -- regenerate with "
        "scripts/build_condition_kernel_fatbin.py"
    )


@pytest.mark.parametrize(
    ("text", "confidence"),
    [
        # CUDA_ERROR_INVALID_IMAGE: the program's hint makes the architecture the usual reading
        (_quadrants("graph_do_while condition", 200, 90), Confidence.MEDIUM),
        (_quadrants("graph launch state", 200, 100, plural="s"), Confidence.MEDIUM),
        # CUDA_ERROR_NO_BINARY_FOR_GPU states it (the number table's 209 as well)
        (_quadrants("qd.checkpoint gate", 209, 120), Confidence.HIGH),
    ],
    ids=["condition-kernel-200", "launch-state-fatbins-200", "checkpoint-gate-209"],
)
def test_quadrants_fatbin_without_this_sm_reads_the_architecture(
    text: str, confidence: Confidence
) -> None:
    diagnosis = explain_text(text).diagnoses[0]
    assert (diagnosis.cause, diagnosis.confidence) == (ARCH, confidence)
    assert "QD_GRAPH=0" in diagnosis.fixes[0]
    # a reading short of certain says what decides; a certain one needs nothing more
    assert (diagnosis.decides is not None) == (confidence is Confidence.MEDIUM)


@pytest.mark.parametrize(
    "text",
    [
        # the same message for a failure that is no image's: CUDA_ERROR_OUT_OF_MEMORY (2) and
        # CUDA_ERROR_INVALID_CONTEXT (201) say nothing of the fatbin's architectures
        _quadrants("graph_do_while condition", 2, 90),
        _quadrants("graph_do_while condition", 201, 120),
        # CUDA's own invalid-image error without the program's hint: a corrupt or mis-built module
        # as much as an architecture (cuda.h: "the device kernel image is invalid")
        "ERROR: LoadError: CUDA error: device kernel image is invalid (code 200, "
        "ERROR_INVALID_IMAGE)",
        "RuntimeError: CUDA error 200 while loading the module",
        # an HTTP client's status 200 beside a fatbin's name
        "GET https://example.org/kernels/condition_kernel.fatbin -> HTTP error 200 (OK)",
    ],
    ids=["out-of-memory-2", "invalid-context-201", "julia-invalid-image", "bare-200", "http-200"],
)
def test_error_200_without_quadrants_hint_is_no_architecture(text: str) -> None:
    assert ARCH not in causes_read(text)


def test_quadrants_pattern_stays_on_one_message() -> None:
    pattern = _signature_pattern("may not be ")
    whole = _quadrants("graph_do_while condition", 200, 120).removeprefix(
        "RuntimeError: Failed to load graph_do_while condition "
    )
    whole = whole.removesuffix(" -- regenerate with scripts/build_condition_kernel_fatbin.py")
    cut = "kernel fatbin (CUDA error 200). This SM (120) may not be "
    assert match_after_repeated_prefixes(pattern, cut, whole) == whole


CUTLASSF = "RuntimeError: cutlassF: no kernel found to launch!"
SDPA_TRACEBACK = (
    "  File modeling_llama.py, line 726, in LlamaSdpaAttention.forward\n"
    "    attn_output = torch.nn.functional.scaled_dot_product_attention(\n" + CUTLASSF
)


@pytest.mark.parametrize("text", [CUTLASSF, SDPA_TRACEBACK], ids=["bare", "sdpa-traceback"])
def test_cutlassf_without_a_kernel_reads_the_architecture_never_high(text: str) -> None:
    diagnosis = explain_text(text).diagnoses[0]
    assert (diagnosis.cause, diagnosis.confidence) == (ARCH, Confidence.MEDIUM)
    assert diagnosis.decides is not None and "dtype" in diagnosis.decides
    assert "float16" in diagnosis.fixes[0]


@pytest.mark.parametrize(
    "text",
    [
        # code naming the line as what it avoids
        '# To prevent "cutlassF: no kernel found to launch!" erorr\n'
        "torch.backends.cuda.enable_mem_efficient_sdp(False)",
        "This fixes the cutlassF: no kernel found to launch! error on T4",
        # xFormers' build report: an operator not built, not a launch that found no kernel
        "memory_efficient_attention.cutlassF:               unavailable",
    ],
    ids=["comment-prevents", "prose-fixes", "xformers-info"],
)
def test_cutlassf_quoted_or_listed_is_no_architecture(text: str) -> None:
    assert ARCH not in causes_read(text)


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        (
            "Reason: cuGraphLaunch failed. CUresult=700",
            ("illegal-memory-access", Confidence.MEDIUM),
        ),
        ("cuModuleLoadData: CUresult: 209", (ARCH, Confidence.HIGH)),
        ("cuStreamSynchronize returned CUresult = 719", ("launch-failure", Confidence.LOW)),
    ],
    ids=["700", "209", "719"],
)
def test_a_number_named_a_curesult_is_read_as_the_drivers(
    text: str, reading: tuple[str, Confidence]
) -> None:
    assert cause_readings(text)[0] == reading


@pytest.mark.parametrize(
    "text",
    [
        # below 100 the driver counts otherwise (its 4 is CUDA_ERROR_DEINITIALIZED, the runtime's
        # legacy 4 a launch failure): two digits and one are not read
        "cuCtxSynchronize failed. CUresult=4",
        "CUresult=0",
        # a longer figure is no result code
        "CUresult=70000 bytes mapped",
        # another library's status in the same shape (cuBLAS' 14 is CUBLAS_STATUS_INTERNAL_ERROR)
        "cublasStatus_t=14",
    ],
    ids=["deinitialized-4", "success-0", "five-digits", "cublas-status"],
)
def test_curesult_look_alikes_read_no_cuda_number(text: str) -> None:
    assert cause_readings(text) == []


test_the_new_readings_never_raise = never_raise(
    [
        "kernel fatbin (CUDA error 200). This SM (",
        "120) may not be included in the fatbin",
        "cutlassF: no kernel found to launch!",
        "To prevent ",
        "CUresult=",
        "700",
        " ",
    ]
)
