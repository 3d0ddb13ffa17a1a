"""Peak transient bytes of one block's forward without autograd: inference, evaluation and
generation during training (memory.md §2.9)."""

from __future__ import annotations

from gpuwarden.planner.layout import Layout
from gpuwarden.planner.precision import Recipe
from gpuwarden.types.plan import Attention, PlanRequest


def working_set(request: PlanRequest, rc: Recipe, lay: Layout, tokens: int, context: int) -> int:
    """Peak transient bytes of one block's forward over ``tokens`` tokens (no autograd)."""
    spec = request.model
    b = rc.act_bytes
    h = spec.hidden_size
    t = lay.tp
    q = spec.num_heads * spec.head_dim / t
    kv = spec.kv_width / t
    attention = tokens * (q + 2 * kv + q) * b
    if request.attention is Attention.EAGER:
        attention += tokens * context * spec.num_heads / t * (4 + b)
    if spec.moe is not None:
        k, i = spec.moe.experts_per_token, spec.moe.expert_intermediate_size / t
        mlp = tokens * (spec.moe.num_experts * 4 + k * (2 * h + 3 * i) * b)
    elif spec.mlp.value == "gated":
        mlp = tokens * 3 * spec.intermediate_size / t * b
    else:
        mlp = tokens * 2 * spec.intermediate_size / t * b
    return int(2 * tokens * h * b + max(attention, mlp))
