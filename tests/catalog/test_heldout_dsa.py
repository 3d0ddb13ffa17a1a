"""DeepSeek Sparse Attention (deepseek_v32: DeepSeek-V3.2, glm_moe_dsa: GLM-5) read by the
DeepSeek family, and the refusals of LongCat-Flash and JetMoE, from the default configs of
transformers 5.24 in tests/data/model_configs_heldout/arch/ and the published DeepSeek-V3.2
config.json: exact counts on config variants, the indexer's HF module names, the indexer key the
KV cache gains. The torch-marked tests build the model on the meta device."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.catalog import configs, resolve_model
from gpuwarden.errors import InvalidConfigError
from tests.catalog.heldout_arch import (
    ARCH,
    HELDOUT,
    arch,
    assert_counts_what_transformers_builds,
    assert_linears_are_the_hf_modules,
    assert_probe_matches_transformers,
    hf_blocks,
    two_blocks,
)

DSA = ["deepseek_v32", "glm_moe_dsa"]

# Layouts and sizes the probe's boolean flips and dropped keys do not reach (on 2 blocks).
SIZE_VARIANTS: list[tuple[str, dict[str, Any]]] = [
    # no mlp_layer_types: first_k_dense_replace dense blocks (not Glm4MoeLite's fixed 1)
    ("deepseek_v32", {"mlp_layer_types": None, "first_k_dense_replace": 1}),
    ("deepseek_v32", {"mlp_layer_types": None, "layer_types": None, "first_k_dense_replace": 0}),
    # DeepseekV32Config re-routes the BC key num_experts onto n_routed_experts
    ("deepseek_v32", {"num_experts": 16, "n_shared_experts": 0}),
    ("deepseek_v32", {"attention_bias": True, "index_head_dim": 64, "index_n_heads": 8}),
    # head_dim is overwritten with qk_rope_head_dim: only the latter sizes the rope key
    ("deepseek_v32", {"head_dim": 32, "kv_lora_rank": 256, "q_lora_rank": 512}),
    ("deepseek_v32", {"qk_rope_head_dim": 32, "mlp_bias": True, "moe_layer_freq": 2}),
    ("deepseek_v32", {"mlp_layer_types": ["sparse", "dense"], "n_shared_experts": 2}),
    ("glm_moe_dsa", {"mlp_layer_types": None, "first_k_dense_replace": 1}),
    ("glm_moe_dsa", {"indexer_types": None, "index_topk_pattern": "FF"}),
    ("glm_moe_dsa", {"indexer_types": None, "index_topk_freq": 4, "index_skip_topk_offset": 3}),
    ("glm_moe_dsa", {"attention_bias": True, "index_n_heads": 8, "num_experts": 8}),
]

# GLM-5's cross-layer top-k sharing: some blocks build no indexer and cache no indexer key.
SHARED_INDEXERS: list[dict[str, Any]] = [
    {"indexer_types": ["full", "shared"]},
    {"indexer_types": None, "index_topk_pattern": "FS"},
    {"indexer_types": None, "index_topk_pattern": ["full", "shared"]},
    {"indexer_types": None, "index_topk_freq": 4, "index_skip_topk_offset": 0},
]


def _variant(model_type: str, change: dict[str, Any]) -> dict[str, Any]:
    """The default config cut to 2 blocks with ``change``; a None drops the key."""
    merged = {**two_blocks(model_type), **change}
    return {key: value for key, value in merged.items() if value is not None}


@pytest.mark.torch
@pytest.mark.parametrize("model_type", DSA)
def test_dsa_counts_what_transformers_builds_for_every_variant(
    model_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_probe_matches_transformers(model_type, monkeypatch)


@pytest.mark.torch
@pytest.mark.parametrize(
    ("model_type", "change"),
    SIZE_VARIANTS,
    ids=[f"{t}-{i}" for i, (t, _) in enumerate(SIZE_VARIANTS)],
)
def test_dsa_sizes_and_layouts_count_what_transformers_builds(
    model_type: str, change: dict[str, Any]
) -> None:
    assert_counts_what_transformers_builds(model_type, _variant(model_type, change))


# (change, blocks of the 2 that build an indexer and cache its key), by hand from
# GlmMoeDsaConfig.__post_init__: "F"/"full" builds one; the frequency rule keeps block i when
# max(i - offset + 1, 0) % freq == 0 (offset 0: block 0 has 1 % 4, block 1 has 2 % 4: neither)
SHARED_INDEXED = [1, 1, 1, 0]


@pytest.mark.parametrize(
    ("change", "indexed"), list(zip(SHARED_INDEXERS, SHARED_INDEXED, strict=True))
)
def test_shared_indexer_blocks_are_read_with_the_blocks_that_cache_the_key(
    change: dict[str, Any], indexed: int
) -> None:
    spec = configs.normalise("glm_moe_dsa", _variant("glm_moe_dsa", change), "shared")
    assert spec.mla is not None
    assert spec.mla.indexed_layers == indexed
    assert spec.mla.index_head_dim == 128


def test_every_indexed_block_leaves_indexed_layers_unset() -> None:
    spec = configs.normalise("glm_moe_dsa", _variant("glm_moe_dsa", {}), "default")
    assert spec.mla is not None and spec.mla.indexed_layers is None


@pytest.mark.torch
@pytest.mark.parametrize("change", SHARED_INDEXERS)
def test_shared_indexer_blocks_count_what_transformers_builds(change: dict[str, Any]) -> None:
    """The blocks without an indexer are counted right."""
    assert_counts_what_transformers_builds("glm_moe_dsa", _variant("glm_moe_dsa", change), "shared")


@pytest.mark.torch
@pytest.mark.parametrize("model_type", DSA)
def test_dsa_linear_names_are_the_hf_modules(model_type: str) -> None:
    """The indexer's wq_b / wk / weights_proj are listed by their HF names and shapes."""
    pytest.importorskip("torch")
    cfg = _variant(model_type, {})
    spec = configs.normalise(model_type, dict(cfg), "two blocks")
    assert_linears_are_the_hf_modules(hf_blocks(cfg), spec.layer_parameters)
    for ours in spec.layer_parameters:
        names = {lin.name for lin in ours.linears if not lin.expert}
        assert {"wq_b", "wk", "weights_proj"} <= names


