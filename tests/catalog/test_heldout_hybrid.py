"""Qwen3-Next and Qwen3.5 (gated-DeltaNet hybrids, catalog/families/hybrid.py), read from the
default configs of transformers 5.24 (tests/data/model_configs_heldout/arch/) and from published
configs: exact counts on config variants, HF module names for the linears, the state the DeltaNet
blocks keep instead of a KV cache, and the refusals. The torch-marked tests build the model on the
meta device (and one tiny model on the CPU, to read the cache's state shapes)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import configs, resolve_model
from gpuwarden.errors import InvalidConfigError
from gpuwarden.types.model import ModelSpec
from tests.catalog.heldout_arch import (
    ARCH,
    HELDOUT,
    arch,
    assert_counts_what_transformers_builds,
    assert_linears_are_the_hf_modules,
    assert_probe_matches_transformers,
    hf_blocks,
    quiet,
    size_cases,
)

TYPES = [
    "qwen3_next",
    "qwen3_5_text",
    "qwen3_5_moe_text",
    "qwen3_5",
    "qwen3_5_moe",
    "olmo_hybrid",
    "kimi_linear",
]
WRAPPERS = {"qwen3_5", "qwen3_5_moe"}
# one block of each mixer, so that every variant builds a DeltaNet and a gated attention
TWO_BLOCKS = ["linear_attention", "full_attention"]

# Size and layout changes the probe's boolean flips and dropped keys do not reach (for the
# wrappers, the changes apply to text_config, except the keys starting with "/").
SIZE_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "qwen3_next": [
        {},
        {"mlp_only_layers": [1]},
        {"decoder_sparse_step": 2},
        {"num_experts": 0},
        {"layer_types": None, "full_attention_interval": 2},
        {"layer_types": ["full_attention", "full_attention"]},
        {"head_dim": 128, "num_key_value_heads": 4, "attention_bias": True},
        {
            "linear_num_key_heads": 8,
            "linear_num_value_heads": 16,
            "linear_key_head_dim": 64,
            "linear_value_head_dim": 96,
            "linear_conv_kernel_dim": 3,
        },
        {
            "tie_word_embeddings": True,
            "num_experts": 16,
            "num_experts_per_tok": 4,
            "moe_intermediate_size": 128,
            "shared_expert_intermediate_size": 256,
        },
    ],
    "qwen3_5_text": [
        {},
        {"layer_types": None, "full_attention_interval": 1},
        {"head_dim": 128, "num_key_value_heads": 8, "attention_bias": True},
        {"linear_num_value_heads": 48, "linear_value_head_dim": 64, "linear_conv_kernel_dim": 5},
        {"tie_word_embeddings": True, "intermediate_size": 1000},
    ],
    "qwen3_5_moe_text": [
        {},
        {
            "num_experts": 16,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 64,
            "shared_expert_intermediate_size": 96,
        },
        {"attention_bias": True, "head_dim": 64, "tie_word_embeddings": True},
        {"linear_num_key_heads": 4, "linear_num_value_heads": 8},
        {"layer_types": ["linear_attention", "linear_attention"]},
    ],
    "qwen3_5": [
        {},
        {"tie_word_embeddings": True},  # the text config's flag ties the head
        {"/tie_word_embeddings": True},  # the wrapper's does not
        {"hidden_size": 1024, "intermediate_size": 3584, "linear_num_value_heads": 16},
    ],
    "qwen3_5_moe": [
        {},
        {"num_experts": 32, "tie_word_embeddings": True},
        {"/tie_word_embeddings": True},
    ],
    "olmo_hybrid": [
        {},
        {"num_key_value_heads": 6, "attention_bias": True},
        {"head_dim": 64},
        {"linear_num_key_heads": 10, "linear_num_value_heads": 20},
        {
            "linear_key_head_dim": None,
            "linear_value_head_dim": None,
            "linear_num_key_heads": 8,
            "linear_num_value_heads": 16,
        },
        {"layer_types": None},  # two blocks: the last one attends
        {"tie_word_embeddings": True, "intermediate_size": 1000, "linear_conv_kernel_dim": 2},
    ],
    # two blocks: a dense KDA block and an MLA block with the MoE
    "kimi_linear": [
        {},
        {"q_lora_rank": 384, "attention_bias": True},
        {"num_shared_experts": 0},
        {"num_shared_experts": 2, "num_experts": 16, "num_experts_per_token": 4},
        {"mlp_layer_types": None, "first_k_dense_replace": 2},
        {"layer_types": None},  # the first block is a KDA block, the second too
        {
            "layer_types": None,
            "linear_attn_config": {
                "full_attn_layers": [1],
                "kda_layers": [2],
                "head_dim": 64,
                "num_heads": 16,
                "short_conv_kernel_size": 3,
            },
        },
        {"linear_head_dim": 64, "linear_num_heads": 8, "linear_conv_kernel_dim": 2},
        {"kv_lora_rank": 256, "qk_nope_head_dim": 64, "v_head_dim": 64, "qk_rope_head_dim": 32},
        {"tie_word_embeddings": True},  # KimiLinearForCausalLM ties nothing
    ],
}


def _two_blocks(model_type: str, change: dict[str, Any] | None = None) -> dict[str, Any]:
    """The default config cut to a DeltaNet block and an attention block, with ``change``."""
    change = change or {}
    cut: dict[str, Any] = {"num_hidden_layers": 2, "layer_types": TWO_BLOCKS}
    if model_type == "kimi_linear":
        cut["mlp_layer_types"] = ["dense", "sparse"]
    outer = {k[1:]: v for k, v in change.items() if k.startswith("/")}
    inner = {k: v for k, v in change.items() if not k.startswith("/")}
    cfg = arch(model_type)
    if model_type in WRAPPERS:
        return {**cfg, **outer, "text_config": {**cfg["text_config"], **cut, **inner}}
    return {**cfg, **cut, **inner}


@pytest.mark.torch
@pytest.mark.parametrize("model_type", TYPES)
def test_the_default_config_counts_what_transformers_builds(model_type: str) -> None:
    assert_counts_what_transformers_builds(model_type, arch(model_type), "default")


@pytest.mark.torch
@pytest.mark.parametrize("model_type", TYPES)
def test_every_flipped_or_dropped_key_counts_what_transformers_builds(
    model_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_probe_matches_transformers(model_type, monkeypatch)


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "change"), size_cases(SIZE_VARIANTS))
def test_sizes_and_layouts_count_what_transformers_builds(
    model_type: str, change: dict[str, Any]
) -> None:
    assert_counts_what_transformers_builds(model_type, _two_blocks(model_type, change))


@pytest.mark.torch
@pytest.mark.parametrize("model_type", TYPES)
def test_each_block_lists_its_hf_linears_and_counts_its_parameters(model_type: str) -> None:
    """PEFT and quantizers act on the blocks' nn.Linear modules by name: the spec lists each
    block's Linears (routed experts are 3-D parameters, not Linears) with the HF shapes, and each
    block's total is the HF block's."""
    pytest.importorskip("torch")
    cfg = _two_blocks(model_type)
    spec = configs.normalise(model_type, cfg, "two blocks")
    assert_linears_are_the_hf_modules(
        hf_blocks(cfg),
        spec.layer_parameters,
        ours=lambda lin: not lin.name.startswith("experts."),
        whole_block=True,
    )
    for ours in spec.layer_parameters:
        assert ours.attention == sum(
            lin.parameters for lin in ours.linears if lin.part == "attention"
        )


def test_qwen3_next_keeps_a_kv_cache_in_every_fourth_block_and_a_state_in_the_others() -> None:
    spec = resolve_model(str(HELDOUT / "Qwen3-Next-80B-A3B-Instruct.json"))
    assert (spec.num_layers, spec.attention_layers) == (48, 12)
    assert (spec.num_kv_heads, spec.head_dim, spec.kv_width) == (2, 256, 512)
    assert spec.state is not None
    assert spec.state.kind == "gated-DeltaNet"
    assert spec.state.num_layers == 36
    # q and k: 16 heads of 128 each; v: 32 heads of 128
    assert spec.state.conv_channels == 2 * 16 * 128 + 32 * 128
    assert spec.state.conv_kernel == 4
    assert spec.state.recurrent_state_elements == 32 * 128 * 128
    assert spec.state.num_heads == 32
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.experts_per_token, spec.moe.num_shared_experts) == (
        512,
        10,
        1,
    )
    assert spec.checkpoint_dtype == "bfloat16"


def test_a_qwen3_5_wrapper_plans_its_language_model() -> None:
    spec = resolve_model(str(HELDOUT / "Qwen3.5-0.8B-Base.json"))
    assert spec.model_type == "qwen3_5_text"
    assert spec.tied_embeddings and spec.parameters.lm_head == 0
    assert (spec.hidden_size, spec.num_layers, spec.attention_layers) == (1024, 24, 6)
    assert spec.state is not None and spec.state.num_heads == 16
    assert spec.state.conv_channels == 2 * 16 * 128 + 16 * 128
    assert spec.checkpoint_dtype == "bfloat16"  # text_config's dtype
    assert spec.raw_config["hidden_act"] == "silu"  # the planner reads the text config
    moe = resolve_model(str(HELDOUT / "Qwen3.5-35B-A3B.json"))
    assert moe.moe is not None and moe.moe.first_dense_layers == 0
    assert moe.intermediate_size == moe.moe.expert_intermediate_size == 512


def test_all_attention_blocks_keep_no_state_and_all_deltanet_blocks_no_kv_cache() -> None:
    full = configs.normalise(
        "x", {**arch("qwen3_5_text"), "layer_types": None, "full_attention_interval": 1}, "x"
    )
    assert full.state is None and full.attention_layers == full.num_layers == 32
    linear = _two_blocks("qwen3_next", {"layer_types": ["linear_attention"] * 2})
    spec = configs.normalise("x", linear, "x")
    assert spec.state is not None and spec.attention_layers == 0


@pytest.mark.torch
@pytest.mark.parametrize("model_type", ["qwen3_next", "qwen3_5_text"])
def test_the_state_is_the_one_transformers_caches(model_type: str) -> None:
    """A tiny model's forward with a cache: the DeltaNet block's recurrent state is
    [batch, num_v_heads, head_k_dim, head_v_dim] and its conv state [batch, conv channels,
    kernel]; the attention block caches K and V of kv_width per token."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    sizes: dict[str, Any] = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 96,
        "vocab_size": 100,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 12,
        "linear_conv_kernel_dim": 3,
        "layer_types": TWO_BLOCKS,
    }
    if model_type == "qwen3_next":
        sizes |= {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16}
    spec = configs.normalise(model_type, {"model_type": model_type, **sizes}, "tiny")
    assert spec.state is not None
    with quiet():
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(model_type, **sizes)
        )
        cache = transformers.DynamicCache(config=model.config)
        model(torch.tensor([[1, 2, 3, 4, 5]]), cache=cache, use_cache=True)
    recurrent = cache.get_recurrent_state(0)
    conv = cache.get_conv_state(0)
    assert recurrent.shape == (1, spec.state.num_heads, 8, 12)
    assert recurrent[0].numel() == spec.state.recurrent_state_elements
    assert conv.shape == (1, spec.state.conv_channels, spec.state.conv_kernel)
    keys = cache.layers[1].keys
    assert keys.shape[1] * keys.shape[3] == spec.kv_width


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"layer_types": ["linear_attention", "mamba"]}, "unknown layer kinds"),
        ({"linear_num_key_heads": 3}, "linear_num_value_heads=32 is not a multiple"),
        ({"num_experts_per_tok": 600}, "exceeds num_experts"),
        ({"layer_types": ["full_attention"]}, "num_hidden_layers=2"),
    ],
)
def test_a_config_the_model_cannot_have_is_refused_with_the_field(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        configs.normalise("x", _two_blocks("qwen3_next", change), "x")


def test_olmo_hybrid_needs_both_kinds_of_block() -> None:
    """OlmoHybridConfig.validate_architecture: transformers builds neither an all-DeltaNet nor an
    all-attention OLMo Hybrid."""
    for kind in TWO_BLOCKS:
        with pytest.raises(InvalidConfigError, match="both"):
            configs.normalise("x", _two_blocks("olmo_hybrid", {"layer_types": [kind] * 2}), "x")
    spec = resolve_model(str(ARCH / "olmo_hybrid.json"))
    assert spec.state is not None
    # 30 key heads of int(0.75 · 3840 / 30) = 96 and 30 value heads of 192
    assert spec.state.conv_channels == 2 * 30 * 96 + 30 * 192
    assert spec.state.recurrent_state_elements == 30 * 96 * 192
    assert (spec.state.num_layers, spec.attention_layers) == (24, 8)


@pytest.mark.torch
def test_kimi_linear_caches_the_latent_in_its_mla_blocks_and_a_state_in_its_kda_blocks() -> None:
    """transformers' cache of a tiny Kimi Linear: the KDA block keeps [batch, heads, d, d] and a
    conv state over q, k and v; the MLA block caches the kv latent and the shared rope key."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    sizes: dict[str, Any] = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 96,
        "vocab_size": 100,
        "pad_token_id": 0,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 8,
        "v_head_dim": 8,
        "moe_intermediate_size": 16,
        "num_experts": 4,
        "num_experts_per_token": 2,
        "linear_head_dim": 12,
        "linear_num_heads": 3,
        "linear_conv_kernel_dim": 3,
        "layer_types": TWO_BLOCKS,
        "mlp_layer_types": ["dense", "sparse"],
    }
    spec = configs.normalise("kimi_linear", {"model_type": "kimi_linear", **sizes}, "tiny")
    assert spec.state is not None and spec.mla is not None
    assert spec.state.kind == "Kimi delta attention"
    with quiet():
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model("kimi_linear", **sizes)
        )
        cache = transformers.DynamicCache(config=model.config)
        model(torch.tensor([[1, 2, 3, 4, 5]]), cache=cache, use_cache=True)
    recurrent = cache.get_recurrent_state(0)
    assert recurrent.shape == (1, spec.state.num_heads, 12, 12)
    assert recurrent[0].numel() == spec.state.recurrent_state_elements
    conv = cache.get_conv_state(0)
    assert conv.shape == (1, spec.state.conv_channels, spec.state.conv_kernel)
    latent = cache.layers[1].keys.shape[-1] + cache.layers[1].values.shape[-1]
    assert latent == spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim


def test_kimi_linear_reads_the_checkpoint_layer_lists_one_indexed() -> None:
    cfg = arch("kimi_linear")
    nested = {"full_attn_layers": [4, 8], "kda_layers": [1, 2, 3, 5, 6, 7]}
    spec = configs.normalise(
        "x",
        {
            **cfg,
            "num_hidden_layers": 8,
            "layer_types": None,
            "mlp_layer_types": None,
            "linear_attn_config": nested,
        },
        "x",
    )
    assert spec.state is not None
    assert (spec.state.num_layers, spec.attention_layers) == (6, 2)
    assert spec.moe is not None and spec.moe.first_dense_layers == 1
    gap = {**nested, "kda_layers": [1, 2, 3]}
    with pytest.raises(InvalidConfigError, match="layer 5 without a mixer"):
        configs.normalise(
            "x",
            {**cfg, "num_hidden_layers": 8, "layer_types": None, "linear_attn_config": gap},
            "x",
        )


def test_a_wrapper_without_a_text_config_object_is_refused() -> None:
    cfg = arch("qwen3_5")
    with pytest.raises(InvalidConfigError, match="text_config"):
        configs.normalise("x", {**cfg, "text_config": [1]}, "x")
    other = {**cfg, "text_config": {**cfg["text_config"], "model_type": "qwen3_5_moe_text"}}
    with pytest.raises(InvalidConfigError, match="'qwen3_5_text'"):
        configs.normalise("x", other, "x")
    missing = {**cfg, "text_config": {"model_type": "qwen3_5_text"}}
    with pytest.raises(InvalidConfigError, match="text_config: required field 'hidden_size'"):
        configs.normalise("x", missing, "x")


# the nested objects test_config_fuzz does not reach: a wrapper's text_config and Kimi Linear's
# linear_attn_config (the checkpoint's form)
_NESTED: list[tuple[str, str, dict[str, Any]]] = [
    (
        "Qwen3.5-0.8B-Base",
        "text_config",
        json.loads((HELDOUT / "Qwen3.5-0.8B-Base.json").read_text()),
    ),
    ("Qwen3.5-35B-A3B", "text_config", json.loads((HELDOUT / "Qwen3.5-35B-A3B.json").read_text())),
    (
        "kimi_linear",
        "linear_attn_config",
        {
            **arch("kimi_linear"),
            "layer_types": None,
            "linear_attn_config": {
                "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
                "kda_layers": [i for i in range(1, 28) if i not in {4, 8, 12, 16, 20, 24, 27}],
                "head_dim": 128,
                "num_heads": 32,
                "short_conv_kernel_size": 4,
            },
        },
    ),
]
_BAD = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.booleans(),
    st.none(),
    st.lists(st.one_of(st.integers(min_value=-3, max_value=40), st.text(max_size=4)), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_mutated_nested_config_gives_a_spec_or_a_named_error(data: st.DataObject) -> None:
    name, field, cfg = data.draw(st.sampled_from(_NESTED))
    nested = dict(cfg[field])
    key = data.draw(st.sampled_from(sorted(nested)))
    if data.draw(st.booleans()):
        del nested[key]
    else:
        nested[key] = data.draw(_BAD)
    outcome = _normalised(name, {**cfg, field: nested})
    if isinstance(outcome, InvalidConfigError):
        assert outcome.reference and outcome.hint
    else:
        assert outcome.total_parameters > 0


def _normalised(name: str, cfg: dict[str, Any]) -> ModelSpec | InvalidConfigError:
    """The spec, or the named error; any other exception propagates and fails the test."""
    try:
        return configs.normalise(name, cfg, name)
    except InvalidConfigError as exc:
        return exc
