"""Gemma 4 (gemma4_text, gemma4, gemma4_unified_text, gemma4_unified) and Gemma 3n's language
model (gemma3n_text): exact parameter counts of
the defaults (tests/data/model_configs_heldout/arch/) and of variants of every knob (per-kind head
dims, attention_k_eq_v, KV sharing, double-wide MLPs, per-layer embeddings, MoE, the towers;
Gemma 3n's AltUp, Laurel and per-block MLP widths),
the HF module names of each block's linears, and the KV facts the planner reads: per-kind KV
groups (ModelSpec.kv_groups), KV-shared blocks in none. The torch-marked tests
build the model on the meta device with transformers 5.24."""

from __future__ import annotations

import csv
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import configs
from gpuwarden.catalog.families.gemma4 import (
    gemma3n_parameters,
    gemma4_kv_groups,
    gemma4_parameters,
)
from gpuwarden.errors import InputError, InvalidConfigError
from gpuwarden.types.model import KvGroup, ModelSpec
from tests.catalog.heldout_arch import (
    HELDOUT,
    arch,
    assert_linears_are_the_hf_modules,
    hf_blocks,
    transformers_count,
)

TYPES = ["gemma4_text", "gemma4", "gemma4_unified_text", "gemma4_unified"]
TEXT_TYPES = ["gemma4_text", "gemma4_unified_text"]
REAL_31B = HELDOUT / "gemma-4-31B-it.json"


def _small(model_type: str, **change: Any) -> dict[str, Any]:
    """The default text config with 12 blocks (the 6-block pattern twice) and small vocabularies:
    layer_types and per_layer_config are dropped so the config class derives them again."""
    cfg = {
        k: v for k, v in arch(model_type).items() if k not in ("layer_types", "per_layer_config")
    }
    return {
        **cfg,
        "num_hidden_layers": 12,
        "vocab_size": 1000,
        "vocab_size_per_layer_input": 900,
        **change,
    }


def _uniform(model_type: str, **change: Any) -> dict[str, Any]:
    """A variant whose full blocks cache K/V as wide as the sliding ones: what ModelSpec says."""
    return _small(model_type, global_head_dim=256, **change)


def _gemma3n(**change: Any) -> dict[str, Any]:
    """gemma3n_text's default with 10 blocks (every 5th full), 4 of them KV-shared."""
    cfg = {
        k: v
        for k, v in arch("gemma3n_text").items()
        if k not in ("layer_types", "activation_sparsity_pattern")
    }
    return {
        **cfg,
        "num_hidden_layers": 10,
        "intermediate_size": 1024,
        "vocab_size": 1000,
        "vocab_size_per_layer_input": 900,
        "num_kv_shared_layers": 4,
        **change,
    }


_MOE = {
    "enable_moe_block": True,
    "num_experts": 8,
    "top_k_experts": 2,
    "moe_intermediate_size": 128,
}

# Each knob of Gemma4TextConfig / Gemma4UnifiedTextConfig that changes a shape; on the unified
# type the PLE and MoE keys must build nothing.
TEXT_VARIANTS: dict[str, dict[str, Any]] = {
    "small": {},
    "untied": {"tie_word_embeddings": False},
    "attention_bias": {"attention_bias": True},
    "k_eq_v": {"attention_k_eq_v": True},
    "k_eq_v-global-kv": {"attention_k_eq_v": True, "num_global_key_value_heads": 1},
    "global-kv-without-k_eq_v": {"num_global_key_value_heads": 1},
    "global_head_dim": {"global_head_dim": 128},
    "per_layer_config-null": {"per_layer_config": None},
    "per_layer_config-explicit": {
        "per_layer_config": {str(i): {"head_dim": 128, "num_key_value_heads": 2} for i in (5, 11)}
    },
    "kv-shared": {"num_kv_shared_layers": 4},
    "kv-shared-double-wide": {"num_kv_shared_layers": 4, "use_double_wide_mlp": True},
    "all-kv-shared": {"num_kv_shared_layers": 12, "use_double_wide_mlp": True},
    "kv-shared-k_eq_v": {
        "num_kv_shared_layers": 4,
        "attention_k_eq_v": True,
        "num_global_key_value_heads": 2,
    },
    "last-block-forced-full": {
        "layer_types": ["sliding_attention", "full_attention"] * 5 + ["sliding_attention"] * 2
    },
    "bidirectional-all": {"use_bidirectional_attention": "all"},
    "no-ple": {"hidden_size_per_layer_input": 0},
    "ple-64": {"hidden_size_per_layer_input": 64},
    "moe": _MOE,
    "moe-untied-no-ple": {
        **_MOE,
        "num_experts": 4,
        "hidden_size_per_layer_input": 0,
        "tie_word_embeddings": False,
    },
}
DROPPED = ["head_dim", "num_key_value_heads", "intermediate_size", "hidden_size_per_layer_input"]

