"""explain_text on the hundred-and-eleventh held-out set (tests/data/explain/heldout111.jsonl,
SOURCES.md, notes/heldout111.md): GitHub issues and pull requests opened 2019-2026 of ML
compilers, GPU kernel DSLs and their runtimes on NVIDIA GPUs (apache/tvm, mlc-ai/mlc-llm,
tinygrad/tinygrad, NVIDIA/cutlass's CuTe DSL, NVIDIA/warp, modular/modular's Mojo / MAX and
iree-org/iree were the ones the searches gave) whose text holds a GPU error, every in-frame text
the issues corpus gave in its order, labelled from the thread before explain was run on them.
26 texts: 13 labelled (illegal-memory-access 4, gpu-arch-unsupported 3, driver-too-old 2,
kernel-shared-memory-exceeded 2, oom-too-big, oom-framework-pool), 13 `unknown` (TVM's CUDA
initialization error, CUDA_ERROR_INVALID_IMAGE on a Jetson and CUDA_ERROR_INVALID_PTX, tinygrad's
invalid PTX, Mojo's PTX JIT on a GTX 970, IREE's CUDA_ERROR_INVALID_VALUE three times, MLC's
CUDA_ERROR_NO_BINARY_FOR_GPU on WSL2, CuTe DSL's cudaErrorInvalidValue, MAX's missing
cublasCreate_v2, tinygrad's OpenCL allocation failure and "CUDA Error 2, out of memory")."""

from __future__ import annotations

import pytest

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    never_raise,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h273/measure.py): labelled 9/13 right (no answer 3/13, wrong
# 1/13), unknown texts given a high cause 2/13. Three misses were wordings their printing
# programs document — IREE's runtime ("requested shared memory size of N larger than allowed
# size of M", its CUDA / HIP native_executable.c) and compiler ("exceeded GPU memory limit of M
# bytes for function. Got N bytes", LLVMGPUCheckIRBeforeLLVMConversion) shared-memory checks, and
# Mojo / MAX's minimum-driver check (quoted by Modular in modular/modular#6519) — now read; those
# three rows are calibration. After: labelled 12/13 right, unknown read high 2/13; no earlier
# diagnosis moved (every set, the OOM files and the fixtures dumped before and after).
MIN_ACCURACY = 0.9
KNOWN_MISSES: dict[str, str] = {
    "tinygrad-cuda-lru-allocator-cumemalloc-oom-cache-not-freed-tg-2175": (
        "pycuda's bare 'cuMemAlloc failed: out of memory' states no numbers and no allocator: "
        "that tinygrad's LRU cache held the memory is the thread's reading, not the message's, "
        "so explain stays at the usual at-the-limit reading (low)"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "mlc-llm-wsl2-rtx3060-cumoduleloaddata-no-binary-for-gpu-mlc-1863": (
        "CUDA_ERROR_NO_BINARY_FOR_GPU is the driver's 'no kernel image is available for this "
        "device' (gpu-arch-unsupported, as earlier sets label it); this thread was closed with "
        "a pointer to newer commands and never says which library lacked the RTX 3060's arch"
    ),
    "max-gemma3-draft-dlsym-undefined-cublascreate-v2-mod-5542": (
        "an undefined cublasCreate_v2 in the process is read as a library the loader did not "
        "resolve (library-conflict), the usual reading of an undefined CUDA-library symbol; the "
        "draft PR was opened for Modular to investigate and does not settle it"
    ),
}

HELDOUT111 = load_set("heldout111")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT111,
    sets_before(111),
    size=(15, 30),
    min_unknown=13,
    min_causes=6,
    min_repositories=7,
    min_categories=26,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

IREE_RUNTIME = "iree-cuda-hal-executable-shared-memory-819200-over-166912-iree-12975"
IREE_COMPILER = "iree-cuda-compile-func-exceeded-gpu-memory-limit-166912-iree-13202"
MOJO_DRIVER = "mojo-devicecontext-driver-570-below-580-minimum-mod-6519"


@pytest.mark.parametrize(
    ("example_id", "cause"),
    [
        (IREE_RUNTIME, "kernel-shared-memory-exceeded"),
        (IREE_COMPILER, "kernel-shared-memory-exceeded"),
        (MOJO_DRIVER, "driver-too-old"),
    ],
)
def test_the_calibration_rows_are_read_high(example_id: str, cause: str) -> None:
    # each failed before the change (no diagnosis at all)
    assert cause_readings(text_of(HELDOUT111, example_id))[0] == (cause, Confidence.HIGH)


@pytest.mark.parametrize(
    "message",
    [
        # IREE's current CUDA HAL (bytes stated) and its HIP / HSA drivers (the function named)
        "iree/runtime/src/iree/hal/drivers/cuda/native_executable.c:215: OUT_OF_RANGE; "
        "requested shared memory size of 98304 bytes larger than allowed size of 65536 bytes",
        "INVALID_ARGUMENT; function 'matmul_dispatch_0' requested shared memory size of 131072 "
        "bytes larger than allowed size of 65536 bytes",
        "error: 'func.func' op exceeded GPU memory limit of 101376 bytes for function. Got "
        "147456 bytes",
    ],
)
def test_iree_shared_memory_checks_with_the_request_over_the_limit_are_read_high(
    message: str,
) -> None:
    assert cause_readings(message)[0] == ("kernel-shared-memory-exceeded", Confidence.HIGH)


def test_iree_numbers_that_do_not_show_the_limit_passed_are_not_read_high() -> None:
    # a mangled paste (request below the limit): the phrase stays a candidate, never high
    message = "Requested shared memory size of 4096 larger than allowed size of 166912"
    readings = cause_readings(message)
    assert ("kernel-shared-memory-exceeded", Confidence.HIGH) not in readings
    assert "kernel-shared-memory-exceeded" in {cause for cause, _ in readings}


def test_mojo_minimum_driver_check_alone_reads_driver_too_old() -> None:
    message = "MAX requires a minimum driver version of 580 and CUDA version 13.0."
    assert cause_readings(message)[0] == ("driver-too-old", Confidence.HIGH)


def test_mojo_other_device_context_errors_are_not_read_as_the_driver() -> None:
    # the PTX JIT failure Mojo's DeviceContext raises on an unsupported GPU names no driver
    readings = cause_readings(
        text_of(HELDOUT111, "mojo-gtx970-sm52-port-cuda-call-failed-invalid-ptx-mod-5387")
    )
    assert "driver-too-old" not in {cause for cause, _ in readings}


test_the_new_readings_never_raise = never_raise(
    [
        "requested shared memory size of ",
        " bytes larger than allowed size of ",
        "function 'matmul_dispatch_0' ",
        "error: 'func.func' op exceeded GPU memory limit of ",
        " bytes for function. Got ",
        "99999999999999999999999",
        "MAX doesn't support your current NVIDIA GPU driver. ",
        "MAX requires a minimum driver version of ",
        "580 and CUDA version 13.0.",
    ]
)
