"""Llama-shaped decoders that differ in a projection, a norm or the residual layout: Helium,
Seed-OSS, Phi-3.5-MoE, Command-R (cohere, cohere2) and StableLM.

Each count is what transformers 5.24 builds (the modeling file named at each family); defaults
are its config class defaults, so a field left out counts as ``AutoConfig.for_model`` would.
"""

from __future__ import annotations

from typing import Unpack

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    Shape,
    SpecOptions,
    breakdown,
    decoder_shape,
    dense_layer,
    gated_mlp,
    model_spec,
    moe_layer,
    plain_mlp,
    qkvo,
    rms_gated_decoder,
    routed_experts,
    shape_attention,
)
from gpuwarden.catalog.families.fields import (
    Config,
    field_bool,
    field_int,
    invalid,
    layer_types,
    optional_int,
)
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    MlpKind,
    ModelSpec,
    MoeSpec,
    NormKind,
)


def helium(name: str, cfg: Config, source: str) -> ModelSpec:
    """Helium (modeling_helium.py): Llama blocks whose o_proj maps hidden → hidden whatever
    heads · head_dim is, without bias; q/k/v take ``attention_bias``, the MLP ``mlp_bias``."""
    shape = decoder_shape(cfg, kv_default=20, head_dim_default=128, tied_default=False)
    h = shape.hidden
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    bias = field_bool(cfg, "attention_bias", False)
    attn = (
        *qkvo(h, q, kv, qkv_bias=bias, o_bias=False)[:3],
        LinearShape("o_proj", h, h, part=ATTENTION),
    )
    mlp = gated_mlp(h, shape.intermediate, bias=field_bool(cfg, "mlp_bias", False))
    layer = dense_layer(attn, mlp, norms=2 * h)
    return rms_gated_decoder(name, cfg, source, "helium", shape, (layer,) * shape.layers)


def seed_oss(name: str, cfg: Config, source: str) -> ModelSpec:
    """Seed-OSS (modeling_seed_oss.py): Llama blocks; q/k/v take ``attention_bias`` (default
    true), o_proj ``attention_out_bias``, the MLP ``mlp_bias``."""
    shape = decoder_shape(cfg, kv_default=8, head_dim_default=128, tied_default=False)
    h = shape.hidden
    attn = qkvo(
        h,
        shape.heads * shape.head_dim,
        shape.kv_heads * shape.head_dim,
        qkv_bias=field_bool(cfg, "attention_bias", True),
        o_bias=field_bool(cfg, "attention_out_bias", False),
    )
    mlp = gated_mlp(h, shape.intermediate, bias=field_bool(cfg, "mlp_bias", False))
    layer = dense_layer(attn, mlp, norms=2 * h)
    return rms_gated_decoder(name, cfg, source, "seed_oss", shape, (layer,) * shape.layers)


def phimoe(name: str, cfg: Config, source: str) -> ModelSpec:
    """Phi-3.5-MoE (modeling_phimoe.py): every block routes to ``num_experts_per_tok`` of
    ``num_local_experts`` (router: a bias-free Linear ``gate``), norms are LayerNorms with bias,
    q/k/v/o take ``attention_bias``, the LM head ``lm_head_bias``; with ``sliding_window`` set
    every block attends (and caches) within it."""
    shape = decoder_shape(cfg, kv_default=8, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    moe = MoeSpec(
        num_experts=field_int(cfg, "num_local_experts", default=16),
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=2),
        expert_intermediate_size=shape.intermediate,
    )
    routed = routed_experts(h, shape.intermediate, moe.num_experts)
    layer = moe_layer(attn, (), routed, router=h * moe.num_experts, norms=2 * 2 * h)
    head_bias = shape.vocab if field_bool(cfg, "lm_head_bias", False) else 0
    parameters = breakdown(shape, (layer,) * shape.layers, final_norm=2 * h, head_bias=head_bias)
    window = optional_int(cfg, "sliding_window")
    return model_spec(
        name,
        cfg,
        source,
        "phimoe",
        shape,
        parameters,
        norm=NormKind.LAYER,
        mlp=MlpKind.GATED,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings"),
        sliding_window=window,
        sliding_window_layers=shape.layers if window else 0,
        moe=moe,
    )


def _layer_norm_decoder(
    name: str,
    cfg: Config,
    source: str,
    model_type: str,
    shape: Shape,
    layers: tuple[LayerParameters, ...],
    *,
    final_norm: int,
    **options: Unpack[SpecOptions],
) -> ModelSpec:
    """A gated-MLP decoder under LayerNorms (``final_norm``: the last norm's parameters)."""
    options.setdefault("max_position_embeddings", optional_int(cfg, "max_position_embeddings"))
    return model_spec(
        name,
        cfg,
        source,
        model_type,
        shape,
        breakdown(shape, layers, final_norm=final_norm),
        norm=NormKind.LAYER,
        mlp=MlpKind.GATED,
        **options,
    )


def _cohere2_sliding(cfg: Config, n_layers: int) -> tuple[int | None, int]:
    """Cohere2Config.__post_init__: ``layer_types``, else every block but each
    ``sliding_window_pattern``-th (default 4) slides; the window is ``sliding_window``."""
    window = optional_int(cfg, "sliding_window", 4096)
    kinds = layer_types(cfg, n_layers)
    if kinds is not None:
        count = kinds.count("sliding_attention")
    else:
        pattern = field_int(cfg, "sliding_window_pattern", default=4)
        count = sum(1 for i in range(n_layers) if (i + 1) % pattern)
    return (window, count) if window and count else (None, 0)


