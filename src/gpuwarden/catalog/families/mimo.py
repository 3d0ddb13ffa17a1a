"""MiMo-V2-Flash (``mimo_v2_flash``, transformers 5.24 modeling_mimo_v2_flash.py /
modular_mimo_v2_flash.py): GLM-4.7-Flash blocks (``Glm4MoeLiteDecoderLayer``: two RMSNorms, a
dense gated MLP or the MoE by ``mlp_layer_types``, by default the first block dense) with
``MiMoV2FlashAttention``: q/k heads ``head_dim`` (192) wide and values ``v_head_dim`` (128),
o_proj ``heads · v_head_dim → hidden`` without bias; sliding-window blocks build twice the KV
heads of the full-attention blocks and a ``sinks`` logit per head. The MoE is DeepSeek-V3's
without shared experts: a router weight (experts × hidden, kept in fp32; its
``e_score_correction_bias`` is a buffer) and fused routed experts. The KV cache is stated per
kind (``ModelSpec.kv_groups``): sliding blocks 2·kv heads × (192 + 128) over the window, full
blocks kv × (192 + 128) over every token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    Shape,
    dense_layer,
    gated_mlp,
    moe_layer,
    moe_spec,
    rms_gated_decoder,
    routed_experts,
)
from gpuwarden.catalog.families.fields import (
    Config,
    divisible,
    field_bool,
    field_int,
    layer_count,
    layer_types,
    optional_int,
    routed_blocks,
)
from gpuwarden.errors import InvalidConfigError
from gpuwarden.types.model import KvGroup, LayerParameters, LinearShape, ModelSpec, MoeSpec

# --- MiMo-V2-Flash -------------------------------------------------------------------------------

_SLIDING = "sliding_attention"


def _mimo_kinds(cfg: Config, n_layers: int) -> list[str]:
    """``layer_types`` as MiMoV2FlashConfig.__post_init__ builds it: block 0 and every 6th full."""
    kinds = layer_types(cfg, n_layers)
    if kinds is not None:
        return kinds
    return ["full_attention" if i == 0 or (i + 1) % 6 == 0 else _SLIDING for i in range(n_layers)]


def _mimo_window(cfg: Config) -> int:
    """``sliding_window``; a ``sliding_window_size`` kwarg wins as that + 1 (the config class)."""
    size = optional_int(cfg, "sliding_window_size")
    if size is not None:
        return size + 1
    return field_int(cfg, "sliding_window", default=129)


def _mimo_attention(
    cfg: Config, h: int, heads: int, kv_heads: int, dims: tuple[int, int]
) -> tuple[LinearShape, ...]:
    """MiMoV2FlashAttention's q/k (``head_dim``), v (``v_head_dim``) and bias-free o_proj for
    ``kv_heads`` KV heads."""
    head_dim, v_dim = dims
    bias = field_bool(cfg, "attention_bias", False)
    return (
        LinearShape("q_proj", h, heads * head_dim, bias=bias, part=ATTENTION),
        LinearShape("k_proj", h, kv_heads * head_dim, bias=bias, part=ATTENTION),
        LinearShape("v_proj", h, kv_heads * v_dim, bias=bias, part=ATTENTION),
        LinearShape("o_proj", heads * v_dim, h, part=ATTENTION),
    )


def _mimo_moe(cfg: Config, n_layers: int, sparse: list[bool]) -> MoeSpec:
    """DeepSeek-V3's routed experts without shared ones; the leading dense blocks counted."""
    return moe_spec(
        # attribute_map: a num_local_experts key is set onto n_routed_experts
        experts=field_int(cfg, "num_local_experts", "n_routed_experts", default=256),
        top_k=field_int(cfg, "num_experts_per_tok", default=8),
        expert_i=field_int(cfg, "moe_intermediate_size", default=2048),
        first_dense=next((i for i, routes in enumerate(sparse) if routes), n_layers),
    )


def _mimo_groups(
    kinds: list[str], kv_heads: int, dims: tuple[int, int], window: int
) -> tuple[KvGroup, ...]:
    """Sliding blocks cache 2·kv heads over the window, full blocks kv heads over every token."""
    head_dim, v_dim = dims
    sliding = kinds.count(_SLIDING)
    groups = (
        KvGroup(sliding, 2 * kv_heads, head_dim, window, v_head_dim=v_dim),
        KvGroup(len(kinds) - sliding, kv_heads, head_dim, None, v_head_dim=v_dim),
    )
    return tuple(group for group in groups if group.layers)


