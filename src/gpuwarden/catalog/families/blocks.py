"""Building blocks shared by the family normalisers: linears of common shapes and their sums."""

from __future__ import annotations

from collections.abc import Iterable

from gpuwarden.types.model import LinearShape

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
