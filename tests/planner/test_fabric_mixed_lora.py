"""LitGPT LoRA under ``--precision bf16-mixed``: Fabric builds the model in float32.

Lightning Fabric's ``MixedPrecision`` plugin (``lightning/fabric/plugins/precision/amp.py``)
defines only ``forward_context`` (``torch.autocast``), ``convert_input`` and the scaler; unlike
``HalfPrecision`` (``half.py``: ``tensor_init_context`` / ``module_init_context`` set the default
dtype, ``convert_module`` casts) it leaves the parameters as built, so ``fabric.init_module()``
creates float32 parameters and LitGPT's bf16 checkpoint is copied into them. With LoRA the frozen
base is therefore fp32 (4 B per weight, not the 2 B of ``bf16-true``), and under autocast each
block Linear's matmul keeps a bf16 cast of its weight for the input's gradient (autocast caches
casts of trainable leaves only, but ``mm`` saves the cast it was given). The eighth held-out
batch (benchmarks/README.md, V280: StableLM 3B LoRA, lit-gpt ``finetune_lora.md`` @064fd52)
showed the miss; that row is no longer held out for this term.
"""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import compute_plan
from gpuwarden.planner.precision import fp32_base_under_autocast, recipe
from gpuwarden.types.plan import Framework, Mode, PlanRequest, Precision


def _lora(framework: Framework, precision: Precision, mode: Mode = Mode.LORA) -> PlanRequest:
    """lit-gpt finetune/lora.py's defaults of 2023: r 8 on q and v, micro-batch 4."""
    return PlanRequest(
        model=resolve_model("stablelm-base-alpha-3b"),
        mode=mode,
        precision=precision,
        micro_batch=4,
        seq_len=1034,
        grad_accum=32,
        lora_rank=8,
        lora_targets=("query_key_value",),
        lora_dropout=0.05,
        framework=framework,
    )


def _block_linear_weights(request: PlanRequest) -> int:
    """Weights of every block Linear plus the LM head (its vocab x hidden matmul) once per call,
    from the model's own config as the catalog reads it. The frozen head is called per 128
    positions (``model(input_ids, lm_head_chunk_size=128)``), 1034 positions: 9 calls, each
    casting it anew (autocast caches casts of leaves that require grad only)."""
    spec = request.model
    blocks = sum(
        lin.count * lin.in_features * lin.out_features
        for layer in spec.parameters.layers
        for lin in layer.linears
    )
    head_calls = -(-request.seq_len // 128)
    assert head_calls == 9
    return blocks + head_calls * spec.vocab_size * spec.hidden_size


def test_fabric_mixed_keeps_the_frozen_base_in_fp32() -> None:
    mixed = compute_plan(_lora(Framework.LITGPT, Precision.BF16_MIXED))
    true = compute_plan(_lora(Framework.LITGPT, Precision.BF16))
    # every parameter, the adapters included, costs 4 B instead of 2 B
    assert mixed.component("parameters") == pytest.approx(2 * true.component("parameters"))


def test_fabric_mixed_keeps_a_bf16_cast_of_every_block_weight() -> None:
    mixed_request = _lora(Framework.LITGPT, Precision.BF16_MIXED)
    mixed = compute_plan(mixed_request)
    true = compute_plan(_lora(Framework.LITGPT, Precision.BF16))
    casts = 2 * _block_linear_weights(mixed_request)  # StableLM 3B: ~9.5 GiB of bf16 copies
    extra = mixed.component("activations") - true.component("activations")
    # the casts, plus the fp32 residual stream and norm outputs autocast leaves in fp32
    assert extra > casts
    assert extra < casts * 1.5


def test_only_lora_under_fabric_mixed_precision_changes() -> None:
    assert fp32_base_under_autocast(_lora(Framework.LITGPT, Precision.BF16_MIXED))
    assert not fp32_base_under_autocast(_lora(Framework.LITGPT, Precision.BF16))
    assert not fp32_base_under_autocast(_lora(Framework.LITGPT, Precision.NF4, Mode.QLORA))
    for framework in (Framework.HF, Framework.HF_LEGACY, Framework.TORCHTUNE):
        request = _lora(framework, Precision.BF16_MIXED)
        assert not fp32_base_under_autocast(request)
        # transformers / torchtune keep the frozen base in the dtype it was loaded in
        assert recipe(request).weight_bytes == 2
        assert not recipe(request).autocast
