"""Falcon: fused ``query_key_value``, parallel attention + MLP, LayerNorm, RoPE (or ALiBi).

Three attention layouts, chosen as transformers' ``FalconAttention`` does:
``new_decoder_architecture`` (40B/180B: grouped KV with ``num_kv_heads``), ``multi_query``
(7B: one shared K/V head), or plain multi-head.
"""

from __future__ import annotations

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    Shape,
    breakdown,
    dense_layer,
    model_spec,
    plain_mlp,
)
from gpuwarden.catalog.families.fields import (
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    optional_int,
)
from gpuwarden.types.model import LinearShape, MlpKind, ModelSpec, NormKind, PositionKind

# FalconConfig also accepts the original checkpoints' spellings.
_SIZE_FIELDS = {
    "hidden": ("hidden_size", "n_embed"),
    "layers": ("num_hidden_layers", "n_layer"),
    "heads": ("num_attention_heads", "n_head"),
}


def _kv_heads(cfg: Config, heads: int, new_arch: bool) -> int:
    if new_arch:
        return field_int(cfg, "num_kv_heads", default=heads)
    return 1 if field_bool(cfg, "multi_query", True) else heads


def _norms_per_layer(cfg: Config, parallel: bool, new_arch: bool) -> int:
    """LayerNorms per block: two unless a parallel block shares one input norm (7B)."""
    if not parallel:
        return 2  # input_layernorm + post_attention_layernorm
    default = 2 if new_arch else 1  # ln_attn + ln_mlp, or one input_layernorm
    return 2 if field_int(cfg, "num_ln_in_parallel_attn", default=default) == 2 else 1


def falcon(name: str, cfg: Config, source: str) -> ModelSpec:
    h, n_layers, heads = core_sizes(cfg, **_SIZE_FIELDS)
    vocab = field_int(cfg, "vocab_size")
    i = field_int(cfg, "ffn_hidden_size", default=4 * h)
    tied = field_bool(cfg, "tie_word_embeddings", True)
    bias = field_bool(cfg, "bias", False)
    new_arch = field_bool(cfg, "new_decoder_architecture", False)
    parallel = field_bool(cfg, "parallel_attn", True)
    alibi = field_bool(cfg, "alibi", False)
    divisible(("hidden_size", h), ("num_attention_heads", heads))
    head_dim = h // heads
    kv_heads = _kv_heads(cfg, heads, new_arch)

    attn = (
        LinearShape(
            "query_key_value", h, (heads + 2 * kv_heads) * head_dim, bias=bias, part=ATTENTION
        ),
        LinearShape("dense", h, h, bias=bias, part=ATTENTION),
    )
    mlp = plain_mlp(h, i, bias=bias, names=("dense_h_to_4h", "dense_4h_to_h"))
    layer = dense_layer(attn, mlp, norms=2 * h * _norms_per_layer(cfg, parallel, new_arch))
    shape = Shape(h, n_layers, heads, kv_heads, head_dim, i, vocab, tied)
    return model_spec(
        name,
        cfg,
        source,
        "falcon",
        shape,
        breakdown(shape, (layer,) * n_layers, final_norm=2 * h),
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings"),
        parallel_attention_mlp=parallel,
        position_encoding=PositionKind.ALIBI if alibi else PositionKind.ROPE,
    )
