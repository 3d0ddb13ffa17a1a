"""GPT-2 and GPT-BigCode (StarCoder): LayerNorm, learned positions, fused ``c_attn``, plain MLP.

GPT-2's projections are ``Conv1D`` modules (a transposed ``nn.Linear``); PEFT and bitsandbytes treat
them as linears, so they are listed as such. GPT-BigCode uses ``nn.Linear`` with the same names and
multi-query attention (one shared K/V head) by default.
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
    field_str,
    invalid,
)
from gpuwarden.types.model import LinearShape, MlpKind, ModelSpec, NormKind, PositionKind

_SIZE_FIELDS = {
    "hidden": ("n_embd", "hidden_size"),
    "layers": ("n_layer", "num_hidden_layers"),
    "heads": ("n_head", "num_attention_heads"),
}


def gpt2_like(name: str, cfg: Config, source: str) -> ModelSpec:
    """``gpt2`` and ``gpt_bigcode`` (HF accepts both field spellings, e.g. n_embd / hidden_size)."""
    model_type = field_str(cfg, "model_type", "gpt2")
    h, n_layers, heads = core_sizes(cfg, **_SIZE_FIELDS)
    positions = field_int(cfg, "n_positions", "max_position_embeddings", default=1024)
    vocab = field_int(cfg, "vocab_size")
    i = field_int(cfg, "n_inner", default=4 * h)
    tied = field_bool(cfg, "tie_word_embeddings", True)
    divisible(("n_embd", h), ("n_head", heads))
    if field_bool(cfg, "add_cross_attention", False):
        raise invalid(
            "field 'add_cross_attention' is true: GPT-2 as a cross-attending decoder is not "
            "supported by the formula planner",
            hint="`gpuwarden plan --exact` traces any HF model",
        )
    head_dim = h // heads
    multi_query = model_type == "gpt_bigcode" and field_bool(cfg, "multi_query", True)
    kv_heads = 1 if multi_query else heads

    attn = (
        LinearShape("c_attn", h, h + 2 * kv_heads * head_dim, bias=True, part=ATTENTION),
        LinearShape("c_proj", h, h, bias=True, part=ATTENTION),
    )
    mlp = plain_mlp(h, i, bias=True, names=("c_fc", "c_proj"))
    layer = dense_layer(attn, mlp, norms=2 * 2 * h)  # ln_1 and ln_2, weight + bias each
    shape = Shape(h, n_layers, heads, kv_heads, head_dim, i, vocab, tied)
    parameters = breakdown(
        shape, (layer,) * n_layers, final_norm=2 * h, position_embedding=positions * h
    )
    return model_spec(
        name,
        cfg,
        source,
        model_type,
        shape,
        parameters,
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=positions,
        position_encoding=PositionKind.LEARNED,
    )
