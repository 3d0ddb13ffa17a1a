"""The planner's recipes read ModelSpec.traits and LayerParameters.mixer, not model_type names.

The trace checks build a 2-block tiny model of a held-out family with transformers on the fake
tensor mode and count what autograd saves (tests/planner/test_formula_vs_exact.py's harness),
one new family per trait value the recipes gained: relu² (jais2), xIELU (apertus), per-head
LayerNorm q/k norms (persimmon), norms before and after each branch (hyperclovax), the softplus
output gate (laguna, per element), DeepSeek-V3 routing (exaone_moe), gated attention beside a
gated DeltaNet (qwen3_next, eager: the torch fallbacks the CPU trace runs, which pad the sequence
to a multiple of the 64-token chunk).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.catalog.traits import ROWS
from gpuwarden.planner import families, mixers
from gpuwarden.planner.layout import lora_targets
from gpuwarden.planner.tensors import Ctx
from gpuwarden.types.model import BlockTraits, Mixer, ModelSpec
from gpuwarden.types.plan import Attention, Mode, Optimizer, PlanRequest, Precision

ARCH = Path(__file__).resolve().parents[1] / "data" / "model_configs_heldout" / "arch"
TOLERANCE = 0.02
_SMALL = {
    "vocab_size": 1000,
    "num_hidden_layers": 2,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
}
_MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64}
# family → config changes beyond _SMALL (two blocks: one dense, one routed where it routes)
CASES: dict[str, dict[str, Any]] = {
    "jais2": {},
    "apertus": {},
    "persimmon": {"partial_rotary_factor": 0.5},
    "hyperclovax": {},
    "laguna": {
        **_MOE,
        "shared_expert_intermediate_size": 64,
        "mlp_layer_types": ["dense", "sparse"],
        "gating": "per-element",
    },
    "exaone_moe": {**_MOE, "n_group": 1, "topk_group": 1, "mlp_layer_types": ["dense", "sparse"]},
    "qwen3_next": {
        **_MOE,
        "shared_expert_intermediate_size": 64,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "layer_types": ["linear_attention", "full_attention"],
    },
}
EAGER = {"qwen3_next"}  # the trace runs the torch fallback, which attention=eager plans
SHAPE = (2, 48)  # micro-batch, sequence


def small(model_type: str) -> ModelSpec:
    cfg = json.loads((ARCH / f"{model_type}.json").read_text())
    for key in ("layer_types", "mlp_layer_types", "num_attention_heads_per_layer"):
        cfg.pop(key, None)
    return normalise(f"small-{model_type}", {**cfg, **_SMALL, **CASES[model_type]}, model_type)


def _trace_cases() -> list[tuple[str, int, int]]:
    # qwen3_next also at a sequence the gated-delta-rule chunk (64) divides: no padding
    return [(t, *SHAPE) for t in sorted(CASES)] + [("qwen3_next", 1, 64)]


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "batch", "seq"), _trace_cases())
def test_recipe_matches_a_saved_tensor_trace(model_type: str, batch: int, seq: int) -> None:
    pytest.importorskip("transformers")
    from tests.planner.test_formula_vs_exact import formula_saved, traced_saved

    attention = Attention.EAGER if model_type in EAGER else Attention.SDPA
    request = PlanRequest(
        model=small(model_type),
        micro_batch=batch,
        seq_len=seq,
        precision=Precision.BF16,
        attention=attention,
        optimizer=Optimizer.NONE,
    )
    exact, formula = traced_saved(request), formula_saved(request)
    error = (formula - exact) / exact
    assert abs(error) <= TOLERANCE, f"formula {formula:,} B, exact {exact:,} B ({error:+.2%})"


CTX = Ctx(256, eager=False, compile=False)


def _items(spec: ModelSpec) -> list[tuple[str, float]]:
    layer = spec.layer_parameters[0]
    return [(x.what, x.width) for x in families.block(spec, layer, CTX)]


@pytest.mark.parametrize("name", ["gemma-2-2b", "OLMo-2-1124-7B", "Qwen3-8B", "phi-2", "gpt2"])
def test_recipes_follow_the_traits_not_the_name(name: str) -> None:
    spec = resolve_model(name)
    renamed = replace(spec, model_type="renamed", name="renamed")
    assert _items(renamed) == _items(spec)
    assert families.eager_only(renamed) == families.eager_only(spec)
    # the same name with Llama's traits plans Llama's recipe
    plain = replace(spec, traits=BlockTraits())
    assert spec.traits != BlockTraits() and _items(plain) != _items(spec)


def _hybrid() -> ModelSpec:
    cfg = json.loads((ARCH / "qwen3_next.json").read_text())
    return normalise("small-qwen3_next", {**cfg, **_SMALL, **CASES["qwen3_next"]}, "qwen3_next")


def test_state_blocks_are_the_ones_the_catalog_marks() -> None:
    spec = _hybrid()
    kinds = [layer.mixer for layer in spec.layer_parameters]
    assert kinds == [Mixer.STATE, Mixer.ATTENTION]
    assert [mixers.state_block(spec, layer) for layer in spec.layer_parameters] == [True, False]


def test_mixer_kinds_choose_the_recipes() -> None:
    spec = _hybrid()
    state, attention = spec.layer_parameters
    # kept alive: families.block memoises per (spec, block) object id
    hybrid, mixerless = replace(state, mixer=Mixer.HYBRID), replace(attention, mixer=Mixer.NONE)

    def whats(layer: Any) -> set[str]:
        return {x.what for x in families.block(spec, layer, CTX)}

    deltanet = {w for w in whats(state) if "fla" in w}
    assert deltanet and not any("logsumexp" in w for w in whats(state))
    both = whats(hybrid)
    assert deltanet <= both and "logsumexp" in both
    # no token mixer: neither the attention recipe nor its norm
    none = whats(mixerless)
    assert not any("logsumexp" in w or "attention norm" in w for w in none)
    assert any("MLP norm" in w for w in none)


def test_an_unmodelled_state_mixer_beside_attention_is_planned_as_attention_twice() -> None:
    spec = _hybrid()
    assert spec.state is not None
    mamba = replace(spec, state=replace(spec.state, kind="Mamba"))  # no recipe of its own
    hybrid = replace(spec.layer_parameters[0], mixer=Mixer.HYBRID)
    items = families.block(mamba, hybrid, CTX)
    attention = [x for x in items if x.what == "logsumexp"]
    stand_in = [x for x in items if x.what == "state mixer stand-in: logsumexp"]
    assert len(attention) == len(stand_in) == 1
    assert not mixers.modelled_mixer(mamba)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt2", ("c_attn",)),
        ("phi-2", ("q_proj", "v_proj", "fc1", "fc2")),  # PEFT's phi entry, q/v exist too
        ("Llama-3.1-8B", ("q_proj", "v_proj")),
    ],
)
def test_default_lora_targets_are_pefts_for_the_type(model: str, expected: tuple[str, ...]) -> None:
    spec = resolve_model(model)
    request = PlanRequest(model=spec, mode=Mode.LORA)
    assert lora_targets(spec, request) == expected
    chosen = replace(request, lora_targets=("q_proj",))
    assert lora_targets(spec, chosen) == ("q_proj",)


def _arch_spec(model_type: str) -> ModelSpec:
    return normalise(model_type, json.loads((ARCH / f"{model_type}.json").read_text()), model_type)


def test_codegen_gets_pefts_fused_qkv_target() -> None:
    spec = _arch_spec("codegen")
    assert lora_targets(spec, PlanRequest(model=spec, mode=Mode.LORA)) == ("qkv_proj",)


def test_nemotron_h_default_lora_targets_are_pefts() -> None:
    spec = _arch_spec("nemotron_h")
    assert ROWS["nemotron_h"].traits.peft_targets == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert lora_targets(spec, PlanRequest(model=spec, mode=Mode.LORA)) == (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
    )