@pytest.mark.parametrize(
    ("model_type", "q_lora_rank", "nope", "v"),
    [("deepseek_v32", 1536, 128, 128), ("glm_moe_dsa", 2048, 192, 256)],
)
def test_the_mla_latent_and_the_indexer_key_are_what_the_cache_holds(
    model_type: str, q_lora_rank: int, nope: int, v: int
) -> None:
    spec = resolve_model(str(ARCH / f"{model_type}.json"))
    assert spec.mla is not None
    assert (spec.mla.kv_lora_rank, spec.mla.qk_rope_head_dim, spec.mla.index_head_dim) == (
        512,
        64,
        128,
    )
    assert (spec.mla.q_lora_rank, spec.mla.qk_nope_head_dim, spec.mla.v_head_dim) == (
        q_lora_rank,
        nope,
        v,
    )
    assert spec.moe is not None and spec.moe.first_dense_layers == 3


def test_published_deepseek_v3_2_is_read_with_its_indexer() -> None:
    spec = resolve_model(str(HELDOUT / "DeepSeek-V3.2.json"))
    # transformers 5.24 on the meta device (expected.csv)
    assert spec.total_parameters == 671_877_929_216
    assert spec.mla is not None and spec.mla.index_head_dim == 128
    indexer = {lin.name: lin.parameters for lin in spec.layer_parameters[0].linears}
    assert indexer["wq_b"] == 1536 * 64 * 128
    assert indexer["wk"] == 7168 * 128
    assert indexer["weights_proj"] == 7168 * 64


