"""Qwen3, Qwen3-MoE and Qwen2-MoE: config branches, the KV cache against transformers' own cache,
and the CLI on the bundled configs (catalog/families/qwen.py, planner/families.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.cli.main import main
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Mode, PlanRequest, Precision
from gpuwarden.units import KIB


def _raw(name: str) -> dict[str, Any]:
    return dict(resolve_model(name).raw_config)


def _spec(name: str, **overrides: Any) -> ModelSpec:
    return normalise(f"variant of {name}", {**_raw(name), **overrides}, f"variant of {name}")


def test_head_dim_is_the_configs_not_hidden_over_heads() -> None:
    # Qwen3-32B: 64 heads × 128 = 8192 ≠ hidden 5120; q_proj is 5120 → 8192
    spec = resolve_model("Qwen3-32B")
    q_proj = next(lin for lin in spec.parameters.layers[0].linears if lin.name == "q_proj")
    assert (spec.head_dim, q_proj.in_features, q_proj.out_features) == (128, 5120, 8192)
    # q_norm and k_norm add head_dim weights each to the two block norms
    assert spec.parameters.layers[0].norms == 2 * 5120 + 2 * 128


def test_moe_blocks_follow_mlp_only_layers_and_sparse_step() -> None:
    spec = _spec("Qwen3-30B-A3B", num_hidden_layers=6, mlp_only_layers=[1], decoder_sparse_step=2)
    routed = [bool(layer.experts) for layer in spec.parameters.layers]
    # (i + 1) % 2 == 0 → blocks 1, 3, 5 route; block 1 is listed as dense-only
    assert routed == [False, False, False, True, False, True]
    assert spec.moe is not None and spec.moe.first_dense_layers == 3


def test_qwen2_moe_has_a_gated_shared_expert() -> None:
    spec = resolve_model("Qwen1.5-MoE-A2.7B")
    names = {lin.name: lin for lin in spec.parameters.layers[0].linears}
    assert (names["shared_expert_gate"].in_features, names["shared_expert_gate"].out_features) == (
        2048,
        1,
    )
    assert names["down_proj"].in_features == 5632  # shared_expert_intermediate_size
    assert spec.moe is not None and spec.moe.num_shared_experts == 1


@pytest.mark.parametrize(
    ("name", "overrides", "field"),
    [
        ("Qwen3-8B", {"layer_types": ["chunked_attention"] * 36}, "layer_types"),
        ("Qwen1.5-MoE-A2.7B", {"layer_types": ["full_attention"] * 3}, "layer_types"),
        ("Qwen3-30B-A3B", {"mlp_only_layers": "all"}, "mlp_only_layers"),
        ("Qwen3-30B-A3B", {"num_experts_per_tok": 200}, "num_experts_per_tok"),
        ("Qwen3-8B", {"num_key_value_heads": 5}, "num_key_value_heads"),
    ],
)
def test_bad_variant_fields_are_named(name: str, overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfigError, match=field) as info:
        _spec(name, **overrides)
    assert info.value.reference == "config-field-invalid"


@pytest.mark.parametrize(
    ("name", "per_token"),
    [
        # layers × K and V × KV heads × head_dim × 2 B (bf16)
        ("Qwen3-8B", 36 * 2 * 8 * 128 * 2),
        ("Qwen3-30B-A3B", 48 * 2 * 4 * 128 * 2),
        ("Qwen3-235B-A22B", 94 * 2 * 4 * 128 * 2),
        ("Qwen1.5-MoE-A2.7B", 24 * 2 * 16 * 128 * 2),
    ],
)
def test_kv_bytes_per_token(name: str, per_token: int) -> None:
    request = PlanRequest(model=resolve_model(name), mode=Mode.INFER, precision=Precision.BF16)
    plan = plan_memory(request)
    assert plan.inference is not None
    assert plan.inference.kv_bytes_per_token == per_token
    assert per_token % KIB == 0


# Shrunken real configs (2-3 blocks, 1,000-token vocabulary), with and without sliding windows.
_SMALL: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3": (
        "Qwen3-8B",
        {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8}
        | {"num_key_value_heads": 2, "head_dim": 64},
    ),
    "qwen3_moe": (
        "Qwen3-30B-A3B",
        {"hidden_size": 256, "moe_intermediate_size": 64, "num_attention_heads": 8}
        | {"num_key_value_heads": 2, "head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2},
    ),
    "qwen2_moe": (
        "Qwen1.5-MoE-A2.7B",
        {"hidden_size": 256, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 128}
        | {"num_attention_heads": 4, "num_key_value_heads": 4, "num_experts": 8}
        | {"num_experts_per_tok": 2, "num_hidden_layers": 3},
    ),
}
_WINDOW = {"use_sliding_window": True, "sliding_window": 32}
_KV_CASES = [
    ("qwen3", {}, 0),
    ("qwen3", _WINDOW | {"max_window_layers": 1}, 1),  # block 1 slides
    ("qwen3_moe", _WINDOW, 2),  # every block slides
    ("qwen2_moe", _WINDOW | {"max_window_layers": 3}, 2),  # blocks 0 and 2 slide
]


@pytest.mark.torch
@pytest.mark.parametrize(("family", "extra", "sliding"), _KV_CASES)
def test_kv_cache_is_what_transformers_caches(
    family: str, extra: dict[str, Any], sliding: int
) -> None:
    """The formula's KV cache against the DynamicCache transformers fills in exact mode: 64
    tokens per sequence pass the 32-token window, 24 do not."""
    pytest.importorskip("transformers")
    from gpuwarden.planner.exact import run_exact

    bundled, overrides = _SMALL[family]
    shrink = {"vocab_size": 1000, "num_hidden_layers": 2}
    spec = _spec(bundled, **(shrink | overrides | extra))
    assert spec.sliding_window_layers == sliding
    for prompt, new in ((48, 16), (20, 4)):
        request = PlanRequest(
            model=spec,
            mode=Mode.INFER,
            precision=Precision.BF16,
            batch=2,
            prompt_tokens=prompt,
            new_tokens=new,
        )
        formula = plan_memory(request).component("kv_cache")
        cached = run_exact(request).components["kv_cache"]
        # each sliding cache layer also holds its window as a 0-d int64 tensor
        assert cached - formula == 8 * sliding


@pytest.mark.parametrize("mode", ["infer", "lora", "train"])
@pytest.mark.parametrize("name", ["Qwen3-8B", "Qwen3-30B-A3B", "Qwen2-57B-A14B"])
def test_cli_plans_the_bundled_models(
    name: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["plan", name, "--mode", mode, "--gpu", "H100-80GB", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    assert json.loads(out)["model"]["name"] == name


def test_cli_unknown_layer_kind_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = {**_raw("Qwen3-8B"), "use_sliding_window": True}
    cfg["layer_types"] = ["full_attention"] * 35 + ["chunked_attention"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["plan", str(path), "--mode", "infer"]) == 2
    err = capsys.readouterr().err
    assert "config-field-invalid" in err and "chunked_attention" in err and str(path) in err
