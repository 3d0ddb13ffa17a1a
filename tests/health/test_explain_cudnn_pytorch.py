"""cuDNN/cuBLAS handle and algorithm failures read by the framework that printed them.

TensorFlow and JAX preallocate most of the GPU, so a cuDNN handle they cannot create reads as
their pool first (`oom-framework-pool`, with allow_growth / XLA_PYTHON_CLIENT_PREALLOCATE as what
decides). PyTorch keeps no such pool: the same status there means the GPU is full (this job's
tensors or another process) or a cuDNN that does not fit the build. PyTorch's convolution search
("Unable to find a valid cuDNN algorithm", "GET was unable to find an engine") skips algorithms
whose workspace runs out of memory and raises when none ran: a LOW memory-first reading.
The texts are the held-out sets' real pastes (tests/data/explain/SOURCES.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import load_set, text_of

SET8 = load_set("heldout8")
SET17 = load_set("heldout17")
SET1 = load_set("heldout")
SET5 = load_set("heldout5")
MEMORY_OR_BUILD = {"oom-too-big", "oom-other-process", "library-conflict"}

PYTORCH_HANDLE_TEXTS = [
    (SET17, "cudnn-not-init-cudnn824-cuda102-torch180-pytorch-97847"),
    (SET17, "cudnn-not-init-create-handle-rust-diffusers-rs-16"),
    (SET17, "cudnn-not-init-lua-torch-neuraltalk2-57"),
    (SET8, "unk-cudnn-internal-error-backward-pytorch-segmentation-77"),
]
ALGORITHM_TEXTS = [
    (SET17, "cudnn-no-valid-algorithm-try-all-relationprediction-37"),
    (SET17, "cudnn-no-valid-algorithm-laptop-opengait-3"),
    (SET17, "cudnn-get-engine-videorag-10"),
    (SET17, "cudnn-get-engine-got-ocr2-19"),
]
TF_HANDLE_TEXTS = [
    (SET1, "oom-tf-cudnn-handle-tony-486"),
    (SET1, "oom-tf-cudnn-handle-tf-24496"),
    (SET5, "pool-tf-cudnn-handle-allow-growth-efficientdet-177"),
]


def _ids(cases: list[tuple[list[tuple[dict[str, str], str]], str]]) -> list[str]:
    return [example_id for _, example_id in cases]


@pytest.mark.parametrize(
    ("examples", "example_id"), PYTORCH_HANDLE_TEXTS, ids=_ids(PYTORCH_HANDLE_TEXTS)
)
def test_a_pytorch_cudnn_handle_failure_reads_memory_or_build_not_a_pool(
    examples: list[tuple[dict[str, str], str]], example_id: str
) -> None:
    diagnoses = explain_text(text_of(examples, example_id)).diagnoses
    causes = [d.cause for d in diagnoses]
    assert causes[0] == "oom-too-big"
    assert set(causes[:3]) == MEMORY_OR_BUILD
    assert "oom-framework-pool" not in causes
    assert diagnoses[0].confidence is Confidence.LOW
    assert diagnoses[0].decides is not None
    assert "torch.cuda.memory_summary()" in diagnoses[0].decides


@pytest.mark.parametrize(("examples", "example_id"), ALGORITHM_TEXTS, ids=_ids(ALGORITHM_TEXTS))
def test_no_cudnn_algorithm_or_engine_reads_memory_first_and_low(
    examples: list[tuple[dict[str, str], str]], example_id: str
) -> None:
    explanation = explain_text(text_of(examples, example_id))
    top = explanation.diagnoses[0]
    assert top.cause == "oom-too-big"
    assert top.confidence is Confidence.LOW
    assert top.decides is not None and "smaller batch" in top.decides
    assert {d.cause for d in explanation.diagnoses} == MEMORY_OR_BUILD


@pytest.mark.parametrize(("examples", "example_id"), TF_HANDLE_TEXTS, ids=_ids(TF_HANDLE_TEXTS))
def test_a_tensorflow_cudnn_handle_failure_keeps_the_pool_reading(
    examples: list[tuple[dict[str, str], str]], example_id: str
) -> None:
    top = explain_text(text_of(examples, example_id)).diagnoses[0]
    assert top.cause == "oom-framework-pool"
    assert top.decides is not None and "ALLOW_GROWTH" in top.decides


def test_a_paste_with_both_torch_and_tensorflow_keeps_the_pool_reading() -> None:
    # TensorFlow's own wording next to a torch import: TF's pool is in the process.
    pytorch = text_of(SET17, "cudnn-not-init-cudnn824-cuda102-torch180-pytorch-97847")
    mixed = "2020-01-01 E tensorflow/stream_executor/cuda/cuda_dnn.cc:329] " + pytorch
    assert explain_text(mixed).diagnoses[0].cause == "oom-framework-pool"


def test_a_bare_status_with_no_framework_named_keeps_the_earlier_reading() -> None:
    top = explain_text("CUDNN_STATUS_NOT_INITIALIZED").diagnoses[0]
    assert top.cause == "oom-framework-pool"
    assert top.confidence is Confidence.LOW


def test_torch_words_alone_vote_nothing() -> None:
    text = 'File "/usr/lib/python3/site-packages/torch/nn/modules/conv.py", line 1\nRuntimeError'
    assert explain_text(text).diagnoses == ()


@settings(max_examples=60, deadline=None)
@given(before=st.text(max_size=200), after=st.text(max_size=200))
def test_these_messages_never_read_confident(before: str, after: str) -> None:
    """The messages add no confident cause to the text around them. (The surrounding text can
    hold a confident message of its own: hypothesis draws string constants from the code under
    test, such as Windows' "RMINITADAPTER FAILED".)"""
    around = explain_text(before + "\n" + after).diagnoses
    already = {d.cause for d in around if d.confidence is Confidence.HIGH}
    for message in (
        "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED",
        "RuntimeError: Unable to find a valid cuDNN algorithm to run convolution",
        "RuntimeError: GET was unable to find an engine to execute this computation",
    ):
        diagnoses = explain_text(before + "\n" + message + "\n" + after).diagnoses
        assert {d.cause for d in diagnoses if d.confidence is Confidence.HIGH} <= already