@pytest.mark.parametrize("model_type", ["deepseek_v3", "glm4_moe_lite", "deepseek_v2"])
def test_mla_without_dsa_caches_no_indexer_key(model_type: str) -> None:
    cfg = {**arch(model_type), "num_experts_per_tok": 6}
    spec = configs.normalise(model_type, cfg, "default")
    assert spec.mla is not None and spec.mla.index_head_dim == 0
    assert not any(lin.name == "wq_b" for lin in spec.layer_parameters[0].linears)


@pytest.mark.parametrize(
    ("change", "reference", "match"),
    [
        ({"q_lora_rank": None}, "config-field-invalid", "q_lora_rank"),
        ({"layer_types": ["full_attention"] * 2}, "config-field-invalid", "layer_types"),
        ({"mlp_layer_types": ["dense"]}, "config-field-invalid", "mlp_layer_types"),
        ({"index_head_dim": 0}, "config-field-invalid", "index_head_dim"),
    ],
)
def test_dsa_configs_transformers_cannot_run_are_refused(
    change: dict[str, Any], reference: str, match: str
) -> None:
    cfg = {**_variant("deepseek_v32", {}), **change}
    with pytest.raises(InvalidConfigError, match=match) as info:
        configs.normalise("deepseek_v32", cfg, "variant")
    assert info.value.reference == reference


def test_glm_indexer_types_of_the_wrong_length_are_refused() -> None:
    cfg = _variant("glm_moe_dsa", {"indexer_types": ["full"]})
    with pytest.raises(InvalidConfigError, match="indexer_types"):
        configs.normalise("glm_moe_dsa", cfg, "variant")


@pytest.mark.parametrize(
    ("model_type", "feature"),
    [("longcat_flash", "zero-computation"), ("jetmoe", "mixture of attention heads")],
)
def test_longcat_and_jetmoe_are_refused_with_the_feature_named(
    model_type: str, feature: str
) -> None:
    with pytest.raises(InvalidConfigError, match=feature) as info:
        resolve_model(str(ARCH / f"{model_type}.json"))
    assert info.value.reference == "unsupported-architecture"
    assert "--exact" in (info.value.hint or "")


# --- MiMo-V2-Flash (read by catalog/families/mimo.py) --------------------------------------------

MIMO_VARIANTS: list[dict[str, Any]] = [
    {},
    # the config class's own patterns: block 0 and every 6th full, block 0 dense
    {"layer_types": None, "mlp_layer_types": None},
    {"attention_bias": True, "tie_word_embeddings": True},
    # attribute_map: num_local_experts is set onto n_routed_experts
    {"num_local_experts": 16, "num_experts_per_tok": 2, "moe_intermediate_size": 64},
    {"head_dim": 64, "v_head_dim": 96, "num_key_value_heads": 8},
    {"layer_types": ["sliding_attention"] * 2, "mlp_layer_types": ["sparse", "dense"]},
    {"sliding_window_size": 64, "intermediate_size": 512},
]


def _mimo(change: dict[str, Any]) -> dict[str, Any]:
    return _variant("mimo_v2_flash", change)


@pytest.mark.torch
def test_mimo_counts_what_transformers_builds_for_every_probe_variant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert_probe_matches_transformers("mimo_v2_flash", monkeypatch)


@pytest.mark.torch
@pytest.mark.parametrize("change", MIMO_VARIANTS, ids=[str(i) for i in range(len(MIMO_VARIANTS))])
def test_mimo_sizes_and_layouts_count_what_transformers_builds(change: dict[str, Any]) -> None:
    assert_counts_what_transformers_builds("mimo_v2_flash", _mimo(change))


