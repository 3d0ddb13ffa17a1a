"""Parameters, gradients and optimizer states per GPU (memory.md §2.2-2.4, §2.6, §4.1)."""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.precision import NF4_DOUBLE_QUANT
from gpuwarden.types.plan import (
    FsdpKind,
    MemoryPlan,
    Mode,
    Offload,
    Optimizer,
    PlanRequest,
    Precision,
)
from gpuwarden.units import GIB

LLAMA2_7B = 6_738_415_616  # memory.md §2.1, the published count


def states(plan: MemoryPlan) -> int:
    return sum(plan.component(k) for k in ("parameters", "gradients", "optimizer_states"))


def job(**knobs: object) -> MemoryPlan:
    # memory.md §4: job A/B = Llama-2-7B, bf16 mixed precision, AdamW, 8 GPUs, b=1, s=4096.
    base: dict[str, object] = {"model": resolve_model("Llama-2-7b-hf"), "num_gpus": 8}
    base.update(seq_len=4096, precision=Precision.BF16_MIXED, optimizer=Optimizer.ADAMW)
    return plan_memory(PlanRequest(**{**base, **knobs}))  # type: ignore[arg-type]


def test_catalog_counts_llama2_7b_like_hf() -> None:
    assert resolve_model("Llama-2-7b-hf").total_parameters == LLAMA2_7B


def test_zero3_model_states_match_the_anchors() -> None:
    # memory.md §4.1: ≈ 14.1-14.6 GiB (TM101 18Ψ/N = 14.12; DeepSpeed adds 4 × largest layer)
    assert 14.1 <= states(job(zero_stage=3)) / GIB <= 14.6


def test_zero2_model_states_match_the_anchors() -> None:
    # memory.md §4.1: ≈ 25-27 GiB; DeepSpeed estimate_zero2_model_states_mem_needs: 2Ψ + 18Ψ/N
    got = states(job(zero_stage=2))
    assert 25 <= got / GIB <= 27
    assert got == pytest.approx(LLAMA2_7B * (2 + 18 / 8), rel=1e-6)


def test_zero1_shards_only_the_optimizer() -> None:
    assert states(job(zero_stage=1)) == pytest.approx(LLAMA2_7B * (2 + 2 + 16 / 8), rel=1e-6)


def test_fsdp_full_shard_keeps_fp32_params_as_the_master_copy() -> None:
    # FSDP MixedPrecision(param_dtype=bf16): sharded fp32 params, fp32 grads, fp32 AdamW states.
    assert states(job(fsdp=FsdpKind.FULL)) == pytest.approx(LLAMA2_7B * 16 / 8, rel=1e-6)


def test_hybrid_shard_shards_within_a_node() -> None:
    hybrid = job(fsdp=FsdpKind.HYBRID, num_gpus=16, gpus_per_node=8)
    full = job(fsdp=FsdpKind.FULL, num_gpus=16)
    assert states(hybrid) == pytest.approx(LLAMA2_7B * 16 / 8, rel=1e-6)
    assert states(full) == pytest.approx(LLAMA2_7B * 16 / 16, rel=1e-6)


def test_megatron_distributed_optimizer_is_6_plus_12_over_n() -> None:
    # memory.md §2.6: Megatron distributed optimizer (6 + 12/N)Ψ per model-parallel shard.
    plan = job(tp=2, zero_stage=1, num_gpus=8)
    assert states(plan) == pytest.approx(LLAMA2_7B / 2 * (6 + 12 / 4), rel=0.01)


def test_amp_single_gpu_is_16_bytes_per_parameter() -> None:
    # memory.md §2.4: fp32 params + AMP + AdamW = 4 + 4 + 8
    assert states(job(num_gpus=1)) == pytest.approx(LLAMA2_7B * 16, rel=1e-6)


def test_pure_bf16_adamw_is_8_bytes_and_8bit_adamw_about_6() -> None:
    pure = job(num_gpus=1, precision=Precision.BF16)
    assert states(pure) == pytest.approx(LLAMA2_7B * 8, rel=1e-6)
    eight = job(num_gpus=1, precision=Precision.BF16, optimizer=Optimizer.ADAMW_8BIT)
    # 2 B params + 2 B grads + 2 × (1 + 4/256) B states, small tensors at 32 bits
    assert states(eight) / LLAMA2_7B == pytest.approx(6.03, abs=0.01)


def test_offload_moves_states_to_host() -> None:
    plan = job(zero_stage=3, offload=Offload.OPTIMIZER_AND_PARAMS)
    assert plan.component("optimizer_states") == 0
    assert plan.component("parameters") == 0
    assert plan.host_bytes > LLAMA2_7B * 12  # one node's share of master + Adam + params


def test_qlora_base_is_nf4_linears_and_bf16_embeddings() -> None:
    # memory.md §2.2: NF4 with double quantization 0.5159 B/param on Linear weights only;
    # Llama-3-8B keeps ≈ 2 GiB of bf16 embedding + head.
    spec = resolve_model("Meta-Llama-3-8B")
    plan = plan_memory(PlanRequest(model=spec, mode=Mode.QLORA, precision=Precision.NF4))
    linear = spec.parameters.linear_parameters
    rest = spec.total_parameters - linear
    adapters = plan.trainable_parameters
    expected = linear * NF4_DOUBLE_QUANT + rest * 2 + adapters * 2
    assert pytest.approx(0.5159, abs=1e-4) == NF4_DOUBLE_QUANT
    assert plan.component("parameters") == pytest.approx(expected, rel=1e-6)
    assert rest * 2 / GIB == pytest.approx(1.96, abs=0.01)


def test_lora_trainable_parameters() -> None:
    # memory.md §2.7: Llama-2-7B, r = 8 on q and v: 32 × 2 × 8 × (4096 + 4096) = 4.19 M
    plan = plan_memory(PlanRequest(model=resolve_model("Llama-2-7b-hf"), mode=Mode.LORA))
    assert plan.trainable_parameters == 32 * 2 * 8 * (4096 + 4096)
