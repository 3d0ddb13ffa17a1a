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
    layer_types,
    optional_int,
)
from gpuwarden.errors import InvalidConfigError
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
    q_lora_rank: int = 1536
    qk_nope_head_dim: int = 128
    v_head_dim: int = 128
    # the keys of the rope head width, first wins: Glm4MoeLiteConfig maps head_dim onto
    # qk_rope_head_dim (attribute_map) and a config's head_dim wins; DeepseekV3Config has no such
    # mapping
    rope_keys: tuple[str, ...] = ("qk_rope_head_dim",)
    # which blocks route: a per-block ``mlp_layer_types`` list ("dense" / "sparse";
    # Glm4MoeLiteDecoderLayer, by default one dense block and then sparse ones), else DeepSeek's
    # reference code (from first_k_dense_replace on, every moe_layer_freq-th block)
    mlp_layer_types: bool = False


_DEFAULTS = {
    "deepseek_v2": _Defaults(2, 64, None, 1407, 0, mlp_bias=True),
    "deepseek_v3": _Defaults(1, 256, 8, 2048, 3, mlp_bias=False),
    # GLM-4.7-Flash (modular_glm4_moe_lite.py): DeepseekV3Attention (MLA) in GLM-4.5's blocks
    "glm4_moe_lite": _Defaults(
        1,
        64,
        4,
        1536,
        1,
        mlp_bias=False,
        q_lora_rank=768,
        qk_nope_head_dim=192,
        v_head_dim=256,
        rope_keys=("head_dim", "qk_rope_head_dim"),
        mlp_layer_types=True,
    ),
}


_MLP_KINDS = frozenset({"dense", "sparse"})  # Glm4MoeLiteConfig.mlp_layer_types


def _mla(cfg: Config, defaults: _Defaults) -> MlaSpec:
    return MlaSpec(
        # q_lora_rank null means "project q directly from the hidden state" (DeepSeek-V2-Lite).
        q_lora_rank=optional_int(cfg, "q_lora_rank", defaults.q_lora_rank),
        kv_lora_rank=field_int(cfg, "kv_lora_rank", default=512),
        qk_nope_head_dim=field_int(cfg, "qk_nope_head_dim", default=defaults.qk_nope_head_dim),
        qk_rope_head_dim=field_int(cfg, *defaults.rope_keys, default=64),
        v_head_dim=field_int(cfg, "v_head_dim", default=defaults.v_head_dim),
    )


def _sparse_blocks(cfg: Config, defaults: _Defaults, moe: MoeSpec, n_layers: int) -> list[bool]:
    """Which blocks route (``_Defaults.mlp_layer_types``)."""
    if not defaults.mlp_layer_types:
        return [
            i >= moe.first_dense_layers and i % moe.layer_frequency == 0 for i in range(n_layers)
        ]
    kinds = layer_types(cfg, n_layers, _MLP_KINDS, name="mlp_layer_types")
    if kinds is None:
        return [i >= 1 for i in range(n_layers)]
    return [kind == "sparse" for kind in kinds]


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


def _experts_per_token(cfg: Config, defaults: _Defaults) -> int:
    """The router's top-k. DeepSeek-V2's config class defaults it to null: transformers then builds
    the weights, but DeepseekV2Moe's router passes it to torch.topk and no forward runs, so there
    is no active-parameter count to plan with (the published V2 and V2-Lite configs set 6)."""
    if defaults.experts_per_token is None and cfg.get("num_experts_per_tok") is None:
        raise InvalidConfigError(
            "field 'num_experts_per_tok' is missing or null: DeepSeek-V2's router takes its top-k "
            "from it (transformers builds the weights but cannot run a forward pass without it)",
            reference="config-field-missing",
            hint="set 'num_experts_per_tok' as the model's published config.json does "
            "(6 for DeepSeek-V2 and V2-Lite)",
        )
    return field_int(cfg, "num_experts_per_tok", default=defaults.experts_per_token)


def deepseek_v3(name: str, cfg: Config, source: str) -> ModelSpec:
    """DeepSeek-V2 (``model_type`` deepseek_v2), DeepSeek-V3 and GLM-4.7-Flash (glm4_moe_lite:
    DeepSeek-V3's MLA in GLM-4.5 blocks, whose MoE is DeepSeek-V3's: a router weight, a
    correction-bias buffer, one shared MLP of n_shared_experts × moe_intermediate_size)."""
    model_type = field_str(cfg, "model_type", "deepseek_v3")
    defaults = _DEFAULTS[model_type]
    h, n_layers, heads = core_sizes(cfg)
    kv_heads = field_int(cfg, "num_key_value_heads", default=heads)
    vocab = field_int(cfg, "vocab_size")
    dense_i = field_int(cfg, "intermediate_size")
    tied = field_bool(cfg, "tie_word_embeddings", False)
    mla = _mla(cfg, defaults)
    n_shared = field_int(cfg, "n_shared_experts", default=defaults.n_shared, minimum=0)
    expert_i = field_int(cfg, "moe_intermediate_size", default=defaults.expert_intermediate)
    mlp_bias = defaults.mlp_bias and field_bool(cfg, "mlp_bias", False)
    moe = MoeSpec(
        num_experts=field_int(cfg, "n_routed_experts", default=defaults.n_routed),
        experts_per_token=_experts_per_token(cfg, defaults),
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
    layers = tuple(
        sparse if routes else dense for routes in _sparse_blocks(cfg, defaults, moe, n_layers)
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
