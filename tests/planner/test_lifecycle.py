"""The job's lifecycle (load, evaluation, checkpoint save) and the stack profiles (stacks.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.lifecycle import _cast_transient
from gpuwarden.planner.plan import compute_plan
from gpuwarden.report.plan import component_detail
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    FsdpKind,
    MemoryPlan,
    Mode,
    PlanRequest,
    Precision,
    SaveMode,
)
from gpuwarden.units import GIB


def _phase(plan_phases: object, name: str) -> int | None:
    for phase in plan_phases:  # type: ignore[attr-defined]
        if phase.name == name:
            return int(phase.total)
    return None


def _llama7b() -> PlanRequest:
    return PlanRequest(model=resolve_model("Llama-2-7b-hf"), mode=Mode.LORA, seq_len=512)


def test_transformers_4_loads_fp32_weights_and_the_load_phase_is_the_peak() -> None:
    request = replace(_llama7b(), framework=Framework.HF_LEGACY)
    plan = compute_plan(request)
    assert plan.peak_phase == "load"
    params = resolve_model("Llama-2-7b-hf").total_parameters
    assert plan.at_peak()["parameters"] >= params * 4  # fp32 while loading
    assert "fp32" in plan.notes["load"]
    # torch_dtype=bfloat16: the load phase is gone, the step is the peak again
    fixed = compute_plan(replace(request, load_dtype="bf16"))
    assert _phase(fixed.phases, "load") is None
    assert fixed.peak_bytes < plan.peak_bytes


def test_the_load_fix_is_offered_when_loading_does_not_fit() -> None:
    request = replace(_llama7b(), framework=Framework.HF_LEGACY, gpu=resolve_gpu("L4"))
    plan = plan_memory(request)
    assert plan.peak_phase == "load"
    keys = [f.key for f in plan.fixes]
    assert "load-in-bf16" in keys


def test_transformers_5_loads_the_checkpoint_dtype() -> None:
    plan = compute_plan(_llama7b())  # Llama-2's config stores float16: 2 bytes, no load phase
    assert _phase(plan.phases, "load") is None


def test_full_state_dict_without_cpu_offload_clones_the_whole_model_on_every_rank() -> None:
    base = PlanRequest(
        model=resolve_model("Llama-2-13b-hf"),
        mode=Mode.TRAIN,
        num_gpus=8,
        fsdp=FsdpKind.FULL,
        checkpointing=Checkpointing.FULL,
        seq_len=1024,
    )
    sharded = compute_plan(replace(base, save=SaveMode.SHARDED))
    offloaded = compute_plan(replace(base, save=SaveMode.FULL))
    on_gpu = compute_plan(replace(base, save=SaveMode.FULL_GPU))
    assert _phase(sharded.phases, "checkpoint-save") is None
    save = _phase(on_gpu.phases, "checkpoint-save")
    assert save is not None and on_gpu.peak_phase == "checkpoint-save"
    # fp32 FSDP parameters: the unsharded clones are 4 B per parameter
    whole = resolve_model("Llama-2-13b-hf").total_parameters * 4
    assert save - (_phase(offloaded.phases, "checkpoint-save") or 0) >= 0.95 * whole


def test_litgpt_fsdp_lora_accumulates_unsharded_full_size_gradients() -> None:
    spec = resolve_model("Llama-2-7b-hf")
    base = PlanRequest(
        model=spec,
        mode=Mode.LORA,
        precision=Precision.BF16,
        num_gpus=2,
        fsdp=FsdpKind.FULL,
        checkpointing=Checkpointing.FULL,
        framework=Framework.LITGPT,
        seq_len=1304,
    )
    accumulating = compute_plan(replace(base, grad_accum=64))
    stepping = compute_plan(replace(base, grad_accum=1))
    hf = compute_plan(replace(base, framework=Framework.HF, grad_accum=64))
    blocks = spec.total_parameters - spec.parameters.embedding - spec.parameters.lm_head
    # no_sync keeps every Block unit's full-size bf16 gradient, unsharded
    assert accumulating.component("gradients") >= 2 * blocks
    # without accumulation the flat gradient is reduce-scattered: half of it per rank
    assert stepping.component("gradients") < 0.6 * accumulating.component("gradients")
    # transformers' PEFT wraps no such mixed units: adapters only
    assert hf.component("gradients") < 0.1 * GIB


def test_the_gradients_line_names_what_the_litgpt_units_hold() -> None:
    # The line next to the number must describe the same bytes: the whole Block units'
    # gradients, unsharded under no_sync, not the adapters' sharded over the ranks.
    spec = resolve_model("Llama-2-7b-hf")
    base = PlanRequest(
        model=spec,
        mode=Mode.LORA,
        precision=Precision.BF16,
        num_gpus=2,
        fsdp=FsdpKind.FULL,
        framework=Framework.LITGPT,
        grad_accum=64,
    )
    accumulating = plan_memory(base)
    stepping = plan_memory(replace(base, grad_accum=1))

    def line(plan: MemoryPlan) -> str:
        return component_detail(plan, next(c for c in plan.components if c.key == "gradients"))

    count, rest = line(accumulating).split(" params × 2 B: ", 1)
    with_grad = int(count.replace(",", ""))
    blocks = spec.total_parameters - spec.parameters.embedding - spec.parameters.lm_head
    assert with_grad == pytest.approx(blocks + accumulating.trainable_parameters, rel=1e-5)
    assert 2 * with_grad <= accumulating.component("gradients")
    assert rest.startswith("FSDP units mixing frozen and trainable parameters")
    assert rest.endswith(f"({accumulating.trainable_parameters:,} trainable)")
    assert ", sharded over 2:" in line(stepping)


def test_op_level_sac_keeps_more_than_full_and_less_than_none() -> None:
    base = PlanRequest(
        model=resolve_model("Llama-3.1-8B"),
        framework=Framework.TORCHTITAN,
        seq_len=8192,
        micro_batch=2,
        num_gpus=8,
        fsdp=FsdpKind.FULL,
    )
    acts = {
        c: compute_plan(replace(base, checkpointing=c)).component("activations")
        for c in (Checkpointing.NONE, Checkpointing.OP, Checkpointing.FULL)
    }
    assert acts[Checkpointing.FULL] < acts[Checkpointing.OP] < acts[Checkpointing.NONE]
    # per block: input + q (4096) + v (1024) + gate (14336) + down (4096) + SDPA out (4096)
    spec = base.model
    tokens = 8192 * 2
    per_block = (4096 + 4096 + 1024 + 14336 + 4096 + 4096) * 2 + 4 * spec.num_heads
    floor = per_block * tokens * spec.num_layers
    assert acts[Checkpointing.OP] >= floor


def test_pipeline_local_batch_is_split_into_microbatches() -> None:
    spec = resolve_model("Llama-3.1-70B")
    base = PlanRequest(model=spec, num_gpus=64, tp=8, pp=8, checkpointing=Checkpointing.FULL)
    split = compute_plan(replace(base, micro_batch=32, pp_microbatch_size=1))
    spelled = compute_plan(replace(base, micro_batch=1, grad_accum=32))
    whole = compute_plan(replace(base, micro_batch=32))
    assert split.component("activations") == spelled.component("activations")
    assert whole.component("activations") > 4 * split.component("activations")


def test_litgpt_validates_and_generates_during_training() -> None:
    request = replace(_llama7b(), framework=Framework.LITGPT, precision=Precision.BF16)
    plan = compute_plan(request)
    assert _phase(plan.phases, "evaluation") is not None
    assert "generation KV cache" in plan.notes["evaluation"]
    hf = compute_plan(replace(request, framework=Framework.HF))
    assert _phase(hf.phases, "evaluation") is None  # no evaluation unless --eval-batch
    evaluated = compute_plan(replace(request, framework=Framework.HF, eval_batch=8))
    assert _phase(evaluated.phases, "evaluation") is not None


def test_litgpt_packs_the_lm_head_and_dequantizes_in_two_copies() -> None:
    request = PlanRequest(
        model=resolve_model("phi-1_5"), mode=Mode.INFER, precision=Precision.NF4, new_tokens=50
    )
    hf = compute_plan(request)
    lit = compute_plan(replace(request, framework=Framework.LITGPT))
    p = request.model.parameters
    head = p.lm_head or p.embedding
    # the packed head saves ≈ 1.44 B per head weight; two fp16/bf16 dequant copies of it cost 4
    assert lit.component("parameters") < hf.component("parameters")
    assert "dequantize" in lit.notes
    assert lit.component("activations") - hf.component("activations") >= 0.9 * head * 2


def test_unknown_stack_behaviour_is_said_in_the_plan() -> None:
    request = replace(_llama7b(), framework=Framework.TORCHTITAN)
    plan = compute_plan(request)
    assert "LoRA" in plan.notes["stack_unknown"]
    assert plan.notes["framework"].startswith("torchtitan")


def test_casting_a_moe_model_converts_its_expert_tensors_too() -> None:
    # Module.to() converts one tensor at a time: the first routed-expert projection (one 3-D
    # tensor for all 8 experts, as transformers 5 stores it) is converted while only the
    # embedding and the first block's attention have shrunk before it.
    spec = resolve_model("Mixtral-8x7B-v0.1")
    first = spec.parameters.layers[0].linears
    experts = next(lin for lin in first if lin.expert)
    cast_before = spec.parameters.embedding + sum(
        lin.in_features * lin.out_features for lin in first[: first.index(experts)]
    )
    whole = experts.count * experts.in_features * experts.out_features
    assert _cast_transient(PlanRequest(model=spec), 1) == whole - cast_before
