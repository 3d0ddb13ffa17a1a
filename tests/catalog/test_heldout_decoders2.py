"""The decoders of catalog/families/decoders2.py (apertus, apertus1p5_text, solar_open,
exaone_moe, hy_v3, afmoe, granitemoeshared, cohere2_moe, flex_olmo, codegen, persimmon, jais2,
hyperclovax, youtu, sarvam_moe, laguna), read from the default configs of transformers 5.24 in
tests/data/model_configs_heldout/arch/: exact counts on every probe variant and on size / layout
changes, HF module names for the linears, the KV-cache and MoE facts, and the refusals (jetmoe's
attention experts, Laguna blocks of different head counts). The torch-marked tests build the model
on the meta device."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import configs, resolve_model
from gpuwarden.errors import InputError, InvalidConfigError
from gpuwarden.types.model import ModelSpec
from tests.catalog.heldout_arch import (
    ARCH,
    HELDOUT,
    arch,
    assert_counts_what_transformers_builds,
    assert_linears_are_the_hf_modules,
    assert_probe_matches_transformers,
    hf_blocks,
    size_cases,
    two_blocks,
)

FAMILIES = [
    "afmoe",
    "apertus",
    "apertus1p5_text",
    "codegen",
    "cohere2_moe",
    "exaone_moe",
    "flex_olmo",
    "granitemoeshared",
    "hy_v3",
    "hyperclovax",
    "jais2",
    "laguna",
    "persimmon",
    "sarvam_moe",
    "solar_open",
    "youtu",
]

# Size and layout changes the probe's boolean flips and dropped keys do not reach (each applied
# to the default config cut to 2 blocks).
SIZE_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "apertus": [{"hidden_act": "silu"}, {"num_key_value_heads": 8}, {"head_dim": 64}],
    "apertus1p5_text": [
        {"output_vocab_size": 131072},
        {"output_vocab_size": 1000, "num_key_value_heads": 8},
    ],
    "solar_open": [
        {"first_k_dense_replace": 2, "use_qk_norm": True, "intermediate_size": 10240},
        {"n_shared_experts": 0},
        {"num_local_experts": 64, "head_dim": 64},
    ],
    "sarvam_moe": [
        {"num_experts": 64, "num_shared_experts": 2},
        {"use_qkv_bias": True},
        {"head_dim": 128, "first_k_dense_replace": 0},
    ],
    "exaone_moe": [
        {"mlp_layer_types": ["sparse", "dense"]},
        {"num_shared_experts": 2, "head_dim": 64},
        {"mlp_layer_types": None, "first_k_dense_replace": 0},
        {"layer_types": None, "sliding_window_pattern": 2},
    ],
    "hy_v3": [
        {"mlp_bias": True, "num_shared_experts": 2},
        {"mlp_layer_types": ["dense", "dense"]},
        {"mlp_layer_types": None, "attention_bias": True},
    ],
    "afmoe": [
        {"num_dense_layers": 0, "num_shared_experts": 0},
        {"num_dense_layers": 2},
        {"num_key_value_heads": 4, "head_dim": 64},
    ],
    "granitemoeshared": [
        {"shared_intermediate_size": 1024},
        {"shared_intermediate_size": 512, "attention_bias": True, "num_key_value_heads": 8},
    ],
    "flex_olmo": [{"num_key_value_heads": 8}, {"num_experts": 2, "num_experts_per_tok": 1}],
    "hyperclovax": [
        {"use_post_norm": False, "head_dim": 64},
        {"mlp_bias": True, "num_key_value_heads": 8},
    ],
    "jais2": [
        {"mlp_bias": False, "attention_bias": False},
        {"num_key_value_heads": 2, "head_dim": 64},
    ],
    "persimmon": [{"qk_layernorm": False}, {"num_attention_heads": 32}],
    "codegen": [{"n_inner": 1000, "tie_word_embeddings": True}],
    "laguna": [
        {"gating": "per-element"},
        {"gating": False},
        {"mlp_layer_types": ["sparse", "sparse"], "shared_expert_intermediate_size": 256},
        {"num_attention_heads_per_layer": [32, 32], "num_attention_heads": 32},
        {"layer_types": ["sliding_attention", "full_attention"]},
    ],
    "cohere2_moe": [
        {
            "mlp_layer_types": None,
            "layer_types": None,
            "first_k_dense_replace": 1,
            "prefix_dense_intermediate_size": 1024,
        },
        {"num_shared_experts": 1},
        {"rms_norm_eps": 1e-5},
        {"head_dim": 64, "num_key_value_heads": 8},
    ],
    "youtu": [{"q_lora_rank": None}, {"tie_word_embeddings": False, "num_key_value_heads": 4}],
}


@pytest.mark.torch
@pytest.mark.parametrize("model_type", FAMILIES)
def test_a_family_counts_what_transformers_builds_for_every_variant(
    model_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_probe_matches_transformers(model_type, monkeypatch)


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "change"), size_cases(SIZE_VARIANTS))
def test_sizes_and_layouts_count_what_transformers_builds(
    model_type: str, change: dict[str, Any]
) -> None:
    assert_counts_what_transformers_builds(model_type, {**two_blocks(model_type), **change})


@pytest.mark.torch
@pytest.mark.parametrize("model_type", FAMILIES)
def test_linear_names_and_kv_width_are_the_hf_modules(model_type: str) -> None:
    """PEFT matches target_modules against module names: the planner's linears of each block
    are the block's nn.Linear modules (routers aside), by name and shape; the K projection (or
    the fused q/k/v projection's third) is the KV width."""
    pytest.importorskip("torch")
    cfg = two_blocks(model_type)
    spec = configs.normalise(model_type, dict(cfg), "two blocks")
    assert_linears_are_the_hf_modules(
        hf_blocks(cfg),
        spec.layer_parameters,
        skip_hf=lambda name: name.endswith(("gate", "router.layer")),
        kv_width=spec.kv_width,
        k_proj_names=("self_attn.k_proj",),
    )


