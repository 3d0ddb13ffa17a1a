"""Phi-1, Phi-1.5 and Phi-2 (``model_type`` "phi"): one LayerNorm feeding attention and MLP in
parallel, biases everywhere (including the LM head), partial RoPE, plain GELU MLP.
"""

from __future__ import annotations

from gpuwarden.catalog.families.blocks import plain_mlp, qkvo, total
from gpuwarden.catalog.families.fields import (
    Config,
    checkpoint_dtype,
    divisible,
    field_bool,
    field_int,
    invalid,
    layer_count,
    optional_int,
)
from gpuwarden.types.model import (
    LayerParameters,
    MlpKind,
    ModelSpec,
    NormKind,
    ParameterBreakdown,
    Structure,
)


def phi(name: str, cfg: Config, source: str) -> ModelSpec:
    h = field_int(cfg, source, "hidden_size")
    n_layers = layer_count(cfg, source, "num_hidden_layers")
    heads = field_int(cfg, source, "num_attention_heads")
    kv_heads = field_int(cfg, source, "num_key_value_heads", default=heads)
    vocab = field_int(cfg, source, "vocab_size")
    i = field_int(cfg, source, "intermediate_size")
    tied = field_bool(cfg, source, "tie_word_embeddings", False)
    divisible(source, ("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
    if heads > h:
        raise invalid(source, f"num_attention_heads={heads} exceeds hidden_size={h}")
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
    qk_norms = 2 * 2 * head_dim if field_bool(cfg, source, "qk_layernorm", False) else 0
    layer = LayerParameters(
        attention=total(attn),
        mlp=total(mlp),
        experts=0,
        router=0,
        norms=2 * h + qk_norms,  # the one input_layernorm, weight + bias
        linears=attn + mlp,
    )
    return ModelSpec(
        name=name,
        model_type="phi",
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
            # The LM head has a bias, which stays even if its weight is tied.
            lm_head=(0 if tied else vocab * h) + vocab,
            final_norm=2 * h,
            layers=(layer,) * n_layers,
        ),
        max_position_embeddings=optional_int(cfg, source, "max_position_embeddings"),
        parallel_attention_mlp=True,
        checkpoint_dtype=checkpoint_dtype(cfg, source),
        source=source,
        raw_config=dict(cfg),
    )
