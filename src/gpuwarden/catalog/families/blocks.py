"""Building blocks shared by the family normalisers: linears of common shapes and their sums,
blocks made of them, and the ``ModelSpec`` that holds them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict, Unpack

from gpuwarden.catalog.families.fields import (
    Config,
    checkpoint_dtype,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    invalid,
    optional_int,
)
from gpuwarden.types.model import (
    KvGroup,
    LayerParameters,
    LinearShape,
    MlaSpec,
    MlpKind,
    ModelSpec,
    MoeSpec,
    NormKind,
    ParameterBreakdown,
    PositionKind,
    StateSpec,
    Structure,
)

ATTENTION = "attention"
CROSS_ATTENTION = "cross_attention"
MLP = "mlp"
SHARED_EXPERTS = "shared_experts"
EXPERTS = "experts"


def total(linears: Iterable[LinearShape]) -> int:
    return sum(lin.parameters for lin in linears)


def qkvo(
    hidden: int,
    q_width: int,
    kv_width: int,
    *,
    qkv_bias: bool,
    o_bias: bool,
    names: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "o_proj"),
    part: str = ATTENTION,
) -> tuple[LinearShape, ...]:
    """Separate q, k, v and output projections (Llama, Gemma, Qwen2, Phi, T5, BERT)."""
    q, k, v, o = names
    return (
        LinearShape(q, hidden, q_width, bias=qkv_bias, part=part),
        LinearShape(k, hidden, kv_width, bias=qkv_bias, part=part),
        LinearShape(v, hidden, kv_width, bias=qkv_bias, part=part),
        LinearShape(o, q_width, hidden, bias=o_bias, part=part),
    )


def gated_mlp(
    hidden: int,
    inner: int,
    *,
    bias: bool = False,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
    part: str = MLP,
) -> tuple[LinearShape, ...]:
    """SwiGLU / GeGLU: gate and up (hidden → inner), down (inner → hidden)."""
    gate, up, down = names
    return (
        LinearShape(gate, hidden, inner, bias=bias, part=part),
        LinearShape(up, hidden, inner, bias=bias, part=part),
        LinearShape(down, inner, hidden, bias=bias, part=part),
    )


def plain_mlp(
    hidden: int, inner: int, *, bias: bool, names: tuple[str, str], part: str = MLP
) -> tuple[LinearShape, ...]:
    """fc1 → activation → fc2."""
    up, down = names
    return (
        LinearShape(up, hidden, inner, bias=bias, part=part),
        LinearShape(down, inner, hidden, bias=bias, part=part),
    )


def routed_experts(hidden: int, inner: int, count: int) -> tuple[LinearShape, ...]:
    """transformers ≥ 5 keeps routed experts as fused 3-D parameters of one ``experts`` module."""
    return (
        LinearShape(
            "experts.gate_up_proj", hidden, 2 * inner, count=count, expert=True, part=EXPERTS
        ),
        LinearShape("experts.down_proj", inner, hidden, count=count, expert=True, part=EXPERTS),
    )


def moe_spec(
    *,
    experts: int,
    top_k: int,
    expert_i: int,
    n_shared: int = 0,
    shared_i: int = 0,
    first_dense: int = 0,
) -> MoeSpec:
    """The MoE layout of ``experts`` routed experts of width ``expert_i``, ``top_k`` per token (a
    shared expert counts only when it has a width); refused when top_k exceeds the experts."""
    return routable(
        MoeSpec(
            num_experts=experts,
            experts_per_token=top_k,
            expert_intermediate_size=expert_i,
            num_shared_experts=n_shared if shared_i else 0,
            shared_intermediate_size=shared_i if n_shared else 0,
            first_dense_layers=first_dense,
        )
    )


def routable(moe: MoeSpec) -> MoeSpec:
    """``moe`` when its router can pick its top-k: torch.topk over the router's scores of
    num_experts experts raises "selected index k out of range" for a larger k, so no such model
    loads, let alone runs."""
    if moe.experts_per_token > moe.num_experts:
        raise invalid(
            f"num_experts_per_tok={moe.experts_per_token} exceeds the {moe.num_experts} "
            "routed experts"
        )
    return moe


def dense_layer(
    attn: tuple[LinearShape, ...], mlp: tuple[LinearShape, ...], norms: int
) -> LayerParameters:
    """A block with a dense MLP: its attention and MLP linears plus ``norms`` norm parameters."""
    return LayerParameters(
        attention=total(attn),
        mlp=total(mlp),
        experts=0,
        router=0,
        norms=norms,
        linears=attn + mlp,
    )


def moe_layer(
    attn: tuple[LinearShape, ...],
    shared: tuple[LinearShape, ...],
    experts: tuple[LinearShape, ...],
    *,
    router: int,
    norms: int,
) -> LayerParameters:
    """A mixture-of-experts block: shared experts (if any) count as its MLP."""
    return LayerParameters(
        attention=total(attn),
        mlp=total(shared),
        experts=total(experts),
        router=router,
        norms=norms,
        linears=attn + shared + experts,
    )


@dataclass(frozen=True, slots=True)
class Shape:
    """The dimensions every family fills into ``ModelSpec``, in its field order."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool


