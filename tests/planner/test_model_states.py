"""Parameters, gradients and optimizer states per GPU (memory.md §2.2-2.4, §2.6, §4.1)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.layout import layout
from gpuwarden.planner.precision import NF4_DOUBLE_QUANT
from gpuwarden.planner.training import zero3_persistent
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    FsdpKind,
    MemoryPlan,
    Mode,
    Offload,
    Optimizer,
    PlanRequest,
    Precision,
    QuantKernel,
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
    # forward model states = 2 B params/8 + 12 B states/8 + the gathered working set in bf16.
    # Every submodule hook prefetches along the trace while fewer than
    # stage3_max_live_parameters (1e9) are gathered, and a prefetch stops after a whole tensor:
    # 1e9 + the largest tensor, the 128256 × 8192 output projection (1,050,673,152) prefetched at
    # the loss. (DeepSpeed 0.18.2's own coordinator, run on a T5 and a BLOOM scaled 1/64 with
    # every threshold scaled alike, peaked at 1e9 + its largest tensor within 2 %:
    # benchmarks/deepspeed_zero3.py.) Tensors below stage3_param_persistence_threshold (1e5
    # elements) stay gathered: 80 × 2 RMSNorm weights + the final norm = 1,318,912.
    live = 1_000_000_000 + L70_EMBEDDING
    persistent = 80 * 2 * 8192 + 8192
    assert (live, persistent) == (2_050_673_152, 1_318_912)
    bucket = 500_000_000 * 2  # IPG reduce bucket: reduce_bucket_size 5e8 bf16 elements, always
    plan = llama70b_8gpu(zero_stage=3)
    phases = {p.name: p.bytes_by_component for p in plan.phases}
    assert phases["forward"]["communication"] == (live + persistent) * 2 + bucket
    assert phases["backward"]["communication"] == (live + persistent) * 2 + bucket
    assert phases["optimizer-step"]["communication"] == bucket
    # Offloaded parameters run on the GPU too, gathered from a copy of their partition made next
    # to the full buffer: + the largest tensor / 8 ranks while it is gathered.
    offloaded = llama70b_8gpu(zero_stage=3, offload=Offload.OPTIMIZER_AND_PARAMS)
    phases = {p.name: p.bytes_by_component for p in offloaded.phases}
    staged = L70_EMBEDDING / 8 * 2
    assert phases["forward"]["communication"] == pytest.approx(
        (live + persistent) * 2 + staged + bucket, abs=8
    )
    assert phases["optimizer-step"]["communication"] == bucket
    assert forward_states(plan) == pytest.approx(
        L70_TOTAL * (2 + 12) / 8 + (live + persistent) * 2 + bucket, abs=8
    )
    detail = next(c.detail for c in plan.components if c.key == "communication")
    for key in ("stage3_max_live_parameters", "largest tensor", "persistence"):
        assert key in detail


def test_deepspeed_zero3_max_live_and_reuse() -> None:
    # Llama-3.1-70B, 8 GPUs, bf16: stage3_max_live_parameters bounds the prefetch; a parameter
    # used again within stage3_max_reuse_distance stays gathered at the turn into backward, the
    # last ≈ max_reuse / 2 elements of the forward. DeepSpeed's coordinator (Llama-2-7B scaled,
    # benchmarks/deepspeed_zero3.py): max_live 3e8 with reuse 1e9 peaked at 504 M (≈ reuse / 2),
    # with both at 3e8 at 425 M (= 3e8 + its 131 M largest tensor, within 2 %).
    persistent = 80 * 2 * 8192 + 8192
    bucket = 500_000_000 * 2

    def gathered(**knobs: int) -> float:
        plan = llama70b_8gpu(zero_stage=3, **knobs)
        return plan.phases[0].bytes_by_component["communication"] - bucket

    assert gathered() == (1_000_000_000 + L70_EMBEDDING + persistent) * 2
    both = gathered(zero3_max_live=300_000_000, zero3_max_reuse=300_000_000)
    assert both == (300_000_000 + L70_EMBEDDING + persistent) * 2
    # lowering max_live alone: the reuse distance keeps max_reuse / 2 = 5e8 < 3e8 + 1.05e9 here
    assert gathered(zero3_max_live=300_000_000) == both
    # a small largest tensor and a lowered max_live: the turnaround's 5e8 is the working set
    spec = resolve_model("Llama-2-7b-hf")
    req = PlanRequest(model=spec, num_gpus=8, zero_stage=3, zero3_max_live=300_000_000)
    plan = plan_memory(req)
    kept = plan.phases[0].bytes_by_component["communication"] - bucket
    assert kept == pytest.approx((500_000_000 + zero3_persistent(spec, layout(req), 0)) * 2)


def test_fewer_live_parameters_fix() -> None:
    request = PlanRequest(
        model=resolve_model("mt0-xxl"), gpu=resolve_gpu("L4"), mode=Mode.LORA,
        precision=Precision.FP32, zero_stage=3, offload=Offload.OPTIMIZER_AND_PARAMS,
        lora_targets=("q", "v"), micro_batch=8, seq_len=64,
    )  # fmt: skip
    plan = plan_memory(request)
    fix = next(f for f in plan.fixes if f.key == "zero3-fewer-live-parameters")
    assert fix.changes == {"zero3_max_live": "100000000", "zero3_max_reuse": "100000000"}
    # 1e9 → 1e8 gathered fp32 elements: 3.35 GiB allocated, more with the allocator's share
    assert fix.saved_bytes > 900_000_000 * 4
    assert (
        fix.saved_bytes
        == plan.peak_bytes
        - plan_memory(
            replace(request, zero3_max_live=100_000_000, zero3_max_reuse=100_000_000)
        ).peak_bytes
    )


def test_deepspeed_zero3_offload_on_one_gpu_by_version() -> None:
    # bloomz-7b1 LoRA, fp32, ZeRO-3 with parameters and optimizer offloaded, one GPU (the PEFT
    # README's DeepSpeed row). Gathered: 1e9 + the tied 250880 × 4096 embedding (1,027,604,480).
    # DeepSpeed >= 0.9 copies an offloaded tensor to the GPU once when there is one rank;
    # 0.8 ran the all-gather anyway: the partition's GPU copy (the whole tensor) next to the
    # gathered buffer, + 3.83 GiB while the vocabulary matrix is gathered.
    spec = resolve_model("bloomz-7b1")
    base = PlanRequest(
        model=spec, mode=Mode.LORA, precision=Precision.FP32, zero_stage=3,
        offload=Offload.OPTIMIZER_AND_PARAMS, lora_targets=("query_key_value",),
    )  # fmt: skip
    vocab = 250_880 * 4096
    current = plan_memory(base)
    legacy = plan_memory(replace(base, deepspeed_legacy=True))
    comm_now = current.phases[0].bytes_by_component["communication"]
    comm_old = legacy.phases[0].bytes_by_component["communication"]
    assert comm_old - comm_now == pytest.approx(vocab * 4, abs=8)
    assert (comm_old - comm_now) / GIB == pytest.approx(3.83, abs=0.01)
    persistent = zero3_persistent(spec, layout(base), 0)
    assert comm_now == pytest.approx((1e9 + vocab + persistent) * 4 + 500_000_000 * 4, abs=8)
    assert not any("no-op" in w for w in current.warnings)  # offload on one GPU does something
    # the knob only changes offloaded ZeRO-3 gathers: a warning elsewhere
    plain = plan_memory(replace(base, zero_stage=0, offload=Offload.NONE, deepspeed_legacy=True))
    assert any("deepspeed_legacy" in w for w in plain.warnings)


def test_legacy_transformers_keeps_an_untied_t5_head() -> None:
    # mT0-xxl's config unties the head (tie_word_embeddings: false) and its checkpoint stores
    # lm_head.weight: transformers < 5 built it (12.92 B parameters), transformers 5 ties every
    # T5 head (11.90 B). T0_3B's config ties it: no change; other families: no change.
    head = 250_112 * 4096
    for name, extra in (("mt0-xxl", head), ("T0_3B", 0), ("Llama-2-7b-hf", 0)):
        spec = resolve_model(name)
        now = plan_memory(PlanRequest(model=spec, precision=Precision.FP32))
        old = plan_memory(
            PlanRequest(model=spec, precision=Precision.FP32, framework=Framework.HF_LEGACY)
        )
        assert old.total_parameters - now.total_parameters == extra, name
        params = {p.name: p.bytes_by_component["parameters"] for p in old.phases}
        assert params["forward"] == old.total_parameters * 4
    legacy = plan_memory(PlanRequest(model=resolve_model("mt0-xxl"), framework=Framework.HF_LEGACY))
    assert legacy.total_parameters == 12_921_057_280


def test_upgrade_deepspeed_fix_saves_the_second_copy() -> None:
    # mt0-xxl LoRA, fp32, ZeRO-3 + offload on one L4 with DeepSpeed 0.8: does not fit; the
    # upgrade fix re-plans without the second copy of the 250112 × 4096 fp32 LM head (3.82 GiB
    # allocated, more with the allocator's share).
    request = PlanRequest(
        model=resolve_model("mt0-xxl"), gpu=resolve_gpu("L4"), mode=Mode.LORA,
        precision=Precision.FP32, zero_stage=3, offload=Offload.OPTIMIZER_AND_PARAMS,
        lora_targets=("q", "v"), micro_batch=8, seq_len=64, deepspeed_legacy=True,
    )  # fmt: skip
    plan = plan_memory(request)
    fix = next(f for f in plan.fixes if f.key == "upgrade-deepspeed")
    upgraded = plan_memory(replace(request, deepspeed_legacy=False))
    assert fix.changes == {"deepspeed_legacy": "false"}
    assert fix.saved_bytes == plan.peak_bytes - upgraded.peak_bytes
    assert fix.saved_bytes > 250_112 * 4096 * 4
    assert "upgrade-deepspeed" not in {f.key for f in upgraded.fixes}


def test_deepspeed_zero3_caps_count_stored_elements_of_4bit_weights() -> None:
    # QLoRA under ZeRO-3 packs each NF4 weight into bf16 storage (bnb_4bit_quant_storage, which
    # ZeRO-3 needs): DeepSpeed's caps count those stored elements, 4 weights each, so
    # stage3_max_live_parameters (1e9) holds 2 GB of gathered weights, + the largest tensor:
    # Llama-2-70B's bf16 32000 × 8192 embedding (524,288,000 B > a packed 28672 × 8192 MLP
    # weight). The persistent norms stay bf16.
    plan = plan_memory(
        PlanRequest(
            model=resolve_model("Llama-2-70b-hf"), mode=Mode.QLORA, precision=Precision.NF4,
            num_gpus=2, zero_stage=3, lora_targets=("all-linear",), seq_len=2048,
        )
    )  # fmt: skip
    phases = {p.name: p.bytes_by_component["communication"] for p in plan.phases}
    persistent = (80 * 2 * 8192 + 8192) * 2
    gathered = phases["forward"] - phases["optimizer-step"]  # the IPG bucket is in both
    assert gathered == pytest.approx(1_000_000_000 * 2 + 32_000 * 8192 * 2 + persistent, abs=8)
    assert gathered / GIB == pytest.approx(2.35, abs=0.01)


L2_70_LINEAR = 80 * 855_638_016  # the blocks' Linear weights (NF4 under QLoRA)
L2_70_OTHER = 80 * 16_384 + 2 * 262_144_000 + 8192  # norms, embedding, LM head, final norm (bf16)


def qlora_70b_fsdp(**knobs: object) -> MemoryPlan:
    request = PlanRequest(
        model=resolve_model("Llama-2-70b-hf"), mode=Mode.QLORA, precision=Precision.NF4,
        num_gpus=2, fsdp=FsdpKind.FULL, lora_targets=("all-linear",), micro_batch=2,
        checkpointing=Checkpointing.FULL, **knobs,  # type: ignore[arg-type]
    )  # fmt: skip
    return plan_memory(request)


def test_fsdp_shards_the_packed_nf4_weight_but_not_its_quantization_state() -> None:
    # bitsandbytes keeps an NF4 weight's absmax (8-bit per 64 weights, + fp32 per 256 absmax
    # under double quantization: 0.0159 B/weight) on the Linear4bit module, outside the packed
    # parameter FSDP shards and offloads: every rank holds all of it, on the GPU.
    state = (8 / 64 + 32 / (64 * 256)) / 8
    lora_params = qlora_70b_fsdp().trainable_parameters
    sharded = (L2_70_LINEAR * 0.5 + L2_70_OTHER * 2 + lora_params * 2) / 2
    plan = qlora_70b_fsdp()
    params = plan.phases[0].bytes_by_component["parameters"]
    assert params == pytest.approx(sharded + L2_70_LINEAR * state, abs=8)
    assert L2_70_LINEAR * state / GIB == pytest.approx(1.01, abs=0.01)
    offloaded = qlora_70b_fsdp(offload=Offload.OPTIMIZER_AND_PARAMS)
    assert offloaded.phases[0].bytes_by_component["parameters"] == pytest.approx(
        L2_70_LINEAR * state, abs=8
    )
    # torchao's NF4Tensor shards its scalers with the weight (torchtune's FSDP2 QLoRA)
    torchao = qlora_70b_fsdp(quant_kernel=QuantKernel.TORCHAO)
    per_weight = 0.5 + (8 / 64 + 16 / (64 * 256)) / 8
    assert torchao.phases[0].bytes_by_component["parameters"] == pytest.approx(
        (L2_70_LINEAR * per_weight + L2_70_OTHER * 2 + lora_params * 2) / 2, abs=8
    )


def test_fsdp_root_is_gathered_in_its_own_dtype() -> None:
    # FSDP's root unit (embedding, LM head, final norm) stays unsharded in bf16 whatever the
    # blocks are packed into: 2 blocks of packed NF4 + LoRA adapters + the root at 2 B/param.
    plan = qlora_70b_fsdp()
    block_params = 80 * 855_654_400
    lora_params = plan.trainable_parameters
    blocks_bytes = 80 * 855_638_016 * 0.5 + 80 * 16_384 * 2 + lora_params * 2
    per_param = blocks_bytes / (block_params + lora_params)
    root = 2 * 262_144_000 + 8192
    forward = plan.phases[0].bytes_by_component["communication"]
    assert forward == pytest.approx(2 * 855_654_400 * per_param + root * 2, abs=8)
    assert root * 2 / GIB == pytest.approx(0.98, abs=0.01)


def test_deepspeed_zero3_never_gathers_more_than_the_model(tmp_path: Path) -> None:
    # GPT-2 (124.4 M params, fp32): below stage3_max_live_parameters, so the prefetcher ends up
    # with the whole model gathered (its persistent norms and biases included), never more.
    spec = resolve_model("gpt2")
    plan = plan_memory(PlanRequest(model=spec, num_gpus=2, zero_stage=3, precision=Precision.FP32))
    bucket = 500_000_000 * 4  # the IPG reduce bucket: reduce_bucket_size fp32 elements, always
    whole = spec.total_parameters * 4
    for phase in ("forward", "backward"):
        gathered = next(p for p in plan.phases if p.name == phase)
        assert gathered.bytes_by_component["communication"] == pytest.approx(whole + bucket, abs=8)
    # A 2-block tiny Llama (h 256, vocab 1000): the working set is the model itself.
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