def test_mimo_default_is_read_with_its_two_kv_kinds() -> None:
    """48 blocks, block 0 and every 6th full (9), 39 sliding over 129 tokens with twice the 4 KV
    heads; keys 192 wide, values 128: per token 39 × 8 × 320 + 9 × 4 × 320 elements."""
    spec = resolve_model(str(ARCH / "mimo_v2_flash.json"))
    assert [
        (g.layers, g.num_kv_heads, g.head_dim, g.v_head_dim, g.window) for g in spec.kv_groups
    ] == [
        (39, 8, 192, 128, 129),
        (9, 4, 192, 128, None),
    ]
    assert sum(g.layers * g.elements_per_token for g in spec.kv_groups) == 111_360
    assert spec.total_parameters == 308_778_768_832
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.experts_per_token, spec.moe.first_dense_layers) == (
        256,
        8,
        1,
    )
    assert spec.moe.num_shared_experts == 0


def test_mimo_linears_are_the_hf_modules_with_values_narrower_than_keys() -> None:
    spec = configs.normalise("mimo_v2_flash", _mimo({}), "variant")
    cfg = _mimo({})
    h, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    kinds = cfg["layer_types"]
    for kind, layer in zip(kinds, spec.layer_parameters, strict=True):
        kv_heads = 2 * kv if kind == "sliding_attention" else kv
        shapes = {lin.name: (lin.in_features, lin.out_features) for lin in layer.linears}
        assert shapes["q_proj"] == (h, heads * 192)
        assert shapes["k_proj"] == (h, kv_heads * 192)
        assert shapes["v_proj"] == (h, kv_heads * 128)
        assert shapes["o_proj"] == (heads * 128, h)
        # one attention-sink logit per head, in the sliding blocks only
        assert layer.other == (heads if kind == "sliding_attention" else 0)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"num_key_value_heads": 3}, "num_key_value_heads"),
        ({"num_experts_per_tok": 999}, "num_experts_per_tok"),
        ({"mlp_layer_types": ["dense"]}, "mlp_layer_types"),
    ],
)
def test_mimo_configs_transformers_cannot_build_are_refused(
    change: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidConfigError, match=match):
        configs.normalise("mimo_v2_flash", {**_mimo({}), **change}, "variant")


# the published config.json's own spellings of the layout (its remote code's keys), as a code
# index copy of the XiaomiMiMo/MiMo-V2-Flash hub config lists them
HUB_SPELLINGS: dict[str, Any] = {
    "hybrid_layer_pattern": [0 if i == 0 or (i + 1) % 6 == 0 else 1 for i in range(48)],
    "moe_layer_freq": [int(i != 0) for i in range(48)],
    "swa_num_key_value_heads": 8,
    "add_swa_attention_sink_bias": True,
    "add_full_attention_sink_bias": False,
    "sliding_window": 128,
    "sliding_window_size": 128,
}


def test_mimo_hub_spellings_that_agree_are_read() -> None:
    cfg = {
        k: v
        for k, v in arch("mimo_v2_flash").items()
        if k not in ("layer_types", "mlp_layer_types")
    }
    spec = configs.normalise("mimo_v2_flash", {**cfg, **HUB_SPELLINGS}, "hub")
    assert spec.total_parameters == 308_778_768_832
    # sliding_window_size 128 → the config class's sliding_window 129
    assert spec.kv_groups[0].window == 129


@pytest.mark.parametrize(
    "change",
    [
        {"swa_num_key_value_heads": 4},
        {"add_full_attention_sink_bias": True},
        {"hybrid_layer_pattern": [1] * 48},
    ],
)
def test_mimo_hub_spellings_transformers_would_not_build_are_refused(
    change: dict[str, Any],
) -> None:
    cfg = {**arch("mimo_v2_flash"), **HUB_SPELLINGS, **change}
    with pytest.raises(InvalidConfigError, match="ignores it") as info:
        configs.normalise("mimo_v2_flash", cfg, "hub")
    assert info.value.reference == "unsupported-architecture"
