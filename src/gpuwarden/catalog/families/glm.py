"""GLM, GLM-4, GLM-4.5/4.6 (glm4_moe), OLMoE, ERNIE-4.5 and ERNIE-4.5-MoE: RMSNorm + RoPE +
SwiGLU decoders whose blocks differ from Llama's only in biases, norms and the MoE layout.

Each count is what transformers 5.24 builds (the modeling file named at each family); defaults
are its config class defaults, so a field left out counts as ``AutoConfig.for_model`` would.
The routers are bare weights (no LoRA / quantization target); routed experts are the fused 3-D
``experts.gate_up_proj`` / ``experts.down_proj`` parameters.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwarden.catalog.families.blocks import (
    MLP,
    SHARED_EXPERTS,
    Shape,
    decoder_shape,
    dense_layer,
    gated_mlp,
    moe_layer,
    qkvo,
    rms_gated_decoder,
    routed_experts,
    shape_attention,
)
from gpuwarden.catalog.families.fields import Config, field_bool, field_int, field_str
from gpuwarden.types.model import LayerParameters, LinearShape, ModelSpec, MoeSpec


def _fused_mlp(h: int, inner: int) -> tuple[LinearShape, ...]:
    """GlmMLP / Glm4MLP: one gate_up_proj (hidden → 2·inner) and down_proj, no bias."""
    return (
        LinearShape("gate_up_proj", h, 2 * inner, part=MLP),
        LinearShape("down_proj", inner, h, part=MLP),
    )


def glm(name: str, cfg: Config, source: str) -> ModelSpec:
    """GLM-4 (model_type glm: modeling_glm.py) and GLM-4-0414 (glm4: modeling_glm4.py, which adds
    post-attention and post-MLP RMSNorms). q/k/v take ``attention_bias`` (default true); o_proj
    never has a bias."""
    model_type = field_str(cfg, "model_type", "glm")
    shape = decoder_shape(cfg, kv_default=2, head_dim_default=128, tied_default=False)
    h = shape.hidden
    attn = qkvo(
        h,
        shape.heads * shape.head_dim,
        shape.kv_heads * shape.head_dim,
        qkv_bias=field_bool(cfg, "attention_bias", True),
        o_bias=False,
    )
    norms = (4 if model_type == "glm4" else 2) * h
    layer = dense_layer(attn, _fused_mlp(h, shape.intermediate), norms=norms)
    return rms_gated_decoder(name, cfg, source, model_type, shape, (layer,) * shape.layers)


def glm4_moe(name: str, cfg: Config, source: str) -> ModelSpec:
    """GLM-4.5 / GLM-4.6 (modeling_glm4_moe.py): blocks from ``first_k_dense_replace`` on route to
    ``num_experts_per_tok`` of ``n_routed_experts`` and always run one shared MLP of
    ``n_shared_experts`` × ``moe_intermediate_size``; the router's weight is a parameter, its
    ``e_score_correction_bias`` a buffer. q/k/v take ``attention_bias``, o_proj never;
    ``use_qk_norm`` adds an RMSNorm over one head to q and k. The MTP layers
    (num_nextn_predict_layers) are not built by Glm4MoeForCausalLM."""
    shape = decoder_shape(cfg, kv_default=8, head_dim_default=None, tied_default=False)
    h, hd = shape.hidden, shape.head_dim
    bias = field_bool(cfg, "attention_bias", False)
    attn = qkvo(h, shape.heads * hd, shape.kv_heads * hd, qkv_bias=bias, o_bias=False)
    norms = 2 * h + (2 * hd if field_bool(cfg, "use_qk_norm", False) else 0)
    expert_i = field_int(cfg, "moe_intermediate_size", default=1408)
    n_shared = field_int(cfg, "n_shared_experts", default=1, minimum=0)
    first_dense = field_int(cfg, "first_k_dense_replace", default=1, minimum=0)
    moe = MoeSpec(
        num_experts=field_int(cfg, "n_routed_experts", "num_local_experts", default=128),
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=8),
        expert_intermediate_size=expert_i,
        num_shared_experts=n_shared,
        shared_intermediate_size=expert_i if n_shared else 0,
        first_dense_layers=first_dense,
    )
    shared = gated_mlp(h, n_shared * expert_i, part=SHARED_EXPERTS) if n_shared else ()
    routed = routed_experts(h, expert_i, moe.num_experts)
    sparse = moe_layer(attn, shared, routed, router=h * moe.num_experts, norms=norms)
    dense = dense_layer(attn, gated_mlp(h, shape.intermediate), norms=norms)
    layers = tuple(sparse if i >= first_dense else dense for i in range(shape.layers))
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "glm4_moe",
        shape,
        layers,
        moe=moe if first_dense < shape.layers else None,
    )


def olmoe(name: str, cfg: Config, source: str) -> ModelSpec:
    """OLMoE (modeling_olmoe.py): every block routes to ``num_experts_per_tok`` of
    ``num_experts`` (no shared expert); q_norm spans all of q (hidden_size) and k_norm all of k
    ((hidden // heads) · kv_heads); q/k/v/o take ``attention_bias``."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    norms = 2 * h + h + (h // shape.heads) * shape.kv_heads
    moe = MoeSpec(
        num_experts=field_int(cfg, "num_experts", default=64),
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=8),
        expert_intermediate_size=shape.intermediate,
    )
    routed = routed_experts(h, shape.intermediate, moe.num_experts)
    layer = moe_layer(attn, (), routed, router=h * moe.num_experts, norms=norms)
    return rms_gated_decoder(name, cfg, source, "olmoe", shape, (layer,) * shape.layers, moe=moe)


def _ernie_moe_blocks(
    cfg: Config, shape: Shape, attn: tuple[LinearShape, ...], bias: bool
) -> tuple[tuple[LayerParameters, ...], MoeSpec | None]:
    """Ernie4_5_MoeDecoderLayer: block i routes when (i + 1) % moe_layer_interval == 0 and
    moe_layer_start_index ≤ i ≤ moe_layer_end_index (-1: the last block)."""
    h, n_layers = shape.hidden, shape.layers
    norms = 2 * h
    interval = field_int(cfg, "moe_layer_interval", default=1)
    start = field_int(cfg, "moe_layer_start_index", default=1, minimum=0)
    end = field_int(cfg, "moe_layer_end_index", default=-1, minimum=-1)
    last = n_layers - 1 if end == -1 else end
    sparse = tuple((i + 1) % interval == 0 and start <= i <= last for i in range(n_layers))
    dense = dense_layer(attn, gated_mlp(h, shape.intermediate, bias=bias), norms=norms)
    if not any(sparse):
        return (dense,) * n_layers, None
    expert_i = field_int(cfg, "moe_intermediate_size", default=1536)
    n_shared = field_int(cfg, "moe_num_shared_experts", default=2, minimum=0)
    moe = MoeSpec(
        num_experts=field_int(cfg, "moe_num_experts", "num_experts", default=64),
        experts_per_token=field_int(cfg, "moe_k", "num_experts_per_tok", default=6),
        expert_intermediate_size=expert_i,
        num_shared_experts=n_shared,
        shared_intermediate_size=expert_i if n_shared else 0,
        first_dense_layers=sparse.index(True),
        layer_frequency=interval,
    )
    shared = gated_mlp(h, n_shared * expert_i, bias=bias, part=SHARED_EXPERTS) if n_shared else ()
    routed = routed_experts(h, expert_i, moe.num_experts)
    # the router weight plus its e_score_correction_bias, a (1, experts) nn.Parameter
    router = (h + 1) * moe.num_experts
    block = moe_layer(attn, shared, routed, router=router, norms=norms)
    return tuple(block if s else dense for s in sparse), moe


def ernie4_5(name: str, cfg: Config, source: str) -> ModelSpec:
    """ERNIE-4.5 (modeling_ernie4_5.py) and ERNIE-4.5-MoE (modeling_ernie4_5_moe.py): one
    ``use_bias`` flag biases every linear of a block (and, in the MoE model, the LM head);
    tied head by default. The dense model's head_dim defaults to 128, the MoE's to
    hidden // heads."""
    model_type = field_str(cfg, "model_type", "ernie4_5")
    is_moe = model_type == "ernie4_5_moe"
    kv_default = 4 if is_moe else 2
    shape = decoder_shape(
        cfg, kv_default=kv_default, head_dim_default=None if is_moe else 128, tied_default=True
    )
    h = shape.hidden
    bias = field_bool(cfg, "use_bias", False)
    attn = shape_attention(shape, bias=bias)
    if is_moe:
        layers, moe = _ernie_moe_blocks(cfg, shape, attn, bias)
    else:
        dense = dense_layer(attn, gated_mlp(h, shape.intermediate, bias=bias), norms=2 * h)
        layers, moe = (dense,) * shape.layers, None
    spec = rms_gated_decoder(name, cfg, source, model_type, shape, layers, moe=moe)
    if is_moe and bias:
        return _with_head_bias(spec, shape.vocab)
    return spec


def _with_head_bias(spec: ModelSpec, vocab: int) -> ModelSpec:
    """``spec`` whose LM head also has a bias of ``vocab`` values."""
    parameters = replace(spec.parameters, lm_head=spec.parameters.lm_head + vocab)
    return replace(spec, parameters=parameters)
