"""GPT-NeoX (StableLM-alpha, Pythia) and BLOOM: fused multi-head ``query_key_value``, LayerNorm,
plain 4h MLP with biases. NeoX uses RoPE and (by default) a parallel residual; BLOOM uses ALiBi
and a LayerNorm right after the word embeddings.
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

_MLP_NAMES = ("dense_h_to_4h", "dense_4h_to_h")


def _block(h: int, i: int, attention_bias: bool) -> LayerParameters:
    attn = (
        LinearShape("query_key_value", h, 3 * h, bias=attention_bias, part=ATTENTION),
        LinearShape("dense", h, h, bias=attention_bias, part=ATTENTION),
    )
    mlp = plain_mlp(h, i, bias=True, names=_MLP_NAMES)
    return LayerParameters(
        attention=total(attn),
        mlp=total(mlp),
        experts=0,
        router=0,
        norms=2 * 2 * h,  # input and post-attention LayerNorms, weight + bias
        linears=attn + mlp,
    )


def gpt_neox(name: str, cfg: Config, source: str) -> ModelSpec:
    h = field_int(cfg, source, "hidden_size")
    n_layers = layer_count(cfg, source, "num_hidden_layers")
    heads = field_int(cfg, source, "num_attention_heads")
    vocab = field_int(cfg, source, "vocab_size")
    i = field_int(cfg, source, "intermediate_size")
    tied = field_bool(cfg, source, "tie_word_embeddings", False)
    divisible(source, ("hidden_size", h), ("num_attention_heads", heads))
    layer = _block(h, i, field_bool(cfg, source, "attention_bias", True))
    return ModelSpec(
        name=name,
        model_type="gpt_neox",
        structure=Structure.DECODER,
        hidden_size=h,
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
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
        parallel_attention_mlp=field_bool(cfg, source, "use_parallel_residual", True),
        checkpoint_dtype=checkpoint_dtype(cfg, source),
        source=source,
        raw_config=dict(cfg),
    )


def bloom(name: str, cfg: Config, source: str) -> ModelSpec:
    h = field_int(cfg, source, "hidden_size", "n_embed")
    n_layers = layer_count(cfg, source, "n_layer", "num_hidden_layers")
    heads = field_int(cfg, source, "n_head", "num_attention_heads")
    vocab = field_int(cfg, source, "vocab_size")
    tied = field_bool(cfg, source, "tie_word_embeddings", True)
    divisible(source, ("hidden_size", h), ("n_head", heads))
    layer = _block(h, 4 * h, attention_bias=True)
    return ModelSpec(
        name=name,
        model_type="bloom",
        structure=Structure.DECODER,
        hidden_size=h,
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=4 * h,
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
            other=2 * h,  # word_embeddings_layernorm
        ),
        checkpoint_dtype=checkpoint_dtype(cfg, source),
        source=source,
        raw_config=dict(cfg),
        position_encoding=PositionKind.ALIBI,
    )
