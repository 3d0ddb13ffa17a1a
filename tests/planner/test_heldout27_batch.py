"""Held-out batch 27 (benchmarks/data/validation.csv V510-V528): torchao / Liger-Kernel tables.

Liger-Kernel's own benchmark logs (examples/huggingface/results/*.log, FSDP1 full_shard over four
A100s, Alpaca capped at 512 tokens) print a step peak of ``torch.cuda.max_memory_allocated()``
after every step. For four of them every logged step prints the same figure to within 0.4 MiB
whatever the step's tokens, so the peak is not set by the activations: it is the optimizer step,
where each rank holds its fp32 shard of weights, gradients and both AdamW states plus the foreach
AdamW's intermediates (torch.optim.AdamW's documentation: "the foreach implementation uses
~ sizeof(params) more peak memory than the for-loop version"). The plan's optimizer-step phase
is compared with those figures here; planner_accuracy.py compares the plan's overall peak (at
the 512-token cap), a different phase."""

from __future__ import annotations

import pytest
from benchmarks.measured_rows import map_validation

from gpuwarden.planner import plan_memory

GIB = 2**30
# Components of a phase that are not torch tensors: the CUDA context / libraries, and the
# allocator's cached slack (reserved − allocated).
NOT_ALLOCATED = ("runtime_overhead", "allocator_cache")
# The logs print MiB to two decimals; the flat rows' steps spread over at most 0.35 MiB.
RELATIVE_TOLERANCE = 0.002
# Rows whose every logged step prints the same allocated peak (the row's notes quote the range).
FLAT_ROWS = ("V517", "V519", "V520", "V521")


def _optimizer_step_allocated(row_id: str) -> tuple[float, float]:
    (mapped,) = [m for m in map_validation() if m.row.id == row_id]
    assert mapped.request is not None
    plan = plan_memory(mapped.request)
    (step,) = [phase for phase in plan.phases if phase.name == "optimizer-step"]
    allocated = sum(
        size for key, size in step.bytes_by_component.items() if key not in NOT_ALLOCATED
    )
    assert mapped.row.measured_gib is not None
    return allocated / GIB, mapped.row.measured_gib


@pytest.mark.parametrize("row_id", FLAT_ROWS)
def test_flat_liger_log_peak_is_the_planned_optimizer_step(row_id: str) -> None:
    planned, logged = _optimizer_step_allocated(row_id)
    assert planned == pytest.approx(logged, rel=RELATIVE_TOLERANCE)