@pytest.mark.parametrize(
    ("model_type", "window", "sliding_layers"),
    [
        ("exaone_moe", 4096, 24),  # every 4th of 32 blocks global (sliding_window_pattern 4)
        ("afmoe", 1024, 24),  # global_attn_every_n_layers 4
        ("cohere2_moe", 4096, 30),  # sliding_window_pattern 4 of 40
        ("laguna", None, 0),  # layer_types all full_attention
        ("hy_v3", None, 0),
        ("apertus", None, 0),
    ],
)
def test_sliding_layers_are_the_ones_that_cache_a_window(
    model_type: str, window: int | None, sliding_layers: int
) -> None:
    spec = resolve_model(str(ARCH / f"{model_type}.json"))
    assert (spec.sliding_window, spec.sliding_window_layers) == (window, sliding_layers)


def test_the_kv_cache_and_moe_layouts_are_the_configs() -> None:
    hy = resolve_model(str(ARCH / "hy_v3.json"))
    assert (hy.num_heads, hy.num_kv_heads, hy.head_dim) == (64, 8, 128)
    assert hy.moe is not None
    assert (hy.moe.num_experts, hy.moe.experts_per_token, hy.moe.first_dense_layers) == (192, 8, 1)
    assert (hy.moe.num_shared_experts, hy.moe.shared_intermediate_size) == (1, 1536)
    solar = resolve_model(str(ARCH / "solar_open.json"))
    assert solar.moe is not None and solar.moe.first_dense_layers == 0
    assert (solar.num_kv_heads, solar.head_dim) == (8, 128)
    granite = resolve_model(str(ARCH / "granitemoeshared.json"))
    assert granite.moe is not None and granite.moe.num_shared_experts == 0
    youtu = resolve_model(str(ARCH / "youtu.json"))
    assert youtu.moe is None and youtu.mla is not None and youtu.mla.kv_lora_rank == 512
    codegen = resolve_model(str(ARCH / "codegen.json"))
    assert codegen.parallel_attention_mlp and codegen.num_kv_heads == codegen.num_heads == 16


