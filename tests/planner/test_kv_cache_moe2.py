"""KV cache per token of gpt-oss, Llama 4 and DeepSeek-V2 against the cache transformers builds.

A shrunken copy of each bundled config (every structural flag kept) runs one bf16 prefill on the
CPU with ``use_cache=True``; the bytes of the returned cache are the truth the plan's
``kv_cache`` component must equal (HF ``generate``: prompt tokens, no new ones).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.planner import plan_memory
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Mode, PlanRequest, Precision

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.torch

_SMALL: dict[str, tuple[str, dict[str, Any]]] = {
    # alternating sliding (window 16) and full layers, GQA 4:2
    "gpt_oss": (
        "gpt-oss-20b",
        {"hidden_size": 64, "intermediate_size": 32, "num_attention_heads": 4}
        | {"num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 4}
        | {"num_experts_per_tok": 2, "sliding_window": 16, "quantization_config": None}
        | {"num_hidden_layers": 4, "vocab_size": 128}
        | {"layer_types": ["sliding_attention", "full_attention"] * 2},
    ),
    # chunked (16) RoPE layers and a global NoPE layer every 4th block
    "llama4": (
        "Llama-4-Scout-17B-16E",
        {"hidden_size": 64, "intermediate_size": 32, "intermediate_size_mlp": 64}
        | {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
        | {"num_local_experts": 4, "attention_chunk_size": 16, "num_hidden_layers": 4}
        | {"vocab_size": 128, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0},
    ),
    "deepseek_v2": (
        "DeepSeek-V2-Lite",
        {"hidden_size": 64, "intermediate_size": 64, "moe_intermediate_size": 16}
        | {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4}
        | {"n_routed_experts": 4, "num_experts_per_tok": 2, "kv_lora_rank": 32}
        | {"qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "vocab_size": 128}
        | {"bos_token_id": 1, "eos_token_id": 2},
    ),
}


def _spec(family: str) -> ModelSpec:
    bundled, overrides = _SMALL[family]
    raw = {**resolve_model(bundled).raw_config, **overrides}
    return normalise(f"small-{family}", raw, f"small {bundled}")


def _hf_cache_bytes(spec: ModelSpec, batch: int, tokens: int) -> int:
    raw = dict(spec.raw_config)
    model_type = raw.pop("model_type")
    for key in ("architectures", "torch_dtype", "dtype"):
        raw.pop(key, None)
    config = transformers.AutoConfig.for_model(model_type, **raw)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model = model.to(torch.bfloat16).eval()
    ids = torch.randint(3, spec.vocab_size, (batch, tokens))
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
    return sum(
        t.numel() * t.element_size()
        for layer in cache.layers
        for t in (layer.keys, layer.values)
        if t is not None
    )


def _planned(spec: ModelSpec, batch: int, tokens: int) -> int:
    plan = plan_memory(
        PlanRequest(
            model=spec,
            mode=Mode.INFER,
            precision=Precision.BF16,
            batch=batch,
            prompt_tokens=tokens,
            new_tokens=0,
        )
    )
    return plan.component("kv_cache")


@pytest.mark.parametrize("family", ["gpt_oss", "llama4"])
def test_kv_cache_within_the_window_equals_hf(family: str) -> None:
    spec = _spec(family)
    assert _planned(spec, 2, 12) == _hf_cache_bytes(spec, 2, 12)


@pytest.mark.parametrize(("family", "windowed"), [("gpt_oss", 2), ("llama4", 3)])
def test_windowed_layers_hold_at_most_the_window(family: str, windowed: int) -> None:
    """Past the window (or chunk), transformers' sliding layers keep window - 1 tokens for the
    next step; the plan holds the window itself: at most one token per windowed layer more."""
    spec = _spec(family)
    batch, tokens = 2, 40
    planned, hf = _planned(spec, batch, tokens), _hf_cache_bytes(spec, batch, tokens)
    per_token_layer = 2 * spec.num_kv_heads * spec.head_dim * 2  # K and V, bf16
    slack = spec.sliding_window_layers * per_token_layer * batch
    assert spec.sliding_window_layers == windowed  # gpt-oss: even blocks; Llama 4: RoPE blocks
    assert hf <= planned <= hf + slack
    # the full layers keep every token: far more than a window-only cache would
    assert planned > spec.num_layers * per_token_layer * batch * 16


def test_mla_cache_equals_hf() -> None:
    """transformers 5 DeepseekV2/V3Attention update the cache before expand_kv: the latent
    (kv_lora_rank) and the rope key, once per token and layer, as vLLM does."""
    spec = _spec("deepseek_v2")
    assert _planned(spec, 2, 12) == _hf_cache_bytes(spec, 2, 12)


def test_llama4_rope_table_is_one_complex64_tensor() -> None:
    """Llama4TextRotaryEmbedding returns freqs_cis, complex64 [b, s, d/2], whatever the compute
    dtype: the plan's RoPE bytes are that tensor's, not a cos/sin pair in the residual dtype."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama4.modeling_llama4 import Llama4TextRotaryEmbedding

    from gpuwarden.planner.families import rope_bytes

    spec = _spec("llama4")
    config = transformers.Llama4TextConfig(**{**spec.raw_config, "model_type": "llama4_text"})
    s = 48
    x = torch.zeros(1, s, spec.hidden_size)
    table = Llama4TextRotaryEmbedding(config)(x, torch.arange(s)[None])
    assert table.dtype == torch.complex64
    measured = table.numel() * table.element_size()
    assert rope_bytes(spec, s, res_bytes=4) == rope_bytes(spec, s, res_bytes=2) == measured
