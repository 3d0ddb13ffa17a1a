"""catalog/traits.py: one row of block traits per model_type, applied once by normalise."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import configs
from gpuwarden.catalog.traits import PEFT_DEFAULT_TYPES, ROWS, peft_has_default, traits_for
from gpuwarden.types.model import (
    Activation,
    BlockTraits,
    ExpertMlp,
    OutputGate,
    PostNorms,
    QkNorm,
    Router,
)

HELDOUT = Path(__file__).resolve().parents[1] / "data" / "model_configs_heldout"

# Every model_type with a row of its own; a type the catalog reads that is not here is planned
# with Llama's traits (BlockTraits()). Adding a family means deciding which list it joins.
TYPES_WITH_ROWS = {
    # modelled before round 46
    "bert", "bloom", "deepseek_v2", "deepseek_v3", "falcon", "gemma", "gemma2", "gemma3",
    "gemma3_text", "gpt2", "gpt_bigcode", "gpt_neox", "gpt_oss", "llama4_text", "mpt", "mt5",
    "olmo2", "phi", "phi3", "qwen2_moe", "qwen3", "qwen3_moe", "starcoder2", "t5",
    # read since round 45
    "afmoe", "apertus", "apertus1p5_text", "codegen", "deepseek_v32", "exaone_moe", "flex_olmo",
    "gemma3n_text", "gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text", "glm4_moe",
    "glm_moe_dsa", "hy_v3", "hyperclovax", "jais2", "kimi_linear", "laguna", "lfm2", "lfm2_moe",
    "nemotron_h",
    "olmo_hybrid", "persimmon", "qwen3_5_moe_text", "qwen3_5_text", "qwen3_next", "sarvam_moe",
    "solar_open", "youtu",
}  # fmt: skip


def _arch(model_type: str, **changes: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((HELDOUT / "arch" / f"{model_type}.json").read_text())
    return {**cfg, **changes}


def test_the_table_lists_exactly_the_types_with_rows() -> None:
    assert set(ROWS) == TYPES_WITH_ROWS


def test_every_row_is_a_type_the_catalog_reads() -> None:
    assert set(ROWS) <= set(configs.NORMALISERS)


def test_every_row_cites_where_its_facts_come_from() -> None:
    for model_type, row in ROWS.items():
        assert re.search(r"modeling_\w+\.py|configuration_\w+\.py|PEFT", row.source), model_type


def test_a_type_without_a_row_gets_llamas_traits() -> None:
    assert traits_for("llama", {}) == BlockTraits()
    assert traits_for("a_family_added_tomorrow", {}) == BlockTraits()
    spec = configs.normalise("granite", _arch("granite"), "granite")
    assert spec.traits == BlockTraits()


@pytest.mark.parametrize(
    ("alias", "family"), [("exaone4", "qwen3"), ("olmo3", "olmo2"), ("vaultgemma", "gemma")]
)
def test_an_alias_gets_its_familys_row(alias: str, family: str) -> None:
    spec = configs.normalise(alias, _arch(alias), alias)
    assert spec.model_type == family
    assert spec.traits == ROWS[family].traits


def test_laguna_gate_width_follows_its_gating_key() -> None:
    per_head = configs.normalise("l", _arch("laguna"), "l").traits
    per_element = configs.normalise("l", _arch("laguna", gating="per-element"), "l").traits
    assert per_head.output_gate is OutputGate.PER_HEAD
    assert per_element.output_gate is OutputGate.PER_ELEMENT
    assert per_head.output_gate_softplus and per_head.router is Router.DEEPSEEK_V3


def test_config_switches_turn_hyperclovax_post_norms_and_sarvam_qk_norms_off() -> None:
    assert traits_for("hyperclovax", {}).post_norms is PostNorms.BOTH
    assert traits_for("hyperclovax", {"use_post_norm": False}).post_norms is PostNorms.NONE
    assert traits_for("sarvam_moe", {}).qk_norm is QkNorm.PER_HEAD
    assert traits_for("sarvam_moe", {"use_qk_norm": False}).qk_norm is QkNorm.NONE


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("Qwen3-Next-80B-A3B-Instruct.json", {"output_gate": OutputGate.PER_ELEMENT}),
        ("Qwen3.5-4B.json", {"output_gate": OutputGate.PER_ELEMENT, "f32_norm_scale": True}),
        ("Trinity-Nano-Preview.json", {"router": Router.DEEPSEEK_V3, "post_norms": PostNorms.BOTH}),
        ("persimmon-8b-base.json", {"qk_norm": QkNorm.LAYER_PER_HEAD}),
        ("Nemotron-H-8B-Base-8K.json", {"activation": Activation.RELU2}),
        ("DeepSeek-V3.2.json", {"router": Router.DEEPSEEK_V3}),
    ],
)
def test_normalise_applies_the_row_to_real_hub_configs(
    config: str, expected: dict[str, object]
) -> None:
    spec = configs.normalise(config, json.loads((HELDOUT / config).read_text()), config)
    for field, value in expected.items():
        assert getattr(spec.traits, field) == value, field


def test_nemotron_h_experts_are_ungated() -> None:
    assert ROWS["nemotron_h"].traits.expert_mlp is ExpertMlp.PLAIN


def test_peft_targets_are_pefts_own_mapping() -> None:
    pytest.importorskip("peft")
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT

    for model_type, row in ROWS.items():
        # phi3: not in PEFT's mapping; the planner's default is its fused qkv_proj (row source)
        if row.traits.peft_targets is not None and model_type != "phi3":
            assert list(row.traits.peft_targets) == list(PEFT[model_type]), model_type
    # every entry for a type we read that differs from the q_proj / v_proj default has a row
    for model_type, targets in PEFT.items():
        differs = isinstance(targets, list) and targets != ["q_proj", "v_proj"]
        if differs and model_type in configs.NORMALISERS:
            assert ROWS[model_type].traits.peft_targets == tuple(targets), model_type


def test_peft_default_types_are_the_installed_pefts_mapping() -> None:
    pytest.importorskip("peft")
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT

    assert set(PEFT) == PEFT_DEFAULT_TYPES
    assert peft_has_default("llama") and peft_has_default("gemma3_text")
    assert not peft_has_default("qwen3_moe") and not peft_has_default("gemma3")


ARCH = Path(__file__).resolve().parents[1] / "data" / "model_configs_heldout" / "arch"


@pytest.mark.torch
@pytest.mark.parametrize("config", ["gemma3", "qwen3_5", "llama4", "mistral", "qwen3_moe"])
def test_pefts_lookup_type_is_the_specs_model_type(config: str) -> None:
    """PEFT looks its default up by the built causal LM's config.model_type: the spec's own,
    wrappers included (qwen3_5 builds Qwen3_5ForCausalLM of qwen3_5_text; gemma3 builds
    Gemma3ForConditionalGeneration of gemma3)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = json.loads((ARCH / f"{config}.json").read_text())
    kwargs = {k: v for k, v in cfg.items() if k not in {"model_type", "architectures"}}
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(cfg["model_type"], **kwargs)
        )
    spec = configs.normalise(config, cfg, config)
    assert model.config.model_type == spec.model_type
