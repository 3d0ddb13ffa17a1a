"""The state-space families (catalog/families/mamba.py): Nemotron-H, Granite 4.0 hybrids, Bamba,
Falcon-H1, Mamba-2, Mamba, Falcon-Mamba, Jamba, LFM2 / LFM2-MoE. Exact counts on the default
configs of transformers 5.24 (tests/data/model_configs_heldout/arch/), on every probe variant and
on size and layout variants; the HF module names of the linears; the fixed-size state of the
blocks that keep one (``StateSpec``), the attention blocks that still cache K and V, each
block's token mixer (``LayerParameters.mixer``); the refusals. The torch-marked tests build the
model on the meta device."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import configs, resolve_model
from gpuwarden.errors import InputError, InvalidConfigError
from gpuwarden.types.model import Mixer, ModelSpec
from tests.catalog.heldout_arch import (
    ARCH,
    HELDOUT,
    arch,
    assert_counts_what_transformers_builds,
    assert_linears_are_the_hf_modules,
    assert_probe_matches_transformers,
    hf_blocks,
    make_arch_set,
    quiet,
    size_cases,
    two_blocks,
)

NEMOTRON_H_8B = HELDOUT / "Nemotron-H-8B-Base-8K.json"

TYPES = [
    "bamba",
    "falcon_h1",
    "falcon_mamba",
    "granitemoehybrid",
    "jamba",
    "lfm2",
    "mamba",
    "mamba2",
    "nemotron_h",
]

# Layouts, sizes and legacy spellings the probe's flips and drops do not reach (each builds in
# transformers; each is counted against it).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "nemotron_h": [
        {"hybrid_override_pattern": "M-M*-E", "num_hidden_layers": 6},
        {"layers_block_type": ["mamba", "attention", "mlp"], "mamba_n_groups": 2},
        {"mamba_d_conv": 3, "mamba_conv_bias": False, "n_groups": 4},
        {"hybrid_override_pattern": "ME*", "moe_latent_size": 1024, "mlp_bias": True},
        {"use_bias": True, "use_conv_bias": False, "tie_word_embeddings": True},
        {
            "hidden_size": 512,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "mamba_num_heads": 16,
            "mamba_head_dim": 32,
            "ssm_state_size": 64,
            "layer_types": ["linear_attention", "full_attention", "moe", "moe"],
            "n_routed_experts": 16,
            "moe_intermediate_size": 128,
            "moe_shared_expert_intermediate_size": 256,
        },
    ],
    "granitemoehybrid": [
        {"layer_types": ["mamba", "attention"], "attention_bias": True, "num_key_value_heads": 8},
        {"layer_types": ["mamba", "attention"], "num_local_experts": 0, "mamba_n_groups": 2},
        {"layer_types": ["mamba", "attention"], "head_dim": 64, "mamba_d_head": 64},
        {"mamba_proj_bias": True, "mamba_conv_bias": False, "tie_word_embeddings": True},
    ],
    "bamba": [
        {"attn_layer_indices": [1, 7], "attention_bias": True, "mlp_bias": True},
        {"attn_layer_indices": [0], "head_dim": 64, "mamba_n_heads": 64, "mamba_d_head": "auto"},
    ],
    "falcon_h1": [
        # the mixer expands the hidden size when mamba_d_ssm is null; the gated norm and the
        # projection biases are each their own key
        {"mamba_d_ssm": None, "mamba_d_head": "auto", "mamba_n_heads": 64},
        {"mamba_rms_norm": True, "projectors_bias": True, "mamba_proj_bias": True},
        {"head_dim": 64, "num_key_value_heads": None, "attention_bias": True, "mlp_bias": True},
        {"mamba_n_groups": 4, "mamba_d_state": 64, "mamba_d_conv": 3, "mamba_conv_bias": False},
        {"mamba_d_ssm": 2048, "mamba_d_head": 32, "mamba_n_heads": 64, "tie_word_embeddings": True},
        # Falcon-H1-7B's sizes (mlx-community's config as quoted): head_dim 128, not 3072 / 12
        {
            "hidden_size": 3072,
            "num_attention_heads": 12,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "mamba_d_ssm": 3072,
            "mamba_d_head": 128,
            "mamba_n_heads": 24,
            "mamba_d_state": 256,
            "intermediate_size": 2048,
            "vocab_size": 1000,
        },
    ],
    "mamba2": [{"hidden_size": 1024, "num_heads": 32, "n_groups": 1, "use_bias": True}],
    # an intermediate_size the config states wins over expand · hidden
    "mamba": [{"expand": 3, "state_size": 8, "time_step_rank": 7, "use_bias": True}],
    "falcon_mamba": [{"hidden_size": 1000, "tie_word_embeddings": False}],
    "jamba": [
        {
            "num_hidden_layers": 6,
            "attn_layer_period": 3,
            "attn_layer_offset": 0,
            "expert_layer_period": 3,
            "expert_layer_offset": 2,
            "mamba_proj_bias": True,
            "mamba_dt_rank": 100,
        },
        {"num_hidden_layers": 4, "num_experts": 1},
        {"num_hidden_layers": 5, "head_dim": 64, "mamba_expand": 1},
    ],
    "lfm2": [
        {"full_attn_idxs": [1], "conv_bias": True, "conv_L_cache": 4},
        {"layer_types": ["conv", "full_attention"], "block_ffn_dim_multiplier": 1.5},
        {"full_attn_idxs": [0], "block_multiple_of": 100, "block_ffn_dim_multiplier": 1.3},
        {"full_attn_idxs": [0], "block_auto_adjust_ff_dim": False},
        {"full_attn_idxs": [0], "block_ff_dim": 9000, "tie_embedding": False},
    ],
    "lfm2_moe": [
        {},
        {"num_dense_layers": 0, "tie_embedding": False, "conv_bias": True},
        {"num_dense_layers": 4, "use_expert_bias": False},
    ],
}
# LFM2-MoE has no arch file (its default config does not build: layer_types has no default)
_LFM2_MOE = {
    "model_type": "lfm2_moe",
    "num_hidden_layers": 4,
    "layer_types": ["conv", "full_attention", "conv", "conv"],
}


def _two_blocks(model_type: str) -> dict[str, Any]:
    if model_type == "lfm2_moe":
        return dict(_LFM2_MOE)
    return two_blocks(model_type)


@pytest.mark.torch
@pytest.mark.parametrize("model_type", TYPES)
def test_every_probe_variant_counts_what_transformers_builds(
    model_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_probe_matches_transformers(model_type, monkeypatch)


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "change"), size_cases(VARIANTS))
def test_layouts_and_sizes_count_what_transformers_builds(
    model_type: str, change: dict[str, Any]
) -> None:
    assert_counts_what_transformers_builds(model_type, {**_two_blocks(model_type), **change})


@pytest.mark.torch
@pytest.mark.parametrize("model_type", ["mamba", "falcon_mamba"])
def test_mamba_without_an_intermediate_size_expands_the_hidden_size(model_type: str) -> None:
    """The saved default states intermediate_size; without it the mixer is expand · hidden."""
    pytest.importorskip("transformers")
    cfg = {k: v for k, v in _two_blocks(model_type).items() if k != "intermediate_size"}
    cfg = {**cfg, "expand": 3, "time_step_rank": "auto"}
    with quiet():
        truth = make_arch_set().meta_parameters(cfg)
    spec = configs.normalise(model_type, dict(cfg), "expanded")
    assert spec.total_parameters == truth
    assert spec.state is not None and spec.state.conv_channels == 3 * spec.hidden_size


@pytest.mark.torch
def test_a_real_nemotron_h_config_counts_what_transformers_builds() -> None:
    pytest.importorskip("transformers")
    cfg = json.loads(NEMOTRON_H_8B.read_text(encoding="utf-8"))
    with quiet():
        truth = make_arch_set().meta_parameters(cfg)
    assert resolve_model(str(NEMOTRON_H_8B)).total_parameters == truth


# every block kind of each family at least once
_ALL_KINDS: dict[str, dict[str, Any]] = {
    "nemotron_h": {"hybrid_override_pattern": "M*-E", "moe_latent_size": 512},
    "granitemoehybrid": {"layer_types": ["mamba", "attention"]},
    "bamba": {"attn_layer_indices": [1]},
    "falcon_h1": {"mamba_rms_norm": True},
    "jamba": {"num_hidden_layers": 2, "attn_layer_offset": 1, "attn_layer_period": 2},
    "lfm2": {"full_attn_idxs": [1]},
    "lfm2_moe": {"num_dense_layers": 2},
    "mamba": {},
    "mamba2": {},
    "falcon_mamba": {},
}


@pytest.mark.torch
@pytest.mark.parametrize("model_type", sorted(_ALL_KINDS))
def test_linear_names_and_kv_width_are_the_hf_modules(model_type: str) -> None:
    """The planner's linears of each block are the block's nn.Linear modules by name and shape
    (routers are bare weights, routed experts 3-D parameters); K is the KV width."""
    pytest.importorskip("torch")
    cfg = {**_two_blocks(model_type), **_ALL_KINDS[model_type]}
    spec = configs.normalise(model_type, dict(cfg), "all kinds")
    # the block's parameters are all counted, linears and the rest
    assert_linears_are_the_hf_modules(
        hf_blocks(cfg),
        spec.layer_parameters,
        skip_hf=lambda name: name.endswith("router"),
        kv_width=spec.kv_width,
        k_proj_names=("self_attn.k_proj", "mixer.k_proj"),
        whole_block=True,
    )


def _spec(path: Path) -> ModelSpec:
    return resolve_model(str(path))


def test_nemotron_h_caches_kv_only_in_its_attention_blocks() -> None:
    """Nemotron-H-8B: 24 Mamba-2, 24 MLP-only and 4 attention blocks; the Mamba-2 conv runs over
    x, B and C (heads · head_dim + 2 · groups · d_state) and its state is heads · head_dim ·
    d_state per sequence and block."""
    cfg = json.loads(NEMOTRON_H_8B.read_text(encoding="utf-8"))
    pattern = cfg["hybrid_override_pattern"]
    spec = _spec(NEMOTRON_H_8B)
    assert spec.state is not None
    heads, head_dim, d_state = cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["ssm_state_size"]
    assert spec.state.kind == "Mamba-2"
    assert spec.state.num_layers == pattern.count("M")
    assert spec.state.mixerless_layers == pattern.count("-")
    assert spec.attention_layers == pattern.count("*") == 4
    assert spec.state.conv_channels == heads * head_dim + 2 * cfg["n_groups"] * d_state
    assert spec.state.conv_kernel == cfg["conv_kernel"]
    assert spec.state.recurrent_state_elements == heads * head_dim * d_state
    assert spec.state.num_heads == heads
    assert (spec.num_kv_heads, spec.head_dim) == (8, 128)


def test_granite_and_bamba_defaults_are_all_mamba_blocks() -> None:
    for model_type in ("granitemoehybrid", "bamba"):
        cfg = arch(model_type)
        spec = _spec(ARCH / f"{model_type}.json")
        assert spec.state is not None and spec.attention_layers == 0
        # inner = mamba_expand · hidden over 128 heads; one group; d_state 256
        inner = cfg["mamba_expand"] * cfg["hidden_size"]
        assert spec.state.conv_channels == inner + 2 * cfg["mamba_n_groups"] * cfg["mamba_d_state"]
        assert spec.state.recurrent_state_elements == inner * cfg["mamba_d_state"]
        assert spec.state.num_heads == cfg["mamba_n_heads"]
    granite = _spec(ARCH / "granitemoehybrid.json")
    assert granite.moe is not None and granite.moe.num_shared_experts == 1


def test_jamba_attends_every_eighth_block_and_its_mamba_splits_channels() -> None:
    spec = _spec(ARCH / "jamba.json")
    assert spec.state is not None
    assert spec.attention_layers == 32 // 8
    assert spec.state.kind == "Mamba"
    # Mamba-1: the conv and the scan run per channel (inner = mamba_expand · hidden)
    inner = 2 * 4096
    assert (spec.state.conv_channels, spec.state.num_heads) == (inner, inner)
    assert spec.state.recurrent_state_elements == inner * 16
    assert spec.moe is not None and spec.moe.layer_frequency == 2


@pytest.mark.parametrize("model_type", ["mamba", "falcon_mamba", "mamba2"])
def test_a_pure_state_model_caches_no_kv(model_type: str) -> None:
    spec = _spec(ARCH / f"{model_type}.json")
    assert spec.state is not None
    assert spec.attention_layers == 0 and spec.state.num_layers == spec.num_layers


def test_lfm2_short_convolutions_keep_only_a_conv_state() -> None:
    cfg = {**arch("lfm2"), "layer_types": ["conv", "conv", "full_attention"] * 2}
    spec = configs.normalise("lfm2", {**cfg, "num_hidden_layers": 6}, "lfm2")
    assert spec.state is not None
    assert (spec.state.num_layers, spec.attention_layers) == (4, 2)
    assert spec.state.recurrent_state_elements == 0
    assert (spec.state.conv_channels, spec.state.conv_kernel) == (spec.hidden_size, 3)
    # the default attends in every block: nothing keeps a state
    assert _spec(ARCH / "lfm2.json").state is None


def test_peft_default_targets_reach_only_nemotron_h_attention() -> None:
    """PEFT's default LoRA targets for nemotron_h are the attention projections: they name
    linears of the attention blocks, not the Mamba-2 in_proj / out_proj."""
    peft = pytest.importorskip("peft.utils.constants")
    targets = set(peft.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["nemotron_h"])
    spec = _spec(NEMOTRON_H_8B)
    names_by_block = [{lin.name for lin in layer.linears} for layer in spec.layer_parameters]
    assert sum(targets <= names for names in names_by_block) == spec.attention_layers
    mamba = next(names for names in names_by_block if "in_proj" in names)
    assert mamba == {"in_proj", "out_proj"} and not mamba & targets


def test_falcon_h1_caches_kv_and_a_mamba2_state_in_every_block() -> None:
    """Falcon-H1's blocks are "hybrid" (LinearAttentionAndFullAttentionLayer): each keeps K and V
    per token and a Mamba-2 state; the default mixer is mamba_d_ssm = 1024 wide over 128 heads
    of 8, its conv over x, B and C."""
    cfg = arch("falcon_h1")
    spec = _spec(ARCH / "falcon_h1.json")
    state = spec.state
    assert state is not None and state.beside_attention
    n = cfg["num_hidden_layers"]
    assert spec.attention_layers == state.num_layers == n
    inner, groups, d_state = cfg["mamba_d_ssm"], cfg["mamba_n_groups"], cfg["mamba_d_state"]
    assert state.conv_channels == inner + 2 * groups * d_state
    assert state.recurrent_state_elements == inner * d_state
    assert state.num_heads == cfg["mamba_n_heads"] and state.conv_kernel == cfg["mamba_d_conv"]
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    assert spec.kv_width == cfg["num_key_value_heads"] * head_dim
    assert {block.mixer for block in spec.layer_parameters} == {Mixer.HYBRID}


# what mixes tokens in each block: Nemotron-H's MLP and MoE blocks have no mixer
_MIXERS: dict[str, list[Mixer]] = {
    "nemotron_h": [Mixer.STATE, Mixer.ATTENTION, Mixer.NONE, Mixer.NONE],
    "granitemoehybrid": [Mixer.STATE, Mixer.ATTENTION],
    "bamba": [Mixer.STATE, Mixer.ATTENTION],
    "jamba": [Mixer.STATE, Mixer.ATTENTION],
    "lfm2": [Mixer.STATE, Mixer.ATTENTION],
    "lfm2_moe": [Mixer.STATE, Mixer.ATTENTION, Mixer.STATE, Mixer.STATE],
    "mamba": [Mixer.STATE, Mixer.STATE],
    "mamba2": [Mixer.STATE, Mixer.STATE],
    "falcon_mamba": [Mixer.STATE, Mixer.STATE],
    "falcon_h1": [Mixer.HYBRID, Mixer.HYBRID],
}

# the block lists the expectations above follow (the saved defaults' own lists win otherwise)
_MIXER_LAYOUTS: dict[str, dict[str, Any]] = {
    "nemotron_h": {"layers_block_type": ["mamba", "attention", "mlp", "moe"]},
    "lfm2": {"layer_types": ["conv", "full_attention"]},
}


@pytest.mark.torch
@pytest.mark.parametrize("model_type", sorted(_MIXERS))
def test_each_block_names_its_token_mixer(model_type: str) -> None:
    pytest.importorskip("transformers")
    cfg = {**_two_blocks(model_type), **_ALL_KINDS[model_type]}
    cfg.update(_MIXER_LAYOUTS.get(model_type, {}))
    spec = configs.normalise(model_type, dict(cfg), "all kinds")
    assert [block.mixer for block in spec.layer_parameters] == _MIXERS[model_type]
    # the mixer markers and the StateSpec count the same blocks
    state = spec.state
    mixers = _MIXERS[model_type]
    stateful = mixers.count(Mixer.STATE) + mixers.count(Mixer.HYBRID)
    assert (state.num_layers if state else 0) == stateful
    assert (state.mixerless_layers if state else 0) == mixers.count(Mixer.NONE)
    assert spec.attention_layers == mixers.count(Mixer.ATTENTION) + mixers.count(Mixer.HYBRID)


def test_lfm3_is_refused_by_name() -> None:
    """LFM3 is not LFM2's blocks (sandwich norms, an attention gate, sliding windows)."""
    with pytest.raises(InvalidConfigError) as info:
        _spec(ARCH / "lfm3.json")
    assert info.value.reference == "unsupported-architecture"
    assert "lfm3" in str(info.value)


