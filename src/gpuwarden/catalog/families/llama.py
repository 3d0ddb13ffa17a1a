"""RMSNorm + RoPE + gated-MLP decoders: Llama, Mistral, Mixtral, Qwen2, Phi-3, Gemma, Gemma-2.

Defaults (bias, tying, sliding window) are each family's ``transformers`` 5.23 config defaults, so a
config that leaves a field out counts the same parameters as ``AutoConfig.for_model`` would.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    MLP,
    decoder_shape,
    dense_layer,
    gated_mlp,
    moe_layer,
    qkvo,
    rms_gated_decoder,
    routed_experts,
)
from gpuwarden.catalog.families.fields import (
    Config,
    field_bool,
    field_int,
    field_str,
    layer_types,
    optional_int,
)
from gpuwarden.types.model import LinearShape, ModelSpec, MoeSpec


@dataclass(frozen=True, slots=True)
class _Family:
    tied: bool  # tie_word_embeddings default
    head_dim: int | None  # default head_dim (None: hidden / heads)
    kv_heads: int | None  # default num_key_value_heads (None: num_attention_heads)
    norms_per_layer: int  # RMSNorm weights per block
    qkv_bias: bool  # Qwen2 always has q/k/v biases


_FAMILIES = {
    "llama": _Family(tied=False, head_dim=None, kv_heads=None, norms_per_layer=2, qkv_bias=False),
    "mistral": _Family(tied=False, head_dim=None, kv_heads=8, norms_per_layer=2, qkv_bias=False),
    "mixtral": _Family(tied=False, head_dim=None, kv_heads=8, norms_per_layer=2, qkv_bias=False),
    "qwen2": _Family(tied=False, head_dim=None, kv_heads=32, norms_per_layer=2, qkv_bias=True),
    "phi3": _Family(tied=False, head_dim=None, kv_heads=None, norms_per_layer=2, qkv_bias=False),
    "gemma": _Family(tied=True, head_dim=256, kv_heads=16, norms_per_layer=2, qkv_bias=False),
    # Gemma-2 adds pre- and post-feedforward norms: four per block.
    "gemma2": _Family(tied=True, head_dim=256, kv_heads=4, norms_per_layer=4, qkv_bias=False),
}


def _count_sliding(cfg: Config, n_layers: int) -> int | None:
    """Sliding layers from an explicit ``layer_types`` list, None when the config has none."""
    kinds = layer_types(cfg, n_layers)
    return None if kinds is None else kinds.count("sliding_attention")


def _sliding(model_type: str, cfg: Config, n_layers: int) -> tuple[int | None, int]:
    """(window, number of windowed layers) as transformers builds the masks and the KV cache."""
    if model_type in {"llama", "gemma"}:
        return None, 0
    if model_type == "qwen2":
        # Qwen2 windows only the layers from max_window_layers on, and only if use_sliding_window.
        if not field_bool(cfg, "use_sliding_window", False):
            return None, 0
        window = optional_int(cfg, "sliding_window", 4096)
        first = field_int(cfg, "max_window_layers", default=28, minimum=0)
        explicit = _count_sliding(cfg, n_layers)
        count = explicit if explicit is not None else max(n_layers - first, 0)
        return (window, count) if window and count else (None, 0)
    if model_type == "gemma2":
        # Gemma-2 alternates: even-indexed blocks (0, 2, ...) slide, odd ones attend globally.
        window = optional_int(cfg, "sliding_window", 4096)
        explicit = _count_sliding(cfg, n_layers)
        count = explicit if explicit is not None else (n_layers + 1) // 2
        return (window, count) if window and count else (None, 0)
    # Mistral defaults to a 4096 window; Mixtral and Phi-3 to none. Phi-3-mini's 2047 is real:
    # transformers builds a sliding-window mask and a sliding KV cache for every layer from it.
    window = optional_int(cfg, "sliding_window", 4096 if model_type == "mistral" else None)
    return (window, n_layers) if window else (None, 0)


def _attention(model_type: str, cfg: Config, h: int, q: int, kv: int) -> tuple[LinearShape, ...]:
    family = _FAMILIES[model_type]
    if model_type == "phi3":
        # Phi-3 fuses q, k and v into one projection.
        return (
            LinearShape("qkv_proj", h, q + 2 * kv, part=ATTENTION),
            LinearShape("o_proj", q, h, part=ATTENTION),
        )
    if model_type in {"mistral", "mixtral"}:
        return qkvo(h, q, kv, qkv_bias=False, o_bias=False)
    if model_type == "qwen2":
        # modeling_qwen2.py: q/k/v always biased, o_proj never; attention_bias is not read
        return qkvo(h, q, kv, qkv_bias=True, o_bias=False)
    bias = field_bool(cfg, "attention_bias", False)
    return qkvo(h, q, kv, qkv_bias=bias or family.qkv_bias, o_bias=bias)


def _mlp(model_type: str, cfg: Config, h: int, i: int) -> tuple[LinearShape, ...]:
    if model_type == "phi3":
        return (
            LinearShape("gate_up_proj", h, 2 * i, part=MLP),
            LinearShape("down_proj", i, h, part=MLP),
        )
    bias = model_type == "llama" and field_bool(cfg, "mlp_bias", False)
    return gated_mlp(h, i, bias=bias)


def llama_like(name: str, cfg: Config, source: str) -> ModelSpec:
    """Llama, Mistral, Mixtral, Qwen2, Phi-3, Gemma and Gemma-2."""
    model_type = field_str(cfg, "model_type", "llama")
    family = _FAMILIES[model_type]
    shape = decoder_shape(
        cfg,
        kv_default=family.kv_heads,
        head_dim_default=family.head_dim,
        tied_default=family.tied,
    )
    h, n_layers, i = shape.hidden, shape.layers, shape.intermediate

    attn = _attention(
        model_type, cfg, h, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    )
    moe: MoeSpec | None = None
    if model_type == "mixtral":
        moe = MoeSpec(
            num_experts=field_int(cfg, "num_local_experts", default=8),
            experts_per_token=field_int(cfg, "num_experts_per_tok", default=2),
            expert_intermediate_size=i,
        )
        experts = routed_experts(h, i, moe.num_experts)
        # The router's weight is not an nn.Linear in transformers 5.
        router = h * moe.num_experts
        layer = moe_layer(attn, (), experts, router=router, norms=family.norms_per_layer * h)
    else:
        mlp = _mlp(model_type, cfg, h, i)
        layer = dense_layer(attn, mlp, norms=family.norms_per_layer * h)

    window, window_layers = _sliding(model_type, cfg, n_layers)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        model_type,
        shape,
        (layer,) * n_layers,
        sliding_window=window,
        sliding_window_layers=window_layers,
        moe=moe,
    )
