"""LitGPT's tensor-parallel generation (``generate/tp.py``) keeps the vocabulary whole.

Read in lit-gpt ``generate/tp.py`` @0eb179c (PR #835, 2023-12) and ``litgpt/generate/tp.py``
@0218047: ``tensor_parallel()`` splits each Block's fused QKV and MLP Linears column-wise and the
output projections row-wise; the token embedding, the LM head and the norms are not touched, so
every rank holds them whole. Megatron-style stacks (transformers' default here, vLLM) split the
vocabulary across the TP ranks. The seventh held-out batch (benchmarks/README.md, V266-V270:
Llama-2-70b-chat on A100 40GB, TP 4 / 8 bf16 and TP 2 / 4 / 8 bnb.nf4-dq) showed the miss; those
rows are no longer held out for this term.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan
from gpuwarden.planner.layout import distinct_layers
from gpuwarden.planner.lifecycle import largest_quantized_linear
from gpuwarden.planner.stacks import unknowns, vocab_shards
from gpuwarden.types.plan import Framework, Mode, PlanRequest, Precision

GB = 1e9


def _generate(framework: Framework, tp: int, precision: Precision) -> PlanRequest:
    """generate/tp.py's tutorial run: batch 1, a short prompt, max_new_tokens 256."""
    return PlanRequest(
        model=resolve_model("Llama-2-70b-hf"),
        mode=Mode.INFER,
        gpu=resolve_gpu("A100-40GB"),
        num_gpus=tp,
        tp=tp,
        precision=precision,
        batch=1,
        prompt_tokens=8,
        new_tokens=256,
        framework=framework,
    )


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_litgpt_tp_holds_the_whole_embedding_and_head_on_every_rank(tp: int) -> None:
    litgpt = compute_plan(_generate(Framework.LITGPT, tp, Precision.BF16))
    megatron = compute_plan(_generate(Framework.HF, tp, Precision.BF16))
    p = litgpt.request.model.parameters
    vocab = p.embedding + (p.lm_head or 0)  # Llama-2-70b: 32,000 x 8,192 each, untied
    unsplit = vocab * (1 - 1 / tp) * 2  # bf16 bytes the split would have saved per rank
    extra = litgpt.component("parameters") - megatron.component("parameters")
    assert extra == pytest.approx(unsplit, abs=2)


def test_only_litgpt_keeps_the_vocabulary_whole() -> None:
    for framework in Framework:
        request = _generate(framework, 8, Precision.BF16)
        expected = 1 if framework is Framework.LITGPT else 8
        assert vocab_shards(request) == expected


def test_the_largest_packed_weight_on_a_litgpt_tp_rank_is_the_whole_lm_head() -> None:
    """BitsandbytesPrecision packs the LM head too; unsplit it outgrows every block shard, so a
    prefill matmul dequantizes 262M weights, not an eighth of them."""
    request = _generate(Framework.LITGPT, 8, Precision.NF4)
    head = request.model.parameters.lm_head or 0
    blocks = max(
        lin.in_features * lin.out_features
        for layer, _ in distinct_layers(request.model)
        for lin in layer.linears
    )
    assert blocks / 8 < head
    assert largest_quantized_linear(request, 8) == head
    megatron = _generate(Framework.HF, 8, Precision.NF4)
    assert largest_quantized_linear(megatron, 8) == blocks / 8  # HF leaves its head 16-bit


def test_litgpt_tp_generation_is_read_tp_finetuning_is_not() -> None:
    request = _generate(Framework.LITGPT, 4, Precision.BF16)
    assert "stack_unknown" not in unknowns(request)
    training = replace(request, mode=Mode.LORA, micro_batch=1, seq_len=512)
    assert "LitGPT's finetune scripts use FSDP only" in unknowns(training)["stack_unknown"]
    assert vocab_shards(training) == 4  # not read: left Megatron-style, as before


@pytest.mark.parametrize(
    ("tp", "precision", "measured_gb"),
    [
        (4, Precision.BF16, 35.46),
        (8, Precision.BF16, 18.19),
        (2, Precision.NF4, 19.79),
        (4, Precision.NF4, 10.73),
        (8, Precision.NF4, 6.15),
    ],
)
def test_litgpt_tp_tables_of_the_inference_tutorial(
    tp: int, precision: Precision, measured_gb: float
) -> None:
    """tutorials/inference.md @1b1463d 'Max GPU RAM' (rank 0's max_memory_allocated / 1e9):
    the rows that guided this term, kept as its regression check (double-quantized NF4)."""
    plan = compute_plan(_generate(Framework.LITGPT, tp, precision))
    assert plan.predicted.max_allocated_bytes / GB == pytest.approx(measured_gb, rel=0.03)
