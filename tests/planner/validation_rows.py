"""benchmarks/data/validation.csv's rows as the accuracy tables map and plan them, for the
held-out batch modules: mapping every row takes a second, so it is done once per test process."""

from __future__ import annotations

import functools

from benchmarks.measured_rows import MappedRow, map_validation

from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import MemoryPlan


@functools.cache
def mapped_rows() -> dict[str, MappedRow]:
    return {m.row.id: m for m in map_validation()}


@functools.cache
def planned(row: str) -> MemoryPlan:
    mapped = mapped_rows()[row]
    assert mapped.request is not None, mapped.error
    return plan_memory(mapped.request)


def component_bytes(plan: MemoryPlan, key: str) -> int:
    """A plan component's bytes; 0 when the plan has no such component."""
    return next((c.bytes for c in plan.components if c.key == key), 0)