def _hub_keys_agree(cfg: Config, kinds: list[str], sparse: list[bool], kv_heads: int) -> None:
    """The published config.json also spells the layout in the remote code's keys, which
    MiMoV2FlashConfig ignores: where they say otherwise than what transformers builds, the
    checkpoint is not the model transformers (and this count) describes, so it is refused."""
    said = {
        "hybrid_layer_pattern": [int(kind == _SLIDING) for kind in kinds],
        "moe_layer_freq": [int(routes) for routes in sparse],
        "swa_num_key_value_heads": 2 * kv_heads,
        "add_full_attention_sink_bias": False,
        "add_swa_attention_sink_bias": True,
    }
    for key, built in said.items():
        if key in cfg and cfg[key] is not None and cfg[key] != built:
            raise InvalidConfigError(
                f"field {key!r} is {cfg[key]!r}, but transformers' MiMoV2FlashConfig ignores it "
                f"and builds {built!r}",
                reference="unsupported-architecture",
                hint="the remote-code layout differs from what transformers 5 builds; `--exact` "
                "traces the model the checkpoint loads into",
            )


def _mimo_blocks(
    cfg: Config,
    sizes: tuple[int, int, int, int],
    dims: tuple[int, int],
    kinds: Iterable[tuple[str, bool]],
    moe: MoeSpec,
) -> tuple[LayerParameters, ...]:
    """Per (attention kind, routes?) block: MiMo attention (twice the KV heads when sliding) and
    the dense MLP or the routed experts; ``sizes`` are hidden, heads, KV heads, dense width."""
    h, heads, kv_heads, intermediate = sizes
    dense_mlp = gated_mlp(h, intermediate)
    experts = routed_experts(h, moe.expert_intermediate_size, moe.num_experts)
    layers = []
    for kind, routes in kinds:
        attn = _mimo_attention(cfg, h, heads, kv_heads * (2 if kind == _SLIDING else 1), dims)
        block = (
            moe_layer(attn, (), experts, router=moe.num_experts * h, norms=2 * h)
            if routes
            else dense_layer(attn, dense_mlp, norms=2 * h)
        )
        # sliding blocks learn one attention-sink logit per head
        layers.append(replace(block, other=heads) if kind == _SLIDING else block)
    return tuple(layers)


def mimo_v2_flash(name: str, cfg: Config, source: str) -> ModelSpec:
    """MiMo-V2-Flash (``mimo_v2_flash``; transformers 5.24 MiMoV2FlashForCausalLM); the defaults
    are MiMoV2FlashConfig's (and Glm4MoeConfig's it inherits)."""
    h = field_int(cfg, "hidden_size", default=4096)
    n_layers = layer_count(cfg, "num_hidden_layers", default=48)
    heads = field_int(cfg, "num_attention_heads", default=64)
    kv_heads = field_int(cfg, "num_key_value_heads", default=4)
    dims = (field_int(cfg, "head_dim", default=192), field_int(cfg, "v_head_dim", default=128))
    divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
    divisible(("num_attention_heads", heads), ("2 × num_key_value_heads", 2 * kv_heads))
    kinds = _mimo_kinds(cfg, n_layers)
    # mlp_layer_types, by default the first block dense and the rest routed
    sparse = routed_blocks(cfg, n_layers, 1)
    _hub_keys_agree(cfg, kinds, sparse, kv_heads)
    moe = _mimo_moe(cfg, n_layers, sparse)
    intermediate = field_int(cfg, "intermediate_size", default=16_384)
    sizes = (h, heads, kv_heads, intermediate)
    layers = _mimo_blocks(cfg, sizes, dims, zip(kinds, sparse, strict=True), moe)
    window = _mimo_window(cfg)
    groups = _mimo_groups(kinds, kv_heads, dims, window)
    main = max(groups, key=lambda g: g.layers)
    shape = Shape(
        h,
        n_layers,
        heads,
        main.num_kv_heads,
        dims[0],
        intermediate,
        field_int(cfg, "vocab_size", default=152_576),
        field_bool(cfg, "tie_word_embeddings", False),
    )
    sliding = kinds.count(_SLIDING)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "mimo_v2_flash",
        shape,
        layers,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 131_072),
        sliding_window=window if sliding else None,
        sliding_window_layers=sliding,
        moe=moe,
        kv_groups=groups,
    )
