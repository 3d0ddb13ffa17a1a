"""Our formula counts against transformers itself: each bundled config instantiated on the meta
device (no memory, no weights), parameters summed in total, per block, and linear by linear."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from gpuwarden.catalog import model_names, resolve_model
from gpuwarden.types.model import LinearShape, ModelSpec

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.torch

_SEQ2SEQ = {"t5", "mt5"}
_MASKED_LM = {"bert"}
# ModuleLists that hold the transformer blocks, in the order ModelSpec lists them.
_BLOCK_LISTS = ("layers", "h", "layer", "block")


def _config(name: str) -> dict[str, Any]:
    text = resources.files("gpuwarden.catalog.data.models").joinpath(f"{name}.json").read_text()
    config: dict[str, Any] = json.loads(text)
    return config


def _instantiate(name: str, overrides: dict[str, Any] | None = None) -> Any:
    """The HF model for a bundled config, built on the meta device (memory.md §7)."""
    cfg = {**_config(name), **(overrides or {})}
    model_type = cfg.pop("model_type")
    cfg.pop("architectures", None)
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    if model_type in _SEQ2SEQ:
        auto = transformers.AutoModelForSeq2SeqLM
    elif model_type in _MASKED_LM:
        auto = transformers.AutoModelForMaskedLM
    else:
        auto = transformers.AutoModelForCausalLM
    with torch.device("meta"):
        return auto.from_config(config)


def _blocks(model: Any) -> list[Any]:
    blocks: list[Any] = []
    found: list[str] = []
    for qualified, module in model.named_modules():
        inside_block = any(qualified.startswith(f"{prefix}.") for prefix in found)
        # a vision tower's encoder layers (Gemma 3) count in ParameterBreakdown.other
        inside_block = inside_block or ".vision_tower." in f".{qualified}."
        if inside_block or not isinstance(module, torch.nn.ModuleList):
            continue  # T5 blocks hold a ModuleList named "layer" of their own
        if qualified.rsplit(".", 1)[-1] in _BLOCK_LISTS:
            found.append(qualified)
            blocks.extend(module)
    return blocks


def _numel(module: Any) -> int:
    return sum(p.numel() for p in module.parameters())


def _hf_linears(block: Any) -> Iterator[tuple[str, int, int, bool, int]]:
    """(name, in, out, bias, count) of each linear of an HF block, as LinearShape describes it."""
    conv1d = transformers.pytorch_utils.Conv1D
    for qualified, module in block.named_modules():
        leaf = qualified.rsplit(".", 1)[-1]
        if type(module).__name__ == "Llama4Router":
            continue  # an nn.Linear subclass; routers are not catalog Linears (router count)
        if isinstance(module, torch.nn.Linear):
            yield leaf, module.in_features, module.out_features, module.bias is not None, 1
        elif isinstance(module, conv1d):
            # Conv1D keeps its weight transposed: (in, out).
            n_in, n_out = module.weight.shape
            yield leaf, n_in, n_out, module.bias is not None, 1
        elif type(module).__name__.endswith("Experts"):
            # transformers >= 5 fuses routed experts into 3-D parameters (experts, out, in);
            # gpt-oss and Llama 4 store them (experts, in, out), gpt-oss with "<name>_bias".
            params = dict(module.named_parameters(recurse=False))
            transposed = getattr(module, "is_transposed", False) or (
                type(module).__name__ == "Llama4TextExperts"
            )
            for param_name, param in params.items():
                if param_name.endswith("_bias"):
                    continue
                count, n_out, n_in = param.shape
                if transposed:
                    n_in, n_out = n_out, n_in
                bias = f"{param_name}_bias" in params
                yield f"experts.{param_name}", n_in, n_out, bias, count


def _ours(lin: LinearShape) -> tuple[str, int, int, bool, int]:
    return lin.name, lin.in_features, lin.out_features, lin.bias, lin.count


@pytest.fixture(scope="module", params=model_names())
def pair(request: pytest.FixtureRequest) -> tuple[ModelSpec, Any]:
    return resolve_model(request.param), _instantiate(request.param)


def test_total_equals_hf_parameters(pair: tuple[ModelSpec, Any]) -> None:
    spec, model = pair
    assert spec.total_parameters == _numel(model)


def test_each_block_equals_its_hf_module(pair: tuple[ModelSpec, Any]) -> None:
    spec, model = pair
    blocks = _blocks(model)
    assert len(blocks) == len(spec.parameters.layers) == spec.num_layers + spec.num_encoder_layers
    for index, (ours, theirs) in enumerate(zip(spec.parameters.layers, blocks, strict=True)):
        assert ours.total == _numel(theirs), f"block {index}"


def test_linears_match_hf_modules(pair: tuple[ModelSpec, Any]) -> None:
    spec, model = pair
    for index, (ours, theirs) in enumerate(
        zip(spec.parameters.layers, _blocks(model), strict=True)
    ):
        assert Counter(map(_ours, ours.linears)) == Counter(_hf_linears(theirs)), f"block {index}"


# Branches no bundled config takes, on small copies of real configs (2-4 blocks keep it fast).
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("Llama-3.2-1B", {"num_hidden_layers": 2, "attention_bias": True, "mlp_bias": True}),
    ("Llama-2-7b-hf", {"num_hidden_layers": 2, "tie_word_embeddings": True}),
    ("Qwen2.5-0.5B", {"num_hidden_layers": 2, "tie_word_embeddings": False}),
    ("gemma-2b", {"num_hidden_layers": 2, "attention_bias": True}),
    ("phi-2", {"num_hidden_layers": 2, "qk_layernorm": True, "tie_word_embeddings": True}),
    ("falcon-7b", {"num_hidden_layers": 2, "parallel_attn": False, "bias": True}),
    ("falcon-7b", {"num_hidden_layers": 2, "multi_query": False, "alibi": True}),
    ("falcon-40b", {"num_hidden_layers": 2, "num_ln_in_parallel_attn": 1}),
    ("octocoder", {"n_layer": 2, "multi_query": False, "tie_word_embeddings": False}),
    ("gpt2", {"n_layer": 2, "n_inner": 1000, "tie_word_embeddings": False}),
    ("stablelm-base-alpha-3b", {"num_hidden_layers": 2, "attention_bias": False}),
    ("bert-large-uncased", {"num_hidden_layers": 2, "tie_word_embeddings": False}),
    ("T0_3B", {"num_layers": 3, "num_decoder_layers": 2, "feed_forward_proj": "gated-gelu"}),
    ("mt0-xxl", {"num_layers": 2, "relative_attention_num_buckets": 16}),
    (
        "DeepSeek-V3",
        {
            "num_hidden_layers": 4,
            "q_lora_rank": None,
            "n_routed_experts": 8,
            "first_k_dense_replace": 1,
        },
    ),
    ("Mixtral-8x7B-v0.1", {"num_hidden_layers": 2, "num_local_experts": 4}),
    # Gemma 3: biased attention, untied; a SigLIP tower with its pooling head, smaller images
    (
        "gemma-3-1b-it",
        {"num_hidden_layers": 2, "attention_bias": True, "tie_word_embeddings": False},
    ),
    (
        "gemma-3-12b-it",
        {
            "text_config": _config("gemma-3-12b-it")["text_config"] | {"num_hidden_layers": 2},
            "vision_config": _config("gemma-3-12b-it")["vision_config"]
            | {"num_hidden_layers": 2, "vision_use_head": True, "image_size": 448},
        },
    ),
    # OLMo 2: GQA and biases; Granite: biased MLP and attention, untied; StarCoder2: no biases
    ("OLMo-2-1124-7B", {"num_hidden_layers": 2, "num_key_value_heads": 8, "attention_bias": True}),
    (
        "granite-3.1-8b-instruct",
        {"num_hidden_layers": 2, "mlp_bias": True, "attention_bias": True}
        | {"tie_word_embeddings": False},
    ),
    ("starcoder2-15b", {"num_hidden_layers": 2, "use_bias": False, "tie_word_embeddings": True}),
    # Qwen3: biases on q/k/v/o, untied; Qwen3-MoE: dense blocks from mlp_only_layers and
    # decoder_sparse_step; Qwen2-MoE: no q/k/v biases, a dense block, no experts (all dense)
    ("Qwen3-0.6B", {"num_hidden_layers": 2, "attention_bias": True, "tie_word_embeddings": False}),
    (
        "Qwen3-30B-A3B",
        {"num_hidden_layers": 4, "mlp_only_layers": [0], "decoder_sparse_step": 2}
        | {"num_experts": 8},
    ),
    ("Qwen1.5-MoE-A2.7B", {"num_hidden_layers": 3, "qkv_bias": False, "mlp_only_layers": [1]}),
    ("Qwen2-57B-A14B", {"num_hidden_layers": 2, "num_experts": 0}),
    # gpt-oss: transformers' default alternation (no layer_types), no attention biases, tied
    (
        "gpt-oss-20b",
        {"num_hidden_layers": 3, "layer_types": None, "num_local_experts": 4}
        | {"attention_bias": False, "tie_word_embeddings": True},
    ),
    # DeepSeek-V2: q LoRA, biased dense and shared-expert MLPs, two leading dense blocks
    (
        "DeepSeek-V2-Lite",
        {"num_hidden_layers": 4, "q_lora_rank": 384, "mlp_bias": True, "n_routed_experts": 8}
        | {"first_k_dense_replace": 2, "attention_bias": True},
    ),
    # Llama 4 text config: explicit moe_layers, attention biases, no chunked attention
    (
        "Llama-4-Scout-17B-16E",
        {
            "text_config": _config("Llama-4-Scout-17B-16E")["text_config"]
            | {"num_hidden_layers": 4, "num_local_experts": 4, "moe_layers": [0, 3]}
            | {"attention_bias": True, "attention_chunk_size": None}
        },
    ),
    (
        "Llama-4-Maverick-17B-128E",
        {
            "text_config": _config("Llama-4-Maverick-17B-128E")["text_config"]
            | {"num_hidden_layers": 4, "num_local_experts": 4, "tie_word_embeddings": True}
        },
    ),
]


@pytest.mark.parametrize(("name", "overrides"), VARIANTS)
def test_config_variants_match_hf(name: str, overrides: dict[str, Any]) -> None:
    from gpuwarden.catalog.configs import normalise

    spec = normalise(name, {**_config(name), **overrides}, f"variant of {name}")
    model = _instantiate(name, overrides)
    assert spec.total_parameters == _numel(model)
    for ours, theirs in zip(spec.parameters.layers, _blocks(model), strict=True):
        assert ours.total == _numel(theirs)
        assert Counter(map(_ours, ours.linears)) == Counter(_hf_linears(theirs))


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        (
            "Qwen2.5-7B",
            {"use_sliding_window": True, "sliding_window": 1024, "max_window_layers": 20},
        ),
        ("gemma-2-2b", {}),
        ("Mistral-7B-v0.1", {}),
        ("Phi-3-mini-4k-instruct", {}),
        ("gemma-3-1b-it", {}),
        ("gemma-3-1b-it", {"sliding_window_pattern": 4, "num_hidden_layers": 10}),
        ("starcoder2-15b", {}),
        ("Qwen3-8B", {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 30}),
        ("Qwen3-30B-A3B", {"use_sliding_window": True, "sliding_window": 4096}),
        ("Qwen1.5-MoE-A2.7B", {"use_sliding_window": True}),
    ],
)
def test_sliding_layers_match_hf_layer_types(name: str, overrides: dict[str, Any]) -> None:
    from gpuwarden.catalog.configs import normalise

    spec = normalise(name, {**_config(name), **overrides}, name)
    cfg = {**_config(name), **overrides}
    model_type = cfg.pop("model_type")
    cfg.pop("architectures", None)
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    # The same inference transformers' cache makes (cache_utils.get_layer_types_and_kwargs).
    layer_types = (
        getattr(config, "layer_types", None)
        or ["sliding_attention" if getattr(config, "sliding_window", None) else "full_attention"]
        * config.num_hidden_layers
    )
    assert spec.sliding_window_layers == layer_types.count("sliding_attention")
    assert spec.sliding_window == (config.sliding_window if spec.sliding_window_layers else None)
