"""Parameters, gradients and optimizer states per GPU (memory.md §2.2-2.4, §2.6, §4.1)."""

from __future__ import annotations

import json
from pathlib import Path

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


# Llama-3.1-70B (memory.md §2.1, the catalog's HF count): h = 8192, 80 blocks, vocab 128256,
# 64 query / 8 KV heads of 128, MLP 28672, untied head.
L70_EMBEDDING = 128_256 * 8192  # tok_embeddings; the untied output projection is the same size
L70_BLOCK = (
    2 * 8192 * 8192  # q_proj, o_proj
    + 2 * 8192 * 1024  # k_proj, v_proj (8 KV heads × 128)
    + 3 * 8192 * 28_672  # gate, up, down
    + 2 * 8192  # input / post-attention RMSNorm
)  # 855,654,400
L70_TOTAL = 80 * L70_BLOCK + 2 * L70_EMBEDDING + 8192  # + final norm: 70,553,706,496


def forward_states(plan: MemoryPlan) -> int:
    """Model states alive in the forward: sharded params/states plus the gathered parameters."""
    forward = next(p for p in plan.phases if p.name == "forward").bytes_by_component
    keys = ("parameters", "gradients", "optimizer_states", "communication")
    return sum(forward[k] for k in keys)


def llama70b_8gpu(**knobs: object) -> MemoryPlan:
    spec = resolve_model("Llama-3.1-70B")
    request = PlanRequest(model=spec, num_gpus=8, precision=Precision.BF16_MIXED, **knobs)  # type: ignore[arg-type]
    return plan_memory(request)


def test_llama31_70b_counts() -> None:
    assert L70_BLOCK == 855_654_400
    assert resolve_model("Llama-3.1-70B").total_parameters == L70_TOTAL == 70_553_706_496


def test_fsdp_root_unit_with_and_without_sharded_embeddings() -> None:
    # FSDP MixedPrecision(param_dtype=bf16) over fp32 params, 8 GPUs: sharded fp32 params (4 B),
    # no gradients yet in the forward, fp32 AdamW m + v (8 B), all over 8.
    sharded = L70_TOTAL * (4 + 8) / 8
    # fully_shard(model) alone: the root (embedding + final norm + head) stays unsharded from
    # forward to backward, beside the current and the prefetched block, in bf16.
    root = 2 * L70_EMBEDDING + 8192
    plain = llama70b_8gpu(fsdp=FsdpKind.FULL)
    assert plain.phases[0].bytes_by_component["communication"] == (2 * L70_BLOCK + root) * 2
    assert forward_states(plain) == pytest.approx(sharded + (2 * L70_BLOCK + root) * 2, abs=8)
    # custom_sharded_layers ['tok_embeddings', 'output']: two adjacent units at most, the
    # largest pair a block + the (larger) embedding/output unit; the root keeps the final norm.
    own = llama70b_8gpu(fsdp=FsdpKind.FULL, fsdp_shard_embeddings=True)
    gathered = (L70_BLOCK + L70_EMBEDDING + 8192) * 2
    assert own.phases[0].bytes_by_component["communication"] == gathered
    assert forward_states(own) == pytest.approx(sharded + gathered, abs=8)
    # ≈ 3.55 GiB less: one block and one 1.05 B-param vocabulary matrix are no longer gathered
    saved = forward_states(plain) - forward_states(own)
    assert saved == (L70_BLOCK + L70_EMBEDDING) * 2
    assert saved / GIB == pytest.approx(3.55, abs=0.01)


def test_sharded_embeddings_do_not_change_deepspeed_zero3() -> None:
    # DeepSpeed gathers per submodule already; the FSDP wrapping knob does not apply.
    assert forward_states(llama70b_8gpu(zero_stage=3)) == forward_states(
        llama70b_8gpu(zero_stage=3, fsdp_shard_embeddings=True)
    )


