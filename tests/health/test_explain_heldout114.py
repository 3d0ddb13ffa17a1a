"""explain_text on the hundred-and-fourteenth held-out set (tests/data/explain/heldout114.jsonl,
SOURCES.md, notes/heldout114.md): GitHub issues and pull requests opened 2019-2026 of NVIDIA's
TensorRT toolchain on NVIDIA GPUs (NVIDIA/TensorRT, pytorch/TensorRT and
NVIDIA/trt-samples-for-hackathon-cn were the ones whose threads the searches gave with an error's
own words) whose text holds a GPU error, every in-frame text the issues corpus gave in its order,
labelled from the thread before explain was run on them. 19 texts: 6 labelled
(illegal-memory-access 3, library-conflict 2, driver-too-old), 13 `unknown` (TensorRT's
out-of-memory lines whose threads settle no cause five times, its "CUDA initialization failure
with error N" three times, Myelin's error 709 at exit and its "Platform (Cuda) error", "Cuda
Runtime (invalid argument)" at exit, "Cuda Driver (invalid argument)" and the Python builder's
bare "Driver error")."""

from __future__ import annotations

import pytest

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h277/measure.py): labelled 4/6 right (no answer 2/6), unknown
# texts given a high cause 0/13. The two misses are Myelin's cuBLASLt check, a wording of
# TensorRT's closed-source Myelin compiler that no NVIDIA code or document the search reaches
# prints or explains (only users' reports of it), so no source changed: the figures after are
# the same.
MIN_ACCURACY = 0.6
_MYELIN_UNDOCUMENTED = (
    'Myelin\'s "Compiled against cuBLASLt X but running against cuBLASLt Y" says a different '
    "cuBLASLt was loaded than the engine was built with (library-conflict), but the wording is "
    "TensorRT's closed-source Myelin's: no NVIDIA source or document the search reaches prints "
    "or explains it, so it is not read (the brief allows only documented wordings)"
)
KNOWN_MISSES: dict[str, str] = {
    "trt-8-4-3-raiimyelingraph-compiled-against-cublaslt-11-9-running-11-2-trt-3236": (
        _MYELIN_UNDOCUMENTED
    ),
    "trt-triton-myelin-compiled-against-cublaslt-11-5-1-running-11-4-2-title-trt-2580": (
        _MYELIN_UNDOCUMENTED
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT114 = load_set("heldout114")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT114,
    sets_before(114),
    size=(15, 20),
    min_unknown=13,
    min_causes=3,
    min_repositories=3,
    min_categories=18,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

ILLEGAL_ACCESS_IN_TENSORRT = [
    "trt-8-3-int8-calibrator-add-cuda-runtime-illegal-memory-access-p2200-trt-2464",
    "trt-pycuda-custreamsynchronize-illegal-memory-access-title-trt-1469",
    "trt-8-4-1-5-trtexec-int8-calibration-illegal-memory-access-trt-2463",
]
DRIVER_INSUFFICIENT_IN_CONTAINER = (
    "trt-22-01-container-onnxruntime-cuda-failure-35-driver-460-v100-trt-1786"
)
CUDA_INIT_FAILURE_CODES = [
    "trt-sample-mnist-cuda-initialization-failure-error-2-trt-149",
    "trt-7-2-pytorch-mnist-sample-cuda-initialization-failure-222-trt-1052",
    "trt-7-0-cuda-10-1-builder-cuda-initialization-failure-error-35-trt-308",
]


@pytest.mark.parametrize("example_id", ILLEGAL_ACCESS_IN_TENSORRT)
def test_tensorrt_wrapped_error_700_reads_an_illegal_access_not_hardware(example_id: str) -> None:
    # TensorRT's "Error Code 1: Cuda Runtime (…)" and pycuda's LogicError carry CUDA's own
    # string: a library or app bug first (medium), the GPU's memory only a low second
    assert cause_readings(text_of(HELDOUT114, example_id)) == [
        ("illegal-memory-access", Confidence.MEDIUM),
        ("ecc-uncorrectable", Confidence.LOW),
    ]


def test_onnxruntime_error_35_in_a_tensorrt_container_is_a_driver_too_old() -> None:
    readings = cause_readings(text_of(HELDOUT114, DRIVER_INSUFFICIENT_IN_CONTAINER))
    assert readings[0] == ("driver-too-old", Confidence.HIGH)


@pytest.mark.parametrize("example_id", CUDA_INIT_FAILURE_CODES)
def test_tensorrt_cuda_initialization_failure_gets_no_confident_cause(example_id: str) -> None:
    # TensorRT prints the CUDA runtime's code and a generic "check your CUDA installation"; the
    # threads settle none of these, so nothing may be read with confidence
    readings = cause_readings(text_of(HELDOUT114, example_id))
    assert all(confidence is not Confidence.HIGH for _, confidence in readings)
