"""gpt-oss, Llama 4 and DeepSeek-V2 normalisers: layer kinds, nesting, published sizes, errors."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.errors import InvalidConfigError


def _raw(name: str) -> dict[str, Any]:
    return dict(resolve_model(name).raw_config)


def _nested(name: str) -> dict[str, Any]:
    """The bundled multimodal Llama 4 config (the spec keeps only its text_config)."""
    text = resources.files("gpuwarden.catalog.data.models").joinpath(f"{name}.json").read_text()
    config: dict[str, Any] = json.loads(text)
    return config


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        # OpenAI model card: 20.91B / 3.61B and 116.83B / 5.13B; "active" there leaves out the
        # embedding table (201,088 × 2,880), which the plan's active count keeps
        ("gpt-oss-20b", 20.91, 3.61),
        ("gpt-oss-120b", 116.83, 5.13),
        # DeepSeek-V2 paper / model card: 15.7B total, 2.4B active (embedding left out too)
        ("DeepSeek-V2-Lite", 15.7, 2.4),
    ],
)
def test_published_sizes(name: str, total_b: float, active_b: float) -> None:
    spec = resolve_model(name)
    embedding = spec.parameters.embedding
    assert spec.total_parameters / 1e9 == pytest.approx(total_b, abs=0.01)
    assert (spec.active_parameters - embedding) / 1e9 == pytest.approx(active_b, abs=0.06)


@pytest.mark.parametrize(
    ("name", "active_b", "total_b"),
    # Meta: 17B active / 109B and 400B total, vision tower included; the language model alone
    [("Llama-4-Scout-17B-16E", 17.0, 107.8), ("Llama-4-Maverick-17B-128E", 17.0, 400.7)],
)
def test_llama4_language_model_sizes(name: str, active_b: float, total_b: float) -> None:
    spec = resolve_model(name)
    assert spec.model_type == "llama4_text"
    assert spec.active_parameters / 1e9 == pytest.approx(active_b, abs=0.25)
    assert spec.total_parameters / 1e9 == pytest.approx(total_b, abs=0.05)


def test_gpt_oss_alternates_sliding_and_full_layers() -> None:
    spec = resolve_model("gpt-oss-120b")
    assert (spec.sliding_window, spec.sliding_window_layers) == (128, 18)
    without = normalise("x", _raw("gpt-oss-120b") | {"layer_types": None}, "x")
    assert without.sliding_window_layers == 18  # transformers' default: even blocks slide


def test_gpt_oss_sinks_and_router_bias_are_counted() -> None:
    spec = resolve_model("gpt-oss-20b")
    block = spec.parameters.layers[0]
    assert block.other == 64  # one sink logit per head
    assert block.router == 32 * (2880 + 1)


def test_llama4_chunked_layers_are_the_rope_layers() -> None:
    scout = resolve_model("Llama-4-Scout-17B-16E")
    assert (scout.sliding_window, scout.sliding_window_layers) == (8192, 36)
    flat = normalise("x", _nested("Llama-4-Scout-17B-16E")["text_config"], "x")
    assert flat.parameters == scout.parameters
    no_chunks = _raw("Llama-4-Scout-17B-16E") | {"attention_chunk_size": None}
    assert normalise("x", no_chunks, "x").sliding_window_layers == 0


def test_maverick_interleaves_dense_and_moe_blocks() -> None:
    spec = resolve_model("Llama-4-Maverick-17B-128E")
    experts = [bool(layer.experts) for layer in spec.layer_parameters]
    assert experts == [False, True] * 24
    assert spec.moe is not None and spec.moe.num_shared_experts == 1


def test_deepseek_v2_lite_has_full_q_projection_and_one_dense_block() -> None:
    spec = resolve_model("DeepSeek-V2-Lite")
    assert spec.mla is not None and spec.mla.q_lora_rank is None
    names = {lin.name for lin in spec.parameters.layers[0].linears}
    assert "q_proj" in names and "q_a_proj" not in names
    assert [bool(layer.experts) for layer in spec.parameters.layers[:2]] == [False, True]


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("gpt-oss-20b", {"layer_types": ["sliding_attention"] * 3}, "has 3 entries"),
        ("gpt-oss-20b", {"layer_types": ["chunked_attention"] * 24}, "unknown layer kinds"),
        ("gpt-oss-20b", {"num_experts_per_tok": 64}, "exceeds num_local_experts"),
        ("Llama-4-Scout-17B-16E", {"no_rope_layers": [1, 0]}, "one 0/1 flag per layer"),
        ("Llama-4-Scout-17B-16E", {"moe_layers": [0, 48]}, "names a layer"),
        ("Llama-4-Scout-17B-16E", {"interleave_moe_layer_step": 0}, "must be positive"),
        ("DeepSeek-V2-Lite", {"num_experts_per_tok": None}, "'num_experts_per_tok' is missing"),
    ],
)
def test_bad_fields_name_the_field(name: str, change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        normalise(name, _raw(name) | change, "cfg.json")


def test_llama4_without_text_config_is_a_clear_error() -> None:
    cfg = _nested("Llama-4-Scout-17B-16E")
    cfg["text_config"] = None
    with pytest.raises(InvalidConfigError, match="text_config") as caught:
        normalise("x", cfg, "cfg.json")
    assert caught.value.reference == "config-field-invalid"


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.text(max_size=4),
    st.lists(st.one_of(st.integers(-1, 3), st.sampled_from(["full_attention", "x"])), max_size=5),
)
_FIELDS = (
    "num_hidden_layers",
    "layer_types",
    "no_rope_layers",
    "moe_layers",
    "interleave_moe_layer_step",
    "attention_chunk_size",
    "num_local_experts",
    "num_experts_per_tok",
    "sliding_window",
    "use_qk_norm",
)


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(["gpt-oss-20b", "Llama-4-Maverick-17B-128E", "DeepSeek-V2-Lite"]),
    changes=st.dictionaries(st.sampled_from(_FIELDS), _VALUES, max_size=4),
)
def test_damaged_configs_give_a_spec_or_a_config_error(name: str, changes: dict[str, Any]) -> None:
    cfg = _raw(name) | changes
    reference = ""
    try:
        spec = normalise(name, cfg, "cfg.json")
    except InvalidConfigError as exc:
        reference = exc.reference
    if reference:
        assert reference in {"config-field-invalid", "config-field-missing"}
        return
    assert spec.total_parameters > 0
    assert 0 <= spec.sliding_window_layers <= spec.num_layers


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("gpt-oss-20b", "infer"),
        ("gpt-oss-20b", "lora"),
        ("Llama-4-Maverick-17B-128E", "infer"),
        ("Llama-4-Scout-17B-16E", "train"),
        ("Llama-4-Scout-17B-16E", "qlora"),
        ("DeepSeek-V2-Lite", "infer"),
        ("DeepSeek-V2-Lite", "lora"),
    ],
)
def test_cli_plans_the_bundled_models(
    name: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuwarden.cli.main import main

    assert main(["plan", name, "--mode", mode, "--gpu", "H100-80GB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_cli_refuses_an_unknown_layer_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuwarden.cli.main import main

    cfg = _raw("gpt-oss-20b") | {"layer_types": ["sliding_attention", "local"] * 12}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["plan", str(path), "--mode", "infer", "--gpu", "H100-80GB"]) == 2
    err = capsys.readouterr().err
    assert "config-field-invalid" in err and "'local'" in err