TOWERS: dict[str, dict[str, dict[str, Any]]] = {
    "gemma4": {
        "untied-outer": {"tie_word_embeddings": False},
        "vision-defaults": {"vision_config": {}},
        "audio-defaults": {"audio_config": {}},
        "vision-sized": {
            "vision_config": {
                "hidden_size": 1152,
                "intermediate_size": 4304,
                "num_hidden_layers": 3,
                "num_attention_heads": 16,
                "num_key_value_heads": 8,
                "head_dim": 72,
                "patch_size": 14,
                "position_embedding_size": 100,
                "attention_bias": True,
                "use_clipped_linears": True,
            }
        },
        "audio-sized": {
            "audio_config": {
                "hidden_size": 256,
                "num_attention_heads": 4,
                "num_hidden_layers": 2,
                "subsampling_conv_channels": [64, 16],
                "conv_kernel_size": 3,
                "output_proj_dims": 512,
            }
        },
    },
    "gemma4_unified": {
        "untied-outer": {"tie_word_embeddings": False},
        "vision-defaults": {"vision_config": {}},
        "audio-defaults": {"audio_config": {}},
        "vision-sized": {
            "vision_config": {
                "patch_size": 8,
                "pooling_kernel_size": 2,
                "mm_embed_dim": 512,
                "mm_posemb_size": 100,
                "output_proj_dims": 256,
            }
        },
        "audio-sized": {"audio_config": {"audio_embed_dim": 320}},
    },
}


def _wrapped(model_type: str, **change: Any) -> dict[str, Any]:
    cfg = arch(model_type)
    text = {
        k: v for k, v in cfg["text_config"].items() if k not in ("layer_types", "per_layer_config")
    }
    return {**cfg, "text_config": {**text, "num_hidden_layers": 6, "vocab_size": 1000}, **change}


def _text_cases() -> list[tuple[str, dict[str, Any]]]:
    cases = [(t, arch(t)) for t in TYPES]
    for t in TEXT_TYPES:
        cases += [(f"{t}/{label}", _small(t, **change)) for label, change in TEXT_VARIANTS.items()]
        base = _small(t)
        cases += [(f"{t}/-{key}", {k: v for k, v in base.items() if k != key}) for key in DROPPED]
    for t, towers in TOWERS.items():
        cases += [(f"{t}/{label}", _wrapped(t, **change)) for label, change in towers.items()]
    return cases


CASES = _text_cases()


@pytest.mark.torch
@pytest.mark.parametrize(("label", "cfg"), CASES, ids=[label for label, _ in CASES])
def test_counts_what_transformers_builds(label: str, cfg: dict[str, Any]) -> None:
    pytest.importorskip("transformers")
    assert gemma4_parameters(cfg).total == transformers_count(cfg)


@pytest.mark.torch
def test_the_published_31b_counts_what_transformers_builds() -> None:
    pytest.importorskip("transformers")
    cfg = json.loads(REAL_31B.read_text(encoding="utf-8"))
    truth = transformers_count(cfg)
    assert gemma4_parameters(cfg).total == truth == _truth(REAL_31B.name)


@pytest.mark.torch
@pytest.mark.parametrize(
    "change",
    [
        {"attention_k_eq_v": True, "num_global_key_value_heads": 1, "num_kv_shared_layers": 4},
        {"num_kv_shared_layers": 4, "use_double_wide_mlp": True, **_MOE},
    ],
    ids=["k_eq_v-shared", "shared-wide-moe"],
)
def test_linears_are_the_hf_modules_of_each_block(change: dict[str, Any]) -> None:
    """PEFT matches target_modules against module names: each block's nn.Linear modules (all
    but the router's proj, counted as the router) are our linears, by name and shape."""
    pytest.importorskip("torch")
    cfg = _small("gemma4_text", **change)
    assert_linears_are_the_hf_modules(
        hf_blocks(cfg),
        gemma4_parameters(cfg).layers,
        skip_hf=lambda name: name.startswith("router"),
    )


def _truth(file: str) -> int:
    with (HELDOUT / "expected.csv").open(encoding="utf-8", newline="") as handle:
        rows = {row["file"]: row for row in csv.DictReader(handle)}
    return int(rows[file]["params_truth"])


def test_defaults_count_what_expected_csv_records() -> None:
    for model_type in TYPES:
        assert gemma4_parameters(arch(model_type)).total == _truth(f"arch/{model_type}.json")


