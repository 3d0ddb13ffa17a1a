"""Vision towers the serving engines load beside the language model (ModelSpec.
engine_tower_parameters): counted exactly from a Qwen3.5 config's vision_config, added to the
weights under vLLM and SGLang, left out of HF generate and training (AutoModelForCausalLM builds
Qwen3_5ForCausalLM, text only). Gemma 3's tower is already in its parameters (its causal LM is
Gemma3ForConditionalGeneration) and stays there.

Llama 4 likewise: AutoModelForCausalLM builds Llama4ForCausalLM; the engines load
Llama4ForConditionalGeneration's vision_model + multi_modal_projector too. vLLM's
--language-model-only ("prevents loading multimodal modules": vLLM docs 'Multimodal models')
leaves the tower out; SGLang has no such switch.

Counts: transformers 5.24 Qwen3_5VisionModel / Qwen3_5MoeVisionModel / Llama4VisionModel +
Llama4MultiModalProjector built on the meta device from the held-out configs' vision_config (the
torch-marked tests redo it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import configs, resolve_gpu, resolve_model
from gpuwarden.cli.commands.plan import build_request, register
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.memory import plan_memory
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Engine, Mode, PlanRequest

HELDOUT = Path(__file__).resolve().parent.parent / "data" / "model_configs_heldout"
TOWERS = {
    "Qwen3.5-0.8B-Base": 100_592_896,
    "Qwen3.5-4B": 333_514_240,
    "Qwen3.5-35B-A3B": 446_571_248,
}


def _config(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((HELDOUT / f"{name}.json").read_text())
    return loaded


def _spec(cfg: dict[str, Any]) -> ModelSpec:
    return configs.normalise("probe", cfg, "test")


@pytest.mark.parametrize(("name", "tower"), TOWERS.items())
def test_the_vision_tower_is_counted_apart_from_the_language_model(name: str, tower: int) -> None:
    spec = _spec(_config(name))
    assert spec.engine_tower_parameters == tower
    text_only = _spec({k: v for k, v in _config(name).items() if k != "vision_config"})
    # the language model's count does not move with the tower
    assert spec.total_parameters == text_only.total_parameters


def test_an_absent_vision_config_takes_the_config_class_defaults() -> None:
    cfg = {k: v for k, v in _config("Qwen3.5-4B").items() if k != "vision_config"}
    # Qwen3_5VisionConfig(): depth 27, 1152 wide, MLP 4304, out 3584 (meta-device build)
    assert _spec(cfg).engine_tower_parameters == 453_650_672


def test_the_tower_follows_its_sizes() -> None:
    cfg = _config("Qwen3.5-4B")
    deeper = {**cfg, "vision_config": {**cfg["vision_config"], "depth": 25}}
    # one more block: 2 LayerNorms, qkv, proj and the MLP of a 1024-wide block
    h, inner = 1024, 4096
    block = 4 * h + 3 * h * h + 3 * h + h * h + h + 2 * h * inner + inner + h
    assert _spec(deeper).engine_tower_parameters == TOWERS["Qwen3.5-4B"] + block


def test_a_tower_of_another_kind_is_refused() -> None:
    cfg = _config("Qwen3.5-4B")
    other = {**cfg, "vision_config": {**cfg["vision_config"], "model_type": "siglip_vision_model"}}
    with pytest.raises(InvalidConfigError, match=r"vision_config\.model_type"):
        _spec(other)
    with pytest.raises(InvalidConfigError, match="vision_config"):
        _spec({**cfg, "vision_config": [1]})


def test_models_without_an_unbuilt_tower_carry_none() -> None:
    # Gemma 3's SigLIP tower is in its parameters (AutoModelForCausalLM builds it): not again
    gemma = resolve_model("gemma-3-12b-it")
    assert gemma.model_type == "gemma3" and gemma.engine_tower_parameters == 0
    assert resolve_model("meta-llama/Llama-3.1-8B").engine_tower_parameters == 0
    text = _config("Qwen3.5-4B")["text_config"]
    assert _spec({**text, "model_type": "qwen3_5_text"}).engine_tower_parameters == 0


def _plan(engine: Engine, tp: int = 1, mode: Mode = Mode.INFER) -> tuple[int, int]:
    spec = _spec(_config("Qwen3.5-4B"))
    request = PlanRequest(
        model=spec,
        mode=mode,
        engine=engine if mode is Mode.INFER else None,
        gpu=resolve_gpu("H100") if mode is Mode.INFER else None,
        tp=tp,
        num_gpus=tp,
        max_model_len=4096,
    )
    plan = plan_memory(request)
    return plan.component("parameters"), spec.engine_tower_parameters


@pytest.mark.parametrize("engine", [Engine.VLLM, Engine.SGLANG])
def test_the_engines_load_the_tower_in_the_compute_dtype(engine: Engine) -> None:
    with_tower, tower = _plan(engine)
    without, _ = _plan(Engine.HF)
    assert with_tower - without == tower * 2  # bf16
    sharded, _ = _plan(engine, tp=2)
    half, _ = _plan(Engine.HF, tp=2)
    assert sharded - half == tower // 2 * 2


def test_training_the_language_model_leaves_the_tower_out() -> None:
    trained, tower = _plan(Engine.HF, mode=Mode.TRAIN)
    spec = _spec(_config("Qwen3.5-4B"))
    assert tower and trained == spec.total_parameters * 4  # bf16-mixed: fp32 text-model weights


@pytest.mark.torch
@pytest.mark.parametrize("name", TOWERS)
def test_the_counts_are_transformers_vision_models_on_meta(name: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = _config(name)
    config = transformers.AutoConfig.for_model(
        raw["model_type"], **{k: v for k, v in raw.items() if k != "model_type"}
    )
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(config)
        causal = transformers.AutoModelForCausalLM.from_config(config)
    visual = sum(p.numel() for p in model.model.visual.parameters())
    assert visual == TOWERS[name]
    # the conditional-generation model is the causal LM plus exactly the tower
    total = sum(p.numel() for p in model.parameters())
    assert total - sum(p.numel() for p in causal.parameters()) == visual


# Llama-4-Scout-17B-16E's published vision_config (huggingface.co/meta-llama/Llama-4-Scout-17B-16E
# config.json, as quoted in NVIDIA/TensorRT-LLM's Llama 4 tests), also in the bundled catalog copy
SCOUT_VISION = {
    "hidden_size": 1408,
    "image_size": 336,
    "intermediate_size": 5632,
    "model_type": "llama4_vision_model",
    "num_attention_heads": 16,
    "num_channels": 3,
    "num_hidden_layers": 34,
    "patch_size": 14,
    "pixel_shuffle_ratio": 0.5,
    "projector_input_dim": 4096,
    "projector_output_dim": 4096,
    "vision_output_dim": 4096,
}
# meta-device counts of vision_model + multi_modal_projector under a 5120-wide text model
LLAMA4_TOWERS = {
    "defaults": 455_178_240,  # Llama4VisionConfig() (the arch config's values)
    "scout": 871_932_416,
    "scout, 3 blocks": 133_888_384,
    "scout, 12 heads": 871_166_056,  # 1408 // 12 = 117-wide heads: q/k/v/o 1404 wide
    "scout, vision_output_dim 2048": 861_446_656,
}


def _llama4(label: str) -> dict[str, Any]:
    cfg = json.loads((HELDOUT / "arch" / "llama4.json").read_text())
    changes = {
        "defaults": {},
        "scout": {},
        "scout, 3 blocks": {"num_hidden_layers": 3},
        "scout, 12 heads": {"num_attention_heads": 12},
        "scout, vision_output_dim 2048": {"vision_output_dim": 2048},
    }[label]
    vision = cfg["vision_config"] if label == "defaults" else {**SCOUT_VISION, **changes}
    return {**cfg, "vision_config": vision}


@pytest.mark.parametrize(("label", "tower"), LLAMA4_TOWERS.items())
def test_llama4s_tower_is_counted_apart(label: str, tower: int) -> None:
    spec = _spec(_llama4(label))
    assert spec.engine_tower_parameters == tower
    assert spec.total_parameters == _spec(_llama4("defaults")).total_parameters


def test_llama4_tower_by_hand() -> None:
    """Scout's tower from its sizes (the moe2 docstring's list)."""
    h, inner, blocks = 1408, 5632, 34
    block = 4 * (h * h + h) + (h * inner + inner) + (inner * h + h) + 4 * h
    embeddings = 3 * 14 * 14 * h + h + (24 * 24 + 1) * h
    adapter = inner * 4096 + 4096 * 4096
    projector = 4096 * 5120
    total = embeddings + 4 * h + blocks * block + adapter + projector
    assert total == LLAMA4_TOWERS["scout"]


def test_llama4_text_and_a_bad_vision_config() -> None:
    text = _llama4("scout")["text_config"]
    assert _spec({**text, "model_type": "llama4_text"}).engine_tower_parameters == 0
    with pytest.raises(InvalidConfigError, match="vision_config"):
        _spec({**_llama4("scout"), "vision_config": [1]})
    with pytest.raises(InvalidConfigError, match="vision_config"):
        _spec({**_llama4("scout"), "vision_config": {**SCOUT_VISION, "hidden_size": "wide"}})


def _served(engine: Engine, *, text_only: bool) -> int:
    spec = _spec(_config("Qwen3.5-4B"))
    request = PlanRequest(
        model=spec,
        mode=Mode.INFER,
        engine=engine,
        gpu=resolve_gpu("H100"),
        max_model_len=4096,
        language_model_only=text_only,
    )
    return plan_memory(request).component("parameters")


def test_vllms_language_model_only_leaves_the_tower_out() -> None:
    tower = _spec(_config("Qwen3.5-4B")).engine_tower_parameters
    loaded = _served(Engine.VLLM, text_only=False)
    assert loaded - _served(Engine.VLLM, text_only=True) == tower * 2
    assert _served(Engine.VLLM, text_only=True) == _served(Engine.HF, text_only=False)
    # SGLang has no switch that skips the tower: the flag does not change its plan
    assert _served(Engine.SGLANG, text_only=True) == _served(Engine.SGLANG, text_only=False)


def test_the_cli_flag_sets_language_model_only() -> None:
    parser = argparse.ArgumentParser()
    register(parser)
    path = str(HELDOUT / "Qwen3.5-4B.json")
    assert not build_request(parser.parse_args([path, "--mode", "infer"])).language_model_only
    flagged = parser.parse_args([path, "--mode", "infer", "--language-model-only"])
    assert build_request(flagged).language_model_only


@pytest.mark.torch
@pytest.mark.parametrize("label", ["defaults", "scout", "scout, 12 heads"])
def test_llama4s_tower_is_transformers_on_meta(label: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = _llama4(label)
    one_block = {"num_hidden_layers": 1, "layer_types": None, "no_rope_layers": None}
    raw = {**raw, "text_config": {**raw["text_config"], **one_block}}
    config = transformers.AutoConfig.for_model(
        "llama4", **{k: v for k, v in raw.items() if k != "model_type"}
    )
    with torch.device("meta"):
        model = transformers.Llama4ForConditionalGeneration(config)
        causal = transformers.Llama4ForCausalLM(config.text_config)
    tower = sum(p.numel() for p in model.vision_model.parameters()) + sum(
        p.numel() for p in model.multi_modal_projector.parameters()
    )
    assert tower == LLAMA4_TOWERS[label]
    total = sum(p.numel() for p in model.parameters())
    assert total - sum(p.numel() for p in causal.parameters()) == tower


def test_the_bundled_llama4s_carry_scouts_published_tower() -> None:
    for name in ("Llama-4-Scout-17B-16E", "Llama-4-Maverick-17B-128E"):
        assert resolve_model(name).engine_tower_parameters == LLAMA4_TOWERS["scout"]
