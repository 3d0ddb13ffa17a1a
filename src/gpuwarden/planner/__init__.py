"""Capacity planning: per-GPU memory of training, fine-tuning and inference. Pure functions.

``plan_memory(request)`` answers "will it fit?" for one configuration; ``fit(request, gpus,
instances)`` searches GPUs and parallel layouts for the ones that do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuwarden.planner.memory import plan_memory
from gpuwarden.planner.plan import compute_plan

if TYPE_CHECKING:
    from gpuwarden.planner.roofline import StepTime, step_time
    from gpuwarden.planner.search import fit

__all__ = ["StepTime", "compute_plan", "fit", "plan_memory", "step_time"]

_LAZY = {
    "fit": "gpuwarden.planner.search",
    "StepTime": "gpuwarden.planner.roofline",
    "step_time": "gpuwarden.planner.roofline",
}


def __getattr__(name: str) -> Any:
    # `gpuwarden plan` without --fit never needs the search: keep its start-up short.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuwarden.planner' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
