"""Stack behaviours read in each stack's code (planner/stacks.py), as closed-form invariants.

What exact mode can trace (op-level SAC, the fp32 load, the evaluation forward, FSDP's unit
gradients) is checked against it in ``test_stacks_vs_exact.py``; here the behaviours it cannot
run: torchtitan's two versions (pipeline microbatches, the compiled loss), torch's
``loss_parallel``, DTensor TP's gathered inputs, torchao's 2024 fp8 weight copies, and LitGPT's
GELU, shared QKV adapter, untied head and bitsandbytes pin.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.traits import traits_for
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import families, stacks
from gpuwarden.planner.activations import Training, item_bytes, pipeline_microbatches
from gpuwarden.planner.layout import layout
from gpuwarden.planner.loss import loss_buffers
from gpuwarden.planner.plan import compute_plan
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.tensors import Ctx, Dt, Saved
from gpuwarden.planner.validate import validate
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    FsdpKind,
    Mode,
    Optimizer,
    PipelineSchedule,
    PlanRequest,
    Precision,
)


def _forward(request: PlanRequest, component: str = "activations") -> int:
    plan = compute_plan(request)
    phase = next(p for p in plan.phases if p.name == "forward")
    return phase.bytes_by_component.get(component, 0)


# --- torchtitan: 2024-12 and 2025-06 ----------------------------------------------------------


def _pipeline(framework: Framework, **knobs: object) -> PlanRequest:
    return replace(
        PlanRequest(
            model=resolve_model("Llama-3.1-70B"),
            num_gpus=64,
            tp=8,
            pp=8,
            micro_batch=32,
            checkpointing=Checkpointing.FULL,
            framework=framework,
        ),
        **knobs,
    )


def test_torchtitan_2024_splits_the_local_batch_into_one_microbatch_per_stage() -> None:
    old = _pipeline(Framework.TORCHTITAN_2024)
    assert pipeline_microbatches(old) == (32 // 8, 8)
    looped = replace(old, pp_schedule=PipelineSchedule.INTERLEAVED, virtual_stages=2)
    assert pipeline_microbatches(looped) == (32 // 16, 16)
    # naming the size wins over the version's default
    assert pipeline_microbatches(replace(old, pp_microbatch_size=1)) == (1, 32)
    # torchtitan refuses a local batch the stage count does not divide
    with pytest.raises(InvalidConfigError) as err:
        validate(replace(old, micro_batch=12))
    assert err.value.reference == "pp-microbatches-uneven"


def test_the_bubble_warning_counts_pipeline_microbatches_not_accumulation_steps() -> None:
    split = _pipeline(Framework.TORCHTITAN, pp_microbatch_size=1)  # 32 microbatches
    assert not any("bubble" in w for w in validate(split))
    whole = _pipeline(Framework.HF, micro_batch=1)
    assert any("1 micro-batch(es) for 8 pipeline stages" in w for w in validate(whole))


def _loss_request(framework: Framework, *, tp: int = 1, compile_: bool = True) -> PlanRequest:
    return PlanRequest(
        model=resolve_model("Llama-3.1-8B"),
        framework=framework,
        compile=compile_,
        tp=tp,
        num_gpus=8,
        fsdp=FsdpKind.FULL,
        sequence_parallel=tp > 1,
        seq_len=8192,
        micro_batch=2,
    )


def test_torchtitan_2025_compiles_the_loss_and_keeps_only_the_bf16_logits() -> None:
    request = _loss_request(Framework.TORCHTITAN)
    elems = 2 * 8192 * request.model.vocab_size
    compiled = loss_buffers(request, recipe(request), 2 * 8192, 1)
    assert (compiled.saved, compiled.transient_forward) == (2 * elems, 0)
    assert compiled.transient_backward == 2 * elems  # the bf16 gradient, written directly
    old = replace(request, framework=Framework.TORCHTITAN_2024)
    eager = loss_buffers(old, recipe(old), 2 * 8192, 1)
    # 2024-12 never compiled the loss: fp32 log-softmax kept, fp32 copy and gradients around it
    assert eager.saved == 4 * elems
    assert eager.transient_backward == 8 * elems
    # at the end of the forward the 2025 plan holds the bf16 logits and one bf16 gradient
    step = _forward(request) + _forward(request, "logits")
    assert _forward(old) + _forward(old, "logits") - step == (4 + 8 - 2 - 2) * elems


def test_loss_parallel_holds_three_fp32_copies_of_the_vocabulary_shard() -> None:
    request = _loss_request(Framework.TORCHTITAN_2024, tp=8)
    tokens = 2 * 8192
    shard = tokens * request.model.vocab_size / 8
    lp = loss_buffers(request, recipe(request), tokens, 8)
    # x (fp32 copy), x − max and exp(x − max) next to the bf16 logits; then the saved
    # log-softmax and zeros + exp + their sum in the fused backward
    assert lp.saved == int(4 * shard)
    assert lp.transient_forward == int((2 + 8) * shard)
    assert lp.transient_backward == int(12 * shard)
    plain = loss_buffers(replace(request, framework=Framework.HF), recipe(request), tokens, 8)
    assert plain.transient_forward + plain.saved < lp.transient_forward + lp.saved


def test_dtensor_tensor_parallel_keeps_the_gathered_input_of_a_column_parallel_linear() -> None:
    request = _loss_request(Framework.TORCHTITAN_2024, tp=8)
    rc = recipe(request)
    h = request.model.hidden_size
    norm_out = Saved("attention norm output", h, Dt.RES, frozenset({"q_proj"}), tp=False)
    trains = frozenset({"q_proj"})
    megatron = Training(trains, True, frozenset(), False)
    dtensor = replace(megatron, gathered_inputs=True)
    assert item_bytes(norm_out, rc, megatron, 8, True) == h * rc.res_bytes / 8
    assert item_bytes(norm_out, rc, dtensor, 8, True) == h * rc.res_bytes
    # a row-parallel input (split by TP) is the local shard either way
    down_in = Saved("down_proj input", 4 * h, Dt.ACT, frozenset({"down_proj"}))
    trains_down = replace(dtensor, trainable=frozenset({"down_proj"}))
    assert item_bytes(down_in, rc, trains_down, 8, True) == 4 * h * rc.act_bytes / 8


def test_torchao_2024_keeps_an_fp8_copy_of_every_weight_without_checkpointing() -> None:
    spec = resolve_model("Llama-3.1-8B")
    base = PlanRequest(
        model=spec,
        precision=Precision.FP8,
        framework=Framework.TORCHTITAN_2024,
        num_gpus=8,
        fsdp=FsdpKind.FULL,
        seq_len=2048,
    )
    saved = _forward(base)
    blocks = sum(
        lin.count * lin.in_features * lin.out_features
        for layer in spec.parameters.layers
        for lin in layer.linears
    )
    assert saved - _forward(replace(base, float8_recompute_weight=True)) == blocks
    # a gathered fp8 weight is FSDP's buffer, freed at reshard; checkpointing recomputes it
    assert _forward(replace(base, float8_all_gather=True)) == saved - blocks
    recomputed = replace(base, checkpointing=Checkpointing.FULL)
    assert _forward(recomputed) == _forward(replace(recomputed, float8_recompute_weight=True))
    # torchao of 2025 keeps the bf16 input and a view of the weight: no copies
    new = replace(base, framework=Framework.TORCHTITAN)
    assert _forward(new) == _forward(replace(new, float8_recompute_weight=True))
    assert "force_recompute_fp8_weight_in_bwd" in compute_plan(base).notes["float8"]


# --- LitGPT ------------------------------------------------------------------------------------


def test_litgpt_gelu_is_torch_s_kernel_keeping_one_tensor_where_gelu_new_keeps_four() -> None:
    spec = resolve_model("phi-1_5")
    layer = spec.parameters.layers[0]
    python_gelu = families.block(spec, layer, Ctx(s=512, eager=False, compile=False))
    native = families.block(spec, layer, Ctx(s=512, eager=False, compile=False, native_gelu=True))
    i = spec.intermediate_size
    saved = sum(x.width for x in python_gelu if x.dtype is Dt.ACT)
    assert saved - sum(x.width for x in native if x.dtype is Dt.ACT) == 3 * i


def test_litgpt_merges_the_heads_of_a_heads_first_sdpa_output_into_a_copy() -> None:
    """LitGPT builds q by torch.cat in (B, nh, T, hs), so the output projection's input is a
    copy of SDPA's output (which SDPA keeps too), as HF's partial-RoPE families do."""
    spec = resolve_model("TinyLlama-1.1B-intermediate-step-1431k-3T")
    assert not spec.traits.sdpa_out_copy  # HF Llama hands SDPA a (B, T, nh, hs) view
    layer = spec.parameters.layers[0]
    hf = families.block(spec, layer, Ctx(s=2048, eager=False, compile=False))
    lit = families.block(spec, layer, Ctx(s=2048, eager=False, compile=False, heads_first_q=True))
    assert "attention output = o_proj input" in [x.what for x in hf]
    assert {"attention output", "o_proj input"} <= {x.what for x in lit}
    width = spec.num_heads * spec.head_dim
    assert sum(x.width for x in lit) - sum(x.width for x in hf) == width
    assert stacks.PROFILES[Framework.LITGPT].heads_first_q


@pytest.mark.parametrize(
    ("mode", "targets", "copies"),
    [(Mode.TRAIN, (), 1), (Mode.LORA, ("q_proj", "v_proj"), 0)],
)
def test_the_merged_heads_copy_is_kept_only_where_the_projection_needs_its_input(
    monkeypatch: pytest.MonkeyPatch, mode: Mode, targets: tuple[str, ...], copies: int
) -> None:
    spec = resolve_model("TinyLlama-1.1B-intermediate-step-1431k-3T")
    request = PlanRequest(
        model=spec,
        mode=mode,
        precision=Precision.BF16,
        framework=Framework.LITGPT,
        seq_len=512,
        micro_batch=2,
        eval_batch=0,
        lora_targets=targets,
    )
    with_copy = _forward(request)
    lit = stacks.PROFILES[Framework.LITGPT]
    monkeypatch.setitem(stacks.PROFILES, Framework.LITGPT, replace(lit, heads_first_q=False))
    without = _forward(request)
    # frozen o_proj (LoRA on q and v): nothing keeps the copy for backward
    per_copy = spec.num_layers * 2 * 512 * spec.num_heads * spec.head_dim * 2
    assert with_copy - without == copies * per_copy


def test_litgpt_adapters_on_the_fused_qkv_share_one_dropout_of_its_input() -> None:
    spec = resolve_model("Llama-2-7b-hf")

    def dropout_cost(framework: Framework) -> int:
        request = PlanRequest(
            model=spec,
            mode=Mode.LORA,
            precision=Precision.FP32,  # adapters in the base's dtype in both stacks
            framework=framework,
            seq_len=512,
            optimizer=Optimizer.NONE,
            eval_batch=0,
        )
        return _forward(replace(request, lora_dropout=0.05)) - _forward(request)

    # PEFT: a dropped copy + mask per adapted Linear (q and v); LitGPT: one for both
    h, tokens = spec.hidden_size, 512
    per_copy = spec.num_layers * tokens * h * (4 + 1)
    saving = dropout_cost(Framework.HF) - dropout_cost(Framework.LITGPT)
    assert saving == pytest.approx(per_copy, rel=0.02)


def test_litgpt_keeps_a_head_of_its_own_for_a_tied_model() -> None:
    spec = resolve_model("gemma-2b")
    assert spec.tied_embeddings
    request = PlanRequest(model=spec, mode=Mode.LORA, precision=Precision.BF16)
    hf = compute_plan(request)
    lit = compute_plan(replace(request, framework=Framework.LITGPT))
    assert lit.total_parameters - hf.total_parameters == spec.vocab_size * spec.hidden_size


def test_a_stack_s_gathered_units_and_layout_are_untouched_by_the_profiles() -> None:
    """The profiles change what a stack keeps, never how the job is laid out."""
    request = _pipeline(Framework.TORCHTITAN_2024)
    assert layout(request) == layout(replace(request, framework=Framework.HF))


# --- PEFT's adapter dtype ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "fp32"),
    [
        (Framework.HF, True),
        (Framework.HF_LEGACY, True),
        (Framework.TORCHTITAN, True),  # no LoRA of its own: planned as PEFT
        (Framework.LITGPT, False),
        (Framework.TORCHTUNE, False),
    ],
)
@pytest.mark.parametrize("precision", [Precision.BF16, Precision.FP16])
def test_peft_stacks_keep_fp32_adapters_on_a_half_precision_base(
    framework: Framework, fp32: bool, precision: Precision
) -> None:
    # PEFT's get_peft_model(autocast_adapter_dtype=True) upcasts fp16 / bf16 adapters to fp32;
    # LitGPT's and torchtune's own LoRA build them in the model's dtype
    request = PlanRequest(
        model=resolve_model("Llama-2-7b-hf"),
        mode=Mode.LORA,
        precision=precision,
        framework=framework,
    )
    rc = recipe(request)
    assert (rc.adapter_bytes, rc.grad_bytes, rc.state_dtype_bytes) == (
        (4, 4, 4) if fp32 else (2, 2, 2)
    )
    assert rc.act_bytes == 2
    assert not rc.adapters_autocast  # no torch.autocast: the fp32 adapters compute in fp32
    mixed = recipe(replace(request, precision=Precision.BF16_MIXED))
    assert mixed.adapter_bytes == 4
    assert mixed.adapters_autocast


def test_fp32_adapters_without_autocast_leave_t5s_loss_on_its_bf16_logits() -> None:
    # modeling_t5.py calls CrossEntropyLoss on the logits as they are; only autocast upcasts it
    spec = resolve_model("Llama-2-7b-hf")
    t5 = replace(spec, model_type="t5", traits=traits_for("t5", {}))
    request = PlanRequest(model=t5, mode=Mode.LORA, precision=Precision.BF16, seq_len=512)
    peft = loss_buffers(request, recipe(request), 512, 1)
    tuned = replace(request, framework=Framework.TORCHTUNE)
    assert peft == loss_buffers(tuned, recipe(tuned), 512, 1)
    mixed = replace(request, precision=Precision.BF16_MIXED)
    assert loss_buffers(mixed, recipe(mixed), 512, 1).saved > peft.saved
