"""DeepSeek-V2 / V3: multi-head latent attention (MLA) and a routed + shared mixture of experts.

The first ``first_k_dense_replace`` blocks have a dense SwiGLU MLP; the others route each token to
``num_experts_per_tok`` of ``n_routed_experts`` experts and always run ``n_shared_experts``.
transformers keeps each MoE router's ``e_score_correction_bias`` as a buffer, not a parameter, so
it is not counted here either (58 × 256 = 14,848 values for DeepSeek-V3).

DeepSeek-V2 (transformers 5.24 ``DeepseekV2ForCausalLM``) has the same blocks; its config defaults
differ, its router has no correction bias, and its dense and shared-expert MLPs take ``mlp_bias``.

DeepSeek-V3.2 (``deepseek_v32``) and GLM-5 (``glm_moe_dsa``) add DeepSeek Sparse Attention:
modeling_deepseek_v32.py / modeling_glm_moe_dsa.py give each attention a lightning indexer (wq_b
from the q latent, wk and weights_proj from the hidden state, a LayerNorm k_norm) that caches one
``index_head_dim`` key per token and picks the ``index_topk`` tokens MLA attends to (GLM-5's
"shared" indexer blocks build none and reuse the block before's top-k: ``MlaSpec.indexed_layers``
counts the blocks that cache the key). Their blocks
are GLM-4.7-Flash's (``mlp_layer_types``, by default ``first_k_dense_replace`` dense blocks), and
their attention always has a q LoRA rank (AXK1Attention).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    invalid,
    layer_types,
    optional_int,
    routed_blocks,
)
from gpuwarden.errors import InvalidConfigError
from gpuwarden.types.model import LayerParameters, LinearShape, MlaSpec, ModelSpec, MoeSpec


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
    # dense blocks before the routed ones when mlp_layer_types is absent: a fixed count
    # (Glm4MoeLiteConfig: 1), or None for first_k_dense_replace (DeepseekV32Config, GlmMoeDsaConfig)
    dense_lead: int | None = 1
    # DeepSeek Sparse Attention's indexer heads (index_n_heads default); 0: no indexer
    index_heads: int = 0
    # keys of the routed-expert count, first wins (DeepseekV32Config re-routes ``num_experts``)
    expert_keys: tuple[str, ...] = ("n_routed_experts",)


def _dsa(
    index_heads: int, *, q_lora_rank: int, qk_nope_head_dim: int, v_head_dim: int
) -> _Defaults:
    """DeepseekV32Config / GlmMoeDsaConfig: Glm4MoeLiteConfig's blocks with a DSA indexer. Their
    __post_init__ overwrites head_dim with qk_rope_head_dim: only the latter sizes the rope key."""
    return _Defaults(
        1,
        256,
        8,
        2048,
        3,
        mlp_bias=False,
        q_lora_rank=q_lora_rank,
        qk_nope_head_dim=qk_nope_head_dim,
        v_head_dim=v_head_dim,
        mlp_layer_types=True,
        dense_lead=None,
        index_heads=index_heads,
        expert_keys=("num_experts", "n_routed_experts"),
    )


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
    "deepseek_v32": _dsa(64, q_lora_rank=1536, qk_nope_head_dim=128, v_head_dim=128),
    "glm_moe_dsa": _dsa(32, q_lora_rank=2048, qk_nope_head_dim=192, v_head_dim=256),
}


def _mla(cfg: Config, defaults: _Defaults) -> MlaSpec:
    mla = MlaSpec(
        # q_lora_rank null means "project q directly from the hidden state" (DeepSeek-V2-Lite).
        q_lora_rank=optional_int(cfg, "q_lora_rank", defaults.q_lora_rank),
        kv_lora_rank=field_int(cfg, "kv_lora_rank", default=512),
        qk_nope_head_dim=field_int(cfg, "qk_nope_head_dim", default=defaults.qk_nope_head_dim),
        qk_rope_head_dim=field_int(cfg, *defaults.rope_keys, default=64),
        v_head_dim=field_int(cfg, "v_head_dim", default=defaults.v_head_dim),
    )
    if not defaults.index_heads:
        return mla
    if mla.q_lora_rank is None:
        # AXK1Attention (which DSA's attention subclasses) always builds q_a_proj / q_b_proj, and
        # the indexer's wq_b reads the q latent
        raise invalid(
            "field 'q_lora_rank' is null, but DeepSeek Sparse Attention projects q (and the "
            "indexer's queries) through the q latent",
            hint="set 'q_lora_rank' as the model's published config.json does",
        )
    return replace(mla, index_head_dim=field_int(cfg, "index_head_dim", default=128))


def _sparse_blocks(cfg: Config, defaults: _Defaults, moe: MoeSpec, n_layers: int) -> list[bool]:
    """Which blocks route (``_Defaults.mlp_layer_types``)."""
    if not defaults.mlp_layer_types:
        return [
            i >= moe.first_dense_layers and i % moe.layer_frequency == 0 for i in range(n_layers)
        ]
    lead = moe.first_dense_layers if defaults.dense_lead is None else defaults.dense_lead
    return routed_blocks(cfg, n_layers, lead)


# DeepseekV32Config / GlmMoeDsaConfig layer_types: every block is a DSA block (DynamicIndexedLayer)
_INDEXED = frozenset({"indexed_attention"})
# GlmMoeDsaConfig.indexer_types: "full" blocks run their own indexer, "shared" ones reuse the top-k
# of the block before (GlmMoeDsaAttention builds no indexer for them)
_INDEXER_KINDS = frozenset({"full", "shared"})
_PATTERN_KINDS = {"F": "full", "S": "shared"}


def _indexer_kinds(cfg: Config, n_layers: int) -> list[str]:
    """Per block, "full" or "shared", as GlmMoeDsaConfig.__post_init__ derives them: an
    ``indexer_types`` list, else ``index_topk_pattern`` ("FFS..." or a list), else every
    ``index_topk_freq``-th block from ``index_skip_topk_offset`` on (default: all "full")."""
    kinds = layer_types(cfg, n_layers, _INDEXER_KINDS, name="indexer_types")
    if kinds is not None:
        return kinds
    pattern: object = cfg.get("index_topk_pattern")
    if isinstance(pattern, str):
        pattern = [_PATTERN_KINDS.get(letter, letter) for letter in pattern]
    spelled = layer_types(
        {"index_topk_pattern": pattern}, n_layers, _INDEXER_KINDS, name="index_topk_pattern"
    )
    if spelled is not None:
        return spelled
    freq = max(field_int(cfg, "index_topk_freq", default=1, minimum=0), 1)
    offset = field_int(cfg, "index_skip_topk_offset", default=2, minimum=0)
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n_layers)]


def _indexed_blocks(cfg: Config, model_type: str, n_layers: int) -> list[bool]:
    """Which blocks build a DSA indexer (DeepSeek-V3.2: all of them)."""
    layer_types(cfg, n_layers, _INDEXED)
    if model_type != "glm_moe_dsa":
        return [True] * n_layers
    return [kind == "full" for kind in _indexer_kinds(cfg, n_layers)]


def _indexer(h: int, q_rank: int, heads: int, mla: MlaSpec) -> tuple[LinearShape, ...]:
    """DSA's lightning indexer (DeepseekV32Indexer): wq_b from the q latent to its heads' queries,
    wk from the hidden state to the one key it caches, weights_proj to the per-head weights."""
    return (
        LinearShape("wq_b", q_rank, heads * mla.index_head_dim, part=ATTENTION),
        LinearShape("wk", h, mla.index_head_dim, part=ATTENTION),
        LinearShape("weights_proj", h, heads, part=ATTENTION),
    )


def mla_attention(h: int, heads: int, mla: MlaSpec, bias: bool) -> tuple[LinearShape, ...]:
    """DeepSeek's multi-head latent attention: q directly or through the q latent, kv_a to the
    kv latent and the shared rope key, kv_b to the per-head keys and values, o_proj."""
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


def _blocks(
    cfg: Config,
    defaults: _Defaults,
    core: tuple[int, int, int],
    mla: MlaSpec,
    moe: MoeSpec,
    indexed: list[bool],
) -> tuple[LayerParameters, ...]:
    """Every block: MLA (plus its DSA indexer where ``indexed``) and a dense or routed MLP."""
    h, n_layers, heads = core
    mlp_bias = defaults.mlp_bias and field_bool(cfg, "mlp_bias", False)
    attn = mla_attention(h, heads, mla, field_bool(cfg, "attention_bias", False))
    # Block norms, plus the RMSNorms on the compressed q and kv latents inside the attention.
    norms = 2 * h + mla.kv_lora_rank + (mla.q_lora_rank or 0)
    # transformers runs the shared experts as one MLP of n_shared × moe_intermediate_size.
    shared_i = moe.num_shared_experts * moe.expert_intermediate_size
    shared = gated_mlp(h, shared_i, bias=mlp_bias, part=SHARED_EXPERTS) if shared_i else ()
    experts = routed_experts(h, moe.expert_intermediate_size, moe.num_experts)
    dense_mlp = gated_mlp(h, field_int(cfg, "intermediate_size"), bias=mlp_bias)
    indexer: tuple[LinearShape, ...] = ()
    if defaults.index_heads and mla.q_lora_rank is not None:
        index_heads = field_int(cfg, "index_n_heads", default=defaults.index_heads)
        indexer = _indexer(h, mla.q_lora_rank, index_heads, mla)
    # the indexer's k_norm is a LayerNorm (weight and bias)
    with_indexer = (attn + indexer, norms + 2 * mla.index_head_dim)
    layers = []
    for routes, has_indexer in zip(
        _sparse_blocks(cfg, defaults, moe, n_layers), indexed, strict=True
    ):
        block_attn, block_norms = with_indexer if has_indexer else (attn, norms)
        layers.append(
            moe_layer(block_attn, shared, experts, router=h * moe.num_experts, norms=block_norms)
            if routes
            else dense_layer(block_attn, dense_mlp, norms=block_norms)
        )
    return tuple(layers)


def _moe(cfg: Config, defaults: _Defaults) -> MoeSpec:
    n_shared = field_int(cfg, "n_shared_experts", default=defaults.n_shared, minimum=0)
    expert_i = field_int(cfg, "moe_intermediate_size", default=defaults.expert_intermediate)
    return MoeSpec(
        num_experts=field_int(cfg, *defaults.expert_keys, default=defaults.n_routed),
        experts_per_token=_experts_per_token(cfg, defaults),
        expert_intermediate_size=expert_i,
        num_shared_experts=n_shared,
        shared_intermediate_size=expert_i if n_shared else 0,
        first_dense_layers=field_int(
            cfg, "first_k_dense_replace", default=defaults.first_dense, minimum=0
        ),
        layer_frequency=field_int(cfg, "moe_layer_freq", default=1),
    )


def deepseek_v3(name: str, cfg: Config, source: str) -> ModelSpec:
    """DeepSeek-V2 (``model_type`` deepseek_v2), DeepSeek-V3, GLM-4.7-Flash (glm4_moe_lite:
    DeepSeek-V3's MLA in GLM-4.5 blocks, whose MoE is DeepSeek-V3's: a router weight, a
    correction-bias buffer, one shared MLP of n_shared_experts × moe_intermediate_size) and
    DeepSeek-V3.2 / GLM-5 (deepseek_v32, glm_moe_dsa: GLM-4.7-Flash's blocks with a DSA indexer)."""
    model_type = field_str(cfg, "model_type", "deepseek_v3")
    defaults = _DEFAULTS[model_type]
    h, n_layers, heads = core_sizes(cfg)
    kv_heads = field_int(cfg, "num_key_value_heads", default=heads)
    mla = _mla(cfg, defaults)
    indexed = [False] * n_layers
    if mla.index_head_dim:
        indexed = _indexed_blocks(cfg, model_type, n_layers)
        # GLM-5's "shared" blocks reuse the block before's top-k: no indexer, no key cached
        count = indexed.count(True)
        mla = replace(mla, indexed_layers=None if count == n_layers else count)
    moe = _moe(cfg, defaults)
    layers = _blocks(cfg, defaults, (h, n_layers, heads), mla, moe, indexed)
    head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    shape = Shape(
        h,
        n_layers,
        heads,
        kv_heads,
        head_dim,
        field_int(cfg, "intermediate_size"),
        field_int(cfg, "vocab_size"),
        field_bool(cfg, "tie_word_embeddings", False),
    )
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
