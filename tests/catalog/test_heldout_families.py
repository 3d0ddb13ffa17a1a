"""The families added for popular model_types plan used to refuse (glm*, ernie4_5*, olmo,
olmoe, phimoe, cohere*, helium, seed_oss, stablelm, arcee, gptj, gpt_neo, opt, mpt,
minimax_m2), read from the
default configs of transformers 5.24 in tests/data/model_configs_heldout/arch/: exact counts on
many config variants, HF module names for the linears, the KV-cache facts, and the refusals of
hybrids whose layers hold no KV cache. The torch-marked tests build the model on the meta device."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.catalog import configs, resolve_model
from gpuwarden.errors import InvalidConfigError
from tests.catalog.heldout_arch import (
    ARCH,
    arch,
    assert_counts_what_transformers_builds,
    assert_linears_are_the_hf_modules,
    assert_probe_matches_transformers,
    hf_blocks,
    size_cases,
    two_blocks,
)

FAMILIES = [
    "arcee",
    "cohere",
    "cohere2",
    "ernie4_5",
    "ernie4_5_moe",
    "glm",
    "glm4",
    "glm4_moe",
    "glm4_moe_lite",
    "gpt_neo",
    "gptj",
    "helium",
    "minimax_m2",
    "mpt",
    "olmo",
    "olmoe",
    "opt",
    "phimoe",
    "seed_oss",
    "stablelm",
]

# Size and layout changes the probe's boolean flips and dropped keys do not reach.
SIZE_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "glm4_moe": [
        {"first_k_dense_replace": 0},
        {"n_shared_experts": 0},
        {"n_shared_experts": 2, "use_qk_norm": True, "head_dim": 64},
    ],
    "ernie4_5_moe": [
        {"moe_layer_interval": 2},
        {"moe_num_shared_experts": 0},
        {"moe_layer_start_index": 0, "moe_layer_end_index": 0},
        {"use_bias": True, "tie_word_embeddings": False},
    ],
    "glm4_moe_lite": [
        {"mlp_layer_types": ["sparse", "dense"]},
        {"head_dim": 32, "qk_rope_head_dim": 64},
        {"q_lora_rank": None, "n_shared_experts": 0},
    ],
    "ernie4_5": [{"head_dim": None}, {"num_key_value_heads": None}],
    "olmoe": [{"num_key_value_heads": 4}, {"head_dim": 64, "num_key_value_heads": 4}],
    "cohere": [{"use_qk_norm": True, "num_key_value_heads": 8}, {"head_dim": 64}],
    "cohere2": [{"head_dim": 64}, {"sliding_window_pattern": 2}],
    "stablelm": [{"qk_layernorm": True, "num_key_value_heads": 8, "use_parallel_residual": True}],
    "helium": [{"head_dim": 64}, {"num_key_value_heads": 4, "attention_bias": True}],
    "seed_oss": [{"attention_out_bias": True, "head_dim": 64}],
    "phimoe": [{"lm_head_bias": True, "attention_bias": True}, {"head_dim": 64}],
    "glm": [{"head_dim": 64, "num_key_value_heads": 4}],
    "opt": [
        {"word_embed_proj_dim": 512},
        {"do_layer_norm_before": False},
        {"layer_norm_elementwise_affine": False},
        {"enable_bias": False, "ffn_dim": 1000},
    ],
    "gpt_neo": [
        {"attention_types": [[["local"], 2]], "num_layers": 2},
        {"attention_types": [[["global"], 1], [["local"], 1]], "num_layers": 2},
    ],
    "gptj": [{"n_inner": 1000, "tie_word_embeddings": True}],
    "mpt": [{"expansion_ratio": 2}, {"attn_config": {"attn_type": "multiquery_attention"}}],
}


def _two_blocks(model_type: str) -> dict[str, Any]:
    """The default config cut to 2 blocks, as the probe cuts it (attention_layers is derived
    from attention_types, so it is dropped with it)."""
    base = two_blocks(model_type, drop={"attention_layers"})
    if model_type == "gpt_neo":
        base = {**base, "num_layers": 2, "attention_types": [[["global", "local"], 1]]}
    return base


@pytest.mark.torch
@pytest.mark.parametrize("model_type", FAMILIES)
def test_a_family_counts_what_transformers_builds_for_every_variant(
    model_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    assert_probe_matches_transformers(model_type, monkeypatch)


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "change"), size_cases(SIZE_VARIANTS))
def test_sizes_and_layouts_count_what_transformers_builds(
    model_type: str, change: dict[str, Any]
) -> None:
    assert_counts_what_transformers_builds(model_type, {**_two_blocks(model_type), **change})


@pytest.mark.torch
@pytest.mark.parametrize("model_type", FAMILIES)
def test_linear_names_and_kv_width_are_the_hf_modules(model_type: str) -> None:
    """PEFT matches target_modules against module names: the planner's linears of each block
    are the block's nn.Linear modules, by name and shape; the K projection is the KV width."""
    pytest.importorskip("torch")
    cfg = _two_blocks(model_type)
    spec = configs.normalise(model_type, dict(cfg), "two blocks")
    assert_linears_are_the_hf_modules(
        hf_blocks(cfg),
        spec.layer_parameters,
        skip_hf=lambda name: name.endswith(("gate", "router")),
        ours=lambda lin: not lin.expert and lin.name != "shared_expert_gate",
        kv_width=spec.kv_width,
        k_proj_names=("self_attn.k_proj", "attn.k_proj"),
    )


