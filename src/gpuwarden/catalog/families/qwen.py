"""Qwen3 (dense), Qwen3-MoE and Qwen2-MoE: RMSNorm + RoPE + SwiGLU decoders.

Qwen3 and Qwen3-MoE normalise each query and key head (``q_norm`` / ``k_norm``: an RMSNorm of
``head_dim`` weights each, per block) and take ``head_dim`` from the config (128 in every
published size, independent of hidden / heads); q/k/v/o carry biases only under
``attention_bias``. Qwen2-MoE has Qwen2's q/k/v biases (``qkv_bias``), no head norms, and a shared
expert next to the routed ones, scaled per token by ``sigmoid(shared_expert_gate(x))``.

MoE blocks: block ``i`` routes (``num_experts`` experts of ``moe_intermediate_size``, top
``num_experts_per_tok``) unless ``i`` is in ``mlp_only_layers`` or ``(i + 1) %
decoder_sparse_step != 0``; the others have a dense SwiGLU of ``intermediate_size``. The router
is a bare weight (not an ``nn.Linear``), so it is no LoRA / quantization target.

Defaults are each family's ``transformers`` 5.24 config defaults (configuration_qwen3*.py,
configuration_qwen2_moe.py), so a config that leaves a field out counts the same parameters as
``AutoConfig.for_model`` would.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.catalog.families.blocks import (
    SHARED_EXPERTS,
    Shape,
    dense_layer,
    gated_mlp,
    moe_layer,
    qkvo,
    rms_gated_decoder,
    routed_experts,
)
from gpuwarden.catalog.families.fields import (
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    field_str,
    invalid,
    layer_types,
    optional_int,
    whole_numbers,
)
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    ModelSpec,
    MoeSpec,
)


@dataclass(frozen=True, slots=True)
class _Defaults:
    """A family's transformers 5.24 config defaults for the fields that change the count."""

    kv_heads: int  # num_key_value_heads (a fixed number, not "= heads")
    head_dim: int | None  # None: hidden // heads (the attention's getattr fallback)
    head_norms: bool  # q_norm / k_norm
    intermediate: int
    experts: int
    experts_per_token: int
    expert_intermediate: int


_DEFAULTS = {
    "qwen3": _Defaults(
        kv_heads=32,
        head_dim=128,
        head_norms=True,
        intermediate=22016,
        experts=0,
        experts_per_token=0,
        expert_intermediate=0,
    ),
    "qwen3_moe": _Defaults(
        kv_heads=4,
        head_dim=None,
        head_norms=True,
        intermediate=6144,
        experts=128,
        experts_per_token=8,
        expert_intermediate=768,
    ),
    "qwen2_moe": _Defaults(
        kv_heads=16,
        head_dim=None,
        head_norms=False,
        intermediate=5632,
        experts=60,
        experts_per_token=4,
        expert_intermediate=1408,
    ),
}
_SHARED_EXPERT_INTERMEDIATE = 5632  # Qwen2-MoE's shared_expert_intermediate_size default


def _sliding(model_type: str, cfg: Config, n_layers: int) -> tuple[int | None, int]:
    """(window, number of windowed blocks) as transformers 5.24 builds the masks and the cache.

    All three window only under ``use_sliding_window`` (false in every published config).
    Qwen3 windows the blocks from ``max_window_layers`` on; Qwen2-MoE the even-indexed blocks
    below ``max_window_layers``; both follow an explicit ``layer_types`` (checked even when no
    block slides). Qwen3-MoE has no per-layer types: every block slides.
    """
    explicit = None if model_type == "qwen3_moe" else layer_types(cfg, n_layers)
    if not field_bool(cfg, "use_sliding_window", False):
        return None, 0
    window = optional_int(cfg, "sliding_window", 4096)
    first = field_int(cfg, "max_window_layers", default=28, minimum=0)
    if model_type == "qwen3_moe":
        count = n_layers
    elif explicit is not None:
        count = explicit.count("sliding_attention")
    elif model_type == "qwen3":
        count = max(n_layers - first, 0)
    else:
        count = sum(1 for i in range(min(first, n_layers)) if i % 2 == 0)
    return (window, count) if window and count else (None, 0)


def qwen_moe_routed_blocks(cfg: Config, n_layers: int, experts: int) -> tuple[bool, ...]:
    """Which blocks route, as Qwen*MoeDecoderLayer.__init__ decides (``mlp_only_layers``, every
    ``decoder_sparse_step``-th block; none without experts)."""
    dense_only = frozenset(whole_numbers(cfg, "mlp_only_layers") or ())
    step = field_int(cfg, "decoder_sparse_step", default=1)
    return tuple(
        i not in dense_only and experts > 0 and (i + 1) % step == 0 for i in range(n_layers)
    )


