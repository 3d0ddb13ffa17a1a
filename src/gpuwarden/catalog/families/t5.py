"""T5 and mT5 (T0, mT0, Flan-T5): encoder-decoder, RMS-style LayerNorm without bias, relative
position bias in the first block of each stack, plain ReLU or gated-GELU feed-forward.

transformers 5.23 ties the LM head to the shared embedding for every T5/mT5 config, even when the
config says ``"tie_word_embeddings": false`` (mT0 and T5 v1.1 do), so the head adds no parameters
here either. The published mT0-xxl checkpoint still stores a separate ``lm_head.weight``.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwarden.catalog.families.blocks import CROSS_ATTENTION, gated_mlp, plain_mlp, qkvo, total
from gpuwarden.catalog.families.fields import (
    Config,
    checkpoint_dtype,
    field_int,
    field_str,
    invalid,
    layer_count,
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


def _feed_forward(cfg: Config, source: str, d: int, d_ff: int) -> tuple[LinearShape, ...]:
    default = "gated-gelu" if cfg.get("model_type") == "mt5" else "relu"
    proj = field_str(cfg, source, "feed_forward_proj", default)
    parts = proj.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated") or not parts[-1]:
        raise invalid(
            source,
            f"field 'feed_forward_proj' must be 'ACT' or 'gated-ACT', got {proj!r}",
        )
    if len(parts) == 2:
        return gated_mlp(d, d_ff, names=("wi_0", "wi_1", "wo"))
    return plain_mlp(d, d_ff, bias=False, names=("wi", "wo"))


def t5(name: str, cfg: Config, source: str) -> ModelSpec:
    d = field_int(cfg, source, "d_model")
    d_kv = field_int(cfg, source, "d_kv", default=64)
    d_ff = field_int(cfg, source, "d_ff")
    n_encoder = layer_count(cfg, source, "num_layers")
    n_decoder = layer_count(cfg, source, "num_decoder_layers", default=n_encoder)
    heads = field_int(cfg, source, "num_heads")
    vocab = field_int(cfg, source, "vocab_size")
    buckets = field_int(cfg, source, "relative_attention_num_buckets", default=32)
    ff = _feed_forward(cfg, source, d, d_ff)
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
    encoder = LayerParameters(
        attention=total(self_attn),
        mlp=total(ff),
        experts=0,
        router=0,
        norms=2 * d,
        linears=self_attn + ff,
    )
    decoder = LayerParameters(
        attention=total(self_attn) + total(cross_attn),
        mlp=total(ff),
        experts=0,
        router=0,
        norms=3 * d,  # before self-attention, cross-attention and feed-forward
        linears=self_attn + cross_attn + ff,
    )

    # Only block 0 of each stack owns the relative position bias table (buckets × heads).
    layers = (
        (replace(encoder, other=buckets * heads),)
        + (encoder,) * (n_encoder - 1)
        + (replace(decoder, other=buckets * heads),)
        + (decoder,) * (n_decoder - 1)
    )
    return ModelSpec(
        name=name,
        model_type=field_str(cfg, source, "model_type", "t5"),
        structure=Structure.ENCODER_DECODER,
        hidden_size=d,
        num_layers=n_decoder,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=d_kv,
        intermediate_size=d_ff,
        vocab_size=vocab,
        tied_embeddings=True,
        norm=NormKind.RMS,
        mlp=MlpKind.GATED if len(ff) == 3 else MlpKind.PLAIN,
        parameters=ParameterBreakdown(
            embedding=vocab * d,
            position_embedding=0,
            lm_head=0,
            final_norm=2 * d,  # encoder and decoder final norms
            layers=layers,
        ),
        num_encoder_layers=n_encoder,
        checkpoint_dtype=checkpoint_dtype(cfg, source),
        source=source,
        raw_config=dict(cfg),
        position_encoding=PositionKind.RELATIVE,
    )