def test_deepspeed_zero3_gathered_working_set_uses_the_config_defaults() -> None:
    # DeepSpeed ZeRO-3 (bf16 params, bf16 grads partition, fp32 master + m + v), 8 GPUs:
    # forward model states = 2 B params/8 + 12 B states/8 + the gathered working set in bf16:
    # blocks: min(stage3_max_live_parameters 1e9, largest block 855.7 M +
    # stage3_prefetch_bucket_size 5e7) = 905,654,400 params; but the module in use is gathered
    # whole, and the 128256 × 8192 output projection (1,050,673,152) is larger, so it sets the
    # working set at the loss. Tensors below stage3_param_persistence_threshold (1e5 elements)
    # stay gathered: 80 × 2 RMSNorm weights + the final norm = 1,318,912.
    blocks = min(1_000_000_000, L70_BLOCK + 50_000_000)
    live = max(blocks, L70_EMBEDDING)
    persistent = 80 * 2 * 8192 + 8192
    assert (blocks, live, persistent) == (905_654_400, 1_050_673_152, 1_318_912)
    for offload in (Offload.NONE, Offload.OPTIMIZER_AND_PARAMS):
        plan = llama70b_8gpu(zero_stage=3, offload=offload)
        phases = {p.name: p.bytes_by_component for p in plan.phases}
        # offloaded parameters still run on the GPU: the gathered set does not change; the IPG
        # reduce bucket (contiguous_gradients: reduce_bucket_size 5e8 bf16 elements) is allocated
        # at optimizer set-up and held in every phase
        bucket = 500_000_000 * 2
        assert phases["forward"]["communication"] == (live + persistent) * 2 + bucket
        assert phases["backward"]["communication"] == (live + persistent) * 2 + bucket
        assert phases["optimizer-step"]["communication"] == bucket
    plan = llama70b_8gpu(zero_stage=3)
    assert forward_states(plan) == pytest.approx(
        L70_TOTAL * (2 + 12) / 8 + 2_103_984_128 + 1_000_000_000, abs=8
    )
    detail = next(c.detail for c in plan.components if c.key == "communication")
    for key in ("stage3_max_live_parameters", "stage3_prefetch_bucket_size", "persistence"):
        assert key in detail


def test_deepspeed_zero3_never_gathers_more_than_the_model(tmp_path: Path) -> None:
    # GPT-2 (124.4 M params, fp32): largest block 7.1 M + prefetch 5e7 = 57.1 M < the model (and
    # > the 38.6 M tied embedding), so 57.1 M are gathered, + the persistent norms and biases of
    # the 12 blocks and the final norm
    # (ln_1, ln_2: 4 × 768; biases of c_attn 2304, attn c_proj 768, c_fc 3072, mlp c_proj 768).
    spec = resolve_model("gpt2")
    plan = plan_memory(PlanRequest(model=spec, num_gpus=2, zero_stage=3, precision=Precision.FP32))
    block = spec.parameters.layers[0]
    persistent = 12 * (4 * 768 + 2304 + 768 + 3072 + 768) + 2 * 768
    bucket = 500_000_000 * 4  # the IPG reduce bucket: reduce_bucket_size fp32 elements, always
    expected = (block.total + 50_000_000 + persistent) * 4 + bucket
    assert plan.phases[0].bytes_by_component["communication"] == pytest.approx(expected, abs=8)
    # Into backward, blocks whose next use is within stage3_max_reuse_distance (1e9 elements,
    # ≈ 2 · 7.1 M per block back) stay gathered: all 12 blocks, so the whole model is gathered.
    backward = next(p for p in plan.phases if p.name == "backward")
    whole = spec.total_parameters * 4
    assert backward.bytes_by_component["communication"] == pytest.approx(whole + bucket, abs=8)
    # A 2-block tiny Llama (h 256, vocab 1000): the whole model is below the prefetch bucket, so
    # the working set is the model itself, never more.
    config = tmp_path / "tiny-llama" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(TINY_LLAMA))
    tiny = resolve_model(str(config))
    plan = plan_memory(PlanRequest(model=tiny, num_gpus=2, zero_stage=3, precision=Precision.FP32))
    assert plan.phases[0].bytes_by_component["communication"] == (
        tiny.total_parameters * 4 + 500_000_000 * 4
    )


TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 688,
    "vocab_size": 1000,
}


@pytest.mark.parametrize("zero_stage", [2, 3])
def test_deepspeed_ipg_bucket_is_reduce_bucket_size_however_few_parameters_train(
    zero_stage: int,
) -> None:
    # contiguous_gradients allocates reduce_bucket_size (5e8) elements of the trainable dtype
    # (fp32 here: no mixed precision, as PEFT's ZeRO examples run) whatever trains: LoRA r=8 on
    # GPT-2 trains 0.3 M parameters, yet the buffer is 2 GB, held from the first backward on.
    spec = resolve_model("gpt2")
    plan = plan_memory(
        PlanRequest(
            model=spec,
            mode=Mode.LORA,
            num_gpus=2,
            zero_stage=zero_stage,
            precision=Precision.FP32,
        )
    )
    phases = {p.name: p.bytes_by_component["communication"] for p in plan.phases}
    assert phases["optimizer-step"] >= 500_000_000 * 4
    assert phases["backward"] >= 500_000_000 * 4
    detail = next(c.detail for c in plan.components if c.key == "communication")
    assert "reduce_bucket_size 5e8" in detail