def cohere(name: str, cfg: Config, source: str) -> ModelSpec:
    """Command-R (cohere: modeling_cohere.py) and Command-R7B / Command-A (cohere2:
    modeling_cohere2.py): attention and MLP in parallel after one bias-free LayerNorm; q/k/v/o
    take ``attention_bias``; tied head by default. Cohere's ``use_qk_norm`` adds bias-free
    LayerNorms over all q and all k heads; Cohere2 has none and slides the blocks its
    ``layer_types`` name. (Cohere2Config sets head_dim = hidden // heads, but a config's own
    head_dim is applied after that and wins.)"""
    model_type = "cohere2" if cfg.get("model_type") == "cohere2" else "cohere"
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=True)
    h, hd = shape.hidden, shape.head_dim
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    norms = h
    if model_type == "cohere" and field_bool(cfg, "use_qk_norm", False):
        norms += (shape.heads + shape.kv_heads) * hd
    layer = dense_layer(attn, gated_mlp(h, shape.intermediate), norms=norms)
    window, window_layers = (
        _cohere2_sliding(cfg, shape.layers) if model_type == "cohere2" else (None, 0)
    )
    return _layer_norm_decoder(
        name,
        cfg,
        source,
        model_type,
        shape,
        (layer,) * shape.layers,
        final_norm=h,
        parallel_attention_mlp=True,
        sliding_window=window,
        sliding_window_layers=window_layers,
    )


def stablelm(name: str, cfg: Config, source: str) -> ModelSpec:
    """StableLM (modeling_stablelm.py): LayerNorms with bias, one per block under
    ``use_parallel_residual`` (attention and MLP in parallel), else two; q/k/v take
    ``use_qkv_bias``, o_proj maps hidden → hidden without bias; ``qk_layernorm`` adds a
    bias-free LayerNorm per q and k head. head_dim is hidden // heads."""
    kept = {k: v for k, v in cfg.items() if k != "head_dim"}
    shape = decoder_shape(kept, kv_default=32, head_dim_default=None, tied_default=False)
    h, hd = shape.hidden, shape.head_dim
    q, kv = shape.heads * hd, shape.kv_heads * hd
    attn = (
        *qkvo(h, q, kv, qkv_bias=field_bool(cfg, "use_qkv_bias", False), o_bias=False)[:3],
        LinearShape("o_proj", h, h, part=ATTENTION),
    )
    parallel = field_bool(cfg, "use_parallel_residual", False)
    norms = (1 if parallel else 2) * 2 * h
    if field_bool(cfg, "qk_layernorm", False):
        norms += (shape.heads + shape.kv_heads) * hd
    layer = dense_layer(attn, gated_mlp(h, shape.intermediate), norms=norms)
    return _layer_norm_decoder(
        name,
        cfg,
        source,
        "stablelm",
        shape,
        (layer,) * shape.layers,
        final_norm=2 * h,
        parallel_attention_mlp=parallel,
    )


def minimax_m2(name: str, cfg: Config, source: str) -> ModelSpec:
    """MiniMax-M2 (modeling_minimax_m2.py): full attention in every block (no linear-attention
    layers, unlike MiniMax-Text-01) with bias-free q/k/v/o and RMSNorms over all of q and all of
    k; every block routes to ``num_experts_per_tok`` of ``num_local_experts`` experts of
    ``intermediate_size`` (router weight a parameter, its correction bias a buffer)."""
    kinds = cfg.get("attn_type_list")
    if isinstance(kinds, list) and any(kind != 1 for kind in kinds):
        # the original checkpoints' per-block list: 0 is a lightning (linear) attention block,
        # which transformers' MiniMax-M2 does not build and the planner does not model
        raise invalid(
            "field 'attn_type_list' names linear-attention blocks (0), which hold no KV cache "
            "and are not modelled",
            hint="`--exact` traces any HF model; minimax_m2 is modelled with full attention only",
        )
    shape = decoder_shape(cfg, kv_default=8, head_dim_default=128, tied_default=False)
    h, hd = shape.hidden, shape.head_dim
    q, kv = shape.heads * hd, shape.kv_heads * hd
    attn = qkvo(h, q, kv, qkv_bias=False, o_bias=False)
    moe = MoeSpec(
        num_experts=field_int(cfg, "num_local_experts", default=256),
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=8),
        expert_intermediate_size=shape.intermediate,
    )
    routed = routed_experts(h, shape.intermediate, moe.num_experts)
    layer = moe_layer(attn, (), routed, router=h * moe.num_experts, norms=2 * h + q + kv)
    layers = (layer,) * shape.layers
    return rms_gated_decoder(name, cfg, source, "minimax_m2", shape, layers, moe=moe)


def olmo(name: str, cfg: Config, source: str) -> ModelSpec:
    """OLMo (1) (modular_olmo.py): Llama attention and SwiGLU, under OlmoLayerNorm, a LayerNorm
    with no weight or bias (the blocks' and the final one hold no parameters)."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    layer = dense_layer(attn, gated_mlp(h, shape.intermediate), norms=0)
    return _layer_norm_decoder(
        name, cfg, source, "olmo", shape, (layer,) * shape.layers, final_norm=0
    )


def arcee(name: str, cfg: Config, source: str) -> ModelSpec:
    """Arcee AFM (modular_arcee.py): Llama blocks whose MLP is Nemotron's plain up_proj →
    ReLU² → down_proj (``mlp_bias``); q/k/v/o take ``attention_bias``."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    mlp_bias = field_bool(cfg, "mlp_bias", False)
    mlp = plain_mlp(h, shape.intermediate, bias=mlp_bias, names=("up_proj", "down_proj"))
    layer = dense_layer(attn, mlp, norms=2 * h)
    parameters = breakdown(shape, (layer,) * shape.layers, final_norm=h)
    return model_spec(
        name,
        cfg,
        source,
        "arcee",
        shape,
        parameters,
        norm=NormKind.RMS,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings"),
    )
