"""The 4-bit (NF4) base: which kernel keeps what for backward, and what its weights cost.

bitsandbytes < 0.43.2's ``MatMul4Bit`` kept the input of every 4-bit Linear whose input requires
grad (``ctx.tensors = (A, B)``); bitsandbytes PR #1270 (0.43.2) and torchao's ``linear_nf4``
keep only the weight. Expected bytes are derived by hand from the model configs in
``shared/fixtures/models``: the distinct Linear inputs of a Llama block are the attention-norm
output (q, k, v), the o_proj input, the MLP-norm output (gate, up) and the down_proj input.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_model
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.planner.precision import recipe as precision_recipe
from gpuwarden.planner.quant_kernel import kernel_for_bnb_release
from gpuwarden.planner.versions import release
from gpuwarden.report.plan import component_detail
from gpuwarden.types.plan import (
    Checkpointing,
    MemoryPlan,
    Mode,
    Optimizer,
    PlanRequest,
    Precision,
    QuantKernel,
)

BF16 = 2


def config(fixtures: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((fixtures / "models" / f"{name}.json").read_text())
    return data


def qlora(name: str, **knobs: Any) -> PlanRequest:
    base: dict[str, Any] = {
        "model": resolve_model(name),
        "mode": Mode.QLORA,
        "precision": Precision.NF4,
        "optimizer": Optimizer.ADAMW,
        "micro_batch": 2,
        "seq_len": 512,
        "lora_rank": 32,
        "lora_targets": ("q_proj", "v_proj"),
        "lora_dropout": 0.05,
    }
    return PlanRequest(**{**base, **knobs})


def phase(plan: MemoryPlan, name: str) -> dict[str, int]:
    return next(p.bytes_by_component for p in plan.phases if p.name == name)


def saved_at_forward(request: PlanRequest) -> int:
    return phase(plan_memory(request), "forward")["activations"]


def test_legacy_bnb_keeps_every_linear_input_but_layer_0_attention(fixtures: Path) -> None:
    # Llama-2-7B, q/v adapters with dropout (the adapters keep their dropped copy, not x):
    # per block the legacy kernel adds h (attention-norm output) + h (MLP-norm output) + i
    # (down_proj input); the o_proj input is the SDPA output, saved by attention anyway. In
    # layer 0 the embedding is frozen, so q/k/v's input needs no grad: that block adds h + i.
    cfg = config(fixtures, "Llama-2-7b-hf")
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    tokens = 2 * 512
    expected = ((2 * h + i) * layers - h) * BF16 * tokens
    legacy = saved_at_forward(qlora("Llama-2-7b-hf", quant_kernel=QuantKernel.BNB_LEGACY))
    current = saved_at_forward(qlora("Llama-2-7b-hf"))
    assert legacy - current == expected == 1_249_902_592


def test_adapter_without_dropout_already_keeps_the_shared_input(fixtures: Path) -> None:
    # lora_dropout 0 and bf16 adapters: lora_A on q and v keeps the attention-norm output, the
    # very tensor bitsandbytes would keep, so the legacy kernel adds only h + i per block.
    cfg = config(fixtures, "Llama-2-7b-hf")
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    request = qlora("Llama-2-7b-hf", lora_dropout=0.0)
    legacy = saved_at_forward(replace(request, quant_kernel=QuantKernel.BNB_LEGACY))
    assert legacy - saved_at_forward(request) == (h + i) * layers * BF16 * 2 * 512


def test_parallel_block_shares_one_input_for_qkv_and_fc1(fixtures: Path) -> None:
    # phi-2: one LayerNorm feeds q, k, v and fc1 (h), the dense input is a copy of the merged
    # heads (h), fc2 reads the GELU output (i). Layer 0: only dense's input requires grad.
    cfg = config(fixtures, "phi-2")
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    legacy = saved_at_forward(qlora("phi-2", quant_kernel=QuantKernel.BNB_LEGACY))
    current = saved_at_forward(qlora("phi-2"))
    assert legacy - current == ((2 * h + i) * (layers - 1) + h) * BF16 * 2 * 512


def test_under_checkpointing_only_the_recomputed_block_keeps_them(fixtures: Path) -> None:
    cfg = config(fixtures, "Llama-2-7b-hf")
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    request = qlora("Llama-2-7b-hf", checkpointing=Checkpointing.FULL)
    legacy = plan_memory(replace(request, quant_kernel=QuantKernel.BNB_LEGACY))
    current = plan_memory(request)
    assert phase(legacy, "forward")["activations"] == phase(current, "forward")["activations"]
    one_block = (2 * h + i) * BF16 * 2 * 512
    assert (
        phase(legacy, "backward")["activations"] - phase(current, "backward")["activations"]
        == one_block
    )


def test_torchao_keeps_what_current_bnb_keeps() -> None:
    torchao = qlora("Llama-2-7b-hf", quant_kernel=QuantKernel.TORCHAO)
    assert saved_at_forward(torchao) == saved_at_forward(qlora("Llama-2-7b-hf"))


@pytest.mark.parametrize(
    ("knobs", "bytes_per_weight"),
    [
        ({}, 0.5 + (8 / 64 + 32 / (64 * 256)) / 8),  # QLoRA's NF4 + double quantization
        ({"double_quant": False}, 0.5 + 4 / 64),  # one fp32 absmax per 64 weights
        ({"quant_kernel": QuantKernel.TORCHAO}, 0.5 + 1 / 64 + 2 / (64 * 256)),
    ],
)
def test_nf4_weight_bytes(knobs: dict[str, Any], bytes_per_weight: float) -> None:
    spec = resolve_model("Llama-2-7b-hf")
    plan = plan_memory(qlora("Llama-2-7b-hf", **knobs))
    linear = spec.parameters.linear_parameters
    adapters = plan.trainable_parameters
    expected = linear * bytes_per_weight + (spec.total_parameters - linear) * 2 + adapters * 2
    assert plan.component("parameters") == pytest.approx(expected, rel=1e-9)


def test_double_quant_saves_what_litgpt_measured_between_nf4_and_nf4_dq() -> None:
    # LitGPT resource tables, Llama-2-7B inference: bnb.nf4 4.57 GB vs bnb.nf4-dq 4.26 GB
    # (max_memory_allocated). The difference is (0.5625 − 0.5159) B × Linear weights.
    infer = {"mode": Mode.INFER, "optimizer": Optimizer.NONE, "prompt_tokens": 10}
    single = plan_memory(qlora("Llama-2-7b-hf", double_quant=False, **infer))
    double = plan_memory(qlora("Llama-2-7b-hf", **infer))
    gap = single.predicted.max_allocated_bytes - double.predicted.max_allocated_bytes
    assert gap / 1e9 == pytest.approx(4.57 - 4.26, abs=0.02)


def test_plan_names_the_kernel_and_its_source() -> None:
    plan = plan_memory(qlora("Llama-2-7b-hf", quant_kernel=QuantKernel.BNB_LEGACY))
    assert "PR #1270" in plan.notes["quant_kernel"]
    activations = next(c for c in plan.components if c.key == "activations")
    detail = component_detail(plan, activations)
    assert "bitsandbytes < 0.43.2" in detail and "PR #1270" in detail
    assert "double quantization" in plan.notes["nf4_weights"]


def kernel_for_bnb_version(version: str) -> QuantKernel | None:
    """What --bnb-version picks: the kernel of the release, None when unreadable (exit 2)."""
    parts = release(version)
    return None if parts is None else kernel_for_bnb_release(parts)


@pytest.mark.parametrize(
    ("version", "kernel"),
    [
        ("0.41.1", QuantKernel.BNB_LEGACY),
        ("0.43.1", QuantKernel.BNB_LEGACY),
        ("0.43.1+cu121", QuantKernel.BNB_LEGACY),
        ("0.43.2", QuantKernel.BNB),
        ("0.45", QuantKernel.BNB),
        ("1.0.0rc1", QuantKernel.BNB),
        ("latest", None),
        ("", None),
    ],
)
def test_bnb_version(version: str, kernel: QuantKernel | None) -> None:
    assert kernel_for_bnb_version(version) is kernel


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=30),
        st.from_regex(r"[vV]?\d{1,3}(\.\d{1,3}){0,3}([a-z]+\d*)?(\+[a-z0-9.]+)?", fullmatch=True),
    )
)
@example("²")  # str.isdigit() holds for superscripts, int() does not take them
@example("0.4³.1")
def test_bnb_version_parser_never_raises(version: str) -> None:
    """Whatever is typed: a kernel, or None (the CLI's ``bnb-version-unreadable``)."""
    assert kernel_for_bnb_version(version) in (QuantKernel.BNB, QuantKernel.BNB_LEGACY, None)


def test_upgrade_fix_saves_the_kept_inputs() -> None:
    request = qlora("Llama-2-7b-hf", quant_kernel=QuantKernel.BNB_LEGACY, micro_batch=8)
    request = replace(request, gpu=resolve_model_gpu("A10G"))
    plan = plan_memory(request)
    fix = next(f for f in plan.fixes if f.key == "upgrade-bitsandbytes")
    upgraded = plan_memory(replace(request, quant_kernel=QuantKernel.BNB))
    assert fix.changes == {"quant_kernel": "bnb"}
    assert fix.saved_bytes == plan.peak_bytes - upgraded.peak_bytes > 0


def test_double_quant_fix_when_off() -> None:
    request = qlora(
        "Llama-2-13b-hf",
        double_quant=False,
        micro_batch=4,
        seq_len=2048,
        checkpointing=Checkpointing.FULL,
    )
    request = replace(request, gpu=resolve_model_gpu("T4"))
    plan = plan_memory(request)
    assert plan.fits is False
    fix = next(f for f in plan.fixes if f.key == "nf4-double-quant")
    assert fix.changes == {"double_quant": "true"}
    linear = request.model.parameters.linear_parameters
    saved = linear * ((0.5 + 4 / 64) - (0.5 + (8 / 64 + 32 / (64 * 256)) / 8))
    assert fix.saved_bytes == pytest.approx(saved, rel=0.01)  # + allocator rounding


def test_torchao_without_double_quant_is_an_error() -> None:
    request = qlora("Llama-2-7b-hf", quant_kernel=QuantKernel.TORCHAO, double_quant=False)
    with pytest.raises(InvalidConfigError) as err:
        plan_memory(request)
    assert err.value.reference == "nf4-double-quant-torchao"


def test_nf4_knobs_without_nf4_warn() -> None:
    request = PlanRequest(
        model=resolve_model("Llama-2-7b-hf"),
        mode=Mode.LORA,
        precision=Precision.BF16,
        quant_kernel=QuantKernel.BNB_LEGACY,
        double_quant=False,
    )
    plan = plan_memory(request)
    assert any("quant_kernel bnb-legacy" in w for w in plan.warnings)
    assert any("double_quant" in w for w in plan.warnings)
    assert plan.component("activations") == plan_memory(
        replace(request, quant_kernel=QuantKernel.BNB, double_quant=True)
    ).component("activations")


def resolve_model_gpu(name: str) -> Any:
    from gpuwarden.catalog import resolve_gpu

    return resolve_gpu(name)


@pytest.mark.parametrize(
    ("knobs", "scheme", "keeps_inputs"),
    [
        ({}, "nf4", False),
        ({"double_quant": False}, "nf4-single", False),
        ({"quant_kernel": QuantKernel.BNB_LEGACY}, "nf4", True),
        ({"quant_kernel": QuantKernel.BNB_LEGACY, "double_quant": False}, "nf4-single", True),
        ({"quant_kernel": QuantKernel.TORCHAO}, "nf4-torchao", False),
    ],
)
def test_exact_mode_prices_the_same_nf4(
    knobs: dict[str, Any], scheme: str, keeps_inputs: bool
) -> None:
    from gpuwarden.planner.exact import _quant, _recipe

    recipe = _recipe.resolve(qlora("Llama-2-7b-hf", **knobs))
    assert (recipe.quantization, recipe.keeps_linear_inputs) == (scheme, keeps_inputs)
    # one 4096 × 4096 weight in the library's layout = the formula's bytes per weight
    per_weight = _quant.weight_bytes(scheme, 4096, 4096) / 4096**2
    formula = precision_recipe(qlora("Llama-2-7b-hf", **knobs)).linear_bytes
    assert per_weight == pytest.approx(formula, abs=1e-5)
