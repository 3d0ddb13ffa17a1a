"""``--kernels liger``: what Liger-Kernel's kernels keep for backward, per token, against the
arithmetic of their code (planner/liger.py cites the files and commits).

* ``LigerRMSNormFunction`` saves ``(X, W, RSTD)``: the input as it comes and one fp32 rstd per
  row, where transformers' ``LlamaRMSNorm`` keeps an fp32 copy of the input, the rstd and the
  normalised input in the weight's dtype (the ``x̂`` the weight's gradient reads).
* ``LigerSiLUMulFunction`` saves ``(a, b)`` and recomputes ``silu(a)`` in backward: no
  activation output; its backward writes da and db into a and b, so of the gated product's
  gradients only dc is new (two i-wide ones where ``LigerPhi3SwiGLUMLP`` chunks a fused
  gate_up output, whose backward concatenates them).
* ``LigerFusedLinearCrossEntropyFunction`` saves ``grad_input`` (rows × hidden) and
  ``grad_weight`` (vocabulary × hidden) computed in forward, and runs the logits in chunks of
  ``next_power_of_2(cdiv(BT, cdiv(V, H)))`` rows.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.cli.main import main
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.planner.liger import flce_chunk_rows
from gpuwarden.types.plan import (
    ActivationFacts,
    Checkpointing,
    Framework,
    FsdpKind,
    Kernels,
    LossImpl,
    MemoryPlan,
    Mode,
    PlanRequest,
    Precision,
)

BF16 = 2
FP32 = 4
TOKENS = 512


def _request(model: str, kernels: Kernels, **knobs: object) -> PlanRequest:
    base = PlanRequest(
        model=resolve_model(model),
        mode=Mode.TRAIN,
        precision=Precision.BF16,
        micro_batch=1,
        seq_len=TOKENS,
        checkpointing=Checkpointing.FULL,
        framework=Framework.HF,
        kernels=kernels,
    )
    return replace(base, **knobs)  # type: ignore[arg-type]


def _block_bytes(plan: MemoryPlan) -> int:
    facts = next(c.facts for c in plan.components if isinstance(c.facts, ActivationFacts))
    (saved,) = facts.per_block_bytes.values()
    return saved


def _phase(plan: MemoryPlan, name: str) -> dict[str, int]:
    (phase,) = [p for p in plan.phases if p.name == name]
    return phase.bytes_by_component


def _hf_norm_bytes(h: int) -> int:
    """transformers' RMSNorm under pure bf16: fp32 input copy, fp32 rstd, bf16 x̂."""
    return FP32 * h + FP32 + BF16 * h


def _liger_norm_bytes(h: int) -> int:
    """LigerRMSNormFunction: X (bf16, as it comes) and RSTD (fp32, one per row)."""
    return BF16 * h + FP32


def test_a_liger_llama_block_keeps_rms_norm_inputs_and_no_activation_output() -> None:
    spec = resolve_model("Meta-Llama-3-8B")
    h, i = spec.hidden_size, spec.intermediate_size
    stock = _block_bytes(plan_memory(_request("Meta-Llama-3-8B", Kernels.NONE)))
    liger = _block_bytes(plan_memory(_request("Meta-Llama-3-8B", Kernels.LIGER)))
    # two RMSNorms per block; SwiGLU's silu(gate) output (bf16, i wide) no longer kept
    per_token = 2 * (_hf_norm_bytes(h) - _liger_norm_bytes(h)) + BF16 * i
    assert stock - liger == per_token * TOKENS


@pytest.mark.parametrize(
    ("model", "product_grads"),
    [("Meta-Llama-3-8B", 1), ("Phi-3-mini-4k-instruct", 2)],
)
def test_a_liger_block_backward_holds_the_in_place_gradients(
    model: str, product_grads: int
) -> None:
    spec = resolve_model(model)
    h, i = spec.hidden_size, spec.intermediate_size
    plan = plan_memory(_request(model, Kernels.LIGER))
    # the residual stream's gradient in and out and one widest (i-wide) gradient (no fp32 norm
    # gradient: dX is written into dY), or the gated product's new gradients beside the
    # stream's: dc (Llama), the concatenated da, db (Phi-3's chunked gate_up, the larger)
    generic = BF16 * i + 2 * BF16 * h
    gated = product_grads * BF16 * i + BF16 * h
    assert _phase(plan, "backward")["temporaries"] == max(generic, gated) * TOKENS


def test_transformers_gated_backward_is_unchanged() -> None:
    spec = resolve_model("Meta-Llama-3-8B")
    h, i = spec.hidden_size, spec.intermediate_size
    plan = plan_memory(_request("Meta-Llama-3-8B", Kernels.NONE))
    generic = 2 * BF16 * i + (2 * BF16 + FP32) * h
    gated = 3 * BF16 * i + BF16 * h  # MulBackward: dc, d(silu(gate)), d(up)
    assert _phase(plan, "backward")["temporaries"] == max(generic, gated) * TOKENS


@pytest.mark.parametrize(
    ("rows", "vocab", "hidden", "chunk"),
    [
        # the code's own comment: "BT = 4096*4, V = 32000, H = 4096 ==> inc_factor = 8,
        # chunk_size = 2048"
        (4096 * 4, 32000, 4096, 2048),
        # Llama 3: cdiv(128256, 4096) = 32 parts; 24,576 rows / 32 = 768 -> 1024
        (24576, 128256, 4096, 1024),
        (4096, 128256, 4096, 128),
        # a vocabulary no wider than the hidden size: one part, capped at the rows
        (100, 2048, 4096, 100),
        (0, 32000, 4096, 0),
    ],
)
def test_flce_chunk_rows_follow_the_kernel(rows: int, vocab: int, hidden: int, chunk: int) -> None:
    assert flce_chunk_rows(rows, vocab, hidden) == chunk


