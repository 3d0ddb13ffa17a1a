"""DeepSeek-V2 / V3: multi-head latent attention (MLA) and a routed + shared mixture of experts.

The first ``first_k_dense_replace`` blocks have a dense SwiGLU MLP; the others route each token to
``num_experts_per_tok`` of ``n_routed_experts`` experts and always run ``n_shared_experts``.
transformers keeps each MoE router's ``e_score_correction_bias`` as a buffer, not a parameter, so
it is not counted here either (58 × 256 = 14,848 values for DeepSeek-V3).

DeepSeek-V2 (transformers 5.24 ``DeepseekV2ForCausalLM``) has the same blocks; its config defaults
differ, its router has no correction bias, and its dense and shared-expert MLPs take ``mlp_bias``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    SHARED_EXPERTS,
    Shape,
    dense_layer,
    gated_mlp,
    moe_layer,
    rms_gated_decoder,
    routed_experts,
)
from gpuwarden.catalog.families.fields import (
    Config,
    core_sizes,
    field_bool,
    field_int,
    field_str,
    optional_int,
)
from gpuwarden.types.model import LinearShape, MlaSpec, ModelSpec, MoeSpec


@dataclass(frozen=True, slots=True)
class _Defaults:
    """transformers 5.24's config defaults, so a field left out counts as AutoConfig would."""

    n_shared: int
    n_routed: int
    experts_per_token: int | None  # V2: None, which its router cannot run: the field is required
    expert_intermediate: int
    first_dense: int
    mlp_bias: bool  # V2's config has mlp_bias (dense and shared-expert MLPs); V3 never biases


_DEFAULTS = {
    "deepseek_v2": _Defaults(2, 64, None, 1407, 0, mlp_bias=True),
    "deepseek_v3": _Defaults(1, 256, 8, 2048, 3, mlp_bias=False),
}


def _mla(cfg: Config) -> MlaSpec:
    return MlaSpec(
        # q_lora_rank null means "project q directly from the hidden state" (DeepSeek-V2-Lite).
        q_lora_rank=optional_int(cfg, "q_lora_rank", 1536),
        kv_lora_rank=field_int(cfg, "kv_lora_rank", default=512),
        qk_nope_head_dim=field_int(cfg, "qk_nope_head_dim", default=128),
        qk_rope_head_dim=field_int(cfg, "qk_rope_head_dim", default=64),
        v_head_dim=field_int(cfg, "v_head_dim", default=128),
    )


def _attention(h: int, heads: int, mla: MlaSpec, bias: bool) -> tuple[LinearShape, ...]:
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank is None:
        q: tuple[LinearShape, ...] = (LinearShape("q_proj", h, heads * qk_head, part=ATTENTION),)
    else:
        q = (
            LinearShape("q_a_proj", h, mla.q_lora_rank, bias=bias, part=ATTENTION),
            LinearShape("q_b_proj", mla.q_lora_rank, heads * qk_head, part=ATTENTION),
        )
    # kv_a projects to the compressed latent plus the shared rotary key; kv_b expands the latent
    # into per-head keys (nope part) and values.
    kv_a_out = mla.kv_lora_rank + mla.qk_rope_head_dim
    kv_b_out = heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    return (
        *q,
        LinearShape("kv_a_proj_with_mqa", h, kv_a_out, bias=bias, part=ATTENTION),
        LinearShape("kv_b_proj", mla.kv_lora_rank, kv_b_out, part=ATTENTION),
        LinearShape("o_proj", heads * mla.v_head_dim, h, bias=bias, part=ATTENTION),
    )


def deepseek_v3(name: str, cfg: Config, source: str) -> ModelSpec:
    """DeepSeek-V2 (``model_type`` deepseek_v2) and DeepSeek-V3."""
    model_type = field_str(cfg, "model_type", "deepseek_v3")
    defaults = _DEFAULTS[model_type]
    h, n_layers, heads = core_sizes(cfg)
    kv_heads = field_int(cfg, "num_key_value_heads", default=heads)
    vocab = field_int(cfg, "vocab_size")
    dense_i = field_int(cfg, "intermediate_size")
    tied = field_bool(cfg, "tie_word_embeddings", False)
    mla = _mla(cfg)
    n_shared = field_int(cfg, "n_shared_experts", default=defaults.n_shared, minimum=0)
    expert_i = field_int(cfg, "moe_intermediate_size", default=defaults.expert_intermediate)
    mlp_bias = defaults.mlp_bias and field_bool(cfg, "mlp_bias", False)
    moe = MoeSpec(
        num_experts=field_int(cfg, "n_routed_experts", default=defaults.n_routed),
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=defaults.experts_per_token),
        expert_intermediate_size=expert_i,
        num_shared_experts=n_shared,
        shared_intermediate_size=expert_i if n_shared else 0,
        first_dense_layers=field_int(
            cfg, "first_k_dense_replace", default=defaults.first_dense, minimum=0
        ),
        layer_frequency=field_int(cfg, "moe_layer_freq", default=1),
    )

    attn = _attention(h, heads, mla, field_bool(cfg, "attention_bias", False))
    # Block norms, plus the RMSNorms on the compressed q and kv latents inside the attention.
    norms = 2 * h + mla.kv_lora_rank + (mla.q_lora_rank or 0)
    dense = dense_layer(attn, gated_mlp(h, dense_i, bias=mlp_bias), norms=norms)
    # transformers runs the shared experts as one MLP of n_shared × moe_intermediate_size.
    shared = (
        gated_mlp(h, n_shared * expert_i, bias=mlp_bias, part=SHARED_EXPERTS) if n_shared else ()
    )
    experts = routed_experts(h, moe.expert_intermediate_size, moe.num_experts)
    sparse = moe_layer(attn, shared, experts, router=h * moe.num_experts, norms=norms)
    # DeepSeek's reference code: MoE from first_k_dense_replace on, every moe_layer_freq-th block.
    layers = tuple(
        sparse if i >= moe.first_dense_layers and i % moe.layer_frequency == 0 else dense
        for i in range(n_layers)
    )
    head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    shape = Shape(h, n_layers, heads, kv_heads, head_dim, dense_i, vocab, tied)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        model_type,
        shape,
        layers,
        moe=moe,
        mla=mla,
    )
