"""Gemma 3, OLMo 2, Granite and StarCoder2 in the planner: the KV cache against transformers' own
cache, the plan command end to end, and clear refusals of variants the normaliser does not model.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.cli.main import main
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Attention, Mode, Optimizer, PlanRequest, Precision

BUNDLED = (
    "gemma-3-1b-it",
    "gemma-3-12b-it",
    "gemma-3-27b-it",
    "OLMo-2-1124-7B",
    "OLMo-2-1124-13B",
    "granite-3.1-8b-instruct",
    "starcoder2-15b",
)


def _hf_cache_bytes(spec: ModelSpec, tokens: int) -> tuple[int, int]:
    """(bytes, sliding layers) of transformers' DynamicCache after a ``tokens`` prefill, bf16,
    built from the spec's own config on the meta device (no memory)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.cache_utils import DynamicCache

    raw = dict(spec.raw_config)
    config = transformers.AutoConfig.for_model(str(raw.pop("model_type")), **raw)
    text = config.get_text_config()
    cache = DynamicCache(config=text)
    shape = (1, text.num_key_value_heads, tokens, spec.head_dim)
    for index in range(text.num_hidden_layers):
        kv = torch.empty(shape, dtype=torch.bfloat16, device="meta")
        cache.update(kv, kv, index)
    held = sum(2 * layer.keys.numel() * 2 for layer in cache.layers)
    sliding = sum(type(layer).__name__ == "DynamicSlidingWindowLayer" for layer in cache.layers)
    return held, sliding


@pytest.mark.torch
@pytest.mark.parametrize("name", BUNDLED)
def test_kv_cache_matches_the_transformers_cache(name: str) -> None:
    # 8192 tokens pass every bundled window (Gemma 3: 512 / 1024, StarCoder2: 4096).
    spec = resolve_model(name)
    tokens = 8192
    plan = plan_memory(
        PlanRequest(
            model=spec,
            mode=Mode.INFER,
            precision=Precision.BF16,
            prompt_tokens=tokens,
            new_tokens=0,
        )
    )
    assert plan.inference is not None
    per_layer = 2 * spec.kv_width * 2
    assert plan.inference.kv_bytes_per_token == spec.num_layers * per_layer
    held, sliding = _hf_cache_bytes(spec, tokens)
    assert sliding == spec.sliding_window_layers
    # transformers' sliding layers keep window − 1 tokens after the step; we plan the window
    # (the token the next step adds): one token per sliding layer, 0.02 % of Gemma 3 27B's cache.
    assert plan.component("kv_cache") == held + sliding * per_layer


def test_gemma3_sliding_layers_cache_at_most_the_window() -> None:
    # Gemma 3 27B: 52 of 62 layers slide over 1024 tokens; past the window only the 10 global
    # layers grow: 10 layers × 2 (K, V) × 16 heads × 128 × 2 B = 80 KiB per token.
    def kv(tokens: int) -> int:
        plan = plan_memory(
            PlanRequest(
                model=resolve_model("gemma-3-27b-it"),
                mode=Mode.INFER,
                precision=Precision.BF16,
                prompt_tokens=tokens,
                new_tokens=0,
            )
        )
        return plan.component("kv_cache")

    assert kv(8192) - kv(4096) == 4096 * 10 * 2 * 16 * 128 * 2


@pytest.mark.parametrize("name", BUNDLED)
@pytest.mark.parametrize("mode", ["infer", "lora", "train"])
def test_plan_command_plans_each_bundled_model(
    name: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", name, "--mode", mode, "--gpu", "H100-80GB", "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert document["model"]["parameters"] == resolve_model(name).total_parameters


def _variant(name: str, **changes: Any) -> dict[str, Any]:
    raw = dict(resolve_model(name).raw_config)
    return raw | changes


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (
            _variant("gemma-3-1b-it", layer_types=["chunked_attention"] * 26),
            "'chunked_attention'",
        ),
        (_variant("gemma-3-1b-it", layer_types=["full_attention"] * 3), "layer_types"),
        (_variant("gemma-3-12b-it", vision_config={"model_type": "clip"}), "vision_config"),
        (_variant("gemma-3-12b-it", text_config=[1]), "text_config"),
        (_variant("OLMo-2-1124-7B", num_key_value_heads=3), "num_key_value_heads"),
        (_variant("starcoder2-15b", use_bias="yes"), "use_bias"),
    ],
)
def test_unmodelled_variants_exit_2_naming_the_field(
    config: dict[str, Any], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InvalidConfigError):
        normalise("variant", config, str(path))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert named in err and "hint:" in err and "Traceback" not in err


# --- dropout --------------------------------------------------------------------------------------


def _eager_dropout_delta(family: str, fields: tuple[str, ...]) -> tuple[int, int]:
    """(traced, formula) bytes that p = 0.1 on ``fields`` adds to the small model of
    test_formula_vs_exact, eager attention (CPU SDPA with dropout takes the math path; CUDA's
    flash kernel keeps no mask), bf16. Exact mode keeps CUDA's bool masks."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_formula_vs_exact import formula_saved, small_spec, traced_saved

    spec = small_spec(family)

    def request(p: float) -> PlanRequest:
        model = normalise(f"small-{family}", spec.raw_config | dict.fromkeys(fields, p), "small")
        return PlanRequest(
            model=model,
            precision=Precision.BF16,
            attention=Attention.EAGER,
            micro_batch=2,
            seq_len=48,
            optimizer=Optimizer.NONE,
        )

    with_dropout, without = request(0.1), request(0.0)
    traced = traced_saved(with_dropout) - traced_saved(without)
    return traced, formula_saved(with_dropout) - formula_saved(without)


@pytest.mark.torch
def test_attention_dropout_replaces_the_kept_probabilities() -> None:
    """Granite 3.1 trains with attention_dropout 0.1: dropout keeps a bool mask and the second
    matmul the dropped probabilities, while the bf16 cast of the softmax is no longer kept."""
    traced, formula = _eager_dropout_delta("granite", ("attention_dropout",))
    assert formula == traced > 0


@pytest.mark.torch
def test_starcoder2_dropout_masks_are_counted_as_cuda_keeps_them() -> None:
    """StarCoder2-15B trains with residual, embedding and attention dropout 0.1."""
    fields = ("residual_dropout", "embedding_dropout", "attention_dropout")
    traced, formula = _eager_dropout_delta("starcoder2", fields)
    assert formula == traced > 0


def test_granite_multipliers_do_not_change_the_plan() -> None:
    spec = resolve_model("granite-3.1-8b-instruct")
    plain = normalise(
        "granite-no-multipliers",
        spec.raw_config
        | {
            "embedding_multiplier": 1.0,
            "residual_multiplier": 1.0,
            "attention_multiplier": 1.0,
            "logits_scaling": 1.0,
        },
        "variant",
    )
    request = PlanRequest(model=spec, mode=Mode.TRAIN, micro_batch=1, seq_len=4096)
    assert plan_memory(request).peak_bytes == (
        plan_memory(dataclasses.replace(request, model=plain)).peak_bytes
    )
