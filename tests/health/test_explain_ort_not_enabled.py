"""ONNX Runtime's "CUDA execution provider is not enabled in this build" reads as a build
without the CUDA EP, at medium confidence.

ONNX Runtime's C API returns these words from its CUDA entry points compiled without USE_CUDA
(core/session/provider_bridge_ort.cc: CreateCUDAProviderOptions, UpdateCUDAProviderOptions;
provider_stubs.cc, minimal builds: CreateNotEnabledStatus("CUDA")). A CUDA build whose provider
library fails to load returns "OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load
shared library" instead. Medium, not high: sets 43, 51 and 58 hold the words four times where
the thread did not settle the cause (labelled unknown, kept)."""

from __future__ import annotations

import pytest

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, load_set, text_of

_CPU_BUILD = ("cpu-only-build", Confidence.MEDIUM)


@pytest.mark.parametrize(
    "text",
    [
        # pykeio/ort#281: ort's log line when registering the EP fails
        "ERROR ort::execution_providers: An error occurred when attempting to register "
        "`CUDAExecutionProvider`: CUDA execution provider is not enabled in this build.",
        # C#: the status code prefix the managed API adds
        "[ErrorCode:Fail] CUDA execution provider is not enabled in this build",
        # a lower-case log, as some wrappers print it
        "onnxruntime error: cuda execution provider is not enabled in this build.",
    ],
)
def test_the_words_read_as_a_build_without_cuda(text: str) -> None:
    assert cause_readings(text) == [_CPU_BUILD]


@pytest.mark.parametrize(
    "text",
    [
        # the CUDA build whose provider library did not load: another cause
        "OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library",
        # another EP missing from a build says nothing of CUDA
        "TensorRT execution provider is not enabled in this build.",
        "DML execution provider is not enabled in this build. ",
        # the older, vaguer words of SetCurrentGpuDeviceId (also when the library fails to load)
        "CUDA execution provider is not enabled.",
    ],
)
def test_lookalikes_do_not_read_as_a_cpu_build(text: str) -> None:
    assert "cpu-only-build" not in {cause for cause, _ in cause_readings(text)}


_EARLIER_UNKNOWN = {
    "heldout43": (
        "ort-genai-phi-3-5-cuda-ep-not-enabled-in-this-build-ogai-971",
        "ort-genai-csharp-cuda-ep-not-enabled-in-this-build-title-ogai-1191",
    ),
    "heldout51": ("ort-genai-cuda-0-11-2-cuda-ep-not-enabled-in-this-build-title-ort-26635",),
    "heldout58": ("ort-csharp-ortcudaprovideroptions-cuda-ep-not-enabled-ort-13542",),
}


@pytest.mark.parametrize(
    ("name", "example_id"),
    [(name, example_id) for name, ids in _EARLIER_UNKNOWN.items() for example_id in ids],
)
def test_earlier_unknown_rows_get_a_medium_candidate_not_an_answer(
    name: str, example_id: str
) -> None:
    examples = load_set(name)
    [label] = [cause for example, cause in examples if example["id"] == example_id]
    assert label == "unknown"
    assert cause_readings(text_of(examples, example_id)) == [_CPU_BUILD]