def _attention(model_type: str, cfg: Config, h: int, q: int, kv: int) -> tuple[LinearShape, ...]:
    if model_type == "qwen2_moe":
        return qkvo(h, q, kv, qkv_bias=field_bool(cfg, "qkv_bias", True), o_bias=False)
    bias = field_bool(cfg, "attention_bias", False)
    return qkvo(h, q, kv, qkv_bias=bias, o_bias=bias)


def _shared_expert(h: int, inner: int) -> tuple[LinearShape, ...]:
    """Qwen2-MoE's shared expert and its one-output gate; the gate is listed first so that the
    down projection stays the part's output Linear (planner wiring)."""
    gate = LinearShape("shared_expert_gate", h, 1, part=SHARED_EXPERTS)
    return (gate, *gated_mlp(h, inner, part=SHARED_EXPERTS))


def _experts(model_type: str, cfg: Config) -> int:
    """Routed experts per MoE block (0 turns every block dense, as in transformers).
    Qwen3-MoE maps ``num_experts`` onto ``num_local_experts`` (what transformers 5 writes)."""
    names = ("num_experts", "num_local_experts") if model_type == "qwen3_moe" else ("num_experts",)
    return field_int(cfg, *names, default=_DEFAULTS[model_type].experts, minimum=0)


def _moe(model_type: str, cfg: Config, experts: int, sparse: tuple[bool, ...]) -> MoeSpec:
    d = _DEFAULTS[model_type]
    shared = model_type == "qwen2_moe"
    moe = MoeSpec(
        num_experts=experts,
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=d.experts_per_token),
        expert_intermediate_size=field_int(
            cfg, "moe_intermediate_size", default=d.expert_intermediate
        ),
        num_shared_experts=1 if shared else 0,
        shared_intermediate_size=(
            field_int(cfg, "shared_expert_intermediate_size", default=_SHARED_EXPERT_INTERMEDIATE)
            if shared
            else 0
        ),
        first_dense_layers=sparse.index(True),
        layer_frequency=field_int(cfg, "decoder_sparse_step", default=1),
    )
    if moe.experts_per_token > moe.num_experts:
        raise invalid(
            f"num_experts_per_tok={moe.experts_per_token} exceeds num_experts={moe.num_experts}"
        )
    return moe


def _blocks(
    model_type: str, cfg: Config, h: int, attn: tuple[LinearShape, ...], norms: int, n_layers: int
) -> tuple[tuple[LayerParameters, ...], MoeSpec | None]:
    dense = dense_layer(attn, gated_mlp(h, _intermediate(model_type, cfg)), norms=norms)
    experts = 0 if model_type == "qwen3" else _experts(model_type, cfg)
    sparse = qwen_moe_routed_blocks(cfg, n_layers, experts)
    if not any(sparse):
        return (dense,) * n_layers, None
    moe = _moe(model_type, cfg, experts, sparse)
    shared = _shared_expert(h, moe.shared_intermediate_size) if moe.num_shared_experts else ()
    routed = routed_experts(h, moe.expert_intermediate_size, moe.num_experts)
    moe_block = moe_layer(attn, shared, routed, router=h * moe.num_experts, norms=norms)
    return tuple(moe_block if s else dense for s in sparse), moe


def _intermediate(model_type: str, cfg: Config) -> int:
    if model_type == "qwen3":
        return field_int(cfg, "intermediate_size")  # the dense model's only MLP width
    return field_int(cfg, "intermediate_size", default=_DEFAULTS[model_type].intermediate)


def qwen(name: str, cfg: Config, source: str) -> ModelSpec:
    """Qwen3, Qwen3-MoE and Qwen2-MoE (``model_type`` picks the family)."""
    model_type = field_str(cfg, "model_type", "qwen3")
    d = _DEFAULTS[model_type]
    h, n_layers, heads = core_sizes(cfg)
    kv_heads = field_int(cfg, "num_key_value_heads", default=d.kv_heads)
    if d.head_dim is None and heads > h:
        raise invalid(f"num_attention_heads={heads} exceeds hidden_size={h}")
    head_dim = field_int(cfg, "head_dim", default=d.head_dim or h // heads)
    vocab = field_int(cfg, "vocab_size")
    tied = field_bool(cfg, "tie_word_embeddings", False)
    divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))

    attn = _attention(model_type, cfg, h, heads * head_dim, kv_heads * head_dim)
    # input and post-attention RMSNorms, plus q_norm and k_norm over one head each
    norms = 2 * h + (2 * head_dim if d.head_norms else 0)
    layers, moe = _blocks(model_type, cfg, h, attn, norms, n_layers)
    window, window_layers = _sliding(model_type, cfg, n_layers)
    shape = Shape(
        h, n_layers, heads, kv_heads, head_dim, _intermediate(model_type, cfg), vocab, tied
    )
    return rms_gated_decoder(
        name,
        cfg,
        source,
        model_type,
        shape,
        layers,
        sliding_window=window,
        sliding_window_layers=window_layers,
        moe=moe,
    )
