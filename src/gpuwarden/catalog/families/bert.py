"""BERT (as ``BertForMaskedLM``): post-LayerNorm encoder, learned absolute and token-type
embeddings, plain GELU MLP, an MLM head whose decoder weight is tied to the word embeddings.
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
)
from gpuwarden.types.model import (
    LayerParameters,
    MlpKind,
    ModelSpec,
    NormKind,
    ParameterBreakdown,
    PositionKind,
    Structure,
)


def bert(name: str, cfg: Config, source: str) -> ModelSpec:
    h = field_int(cfg, source, "hidden_size")
    n_layers = layer_count(cfg, source, "num_hidden_layers")
    heads = field_int(cfg, source, "num_attention_heads")
    vocab = field_int(cfg, source, "vocab_size")
    i = field_int(cfg, source, "intermediate_size")
    positions = field_int(cfg, source, "max_position_embeddings", default=512)
    token_types = field_int(cfg, source, "type_vocab_size", default=2, minimum=0)
    tied = field_bool(cfg, source, "tie_word_embeddings", True)
    divisible(source, ("hidden_size", h), ("num_attention_heads", heads))
    for flag in ("is_decoder", "add_cross_attention"):
        if field_bool(cfg, source, flag, False):
            raise invalid(
                source,
                f"field {flag!r} is true: BERT as a decoder is not supported by the formula "
                "planner",
                hint="`gpuwarden plan --exact` traces any HF model",
            )

    # HF names: attention.self.{query,key,value}, attention.output.dense, intermediate.dense,
    # output.dense. PEFT matches on the last part, so the names repeat "dense".
    attn = qkvo(h, h, h, qkv_bias=True, o_bias=True, names=("query", "key", "value", "dense"))
    mlp = plain_mlp(h, i, bias=True, names=("dense", "dense"))
    layer = LayerParameters(
        attention=total(attn),
        mlp=total(mlp),
        experts=0,
        router=0,
        norms=2 * 2 * h,  # post-attention and post-MLP LayerNorms, weight + bias
        linears=attn + mlp,
    )
    embeddings_norm = 2 * h
    head_transform = h * h + h + 2 * h  # dense + LayerNorm before the MLM decoder
    return ModelSpec(
        name=name,
        model_type="bert",
        structure=Structure.ENCODER,
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
            position_embedding=positions * h,
            # The MLM head's bias (V) always counts; untied, its decoder also gets its own weight
            # and bias, which transformers ties to the embeddings and that bias otherwise.
            lm_head=vocab + (0 if tied else vocab * h + vocab),
            final_norm=0,  # post-LN: the last block ends with its own norm
            layers=(layer,) * n_layers,
            other=token_types * h + embeddings_norm + head_transform,
        ),
        max_position_embeddings=positions,
        checkpoint_dtype=checkpoint_dtype(cfg, source),
        source=source,
        raw_config=dict(cfg),
        position_encoding=PositionKind.LEARNED,
    )
