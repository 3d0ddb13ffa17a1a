"""Held-out batch 33 (benchmarks/data/validation.csv V575-V577): pre-training codebases' OOMs.

Three out-of-memory reports from the frame's issue trackers, each with the settings that pin it:
karpathy/nanoGPT #88 (GPT-2 124M from scratch, batch 32 x 1024, a 16 GB card), nanoGPT #208
(config/finetune_shakespeare.py: gpt2-xl, batch 1 x 1024, a 24 GB card) and hpcaitech/ColossalAI
#4537 (the llama2 benchmark's Gemini plugin, Llama-2-7B, batch 16 x 4096, eager attention, 8x A100
80GB). Each is scored by the OOM classification: the planned device-level peak must exceed the
card's usable memory. The figures each error message prints are checked against the arithmetic
of the tensors the sources name (benchmarks/README.md, batch 33)."""

from __future__ import annotations

import pytest
from benchmarks.measured_rows import Kind, MappedRow, flagged

from gpuwarden.units import GIB
from tests.planner.validation_rows import component_bytes, mapped_rows, planned

ROWS = ("V575", "V576", "V577")
FP32_BYTES = 4
# rounding of the two decimals torch prints a GiB figure with
PRINTED_GIB = 0.005

# nanoGPT #88: 'Tried to allocate 6.14 GiB (GPU 0; 15.78 GiB total capacity; 10.16 GiB already
# allocated', batch 32 x block 1024 over nanoGPT's padded vocabulary (train.py: 50304 without a
# meta.pkl); the catalog gpt2 has the tokenizer's 50257
NANOGPT_TOKENS = 32 * 1024
NANOGPT_VOCAB = 50304
NANOGPT_REQUEST_GIB = 6.14
NANOGPT_ALLOCATED_GIB = 10.16
NANOGPT_CAPACITY_GIB = 15.78
FP16_BYTES = 2

# nanoGPT #208: 'Tried to allocate 100.00 MiB (GPU 0; 23.68 GiB total capacity; 21.67 GiB already
# allocated' (fp32 weights, gradients and AdamW's two moments of gpt2-xl)
FINETUNE_ALLOCATED_GIB = 21.67

# ColossalAI #4537: 'Tried to allocate 32.00 GiB (GPU 6; 79.20 GiB total capacity; 54.76 GiB
# already allocated': LlamaAttention's fp32 softmax over batch 16 x 32 heads x 4096 x 4096
GEMINI_SCORES = 16 * 32 * 4096 * 4096
GEMINI_REQUEST_GIB = 32.00


def assert_maps_as_a_scored_oom(mapped: MappedRow) -> None:
    """The row plans, is not set aside, and is scored as an out-of-memory report on its card."""
    assert mapped.request is not None, mapped.error
    assert flagged(mapped.row) is None
    assert mapped.row.oom
    assert mapped.kind.kind is Kind.OOM
    assert mapped.gpu_memory_bytes is not None


@pytest.mark.parametrize("row", ROWS)
def test_each_row_maps_as_a_scored_oom(row: str) -> None:
    assert_maps_as_a_scored_oom(mapped_rows()[row])


@pytest.mark.parametrize("row", ROWS)
def test_each_plan_exceeds_the_cards_usable_memory(row: str) -> None:
    mapped = mapped_rows()[row]
    assert mapped.gpu_memory_bytes is not None
    assert planned(row).predicted.nvidia_smi_used_bytes > mapped.gpu_memory_bytes


def test_nanogpt_request_is_the_fp32_copy_of_the_padded_logits() -> None:
    request_gib = NANOGPT_TOKENS * NANOGPT_VOCAB * FP32_BYTES / GIB
    assert abs(request_gib - NANOGPT_REQUEST_GIB) < PRINTED_GIB


def test_nanogpt_failed_in_the_first_evaluation_before_any_training_step() -> None:
    # fp32 weights + fp16 logits + their fp32 upcast: what estimate_loss() holds under no_grad
    # when cross_entropy asks for its fp32 log-softmax; the rest of the 10.16 GiB is small
    plan = planned("V575")
    weights = component_bytes(plan, "parameters")
    logits = NANOGPT_TOKENS * NANOGPT_VOCAB
    held = weights + logits * FP16_BYTES + logits * FP32_BYTES
    assert held / GIB < NANOGPT_ALLOCATED_GIB < held / GIB + 1
    assert NANOGPT_ALLOCATED_GIB + NANOGPT_REQUEST_GIB > NANOGPT_CAPACITY_GIB


def test_nanogpt_planned_loss_keeps_two_fp32_copies_of_the_logits() -> None:
    # the HF-style loss the plan uses: the fp32 upcast and the fp32 log-softmax it keeps
    request = mapped_rows()["V575"].request
    assert request is not None
    vocab = request.model.vocab_size
    assert component_bytes(planned("V575"), "logits") == 2 * NANOGPT_TOKENS * vocab * FP32_BYTES


def test_finetune_state_alone_exceeds_what_the_card_had_allocated_at_the_failure() -> None:
    # gpt2-xl in fp32 with AdamW: 4 B weights + 4 B gradients + 8 B moments per parameter
    plan = planned("V576")
    state = sum(component_bytes(plan, key) for key in ("parameters", "optimizer_states"))
    state += plan.trainable_parameters * FP32_BYTES
    assert state / GIB > FINETUNE_ALLOCATED_GIB
    usable = mapped_rows()["V576"].gpu_memory_bytes
    assert usable is not None
    assert state + component_bytes(plan, "runtime_overhead") > usable


def test_gemini_request_is_the_fp32_softmax_of_all_heads() -> None:
    # 32 heads unsplit: the tp=4 in the printed Namespace did not reach the Gemini plugin
    assert abs(GEMINI_SCORES * FP32_BYTES / GIB - GEMINI_REQUEST_GIB) < PRINTED_GIB


def test_gemini_plan_peaks_in_backward_with_the_eager_block_working_set() -> None:
    plan = planned("V577")
    assert plan.peak_phase == "backward"
    assert component_bytes(plan, "temporaries") > GEMINI_SCORES * FP32_BYTES
