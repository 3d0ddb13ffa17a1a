"""Phi-1, Phi-1.5 and Phi-2 (``model_type`` "phi"): one LayerNorm feeding attention and MLP in
parallel, biases everywhere (including the LM head), partial RoPE, plain GELU MLP.
"""

from __future__ import annotations

from gpuwarden.catalog.families.blocks import (
    Shape,
    breakdown,
    dense_layer,
    model_spec,
    plain_mlp,
    qkvo,
)
from gpuwarden.catalog.families.fields import (
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    invalid,
    optional_int,
)
from gpuwarden.types.model import MlpKind, ModelSpec, NormKind


def phi(name: str, cfg: Config, source: str) -> ModelSpec:
    h, n_layers, heads = core_sizes(cfg)
    kv_heads = field_int(cfg, "num_key_value_heads", default=heads)
    vocab = field_int(cfg, "vocab_size")
    i = field_int(cfg, "intermediate_size")
    tied = field_bool(cfg, "tie_word_embeddings", False)
    divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
    if heads > h:
        raise invalid(f"num_attention_heads={heads} exceeds hidden_size={h}")
    head_dim = h // heads

    attn = qkvo(
        h,
        heads * head_dim,
        kv_heads * head_dim,
        qkv_bias=True,
        o_bias=True,
        names=("q_proj", "k_proj", "v_proj", "dense"),
    )
    mlp = plain_mlp(h, i, bias=True, names=("fc1", "fc2"))
    # Optional LayerNorms over q and k (weight + bias of head_dim each).
    qk_norms = 2 * 2 * head_dim if field_bool(cfg, "qk_layernorm", False) else 0
    layer = dense_layer(attn, mlp, norms=2 * h + qk_norms)  # the one input_layernorm, weight + bias
    shape = Shape(h, n_layers, heads, kv_heads, head_dim, i, vocab, tied)
    # The LM head has a bias, which stays even if its weight is tied.
    parameters = breakdown(shape, (layer,) * n_layers, final_norm=2 * h, head_bias=vocab)
    return model_spec(
        name,
        cfg,
        source,
        "phi",
        shape,
        parameters,
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings"),
        parallel_attention_mlp=True,
    )