def test_fused_linear_ce_saves_the_head_gradients_from_forward() -> None:
    spec = resolve_model("Meta-Llama-3-8B")
    h, v = spec.hidden_size, spec.vocab_size
    request = _request("Meta-Llama-3-8B", Kernels.NONE, loss=LossImpl.FUSED, seq_len=4096)
    plan = plan_memory(request)
    facts = next(c.facts for c in plan.components if isinstance(c.facts, ActivationFacts))
    grad_input = 4096 * h * BF16
    grad_weight = v * h * BF16  # the head trains in full fine-tuning
    assert facts.loss_saved_bytes == grad_input + grad_weight
    # forward: one 128-row bf16 logits chunk, an fp32 loss per row, the shifted hidden copy
    chunk = flce_chunk_rows(4096, v, h) * v * BF16
    assert _phase(plan, "forward")["logits"] == chunk + FP32 * 4096 + 4096 * h * BF16


def test_lora_keeps_no_head_weight_gradient() -> None:
    spec = resolve_model("Meta-Llama-3-8B")
    request = _request("Meta-Llama-3-8B", Kernels.NONE, loss=LossImpl.FUSED, mode=Mode.LORA)
    facts = next(
        c.facts for c in plan_memory(request).components if isinstance(c.facts, ActivationFacts)
    )
    assert facts.loss_saved_bytes == TOKENS * spec.hidden_size * BF16


def test_liger_lowers_the_v528_backward_to_its_kernels() -> None:
    """Liger's own llama_B_48 log's settings (V528): FSDP1 over four A100s, batch 48 × 512; the
    plan's peak drops with the kernels, and the note says which."""
    request = _request(
        "Meta-Llama-3-8B",
        Kernels.LIGER,
        precision=Precision.BF16_MIXED,
        framework=Framework.HF_LEGACY,
        loss=LossImpl.FUSED,
        micro_batch=48,
        num_gpus=4,
        fsdp=FsdpKind.FULL,
        gpu=resolve_gpu("a100-sxm4-80gb"),
    )
    liger = plan_memory(request)
    stock = plan_memory(replace(request, kernels=Kernels.NONE))
    assert liger.predicted.max_allocated_bytes < stock.predicted.max_allocated_bytes
    assert "RMSNorm" in liger.notes["kernels"]
    assert "kernels" not in stock.notes


@pytest.mark.parametrize(
    ("knobs", "reference"),
    [
        ({"framework": Framework.TORCHTUNE}, "liger-framework"),
        ({"framework": Framework.MEGATRON}, "liger-framework"),
    ],
)
def test_liger_outside_transformers_is_refused(knobs: dict[str, object], reference: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        plan_memory(_request("Meta-Llama-3-8B", Kernels.LIGER, **knobs))
    assert refused.value.reference == reference


def _cli_plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["plan", "Meta-Llama-3-8B", *args, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_the_cli_plans_liger_with_its_fused_loss(capsys: pytest.CaptureFixture[str]) -> None:
    document = _cli_plan(capsys, "--kernels", "liger")
    assert document["request"]["kernels"] == "liger"
    # apply_liger_kernel_to_llama's default: fused_linear_cross_entropy=True
    assert document["request"]["loss"] == "fused"
    assert "RMSNorm" in document["notes"]["kernels"]


def test_an_explicit_loss_wins_over_liger_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli_plan(capsys, "--kernels", "liger", "--loss", "full")["request"]["loss"] == "full"
    assert _cli_plan(capsys)["request"]["loss"] == "full"


def test_the_cli_refuses_liger_on_another_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "Meta-Llama-3-8B", "--kernels", "liger", "--framework", "torchtune"]) == 2
    assert "liger-framework" in capsys.readouterr().err


@pytest.mark.parametrize("model", ["T0_3B", "bert-large-uncased"])
def test_liger_on_a_model_it_does_not_patch_is_refused(model: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        plan_memory(_request(model, Kernels.LIGER))
    assert refused.value.reference == "liger-model"


def test_a_model_type_liger_has_no_patch_for_is_refused() -> None:
    """Liger's _apply_liger_kernel only logs for a type outside MODEL_TYPE_TO_APPLY_LIGER_FN
    (GPT-2, Falcon, Phi-2): planning it as patched would plan kernels that never ran."""
    from gpuwarden.catalog import resolve_model
    from gpuwarden.errors import InvalidConfigError
    from gpuwarden.planner.liger import check_kernels, patches_model
    from gpuwarden.types.plan import Kernels, PlanRequest

    gpt2 = resolve_model("gpt2-large")
    assert not patches_model(gpt2)
    with pytest.raises(InvalidConfigError, match="no patch for model type gpt2"):
        check_kernels(PlanRequest(model=gpt2, kernels=Kernels.LIGER))
    assert patches_model(resolve_model("Meta-Llama-3-8B"))


def test_granite_keeps_its_full_logits_under_liger() -> None:
    """apply_liger_kernel_to_granite defaults to Liger's cross-entropy on the full logits (its
    fused loss raises NotImplementedError: granite scales the logits)."""
    import dataclasses

    from gpuwarden.catalog import resolve_model
    from gpuwarden.planner.liger import default_loss
    from gpuwarden.types.plan import Kernels, LossImpl

    llama = resolve_model("Meta-Llama-3-8B")
    granite = dataclasses.replace(llama, model_type="granite")
    assert default_loss(Kernels.LIGER, llama) is LossImpl.FUSED
    assert default_loss(Kernels.LIGER, granite) is LossImpl.FULL
    assert default_loss(Kernels.NONE, llama) is LossImpl.FULL
