"""LitGPT LoRA under ``bf16-mixed``: the frozen fp32 LM head is cast to bf16 once per call.

LitGPT's fine-tuning loops call ``model(input_ids, lm_head_chunk_size=128)``; ``GPT.forward``
then runs ``self.lm_head`` once per ``x.split(128, dim=1)`` (lit-gpt ``lit_gpt/lora.py`` @660e0c9,
the same loop in every finetune script since 2023). PyTorch autocast caches the bf16 cast of a
weight only for a leaf that requires grad (``cached_cast``: ``can_try_cache`` needs
``arg.requires_grad() && arg.is_leaf()``), so the frozen fp32 head (Fabric's ``MixedPrecision``
builds the model in fp32, ``test_fabric_mixed_lora.py``) is cast anew in every call and each
call's matmul keeps its cast for the input's gradient: ceil(T / 128) bf16 copies of the head.
The eighth held-out batch's V280 (StableLM 3B, 1,034 positions: 9 copies) showed the miss
(−10.8 %, benchmarks/README.md); that row is no longer held out for this term.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.loss import head_calls
from gpuwarden.types.plan import Framework, Mode, PlanRequest, Precision

BF16 = 2


def lora(framework: Framework, precision: Precision, mode: Mode = Mode.LORA) -> PlanRequest:
    """lit-gpt finetune/lora.py's defaults of 2023: r 8 on q and v, micro-batch 4."""
    return PlanRequest(
        model=resolve_model("stablelm-base-alpha-3b"),
        mode=mode,
        precision=precision,
        micro_batch=4,
        seq_len=1034,
        lora_rank=8,
        lora_targets=("query_key_value",),
        lora_dropout=0.05,
        framework=framework,
    )


def forward_activations(request: PlanRequest, positions: int) -> int:
    plan = plan_memory(replace(request, seq_len=positions))
    return next(p.bytes_by_component for p in plan.phases if p.name == "forward")["activations"]


@pytest.mark.parametrize(
    ("positions", "calls"), [(1, 1), (128, 1), (129, 2), (1034, 9), (1152, 9), (1153, 10)]
)
def test_litgpt_calls_the_head_per_128_positions(positions: int, calls: int) -> None:
    request = lora(Framework.LITGPT, Precision.BF16_MIXED)
    assert head_calls(request, positions) == calls
    assert head_calls(lora(Framework.HF, Precision.BF16_MIXED), positions) == 1


def test_one_more_call_keeps_one_more_bf16_copy_of_the_head() -> None:
    # 1,151 -> 1,152 positions: one more position of activations, still 9 calls; 1,152 -> 1,153:
    # one more position and a 10th call. The difference of the two steps is one head cast.
    request = lora(Framework.LITGPT, Precision.BF16_MIXED)
    spec = request.model
    a, b, c = (forward_activations(request, n) for n in (1151, 1152, 1153))
    assert (c - b) - (b - a) == BF16 * spec.vocab_size * spec.hidden_size  # 50,688 x 4,096


@pytest.mark.parametrize(
    "request_",
    [
        lora(Framework.LITGPT, Precision.BF16),  # bf16-true: the head is bf16, nothing cast
        lora(Framework.LITGPT, Precision.BF16_MIXED, Mode.TRAIN),  # trainable: cast cached
        lora(Framework.HF, Precision.BF16_MIXED),  # transformers: one head call
    ],
    ids=["litgpt-bf16-true", "litgpt-full-training", "hf-lora"],
)
def test_no_per_call_copies_without_a_chunked_frozen_fp32_head(request_: PlanRequest) -> None:
    a, b, c = (forward_activations(request_, n) for n in (1151, 1152, 1153))
    assert (c - b) - (b - a) == pytest.approx(0, abs=1024)
