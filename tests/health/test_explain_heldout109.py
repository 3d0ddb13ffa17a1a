"""explain_text on the hundred-and-ninth held-out set (tests/data/explain/heldout109.jsonl,
SOURCES.md, notes/heldout109.md): GitHub issues opened 2023-2024 in the model makers' own
repositories of open-weight LLMs on NVIDIA GPUs (THUDM's ChatGLM-6B, ChatGLM2-6B, ChatGLM3 and
GLM-4 — the corpus names them zai-org/… —, baichuan-inc/Baichuan2 and Baichuan-7B, QwenLM/Qwen
and Qwen2 — the corpus names it QwenLM/Qwen3 —, meta-llama/llama, llama3 and llama-models were
the ones the searches gave) whose text holds a GPU error, every in-frame text the issues corpus
gave in its order, labelled from the thread before explain was run on them.
22 texts: 8 labelled (oom-too-big 4, device-assert 3, oom-fragmentation), 14 `unknown` (cuBLAS
CUBLAS_STATUS_INVALID_VALUE twice, CUBLAS_STATUS_NOT_INITIALIZED and
CUBLAS_STATUS_EXECUTION_FAILED, a PyTorch OOM with 13.70 GiB free, NVML's missing
nvmlDeviceGetNvLinkRemoteDeviceType, llama.cpp's CUDA error 9 with Baichuan2, cpm_kernels'
"Library cuda is not initialized", TorchScript's missing libnvrtc-builtins, a tensor left on the
meta device, NCCL's failed ibv_reg_mr, and PyTorch without NCCL three times)."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h268/measure.py): labelled 6/8 right (no answer 1/8, wrong
# 1/8), unknown texts given a high cause 1/14. No miss is a documented wording the code lacks
# (see the reasons below), so nothing was changed: the figures after are the same.
MIN_ACCURACY = 0.75
KNOWN_MISSES: dict[str, str] = {
    "glm-4-lora-finetuned-inference-device-side-assert-title-glm4-635": (
        "the title cuts cudaErrorAssert's string, 'device-side assert triggered', before its "
        "last word: a reporter's truncation, not a wording PyTorch or the CUDA runtime prints"
    ),
    "chatglm3-6b-32k-30k-tokens-a800-oom-20-18-gib-reserved-cg3-1294": (
        "reserved − allocated (20.23 GiB) covers the 20.18 GiB request by a sliver, and free + "
        "cached leaves less than another request's room: explain reads the job as at the GPU's "
        "limit (oom-too-big medium, fragmentation second); the thread has no answer"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "llama-multinode-finetune-nccl-ibv-reg-mr-failed-ibext-llama-162": (
        "NCCL's 'Call to ibv_reg_mr failed' is read as the IB transport's, as earlier sets "
        "label NCCL's ibv_reg_mr_iova2 failures once their threads settled them; this thread "
        "does not say whether memlock limits, the fabric or GPUDirect was at fault"
    ),
}

HELDOUT109 = load_set("heldout109")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT109,
    sets_before(109),
    size=(15, 30),
    min_unknown=14,
    min_causes=3,
    min_repositories=11,
    min_categories=22,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

LONG_INPUT_OOM = "chatglm3-6b-32k-30k-tokens-a800-oom-20-18-gib-reserved-cg3-1294"


def test_the_long_input_oom_keeps_fragmentation_as_a_reading() -> None:
    # the known miss above: fragmentation stays among the readings, below the at-limit one
    readings = cause_readings(text_of(HELDOUT109, LONG_INPUT_OOM))
    assert readings[0] == ("oom-too-big", Confidence.MEDIUM)
    assert ("oom-fragmentation", Confidence.LOW) in readings
