"""GPT-NeoX (StableLM-alpha, Pythia) and BLOOM: fused multi-head ``query_key_value``, LayerNorm,
plain 4h MLP with biases. NeoX uses RoPE and (by default) a parallel residual; BLOOM uses ALiBi
and a LayerNorm right after the word embeddings.
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
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    MlpKind,
    ModelSpec,
    NormKind,
    PositionKind,
)

_MLP_NAMES = ("dense_h_to_4h", "dense_4h_to_h")
# BloomConfig also accepts the original checkpoints' spellings, and prefers them.
_BLOOM_SIZE_FIELDS = {
    "hidden": ("hidden_size", "n_embed"),
    "layers": ("n_layer", "num_hidden_layers"),
    "heads": ("n_head", "num_attention_heads"),
}


def _block(h: int, i: int, attention_bias: bool) -> LayerParameters:
    attn = (
        LinearShape("query_key_value", h, 3 * h, bias=attention_bias, part=ATTENTION),
        LinearShape("dense", h, h, bias=attention_bias, part=ATTENTION),
    )
    mlp = plain_mlp(h, i, bias=True, names=_MLP_NAMES)
    # input and post-attention LayerNorms, weight + bias
    return dense_layer(attn, mlp, norms=2 * 2 * h)


def gpt_neox(name: str, cfg: Config, source: str) -> ModelSpec:
    h, n_layers, heads = core_sizes(cfg)
    vocab = field_int(cfg, "vocab_size")
    i = field_int(cfg, "intermediate_size")
    tied = field_bool(cfg, "tie_word_embeddings", False)
    divisible(("hidden_size", h), ("num_attention_heads", heads))
    layer = _block(h, i, field_bool(cfg, "attention_bias", True))
    shape = Shape(h, n_layers, heads, heads, h // heads, i, vocab, tied)
    return model_spec(
        name,
        cfg,
        source,
        "gpt_neox",
        shape,
        breakdown(shape, (layer,) * n_layers, final_norm=2 * h),
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings"),
        parallel_attention_mlp=field_bool(cfg, "use_parallel_residual", True),
    )


def bloom(name: str, cfg: Config, source: str) -> ModelSpec:
    h, n_layers, heads = core_sizes(cfg, **_BLOOM_SIZE_FIELDS)
    vocab = field_int(cfg, "vocab_size")
    tied = field_bool(cfg, "tie_word_embeddings", True)
    divisible(("hidden_size", h), ("n_head", heads))
    layer = _block(h, 4 * h, attention_bias=True)
    shape = Shape(h, n_layers, heads, heads, h // heads, 4 * h, vocab, tied)
    return model_spec(
        name,
        cfg,
        source,
        "bloom",
        shape,
        # other: word_embeddings_layernorm
        breakdown(shape, (layer,) * n_layers, final_norm=2 * h, other=2 * h),
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        position_encoding=PositionKind.ALIBI,
    )
