"""Decoders built from known pieces: Apertus (xIELU MLP, q/k norms), K-EXAONE (exaone_moe),
Hunyuan (hy_v3), Trinity (afmoe), Laguna (gated attention, per-head), Command A MoE
(cohere2_moe), Granite MoE with a shared MLP, FlexOlmo, Solar-Open and Sarvam-MoE (GLM-4.5
blocks, read by ``glm.glm4_moe``), Youtu-LLM (dense MLA, read by ``deepseek.deepseek_v3``),
HyperCLOVA X SEED, Jais-2, Persimmon and CodeGen.

Each count is what transformers 5.24 builds (the modeling file named at each family); defaults
are its config class defaults, so a field left out counts as ``AutoConfig.for_model`` would.
Routers are bare weights (not LoRA / quantization targets); routed experts are the fused 3-D
``experts.gate_up_proj`` / ``experts.down_proj`` parameters (``blocks.routed_experts``). A
router's ``e_score_correction_bias`` counts only where the modeling file makes it a parameter
(afmoe ``expert_bias``, Laguna's ``e_score_correction_bias``); where it is a buffer
(DeepSeek-V3's router, Hunyuan) it is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypedDict, Unpack

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    MLP,
    SHARED_EXPERTS,
    Shape,
    SpecOptions,
    breakdown,
    decoder_shape,
    dense_layer,
    gated_mlp,
    model_spec,
    moe_layer,
    moe_spec,
    plain_mlp,
    rms_gated_decoder,
    routed_experts,
    shape_attention,
    stacked_decoder,
)
from gpuwarden.catalog.families.deepseek import deepseek_v3
from gpuwarden.catalog.families.fields import (
    MAX_LAYERS,
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    field_str,
    invalid,
    layer_types,
    optional_int,
    routed_blocks,
)
from gpuwarden.catalog.families.glm import glm4_moe
from gpuwarden.errors import InvalidConfigError
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    MlpKind,
    ModelSpec,
    MoeSpec,
    NormKind,
    PositionKind,
)

# --- shared pieces -------------------------------------------------------------------------------


def _routing_moe(
    sparse: list[bool],
    *,
    experts: int,
    top_k: int,
    expert_i: int,
    n_shared: int = 0,
    shared_i: int = 0,
) -> MoeSpec | None:
    """The MoE layout of blocks flagged ``sparse``; None when no block routes."""
    moe = moe_spec(
        experts=experts, top_k=top_k, expert_i=expert_i, n_shared=n_shared, shared_i=shared_i
    )
    return replace(moe, first_dense_layers=sparse.index(True)) if any(sparse) else None


def _dense_or_routed_blocks(
    attn: tuple[LinearShape, ...],
    h: int,
    sparse: list[bool],
    moe: MoeSpec | None,
    *,
    dense_i: int,
    norms: int,
    router_bias: bool = False,
    mlp_bias: bool = False,
) -> tuple[LayerParameters, ...]:
    """Per block: a gated MLP of ``dense_i`` or, where ``sparse``, the MoE of ``_routed_block``
    behind the same attention and ``norms``."""
    dense = dense_layer(attn, gated_mlp(h, dense_i, bias=mlp_bias), norms=norms)
    if moe is None:
        return (dense,) * len(sparse)
    routed = _routed_block(
        attn,
        h,
        moe,
        norms=norms,
        router_bias=router_bias,
        mlp_bias=mlp_bias,
    )
    return tuple(routed if routes else dense for routes in sparse)


class _Window(TypedDict):
    """The sliding-window fields of ``ModelSpec``."""

    sliding_window: int | None
    sliding_window_layers: int


def _sliding(cfg: Config, n_layers: int, default: list[str], window_default: int | None) -> _Window:
    """Sliding-window options from ``layer_types`` (else the config class's ``default``)."""
    kinds = layer_types(cfg, n_layers) or default
    count = kinds.count("sliding_attention")
    window = optional_int(cfg, "sliding_window", window_default)
    if window is None or not count:
        return {"sliding_window": None, "sliding_window_layers": 0}
    return {"sliding_window": window, "sliding_window_layers": count}


def _every_nth_full(n_layers: int, period: int) -> list[str]:
    """Blocks i with (i + 1) % period != 0 slide, the others attend to everything."""
    return [
        "sliding_attention" if (index + 1) % period else "full_attention"
        for index in range(n_layers)
    ]


def _with_class_defaults(
    cfg: Config,
    defaults: Mapping[str, Any],
    *,
    renames: Mapping[str, str] | None = None,
    forced: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``cfg`` as another family's normaliser should read it: the type's own spellings renamed
    (its attribute_map; as in transformers, which sets the mapped keys after the fields, a
    mapped key wins over the canonical one, the last in the file over earlier ones), its
    config-class defaults where the family's differ, and the values its modeling file fixes
    whatever the config says (``forced``)."""
    out: dict[str, Any] = dict(cfg)
    mapped = renames or {}
    for key, value in cfg.items():
        if key in mapped:
            out[mapped[key]] = value
    for key, value in defaults.items():
        out.setdefault(key, value)
    out.update(forced or {})
    return out


# --- Apertus -------------------------------------------------------------------------------------


def _xielu(cfg: Config) -> int:
    """xIELU (activations.XIELU) learns two scalars, alpha_p and alpha_n, in every MLP; any other
    ``hidden_act`` has none."""
    return 2 if field_str(cfg, "hidden_act", "xielu") == "xielu" else 0


def apertus(name: str, cfg: Config, source: str) -> ModelSpec:
    """Apertus (modeling_apertus.py) and the Apertus-1.5 language model (apertus1p5_text,
    modular_apertus1p5.py): Llama attention with an RMSNorm over each head of q and k, an
    up/down MLP without gate or bias (xIELU), two RMSNorms per block. Apertus-1.5's LM head may be
    pruned to the first ``output_vocab_size`` rows (the embedding keeps ``vocab_size``)."""
    model_type = field_str(cfg, "model_type", "apertus")
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h, hd = shape.hidden, shape.head_dim
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    mlp = plain_mlp(h, shape.intermediate, bias=False, names=("up_proj", "down_proj"))
    layer = replace(dense_layer(attn, mlp, norms=2 * h + 2 * hd), other=_xielu(cfg))
    parameters = breakdown(shape, (layer,) * shape.layers, final_norm=h)
    if model_type == "apertus1p5_text":
        parameters = replace(parameters, lm_head=_apertus1p5_head(cfg, shape))
    return model_spec(
        name,
        cfg,
        source,
        model_type,
        shape,
        parameters,
        norm=NormKind.RMS,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings"),
    )


def _apertus1p5_head(cfg: Config, shape: Shape) -> int:
    """Apertus1p5TextForCausalLM's head: ``output_vocab_size`` (else vocab_size) rows, at most
    vocab_size (the config's validate_output_vocab_size); tied, the head is the embedding
    itself, whatever output_vocab_size says (transformers ties the weight)."""
    rows = optional_int(cfg, "output_vocab_size") or shape.vocab
    if rows > shape.vocab:
        raise invalid(f"output_vocab_size={rows} exceeds vocab_size={shape.vocab}")
    return 0 if shape.tied else rows * shape.hidden


# --- GLM-4.5-block MoEs: Solar-Open, Sarvam-MoE -----------------------------------------------


# SolarOpenConfig (modular_solar_open.py): GLM-4.5's config without dense blocks, q/k norms or
# intermediate_size; its class defaults where they differ from Glm4MoeConfig's.
_SOLAR_OPEN_DEFAULTS: dict[str, Any] = {
    "vocab_size": 196608,
    "hidden_size": 4096,
    "num_hidden_layers": 48,
    "num_attention_heads": 64,
    "head_dim": 128,
    "moe_intermediate_size": 1280,
    "n_routed_experts": 128,
    "num_experts_per_tok": 8,
}


def solar_open(name: str, cfg: Config, source: str) -> ModelSpec:
    """Solar-Open (modular_solar_open.py): GLM-4.5's MoE (router weight, correction-bias buffer,
    one shared MLP of n_shared_experts × moe_intermediate_size) in every block, under Llama
    attention whose o_proj never has a bias; no dense block and no q/k norm whatever the config
    says (SolarOpenConfig removes first_k_dense_replace and use_qk_norm)."""
    expert_i = field_int(cfg, "moe_intermediate_size", default=1280)
    read = _with_class_defaults(
        cfg,
        _SOLAR_OPEN_DEFAULTS,
        renames={"num_local_experts": "n_routed_experts"},
        # every block routes, so no dense MLP is built: its width is the experts'
        forced={"first_k_dense_replace": 0, "use_qk_norm": False, "intermediate_size": expert_i},
    )
    return replace(glm4_moe(name, read, source), model_type="solar_open", raw_config=dict(cfg))


# SarvamMoEConfig (modular_sarvam_moe.py) subclasses Glm4MoeConfig; these class defaults differ.
_SARVAM_MOE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262144,
    "intermediate_size": 8192,
    "num_hidden_layers": 19,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "moe_intermediate_size": 1024,
    "num_experts_per_tok": 6,
    "use_qk_norm": True,
}
# its attribute_map: the names of the original sarvamai/sarvam-30b config.json
_SARVAM_MOE_RENAMES = {
    "num_local_experts": "n_routed_experts",
    "num_experts": "n_routed_experts",
    "num_shared_experts": "n_shared_experts",
    "use_qkv_bias": "attention_bias",
}


def sarvam_moe(name: str, cfg: Config, source: str) -> ModelSpec:
    """Sarvam-MoE (modular_sarvam_moe.py): GLM-4.5 blocks (transformers builds
    Glm4MoeForCausalLM's modules from SarvamMoEConfig) with its own defaults and spellings."""
    read = _with_class_defaults(cfg, _SARVAM_MOE_DEFAULTS, renames=_SARVAM_MOE_RENAMES)
    return replace(glm4_moe(name, read, source), model_type="sarvam_moe", raw_config=dict(cfg))


# --- K-EXAONE (exaone_moe) -----------------------------------------------------------------------


def _exaone_layer_kinds(cfg: Config, n_layers: int) -> list[str]:
    """Exaone4Config.__post_init__: every ``sliding_window_pattern``-th block attends fully;
    without a sliding window none slides."""
    pattern: object = cfg.get("sliding_window_pattern", 4)
    if cfg.get("sliding_window", 4096) is None or pattern is None:
        return ["full_attention"] * n_layers
    if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
        raise invalid(
            f"field 'sliding_window_pattern' must be a positive integer, got {pattern!r}",
            hint="without 'layer_types', transformers builds the pattern from an integer period",
        )
    return _every_nth_full(n_layers, pattern)


def exaone_moe(name: str, cfg: Config, source: str) -> ModelSpec:
    """K-EXAONE (modular_exaone_moe.py): EXAONE-4 attention (q/k/v/o without bias whatever
    attention_bias says, an RMSNorm over each head of q and k), two RMSNorms per block; blocks
    flagged "sparse" (``mlp_layer_types``, else from ``first_k_dense_replace``) run DeepSeek-V3's
    MoE: router weight, correction-bias buffer, one shared MLP of num_shared_experts ×
    moe_intermediate_size."""
    shape = decoder_shape(cfg, kv_default=32, head_dim_default=None, tied_default=False)
    h, hd, n_layers = shape.hidden, shape.head_dim, shape.layers
    attn = shape_attention(shape, bias=False)
    norms = 2 * h + 2 * hd
    expert_i = field_int(cfg, "moe_intermediate_size", default=1024)
    n_shared = field_int(cfg, "num_shared_experts", default=1, minimum=0)
    sparse = routed_blocks(
        cfg, n_layers, field_int(cfg, "first_k_dense_replace", default=1, minimum=0)
    )
    moe = _routing_moe(
        sparse,
        experts=field_int(cfg, "num_experts", default=64),
        top_k=field_int(cfg, "num_experts_per_tok", default=8),
        expert_i=expert_i,
        n_shared=n_shared,
        shared_i=expert_i,
    )
    layers = _dense_or_routed_blocks(
        attn,
        h,
        sparse,
        moe,
        dense_i=shape.intermediate,
        norms=norms,
    )
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "exaone_moe",
        shape,
        layers,
        moe=moe,
        **_sliding(cfg, n_layers, _exaone_layer_kinds(cfg, n_layers), 4096),
    )


def _routed_block(
    attn: tuple[LinearShape, ...],
    h: int,
    moe: MoeSpec,
    *,
    norms: int,
    router_bias: bool = False,
    mlp_bias: bool = False,
) -> LayerParameters:
    """An MoE block: a router weight (experts × hidden; with ``router_bias`` a learned bias of
    one value per expert beside it), the routed experts and the shared experts as one gated MLP
    of num_shared × their width (none without them)."""
    shared_width = moe.num_shared_experts * moe.shared_intermediate_size
    shared = gated_mlp(h, shared_width, bias=mlp_bias, part=SHARED_EXPERTS) if shared_width else ()
    experts = routed_experts(h, moe.expert_intermediate_size, moe.num_experts)
    router = (h + (1 if router_bias else 0)) * moe.num_experts
    return moe_layer(attn, shared, experts, router=router, norms=norms)


# --- Hunyuan (hy_v3) -----------------------------------------------------------------------------


def hy_v3(name: str, cfg: Config, source: str) -> ModelSpec:
    """Hunyuan (modular_hy_v3.py): Apertus attention (q/k/v/o take ``attention_bias``, an
    RMSNorm over each head of q and k), two RMSNorms per block; blocks flagged "sparse"
    (``mlp_layer_types``, by default all but the first) route to num_experts_per_tok of
    num_experts (router weight; the correction bias is a buffer) and run one shared MLP of
    num_shared_experts × moe_intermediate_size. Every MLP takes ``mlp_bias``."""
    shape = decoder_shape(cfg, kv_default=8, head_dim_default=128, tied_default=False)
    h, hd, n_layers = shape.hidden, shape.head_dim, shape.layers
    bias = field_bool(cfg, "attention_bias", False)
    mlp_bias = field_bool(cfg, "mlp_bias", False)
    attn = shape_attention(shape, bias=bias)
    norms = 2 * h + 2 * hd
    expert_i = field_int(cfg, "moe_intermediate_size", default=1536)
    n_shared = field_int(cfg, "num_shared_experts", default=1, minimum=0)
    sparse = routed_blocks(cfg, n_layers, 1)
    moe = _routing_moe(
        sparse,
        experts=field_int(cfg, "num_experts", "num_local_experts", default=192),
        top_k=field_int(cfg, "num_experts_per_tok", default=8),
        expert_i=expert_i,
        n_shared=n_shared,
        shared_i=expert_i,
    )
    layers = _dense_or_routed_blocks(
        attn,
        h,
        sparse,
        moe,
        dense_i=shape.intermediate,
        norms=norms,
        mlp_bias=mlp_bias,
    )
    return rms_gated_decoder(name, cfg, source, "hy_v3", shape, layers, moe=moe)


# --- Trinity (afmoe) -----------------------------------------------------------------------------


def afmoe(name: str, cfg: Config, source: str) -> ModelSpec:
    """Arcee Trinity (modeling_afmoe.py): attention with an RMSNorm over each head of q and k and
    a sigmoid output gate (``self_attn.gate_proj``, hidden → heads × head_dim, no bias); four
    RMSNorms per block (pre/post attention, pre/post MLP); the first ``num_dense_layers`` blocks
    are dense, the others route (an ``nn.Linear`` router plus an ``expert_bias`` parameter of one
    value per expert) and run one shared MLP of num_shared_experts × moe_intermediate_size.
    Blocks slide unless every ``global_attn_every_n_layers``-th (or as ``layer_types`` says)."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=128, tied_default=False)
    h, hd, n_layers = shape.hidden, shape.head_dim, shape.layers
    bias = field_bool(cfg, "attention_bias", False)
    q = shape.heads * hd
    attn = (
        *shape_attention(shape, bias=bias),
        LinearShape("gate_proj", h, q, part=ATTENTION),
    )
    norms = 4 * h + 2 * hd
    expert_i = field_int(cfg, "moe_intermediate_size", default=1408)
    n_shared = field_int(cfg, "num_shared_experts", default=2, minimum=0)
    # AfmoeDecoderLayer reads no mlp_layer_types: block i routes when i >= num_dense_layers
    first_dense = field_int(cfg, "num_dense_layers", default=1, minimum=0)
    sparse = [index >= first_dense for index in range(n_layers)]
    moe = _routing_moe(
        sparse,
        experts=field_int(cfg, "num_experts", default=64),
        top_k=field_int(cfg, "num_experts_per_tok", default=6),
        expert_i=expert_i,
        n_shared=n_shared,
        shared_i=expert_i,
    )
    # the router's expert_bias is a parameter here (a buffer in DeepSeek-V3)
    layers = _dense_or_routed_blocks(
        attn,
        h,
        sparse,
        moe,
        dense_i=shape.intermediate,
        norms=norms,
        router_bias=True,
    )
    period = field_int(cfg, "global_attn_every_n_layers", default=4)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "afmoe",
        shape,
        layers,
        moe=moe,
        **_sliding(cfg, n_layers, _every_nth_full(n_layers, period), 1024),
    )


# --- Granite MoE with a shared MLP ---------------------------------------------------------------


def granitemoeshared(name: str, cfg: Config, source: str) -> ModelSpec:
    """Granite MoE (modeling_granitemoeshared.py): every block routes to num_experts_per_tok of
    num_local_experts of width intermediate_size (router: a bias-free weight) and, when
    ``shared_intermediate_size`` > 0, also runs a shared MLP (``shared_mlp.input_linear``
    hidden → 2 × shared width, ``output_linear`` back, no bias); q/k/v/o take
    ``attention_bias``. The muP multipliers have no parameters."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    shared_i = field_int(cfg, "shared_intermediate_size", default=0, minimum=0)
    moe = moe_spec(
        experts=field_int(cfg, "num_local_experts", default=8),
        top_k=field_int(cfg, "num_experts_per_tok", default=2),
        expert_i=shape.intermediate,
        n_shared=1,
        shared_i=shared_i,
    )
    shared = (
        (
            LinearShape("input_linear", h, 2 * shared_i, part=SHARED_EXPERTS),
            LinearShape("output_linear", shared_i, h, part=SHARED_EXPERTS),
        )
        if shared_i
        else ()
    )
    experts = routed_experts(h, shape.intermediate, moe.num_experts)
    layer = moe_layer(attn, shared, experts, router=h * moe.num_experts, norms=2 * h)
    return rms_gated_decoder(
        name, cfg, source, "granitemoeshared", shape, (layer,) * shape.layers, moe=moe
    )


# --- FlexOlmo ------------------------------------------------------------------------------------


def flex_olmo(name: str, cfg: Config, source: str) -> ModelSpec:
    """FlexOlmo (modeling_flex_olmo.py): OLMo-2 blocks (post-attention and post-feedforward
    RMSNorms; q_norm over all of q, k_norm over all of k; q/k/v/o take ``attention_bias``) whose
    MLP is OLMoE's: every block routes to num_experts_per_tok of num_experts of width
    intermediate_size (router: a bias-free weight), no shared expert."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h, hd = shape.hidden, shape.head_dim
    bias = field_bool(cfg, "attention_bias", False)
    q, kv = shape.heads * hd, shape.kv_heads * hd
    attn = shape_attention(shape, bias=bias)
    moe = moe_spec(
        experts=field_int(cfg, "num_experts", default=7),
        top_k=field_int(cfg, "num_experts_per_tok", default=5),
        expert_i=shape.intermediate,
    )
    layer = _routed_block(attn, h, moe, norms=2 * h + q + kv)
    return rms_gated_decoder(
        name, cfg, source, "flex_olmo", shape, (layer,) * shape.layers, moe=moe
    )


# --- HyperCLOVA X SEED ---------------------------------------------------------------------------


def hyperclovax(name: str, cfg: Config, source: str) -> ModelSpec:
    """HyperCLOVA X SEED (modeling_hyperclovax.py): Llama blocks (q/k/v/o take
    ``attention_bias``, the MLP ``mlp_bias``) with, when ``use_post_norm``, an RMSNorm after the
    attention and after the MLP too (Peri-LN); the muP multipliers have no parameters."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    mlp = gated_mlp(h, shape.intermediate, bias=field_bool(cfg, "mlp_bias", False))
    post_norms = 2 * h if field_bool(cfg, "use_post_norm", True) else 0
    layer = dense_layer(attn, mlp, norms=2 * h + post_norms)
    return rms_gated_decoder(name, cfg, source, "hyperclovax", shape, (layer,) * shape.layers)


# --- LayerNorm decoders: Jais-2, Persimmon, CodeGen ----------------------------------------------


def _layer_norm_decoder(
    name: str,
    cfg: Config,
    source: str,
    model_type: str,
    shape: Shape,
    layer: LayerParameters,
    *,
    head_bias: int = 0,
    **options: Unpack[SpecOptions],
) -> ModelSpec:
    """A plain-MLP decoder of ``layer`` blocks under LayerNorms with weight and bias (final norm
    2 × hidden)."""
    return stacked_decoder(
        name,
        cfg,
        source,
        model_type,
        shape,
        (layer,) * shape.layers,
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        final_norm=2 * shape.hidden,
        head_bias=head_bias,
        **options,
    )


def jais2(name: str, cfg: Config, source: str) -> ModelSpec:
    """Jais-2 (modeling_jais2.py): Llama attention (q/k/v/o take ``attention_bias``, default
    true), an up/down MLP (ReLU², ``mlp_bias``, default true), LayerNorms with bias."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", True)
    attn = shape_attention(shape, bias=bias)
    mlp = plain_mlp(
        h,
        shape.intermediate,
        bias=field_bool(cfg, "mlp_bias", True),
        names=("up_proj", "down_proj"),
    )
    layer = dense_layer(attn, mlp, norms=2 * 2 * h)
    return _layer_norm_decoder(name, cfg, source, "jais2", shape, layer)


def persimmon(name: str, cfg: Config, source: str) -> ModelSpec:
    """Persimmon (modeling_persimmon.py): a fused ``query_key_value`` (hidden → 3 × hidden) and
    ``dense`` output, both biased; with ``qk_layernorm`` a LayerNorm (weight and bias) over each
    head of q and k; a biased ReLU² MLP; LayerNorms with bias; K/V as wide as Q."""
    h, n_layers, heads = core_sizes(cfg)
    divisible(("hidden_size", h), ("num_attention_heads", heads))
    hd = h // heads
    shape = Shape(
        h,
        n_layers,
        heads,
        heads,
        hd,
        field_int(cfg, "intermediate_size"),
        field_int(cfg, "vocab_size"),
        field_bool(cfg, "tie_word_embeddings", False),
    )
    attn = (
        LinearShape("query_key_value", h, 3 * h, bias=True, part=ATTENTION),
        LinearShape("dense", h, h, bias=True, part=ATTENTION),
    )
    mlp = plain_mlp(
        h, shape.intermediate, bias=True, names=("dense_h_to_4h", "dense_4h_to_h"), part=MLP
    )
    qk_norms = 2 * 2 * hd if field_bool(cfg, "qk_layernorm", True) else 0
    layer = dense_layer(attn, mlp, norms=2 * 2 * h + qk_norms)
    return _layer_norm_decoder(name, cfg, source, "persimmon", shape, layer)


def codegen(name: str, cfg: Config, source: str) -> ModelSpec:
    """CodeGen (modeling_codegen.py): GPT-J's parallel block (one LayerNorm feeds attention and
    MLP) with a fused ``qkv_proj`` (hidden → 3 × hidden) and ``out_proj``, both without bias;
    fc_in / fc_out (n_inner, default 4 × hidden) with bias; rotary positions; the LM head has a
    bias of vocab values, tied or not."""
    h, n_layers, heads = core_sizes(
        cfg,
        hidden=("n_embd", "hidden_size"),
        layers=("n_layer", "num_hidden_layers"),
        heads=("n_head", "num_attention_heads"),
    )
    divisible(("n_embd", h), ("n_head", heads))
    vocab = field_int(cfg, "vocab_size", default=50400)
    shape = Shape(
        h,
        n_layers,
        heads,
        heads,
        h // heads,
        field_int(cfg, "n_inner", default=4 * h),
        vocab,
        field_bool(cfg, "tie_word_embeddings", False),
    )
    attn = (
        LinearShape("qkv_proj", h, 3 * h, part=ATTENTION),
        LinearShape("out_proj", h, h, part=ATTENTION),
    )
    mlp = plain_mlp(h, shape.intermediate, bias=True, names=("fc_in", "fc_out"))
    layer = dense_layer(attn, mlp, norms=2 * h)
    return _layer_norm_decoder(
        name,
        cfg,
        source,
        "codegen",
        shape,
        layer,
        head_bias=vocab,
        max_position_embeddings=field_int(
            cfg, "n_positions", "max_position_embeddings", default=2048
        ),
        position_encoding=PositionKind.ROPE,
        parallel_attention_mlp=True,
    )


# --- Laguna --------------------------------------------------------------------------------------


def _laguna_heads(cfg: Config, n_layers: int, heads: int) -> int:
    """The query heads of every block: ``num_attention_heads_per_layer`` may give each block its
    own count, which one ``ModelSpec`` head count cannot say (the attention activations would be
    guessed): refused unless they are all one number."""
    per_layer: object = cfg.get("num_attention_heads_per_layer")
    if per_layer is None:
        return heads
    if not isinstance(per_layer, list) or len(per_layer) != n_layers:
        raise invalid(
            "field 'num_attention_heads_per_layer' must list one head count per block "
            f"({n_layers}), got {per_layer!r}"
        )
    counts = set(per_layer)
    if len(counts) != 1:
        raise InvalidConfigError(
            f"num_attention_heads_per_layer gives the blocks different query head counts "
            f"({sorted(map(str, counts))}); the formula planner models one count for all blocks",
            reference="unsupported-architecture",
            hint="`--exact` traces any HF model",
        )
    return field_int(
        {"num_attention_heads_per_layer": per_layer[0]}, "num_attention_heads_per_layer"
    )


def _laguna_gate(cfg: Config, heads: int, head_dim: int) -> int:
    """LagunaAttention.g_proj's width: one gate per head (``gating`` true or "per-head"), else
    one per element of each head."""
    gating: object = cfg.get("gating", True)
    if not isinstance(gating, (bool, str)):
        raise invalid(f"field 'gating' must be true, false or a string, got {gating!r}")
    return heads if gating is True or gating == "per-head" else heads * head_dim


def laguna(name: str, cfg: Config, source: str) -> ModelSpec:
    """Laguna (modeling_laguna.py): attention with an RMSNorm over each head of q and k and a
    sigmoid output gate ``g_proj`` (hidden → one value per head, or per element); two RMSNorms
    per block; blocks flagged "sparse" (``mlp_layer_types``, by default all but the first) route
    to num_experts_per_tok of num_experts (router weight plus an ``e_score_correction_bias``
    parameter) and always run a shared MLP of ``shared_expert_intermediate_size``."""
    shape = decoder_shape(cfg, kv_default=8, head_dim_default=128, tied_default=False)
    h, n_layers = shape.hidden, shape.layers
    shape = replace(shape, heads=_laguna_heads(cfg, n_layers, shape.heads))
    divisible(("num_attention_heads", shape.heads), ("num_key_value_heads", shape.kv_heads))
    hd, bias = shape.head_dim, field_bool(cfg, "attention_bias", False)
    attn = (
        *shape_attention(shape, bias=bias),
        LinearShape("g_proj", h, _laguna_gate(cfg, shape.heads, hd), part=ATTENTION),
    )
    norms = 2 * h + 2 * hd
    expert_i = field_int(cfg, "moe_intermediate_size", default=512)
    shared_i = field_int(cfg, "shared_expert_intermediate_size", default=512, minimum=0)
    sparse = routed_blocks(cfg, n_layers, 1)
    moe = _routing_moe(
        sparse,
        experts=field_int(cfg, "num_experts", default=256),
        top_k=field_int(cfg, "num_experts_per_tok", default=8),
        expert_i=expert_i,
        n_shared=1,
        shared_i=shared_i,
    )
    # the router's e_score_correction_bias is a parameter here
    layers = _dense_or_routed_blocks(
        attn,
        h,
        sparse,
        moe,
        dense_i=shape.intermediate,
        norms=norms,
        router_bias=True,
    )
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "laguna",
        shape,
        layers,
        moe=moe,
        **_sliding(cfg, n_layers, ["full_attention"] * n_layers, 512),
    )


# --- Command A MoE (cohere2_moe) -----------------------------------------------------------------


def _cohere2_moe_kinds(cfg: Config, n_layers: int) -> tuple[list[bool], list[str]]:
    """(routes?, attention kind) per block, as Cohere2MoeConfig.__post_init__ builds them: the
    first ``first_k_dense_replace`` blocks (a config key it reads and drops) are dense and slide
    by ``prefix_dense_sliding_window_pattern``, the rest route and slide by
    ``sliding_window_pattern``; explicit ``mlp_layer_types`` / ``layer_types`` win."""
    first_dense = field_int(cfg, "first_k_dense_replace", default=0, minimum=0)
    prefix = min(first_dense, n_layers)
    kinds = _every_nth_full(
        prefix, field_int(cfg, "prefix_dense_sliding_window_pattern", default=1)
    ) + _every_nth_full(n_layers - prefix, field_int(cfg, "sliding_window_pattern", default=4))
    return routed_blocks(cfg, n_layers, first_dense), kinds


def cohere2_moe(name: str, cfg: Config, source: str) -> ModelSpec:
    """Command A MoE (modeling_cohere2_moe.py): Cohere-2 blocks (attention and MLP in parallel
    after one bias-free norm: an RMSNorm when ``rms_norm_eps`` is set, else a LayerNorm without
    bias; q/k/v/o take ``attention_bias``; tied head by default) whose MLP routes to
    num_experts_per_tok of num_experts of width intermediate_size (router: a bias-free weight)
    plus, with num_shared_experts > 0, a shared MLP of num_shared_experts × intermediate_size;
    dense blocks have a SwiGLU of ``prefix_dense_intermediate_size``."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=128, tied_default=True)
    h, n_layers = shape.hidden, shape.layers
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    n_shared = field_int(cfg, "num_shared_experts", default=0, minimum=0)
    sparse, kinds = _cohere2_moe_kinds(cfg, n_layers)
    moe = _routing_moe(
        sparse,
        experts=field_int(cfg, "num_experts", default=8),
        top_k=field_int(cfg, "num_experts_per_tok", default=2),
        expert_i=shape.intermediate,
        n_shared=n_shared,
        shared_i=shape.intermediate,
    )
    layers = _dense_or_routed_blocks(
        attn,
        h,
        sparse,
        moe,
        dense_i=field_int(cfg, "prefix_dense_intermediate_size", default=shape.intermediate),
        norms=h,
    )
    return model_spec(
        name,
        cfg,
        source,
        "cohere2_moe",
        shape,
        breakdown(shape, layers, final_norm=h),
        norm=NormKind.LAYER if cfg.get("rms_norm_eps") is None else NormKind.RMS,
        mlp=MlpKind.GATED,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings"),
        parallel_attention_mlp=True,
        moe=moe,
        **_sliding(cfg, n_layers, kinds, 4096),
    )


# --- Youtu-LLM -----------------------------------------------------------------------------------


# YoutuConfig (modular_youtu.py) subclasses DeepseekV3Config; the class default that differs
_YOUTU_DEFAULTS: dict[str, Any] = {"tie_word_embeddings": True}


def youtu(name: str, cfg: Config, source: str) -> ModelSpec:
    """Youtu-LLM (modular_youtu.py): Llama blocks whose attention is DeepSeek-V3's multi-head
    latent attention and whose MLP is a dense SwiGLU (no experts); read by the DeepSeek-V3
    family with every block dense."""
    n_layers = field_int(cfg, "num_hidden_layers", maximum=MAX_LAYERS)
    read = _with_class_defaults(
        cfg,
        _YOUTU_DEFAULTS,
        forced={"model_type": "deepseek_v3", "first_k_dense_replace": n_layers},
    )
    spec = deepseek_v3(name, read, source)
    return replace(spec, model_type="youtu", moe=None, raw_config=dict(cfg))
