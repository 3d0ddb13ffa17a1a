"""DeepSeek-V3: multi-head latent attention (MLA) and a routed + shared mixture of experts.

The first ``first_k_dense_replace`` blocks have a dense SwiGLU MLP; the others route each token to
``num_experts_per_tok`` of ``n_routed_experts`` experts and always run ``n_shared_experts``.
transformers keeps each MoE router's ``e_score_correction_bias`` as a buffer, not a parameter, so
it is not counted here either (58 × 256 = 14,848 values for DeepSeek-V3).
"""

from __future__ import annotations

from gpuwarden.catalog.families.blocks import ATTENTION, SHARED_EXPERTS, gated_mlp, routed_experts
from gpuwarden.catalog.families.blocks import total as params
from gpuwarden.catalog.families.fields import (
    Config,
    checkpoint_dtype,
    field_bool,
    field_int,
    layer_count,
    optional_int,
)
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    MlaSpec,
    MlpKind,
    ModelSpec,
    MoeSpec,
    NormKind,
    ParameterBreakdown,
    Structure,
)


def _mla(cfg: Config, source: str) -> MlaSpec:
    return MlaSpec(
        # q_lora_rank null means "project q directly from the hidden state" (DeepSeek-V2-Lite).
        q_lora_rank=optional_int(cfg, source, "q_lora_rank", 1536),
        kv_lora_rank=field_int(cfg, source, "kv_lora_rank", default=512),
        qk_nope_head_dim=field_int(cfg, source, "qk_nope_head_dim", default=128),
        qk_rope_head_dim=field_int(cfg, source, "qk_rope_head_dim", default=64),
        v_head_dim=field_int(cfg, source, "v_head_dim", default=128),
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
    h = field_int(cfg, source, "hidden_size")
    n_layers = layer_count(cfg, source, "num_hidden_layers")
    heads = field_int(cfg, source, "num_attention_heads")
    kv_heads = field_int(cfg, source, "num_key_value_heads", default=heads)
    vocab = field_int(cfg, source, "vocab_size")
    dense_i = field_int(cfg, source, "intermediate_size")
    tied = field_bool(cfg, source, "tie_word_embeddings", False)
    mla = _mla(cfg, source)
    n_shared = field_int(cfg, source, "n_shared_experts", default=1, minimum=0)
    expert_i = field_int(cfg, source, "moe_intermediate_size", default=2048)
    moe = MoeSpec(
        num_experts=field_int(cfg, source, "n_routed_experts", default=256),
        experts_per_token=field_int(cfg, source, "num_experts_per_tok", default=8),
        expert_intermediate_size=expert_i,
        num_shared_experts=n_shared,
        shared_intermediate_size=expert_i if n_shared else 0,
        first_dense_layers=field_int(cfg, source, "first_k_dense_replace", default=3, minimum=0),
        layer_frequency=field_int(cfg, source, "moe_layer_freq", default=1),
    )

    attn = _attention(h, heads, mla, field_bool(cfg, source, "attention_bias", False))
    # Block norms, plus the RMSNorms on the compressed q and kv latents inside the attention.
    norms = 2 * h + mla.kv_lora_rank + (mla.q_lora_rank or 0)
    dense_mlp = gated_mlp(h, dense_i)
    dense = LayerParameters(
        attention=params(attn),
        mlp=params(dense_mlp),
        experts=0,
        router=0,
        norms=norms,
        linears=attn + dense_mlp,
    )
    # transformers runs the shared experts as one MLP of n_shared × moe_intermediate_size.
    shared = gated_mlp(h, n_shared * expert_i, part=SHARED_EXPERTS) if n_shared else ()
    experts = routed_experts(h, moe.expert_intermediate_size, moe.num_experts)
    sparse = LayerParameters(
        attention=params(attn),
        mlp=params(shared),
        experts=params(experts),
        router=h * moe.num_experts,
        norms=norms,
        linears=attn + shared + experts,
    )
    # DeepSeek's reference code: MoE from first_k_dense_replace on, every moe_layer_freq-th block.
    layers = tuple(
        sparse if i >= moe.first_dense_layers and i % moe.layer_frequency == 0 else dense
        for i in range(n_layers)
    )
    return ModelSpec(
        name=name,
        model_type="deepseek_v3",
        structure=Structure.DECODER,
        hidden_size=h,
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim,
        intermediate_size=dense_i,
        vocab_size=vocab,
        tied_embeddings=tied,
        norm=NormKind.RMS,
        mlp=MlpKind.GATED,
        parameters=ParameterBreakdown(
            embedding=vocab * h,
            position_embedding=0,
            lm_head=0 if tied else vocab * h,
            final_norm=h,
            layers=layers,
        ),
        max_position_embeddings=optional_int(cfg, source, "max_position_embeddings"),
        moe=moe,
        mla=mla,
        checkpoint_dtype=checkpoint_dtype(cfg, source),
        source=source,
        raw_config=dict(cfg),
    )