def test_a_real_trinity_config_is_read_with_its_sliding_blocks() -> None:
    """arcee-ai/Trinity-Nano-Preview: no layer_types, so 3 of every 4 of its 56 blocks slide."""
    spec = resolve_model(str(HELDOUT / "Trinity-Nano-Preview.json"))
    assert (spec.sliding_window, spec.sliding_window_layers) == (2048, 42)
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim) == (8, 2, 128)
    assert spec.moe is not None and spec.moe.first_dense_layers == 2
    assert spec.total_parameters == 6_120_003_328  # transformers 5.24 on the meta device


def test_jetmoe_attention_experts_are_refused() -> None:
    """JetMoE routes its attention through experts too (mixture of attention heads): one
    attention shape per block cannot say that."""
    with pytest.raises(InvalidConfigError) as info:
        resolve_model(str(ARCH / "jetmoe.json"))
    assert info.value.reference == "unsupported-architecture"


def test_laguna_blocks_of_different_head_counts_are_refused() -> None:
    cfg = {**arch("laguna"), "num_attention_heads_per_layer": [48] * 39 + [32]}
    with pytest.raises(InvalidConfigError, match="query head counts") as info:
        configs.normalise("laguna", cfg, "laguna")
    assert info.value.reference == "unsupported-architecture"
    same = {**arch("laguna"), "num_attention_heads_per_layer": [48] * 40}
    assert configs.normalise("laguna", same, "laguna").num_heads == 48


def test_a_pruned_apertus_head_is_counted_at_its_width() -> None:
    cfg = arch("apertus1p5_text")
    full = configs.normalise("a", cfg, "a").parameters
    pruned = configs.normalise("a", {**cfg, "output_vocab_size": 131072}, "a").parameters
    assert full.lm_head - pruned.lm_head == (266752 - 131072) * 4096
    with pytest.raises(InvalidConfigError, match="output_vocab_size"):
        configs.normalise("a", {**cfg, "output_vocab_size": 266753}, "a")


def test_an_exaone_moe_pattern_that_is_not_a_period_is_refused() -> None:
    cfg = {k: v for k, v in arch("exaone_moe").items() if k != "layer_types"}
    with pytest.raises(InvalidConfigError, match="sliding_window_pattern"):
        configs.normalise("e", {**cfg, "sliding_window_pattern": "LLLG"}, "e")


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=2**40),
    st.text(max_size=8),
    st.lists(st.sampled_from(["dense", "sparse", "full_attention", "x", 3]), max_size=4),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model_type=st.sampled_from(FAMILIES),
    key=st.sampled_from(
        [
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "mlp_layer_types",
            "layer_types",
            "num_experts",
            "num_experts_per_tok",
            "num_dense_layers",
            "sliding_window_pattern",
            "gating",
            "num_attention_heads_per_layer",
            "output_vocab_size",
            "shared_intermediate_size",
            "first_k_dense_replace",
            "num_shared_experts",
            "num_experts",
            "n_inner",
        ]
    ),
    value=_VALUES,
)
def test_a_mutated_config_gives_a_spec_or_a_named_error(
    model_type: str, key: str, value: object
) -> None:
    """Any value in a key these families read: a spec, or an InputError naming the problem."""
    outcome = _normalise({**arch(model_type), key: value})
    if isinstance(outcome, InputError):
        assert outcome.reference and outcome.hint
    else:
        assert outcome.total_parameters > 0


def _normalise(cfg: dict[str, Any]) -> ModelSpec | InputError:
    """The spec, or the input error; any other exception propagates and fails the test."""
    try:
        return configs.normalise(str(cfg["model_type"]), cfg, "mutated")
    except InputError as exc:
        return exc