def decoder_shape(
    cfg: Config,
    *,
    kv_default: int | None,
    head_dim_default: int | None,
    tied_default: bool,
    vocab_default: int | None = None,
) -> Shape:
    """The sizes of a Llama-shaped decoder (hidden_size, num_hidden_layers, num_attention_heads,
    num_key_value_heads, head_dim, intermediate_size, vocab_size, tie_word_embeddings) with its
    config class's defaults; ``None`` means "= heads" / "hidden // heads". An explicit null
    num_key_value_heads means = heads and a null head_dim hidden // heads (what the config
    classes' __post_init__ sets); a head_dim the config states wins over hidden // heads."""
    h, n_layers, heads = core_sizes(cfg)
    if "num_key_value_heads" in cfg and cfg["num_key_value_heads"] is None:
        kv_default = None
    kv_heads = field_int(cfg, "num_key_value_heads", default=kv_default or heads)
    if "head_dim" in cfg and cfg["head_dim"] is None:
        head_dim_default = None
    if head_dim_default is None and cfg.get("head_dim") is None and heads > h:
        raise invalid(f"num_attention_heads={heads} exceeds hidden_size={h}")
    head_dim = field_int(cfg, "head_dim", default=head_dim_default or h // heads)
    divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
    return Shape(
        h,
        n_layers,
        heads,
        kv_heads,
        head_dim,
        field_int(cfg, "intermediate_size"),
        field_int(cfg, "vocab_size", default=vocab_default),
        field_bool(cfg, "tie_word_embeddings", tied_default),
    )


def shape_attention(shape: Shape, *, bias: bool) -> tuple[LinearShape, ...]:
    """q/k/v/o sized by ``shape`` (heads and KV heads of ``head_dim``), all four biased or not."""
    hd = shape.head_dim
    return qkvo(shape.hidden, shape.heads * hd, shape.kv_heads * hd, qkv_bias=bias, o_bias=bias)


def breakdown(
    shape: Shape,
    layers: tuple[LayerParameters, ...],
    *,
    final_norm: int,
    position_embedding: int = 0,
    head_bias: int = 0,
    other: int = 0,
) -> ParameterBreakdown:
    """Token embedding, an LM head of vocab × hidden unless tied (plus ``head_bias``), blocks."""
    embedding = shape.vocab * shape.hidden
    return ParameterBreakdown(
        embedding=embedding,
        position_embedding=position_embedding,
        lm_head=(0 if shape.tied else embedding) + head_bias,
        final_norm=final_norm,
        layers=layers,
        other=other,
    )


class SpecOptions(TypedDict, total=False):
    """``ModelSpec`` fields that only some families set (the rest keep their defaults)."""

    max_position_embeddings: int | None
    sliding_window: int | None
    sliding_window_layers: int
    parallel_attention_mlp: bool
    moe: MoeSpec | None
    mla: MlaSpec | None
    num_encoder_layers: int
    position_encoding: PositionKind
    state: StateSpec | None
    kv_groups: tuple[KvGroup, ...]


def model_spec(
    name: str,
    cfg: Config,
    source: str,
    model_type: str,
    shape: Shape,
    parameters: ParameterBreakdown,
    *,
    norm: NormKind,
    mlp: MlpKind,
    structure: Structure = Structure.DECODER,
    **options: Unpack[SpecOptions],
) -> ModelSpec:
    """The ``ModelSpec`` of ``cfg``: the shared fields, then what ``options`` adds."""
    return ModelSpec(
        name=name,
        model_type=model_type,
        structure=structure,
        hidden_size=shape.hidden,
        num_layers=shape.layers,
        num_heads=shape.heads,
        num_kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        intermediate_size=shape.intermediate,
        vocab_size=shape.vocab,
        tied_embeddings=shape.tied,
        norm=norm,
        mlp=mlp,
        parameters=parameters,
        checkpoint_dtype=checkpoint_dtype(cfg),
        source=source,
        raw_config=dict(cfg),
        **options,
    )


def stacked_decoder(
    name: str,
    cfg: Config,
    source: str,
    model_type: str,
    shape: Shape,
    layers: tuple[LayerParameters, ...],
    *,
    norm: NormKind,
    mlp: MlpKind,
    final_norm: int,
    head_bias: int = 0,
    other: int = 0,
    **options: Unpack[SpecOptions],
) -> ModelSpec:
    """A decoder of ``layers`` under one final norm of ``final_norm`` parameters: the parameter
    breakdown and the spec; max_position_embeddings is the config's unless ``options`` names
    it."""
    options.setdefault("max_position_embeddings", optional_int(cfg, "max_position_embeddings"))
    return model_spec(
        name,
        cfg,
        source,
        model_type,
        shape,
        breakdown(shape, layers, final_norm=final_norm, head_bias=head_bias, other=other),
        norm=norm,
        mlp=mlp,
        **options,
    )


def rms_gated_decoder(
    name: str,
    cfg: Config,
    source: str,
    model_type: str,
    shape: Shape,
    layers: tuple[LayerParameters, ...],
    *,
    other: int = 0,
    **options: Unpack[SpecOptions],
) -> ModelSpec:
    """A decoder of RMSNorm + gated-MLP blocks under a final RMSNorm (Llama's layout and its
    descendants)."""
    return stacked_decoder(
        name,
        cfg,
        source,
        model_type,
        shape,
        layers,
        norm=NormKind.RMS,
        mlp=MlpKind.GATED,
        final_norm=shape.hidden,
        other=other,
        **options,
    )