@pytest.mark.parametrize(
    ("model_type", "change", "reference", "match"),
    [
        (
            "nemotron_h",
            {"layers_block_type": None, "hybrid_override_pattern": "M*X"},
            "config-field-invalid",
            "pattern",
        ),
        ("nemotron_h", {"layers_block_type": ["mamba", "hybrid"]}, "config-field-invalid", "kind"),
        ("granitemoehybrid", {"mamba_d_head": 48}, "config-field-invalid", "mamba_d_head"),
        ("granitemoehybrid", {"mamba_n_heads": 100}, "config-field-invalid", "mamba_n_heads"),
        ("jamba", {"attn_layer_offset": 8}, "config-field-invalid", "attn_layer_offset"),
        ("mamba2", {"num_heads": 64}, "config-field-invalid", "expand"),
        ("lfm2", {"layer_types": ["conv"]}, "config-field-invalid", "layer_types"),
    ],
)
def test_configs_transformers_cannot_build_are_refused_with_the_field(
    model_type: str, change: dict[str, Any], reference: str, match: str
) -> None:
    with pytest.raises(InvalidConfigError, match=match) as info:
        configs.normalise(model_type, {**arch(model_type), **change}, "bad")
    assert info.value.reference == reference


def test_lfm2_moe_without_layer_types_is_refused() -> None:
    cfg = {k: v for k, v in _LFM2_MOE.items() if k != "layer_types"}
    with pytest.raises(InvalidConfigError, match="layer_types") as info:
        configs.normalise("lfm2_moe", cfg, "lfm2_moe")
    assert info.value.reference == "config-field-missing"


_FUZZED = {t: arch(t) for t in TYPES} | {
    "lfm2_moe": _LFM2_MOE,
    "nemotron_h_8b": json.loads(NEMOTRON_H_8B.read_text(encoding="utf-8")),
}
_BAD = st.one_of(
    st.integers(min_value=-3, max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet="ME*-x", max_size=6),
    st.booleans(),
    st.none(),
    st.lists(st.sampled_from(["mamba", "attention", "conv", "moe", "mlp", 3]), max_size=4),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_FUZZED)),
    data=st.data(),
)
def test_mutated_configs_give_a_spec_or_a_named_error(name: str, data: st.DataObject) -> None:
    cfg = dict(_FUZZED[name])
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        key = data.draw(st.sampled_from(sorted(cfg)))
        if key == "model_type":
            continue
        if data.draw(st.booleans()):
            cfg.pop(key)
        else:
            cfg[key] = data.draw(_BAD)
    refusal: InputError | None = None
    try:
        spec = configs.normalise(name, cfg, "fuzzed")
    except InputError as exc:
        refusal = exc
    if refusal is not None:
        assert refusal.reference and refusal.hint
        return
    assert spec.total_parameters > 0
    assert 0 <= spec.attention_layers <= spec.num_layers
