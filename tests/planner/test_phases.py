"""The peak is the largest phase of a step, not a sum (memory.md §2.11, §5.4)."""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.overheads import cublas_workspace
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    MemoryPlan,
    Optimizer,
    OptimizerImpl,
    PlanRequest,
    Precision,
)
from gpuwarden.units import GIB


def step(checkpointing: Checkpointing, optimizer: Optimizer) -> MemoryPlan:
    # memory.md §5.4: Llama-2-7B, s=4096, b=1, pure-bf16 params, AdamW states in bf16, traced by
    # MemTracker on CPU, where AdamW runs its single-tensor (for-loop) implementation.
    return plan_memory(
        PlanRequest(
            model=resolve_model("Llama-2-7b-hf"),
            precision=Precision.BF16,
            seq_len=4096,
            attention=Attention.SDPA,
            checkpointing=checkpointing,
            optimizer=optimizer,
            optimizer_impl=OptimizerImpl.FOR_LOOP,
        )
    )


def tensors(plan: MemoryPlan) -> float:
    """GiB of tensors, as MemTracker counts them (no cuBLAS workspace, no allocator slack)."""
    return (plan.predicted.max_allocated_bytes - cublas_workspace(None, 2)) / GIB


@pytest.mark.parametrize(
    ("checkpointing", "optimizer", "phase", "memtracker_gib", "tolerance"),
    [
        (Checkpointing.NONE, Optimizer.ADAMW, "forward", 62.01, 0.002),
        (Checkpointing.FULL, Optimizer.ADAMW, "optimizer-step", 50.69, 0.002),
        (Checkpointing.NONE, Optimizer.NONE, "forward", 36.91, 0.002),
        # MemTracker's backward peak comes a little before layer 0: 25.56 GiB
        (Checkpointing.FULL, Optimizer.NONE, "backward-end", 25.56, 0.01),
    ],
)
def test_memtracker_peaks(
    checkpointing: Checkpointing,
    optimizer: Optimizer,
    phase: str,
    memtracker_gib: float,
    tolerance: float,
) -> None:
    plan = step(checkpointing, optimizer)
    assert plan.peak_phase == phase
    assert tensors(plan) == pytest.approx(memtracker_gib, rel=tolerance)


def test_peak_is_the_largest_phase_and_components_sum_at_the_peak() -> None:
    plan = step(Checkpointing.FULL, Optimizer.ADAMW)
    totals = {p.name: p.total for p in plan.phases}
    assert max(totals.values()) == totals[plan.peak_phase] == plan.peak_bytes
    assert sum(plan.at_peak().values()) == plan.peak_bytes
    # A sum of every component's own peak over-states the job: activations and gradients do
    # not peak together under checkpointing.
    assert sum(c.bytes for c in plan.components) > plan.peak_bytes


def test_gradient_accumulation_keeps_gradients_through_the_forward() -> None:
    spec = resolve_model("Llama-2-7b-hf")
    one = plan_memory(PlanRequest(model=spec, precision=Precision.BF16, seq_len=4096))
    four = plan_memory(
        PlanRequest(model=spec, precision=Precision.BF16, seq_len=4096, grad_accum=4)
    )
    forward = {p.name: p for p in four.phases}["forward"]
    assert forward.bytes_by_component["gradients"] == spec.total_parameters * 2
    assert four.peak_bytes > one.peak_bytes
