"""Falcon: fused ``query_key_value``, parallel attention + MLP, LayerNorm, RoPE (or ALiBi).

Three attention layouts, chosen as transformers' ``FalconAttention`` does:
``new_decoder_architecture`` (40B/180B: grouped KV with ``num_kv_heads``), ``multi_query``
(7B: one shared K/V head), or plain multi-head.
"""

from __future__ import annotations

from gpuwarden.catalog.families.blocks import ATTENTION, plain_mlp, total
from gpuwarden.catalog.families.fields import (
    Config,
    checkpoint_dtype,
    divisible,
    field_bool,
    field_int,
    layer_count,
    optional_int,
)
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    MlpKind,
    ModelSpec,
    NormKind,
    ParameterBreakdown,
    PositionKind,
    Structure,
)


def _kv_heads(cfg: Config, source: str, heads: int, new_arch: bool) -> int:
    if new_arch:
        return field_int(cfg, source, "num_kv_heads", default=heads)
    return 1 if field_bool(cfg, source, "multi_query", True) else heads


def _norms_per_layer(cfg: Config, source: str, parallel: bool, new_arch: bool) -> int:
    """LayerNorms per block: two unless a parallel block shares one input norm (7B)."""
    if not parallel:
        return 2  # input_layernorm + post_attention_layernorm
    default = 2 if new_arch else 1  # ln_attn + ln_mlp, or one input_layernorm
    return 2 if field_int(cfg, source, "num_ln_in_parallel_attn", default=default) == 2 else 1


def falcon(name: str, cfg: Config, source: str) -> ModelSpec:
    h = field_int(cfg, source, "hidden_size", "n_embed")
    n_layers = layer_count(cfg, source, "num_hidden_layers", "n_layer")
    heads = field_int(cfg, source, "num_attention_heads", "n_head")
    vocab = field_int(cfg, source, "vocab_size")
    i = field_int(cfg, source, "ffn_hidden_size", default=4 * h)
    tied = field_bool(cfg, source, "tie_word_embeddings", True)
    bias = field_bool(cfg, source, "bias", False)
    new_arch = field_bool(cfg, source, "new_decoder_architecture", False)
    parallel = field_bool(cfg, source, "parallel_attn", True)
    alibi = field_bool(cfg, source, "alibi", False)
    divisible(source, ("hidden_size", h), ("num_attention_heads", heads))
    head_dim = h // heads
    kv_heads = _kv_heads(cfg, source, heads, new_arch)

    attn = (
        LinearShape(
            "query_key_value", h, (heads + 2 * kv_heads) * head_dim, bias=bias, part=ATTENTION
        ),
        LinearShape("dense", h, h, bias=bias, part=ATTENTION),
    )
    mlp = plain_mlp(h, i, bias=bias, names=("dense_h_to_4h", "dense_4h_to_h"))
    layer = LayerParameters(
        attention=total(attn),
        mlp=total(mlp),
        experts=0,
        router=0,
        norms=2 * h * _norms_per_layer(cfg, source, parallel, new_arch),
        linears=attn + mlp,
    )
    return ModelSpec(
        name=name,
        model_type="falcon",
        structure=Structure.DECODER,
        hidden_size=h,
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=i,
        vocab_size=vocab,
        tied_embeddings=tied,
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        parameters=ParameterBreakdown(
            embedding=vocab * h,
            position_embedding=0,
            lm_head=0 if tied else vocab * h,
            final_norm=2 * h,
            layers=(layer,) * n_layers,
        ),
        max_position_embeddings=optional_int(cfg, source, "max_position_embeddings"),
        parallel_attention_mlp=parallel,
        checkpoint_dtype=checkpoint_dtype(cfg, source),
        source=source,
        raw_config=dict(cfg),
        position_encoding=PositionKind.ALIBI if alibi else PositionKind.ROPE,
    )
