"""T5 and mT5 (T0, mT0, Flan-T5): encoder-decoder, RMS-style LayerNorm without bias, relative
position bias in the first block of each stack, plain ReLU or gated-GELU feed-forward.

transformers 5.23 ties the LM head to the shared embedding for every T5/mT5 config, even when the
config says ``"tie_word_embeddings": false`` (mT0 and T5 v1.1 do), so the head adds no parameters
here either. The published mT0-xxl checkpoint still stores a separate ``lm_head.weight``.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwarden.catalog.families.blocks import (
    CROSS_ATTENTION,
    Shape,
    breakdown,
    dense_layer,
    gated_mlp,
    model_spec,
    plain_mlp,
    qkvo,
)
from gpuwarden.catalog.families.fields import Config, field_int, field_str, invalid, layer_count
from gpuwarden.types.model import LinearShape, MlpKind, ModelSpec, NormKind, PositionKind, Structure


def _feed_forward(cfg: Config, d: int, d_ff: int) -> tuple[LinearShape, ...]:
    default = "gated-gelu" if cfg.get("model_type") == "mt5" else "relu"
    proj = field_str(cfg, "feed_forward_proj", default)
    parts = proj.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated") or not parts[-1]:
        raise invalid(
            f"field 'feed_forward_proj' must be 'ACT' or 'gated-ACT', got {proj!r}",
        )
    if len(parts) == 2:
        return gated_mlp(d, d_ff, names=("wi_0", "wi_1", "wo"))
    return plain_mlp(d, d_ff, bias=False, names=("wi", "wo"))


def t5(name: str, cfg: Config, source: str) -> ModelSpec:
    d = field_int(cfg, "d_model")
    d_kv = field_int(cfg, "d_kv", default=64)
    d_ff = field_int(cfg, "d_ff")
    n_encoder = layer_count(cfg, "num_layers")
    n_decoder = layer_count(cfg, "num_decoder_layers", default=n_encoder)
    heads = field_int(cfg, "num_heads")
    vocab = field_int(cfg, "vocab_size")
    buckets = field_int(cfg, "relative_attention_num_buckets", default=32)
    ff = _feed_forward(cfg, d, d_ff)
    inner = heads * d_kv

    self_attn = qkvo(d, inner, inner, qkv_bias=False, o_bias=False, names=("q", "k", "v", "o"))
    cross_attn = qkvo(
        d,
        inner,
        inner,
        qkv_bias=False,
        o_bias=False,
        names=("q", "k", "v", "o"),
        part=CROSS_ATTENTION,
    )
    encoder = dense_layer(self_attn, ff, norms=2 * d)
    # before self-attention, cross-attention and feed-forward
    decoder = dense_layer(self_attn + cross_attn, ff, norms=3 * d)

    # Only block 0 of each stack owns the relative position bias table (buckets × heads).
    layers = (
        (replace(encoder, other=buckets * heads),)
        + (encoder,) * (n_encoder - 1)
        + (replace(decoder, other=buckets * heads),)
        + (decoder,) * (n_decoder - 1)
    )
    # transformers ties the LM head to the shared embedding for every T5 (see above).
    shape = Shape(d, n_decoder, heads, heads, d_kv, d_ff, vocab, tied=True)
    return model_spec(
        name,
        cfg,
        source,
        field_str(cfg, "model_type", "t5"),
        shape,
        breakdown(shape, layers, final_norm=2 * d),  # encoder and decoder final norms
        norm=NormKind.RMS,
        mlp=MlpKind.GATED if len(ff) == 3 else MlpKind.PLAIN,
        structure=Structure.ENCODER_DECODER,
        num_encoder_layers=n_encoder,
        position_encoding=PositionKind.RELATIVE,
    )