@pytest.mark.parametrize(
    ("model_type", "window", "sliding_layers"),
    [("cohere2", 4096, 30), ("gpt_neo", 256, 12), ("glm4_moe", None, 0), ("opt", None, 0)],
)
def test_sliding_layers_are_the_ones_that_cache_a_window(
    model_type: str, window: int | None, sliding_layers: int
) -> None:
    """Cohere2: every 4th block attends globally (sliding_window_pattern 4 of 40 blocks);
    GPT-Neo: the "local" half of [["global", "local"], 12]."""
    spec = resolve_model(str(ARCH / f"{model_type}.json"))
    assert (spec.sliding_window, spec.sliding_window_layers) == (window, sliding_layers)


def test_grouped_kv_heads_are_read_for_the_cache() -> None:
    glm = resolve_model(str(ARCH / "glm4_moe.json"))
    assert (glm.num_kv_heads, glm.num_heads) == (8, 96)
    assert glm.moe is not None and glm.moe.first_dense_layers == 1
    ernie = resolve_model(str(ARCH / "ernie4_5.json"))
    assert (ernie.num_kv_heads, ernie.head_dim) == (2, 128)


@pytest.mark.parametrize(
    "model_type",
    sorted(
        t
        for t, what in configs.UNMODELLED.items()
        if what.state_layers and (ARCH / f"{t}.json").exists()
    ),
)
def test_a_hybrid_is_refused_because_its_layers_hold_no_kv_cache(model_type: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        resolve_model(str(ARCH / f"{model_type}.json"))
    assert info.value.reference == "unsupported-architecture"
    assert "KV cache" in str(info.value) and "not modelled" in (info.value.hint or "")


def test_deepseek_v2_without_a_top_k_is_refused_with_the_reason() -> None:
    cfg = arch("deepseek_v2")
    with pytest.raises(InvalidConfigError, match="top-k") as info:
        configs.normalise("deepseek_v2", cfg, "default")
    assert info.value.reference == "config-field-missing"
    lite = {**cfg, "num_experts_per_tok": 6, "q_lora_rank": None}
    assert configs.normalise("lite", lite, "lite").moe is not None


def test_minimax_m2_with_linear_attention_blocks_is_refused() -> None:
    cfg = {**arch("minimax_m2"), "attn_type_list": [0, 1]}
    with pytest.raises(InvalidConfigError, match="linear-attention"):
        configs.normalise("m2", cfg, "m2")
    full = {**arch("minimax_m2"), "attn_type_list": [1] * 62}
    assert configs.normalise("m2", full, "m2").num_layers == 62


def test_gpt_neo_attention_layers_of_the_wrong_length_are_refused() -> None:
    cfg = {**arch("gpt_neo"), "attention_layers": ["global", "local"]}
    with pytest.raises(InvalidConfigError, match="attention_layers"):
        configs.normalise("neo", cfg, "neo")
