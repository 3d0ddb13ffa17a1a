"""``plan_memory``: the plan, plus the fixes when it does not fit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpuwarden.planner.fixes import fixes_for
from gpuwarden.planner.plan import compute_plan
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.plan import MemoryPlan, PlanRequest


def plan_memory(request: PlanRequest, *, gpus: Sequence[GpuSpec] = ()) -> MemoryPlan:
    """Per-GPU memory of ``request``; when it does not fit, the OOM-playbook fixes that apply.

    ``gpus`` are the candidates for the "bigger GPU" fix (usually the catalog's GPUs).
    """
    plan = compute_plan(request)
    if plan.fits is False:
        plan = replace(plan, fixes=fixes_for(plan, gpus))
    return plan