def test_the_31b_is_read_with_its_two_kv_shapes() -> None:
    """google/gemma-4-31B-it: 50 sliding blocks of 16 KV heads × 256 over 1024 tokens, 10 full
    blocks of 4 × 512 (attention_k_eq_v with num_global_key_value_heads 4)."""
    cfg = json.loads(REAL_31B.read_text(encoding="utf-8"))
    groups = (KvGroup(50, 16, 256, 1024), KvGroup(10, 4, 512, None))
    assert gemma4_kv_groups(cfg) == groups
    spec = configs.normalise("31b", cfg, "gemma-4-31B-it.json")
    assert spec.kv_groups == groups
    assert spec.attention_layers == 60
    # the spec's single shape is the sliding kind's (50 of 60 blocks)
    assert (spec.num_kv_heads, spec.head_dim, spec.sliding_window) == (16, 256, 1024)
    # K and V per token: 50 × 16 × (256 + 256) + 10 × 4 × (512 + 512) elements
    assert sum(g.layers * g.elements_per_token for g in spec.kv_groups) == 450_560
    assert spec.total_parameters == _truth("gemma-4-31B-it.json")


def test_kv_shared_blocks_cache_nothing() -> None:
    """The last 4 of 12 blocks reuse the K/V of the first 8 (block 7 the sliding one, block 5
    the full one): only those 8 cache, the 4 others are in no group."""
    cfg = _uniform("gemma4_text", num_kv_shared_layers=4)
    groups = (KvGroup(7, 4, 256, 512), KvGroup(1, 4, 256, None))
    assert gemma4_kv_groups(cfg) == groups
    spec = configs.normalise("shared", cfg, "shared")
    assert spec.kv_groups == groups
    assert (spec.num_layers, spec.attention_layers) == (12, 8)


@pytest.mark.parametrize("model_type", TEXT_TYPES)
def test_a_uniform_config_is_read_with_its_sliding_blocks(model_type: str) -> None:
    """Every 6th block full, the last forced full: 10 of 12 slide, over 512 tokens (gemma4_text)
    or 1024 (gemma4_unified_text's default)."""
    spec = configs.normalise("u", _uniform(model_type), "u")
    window = 512 if model_type == "gemma4_text" else 1024
    assert (spec.sliding_window, spec.sliding_window_layers) == (window, 10)
    assert (spec.num_kv_heads, spec.head_dim, spec.kv_width) == (4, 256, 1024)
    assert spec.total_parameters == gemma4_parameters(_uniform(model_type)).total


def test_bidirectional_windows_are_exclusive_on_both_sides() -> None:
    spec = configs.normalise("b", _uniform("gemma4_text", use_bidirectional_attention="all"), "b")
    assert spec.sliding_window == 512 // 2 + 1


def test_moe_blocks_keep_their_dense_mlp_as_a_shared_expert() -> None:
    spec = configs.normalise("moe", _uniform("gemma4_text", **_MOE), "moe")
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.experts_per_token) == (8, 2)
    assert (spec.moe.num_shared_experts, spec.moe.shared_intermediate_size) == (1, 9216)
    layer = spec.layer_parameters[0]
    assert layer.experts == 8 * 3 * 2304 * 128
    assert layer.router == 2304 * 8 + 2304 + 8
    assert spec.active_parameters < spec.total_parameters


def test_the_unified_text_model_builds_no_ple_and_no_moe() -> None:
    plain = gemma4_parameters(_small("gemma4_unified_text")).total
    knobs = _small("gemma4_unified_text", hidden_size_per_layer_input=64, **_MOE)
    assert gemma4_parameters(knobs).total == plain


@pytest.mark.parametrize(
    ("change", "reference", "words"),
    [
        ({"per_layer_config": {"12": {"head_dim": 64}}}, "config-field-invalid", "block index"),
        (
            {"per_layer_config": {"5": {"intermediate_size": 64}}},
            "unsupported-architecture",
            "head_dim",
        ),
        ({"per_layer_config": {"5": {"head_dim": 64}}}, "config-field-invalid", "one per kind"),
        (
            {
                "num_kv_shared_layers": 11,
                "layer_types": ["full_attention"] + ["sliding_attention"] * 11,
            },
            "config-field-invalid",
            "reuse",
        ),
        ({"num_kv_shared_layers": 13}, "config-field-invalid", "at most 12"),
        ({"use_bidirectional_attention": "both"}, "config-field-invalid", "use_bidirectional"),
        ({"enable_moe_block": True}, "config-field-missing", "num_experts"),
    ],
)
def test_configs_transformers_cannot_build_are_refused(
    change: dict[str, Any], reference: str, words: str
) -> None:
    with pytest.raises(InvalidConfigError, match=words) as info:
        configs.normalise("bad", _uniform("gemma4_text", **change), "bad.json")
    assert info.value.reference == reference


def test_a_foreign_tower_is_refused_not_guessed() -> None:
    cfg = _wrapped("gemma4", vision_config={"model_type": "siglip_vision_model"})
    with pytest.raises(InvalidConfigError, match="siglip_vision_model") as info:
        configs.normalise("g", cfg, "g.json")
    assert info.value.reference == "unsupported-architecture"


