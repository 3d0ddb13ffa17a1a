"""BERT (as ``BertForMaskedLM``): post-LayerNorm encoder, learned absolute and token-type
embeddings, plain GELU MLP, an MLM head whose decoder weight is tied to the word embeddings.
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
)
from gpuwarden.types.model import MlpKind, ModelSpec, NormKind, PositionKind, Structure


def bert(name: str, cfg: Config, source: str) -> ModelSpec:
    h, n_layers, heads = core_sizes(cfg)
    vocab = field_int(cfg, "vocab_size")
    i = field_int(cfg, "intermediate_size")
    positions = field_int(cfg, "max_position_embeddings", default=512)
    token_types = field_int(cfg, "type_vocab_size", default=2, minimum=0)
    tied = field_bool(cfg, "tie_word_embeddings", True)
    divisible(("hidden_size", h), ("num_attention_heads", heads))
    for flag in ("is_decoder", "add_cross_attention"):
        if field_bool(cfg, flag, False):
            raise invalid(
                f"field {flag!r} is true: BERT as a decoder is not supported by the formula "
                "planner",
                hint="`gpuwarden plan --exact` traces any HF model",
            )

    # HF names: attention.self.{query,key,value}, attention.output.dense, intermediate.dense,
    # output.dense. PEFT matches on the last part, so the names repeat "dense".
    attn = qkvo(h, h, h, qkv_bias=True, o_bias=True, names=("query", "key", "value", "dense"))
    mlp = plain_mlp(h, i, bias=True, names=("dense", "dense"))
    # post-attention and post-MLP LayerNorms, weight + bias
    layer = dense_layer(attn, mlp, norms=2 * 2 * h)
    embeddings_norm = 2 * h
    head_transform = h * h + h + 2 * h  # dense + LayerNorm before the MLM decoder
    shape = Shape(h, n_layers, heads, heads, h // heads, i, vocab, tied)
    parameters = breakdown(
        shape,
        (layer,) * n_layers,
        position_embedding=positions * h,
        # The MLM head's bias (V) always counts; untied, its decoder also gets its own weight
        # and bias, which transformers ties to the embeddings and that bias otherwise.
        head_bias=vocab + (0 if tied else vocab),
        final_norm=0,  # post-LN: the last block ends with its own norm
        other=token_types * h + embeddings_norm + head_transform,
    )
    return model_spec(
        name,
        cfg,
        source,
        "bert",
        shape,
        parameters,
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        structure=Structure.ENCODER,
        max_position_embeddings=positions,
        position_encoding=PositionKind.LEARNED,
    )