_BAD_VALUES = st.one_of(
    st.integers(min_value=-3, max_value=40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
    st.lists(st.integers(min_value=-1, max_value=3), max_size=3),
    st.dictionaries(st.sampled_from(["0", "5", "x"]), st.integers(), max_size=2),
)
_FUZZED = {
    "uniform": _uniform("gemma4_text", **_MOE),
    "gemma3n": _gemma3n(num_kv_shared_layers=0),
    "unified": _uniform("gemma4_unified_text"),
    "31b": json.loads(REAL_31B.read_text(encoding="utf-8")),
}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(_FUZZED)),
    data=st.data(),
)
def test_a_mutated_config_gives_a_spec_or_a_named_error(name: str, data: st.DataObject) -> None:
    cfg = json.loads(json.dumps(_FUZZED[name]))
    target = cfg["text_config"] if "text_config" in cfg and data.draw(st.booleans()) else cfg
    key = data.draw(st.sampled_from(sorted(set(target) - {"model_type"})))
    if data.draw(st.booleans()):
        del target[key]
    else:
        target[key] = data.draw(_BAD_VALUES)
    outcome: object
    try:
        outcome = configs.normalise(name, cfg, "fuzz.json")
    except InputError as exc:
        outcome = exc
    if isinstance(outcome, InputError):
        assert outcome.reference and outcome.hint
    else:
        assert isinstance(outcome, ModelSpec) and outcome.total_parameters > 0


# --- Gemma 3n -------------------------------------------------------------------------------------


GEMMA3N_CASES: dict[str, dict[str, Any]] = {
    "default": arch("gemma3n_text"),
    "small": _gemma3n(),
    "untied": _gemma3n(tie_word_embeddings=False),
    "attention_bias": _gemma3n(attention_bias=True),
    "no-kv-sharing": _gemma3n(num_kv_shared_layers=0),
    "per-block-mlp": _gemma3n(intermediate_size=[512] * 5 + [1024] * 5),
    "altup-2": _gemma3n(altup_num_inputs=2),
    "laurel-8": _gemma3n(laurel_rank=8),
    "ple-64": _gemma3n(hidden_size_per_layer_input=64),
    "kv-heads-4": _gemma3n(num_key_value_heads=4, num_kv_shared_layers=0),
    "layer_types": _gemma3n(layer_types=["sliding_attention", "full_attention"] * 5),
}


@pytest.mark.torch
@pytest.mark.parametrize("label", sorted(GEMMA3N_CASES))
def test_gemma3n_counts_what_transformers_builds(label: str) -> None:
    pytest.importorskip("transformers")
    cfg = GEMMA3N_CASES[label]
    assert gemma3n_parameters(cfg).total == transformers_count(cfg)


def test_gemma3n_default_is_read_with_15_blocks_caching_nothing() -> None:
    """35 blocks, every 5th full: of the first 20 (the last 15 reuse K/V), 16 slide over 512
    tokens and 4 attend to all, each 2 KV heads × 256."""
    cfg = arch("gemma3n_text")
    spec = configs.normalise("3n", cfg, "gemma3n_text.json")
    assert spec.total_parameters == _truth("arch/gemma3n_text.json")
    assert spec.kv_groups == (KvGroup(16, 2, 256, 512), KvGroup(4, 2, 256, None))
    assert (spec.num_layers, spec.attention_layers) == (35, 20)


def test_gemma3n_without_kv_sharing_is_read() -> None:
    """10 blocks, every 5th full: 8 slide over 512 tokens; one KV width (2 heads × 256)."""
    spec = configs.normalise("3n", _gemma3n(num_kv_shared_layers=0), "3n")
    assert (spec.sliding_window, spec.sliding_window_layers) == (512, 8)
    assert spec.kv_groups == (KvGroup(8, 2, 256, 512), KvGroup(2, 2, 256, None))
    assert (spec.num_kv_heads, spec.head_dim) == (2, 256)
    assert spec.total_parameters == gemma3n_parameters(_gemma3n(num_kv_shared_layers=0)).total


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"intermediate_size": [512] * 5 + [1024] * 5}, "intermediate sizes"),
        # absent (null): the class default 15 exceeds the 10 blocks
        ({"num_kv_shared_layers": None}, "exceeds num_hidden_layers"),
        ({"intermediate_size": [512] * 3}, "intermediate_size"),
        ({"activation_sparsity_pattern": [0.0] * 3}, "activation_sparsity_pattern"),
    ],
)
def test_gemma3n_configs_not_modelled_or_not_buildable_are_refused(
    change: dict[str, Any], words: str
) -> None:
    cfg = _gemma3n(**{"num_kv_shared_layers": 0, **change})
    with pytest.raises(InvalidConfigError, match=words):
        configs.normalise("3n", cfg, "3n.json")
