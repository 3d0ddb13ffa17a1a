"""``--framework megatron --offload optimizer``: Megatron's ``--optimizer-cpu-offload``, as read in
Megatron-LM (planner/stacks.py, module docstring).

``arguments.py`` refuses the offload without ``--use-precision-aware-optimizer``; under it the
distributed optimizer hands the 16-bit shards to ``HybridDeviceOptimizer`` and points their
``decoupled_grad`` at the main_grad buffer's shard (``distrib_optimizer.py``
``_copy_model_grads_to_main_grads``: a view, no ``.float()`` copy), and the hybrid optimizer
(``param_update_in_fp32=True``, ``core/optimizer/__init__.py``) keeps fp32 params, Adam states
and pinned fp32 gradient copies on the host (``hybrid_optimizer.py`` ``_set_sub_optimizer_grads``
copies the GPU gradient into them). So the GPU holds the main_grad buffer and no fp32 gradient
copy, whatever the buffer's dtype, and the host holds 4 + 12 B per parameter of each rank's shard.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner.plan import compute_plan
from gpuwarden.types.plan import Framework, Offload, PlanRequest, Precision

MODEL = resolve_model("Llama-3.2-1B")
DP = 8


def _offloaded(**knobs: object) -> PlanRequest:
    base = PlanRequest(
        model=MODEL,
        num_gpus=DP,
        gpus_per_node=DP,
        zero_stage=1,
        micro_batch=1,
        seq_len=1024,
        framework=Framework.MEGATRON,
        offload=Offload.OPTIMIZER,
    )
    return replace(base, **knobs)


def _gradients(request: PlanRequest, phase: str) -> int:
    plan = compute_plan(request)
    return dict(next(p for p in plan.phases if p.name == phase).bytes_by_component)["gradients"]


# (knobs, main_grad buffer bytes per parameter)
BUFFERS = [
    ({}, 4),  # bf16-mixed: grad_reduce_in_fp32 forced on
    ({"grad_reduce_in_fp32": False}, 2),  # --no-grad-reduce-in-fp32
    ({"precision": Precision.FP16_MIXED}, 2),  # fp16: off by default
]


@pytest.mark.parametrize(("knobs", "buffer_bytes"), BUFFERS)
def test_the_step_holds_the_main_grad_buffer_only(
    knobs: dict[str, object], buffer_bytes: int
) -> None:
    """No fp32 gradient copy on the GPU at the step: the 16-bit buffer's shard goes to the host
    as it is (the planner used to add Float16Optimizer's fp32 copy, 4 B / DP, back on the GPU)."""
    params = MODEL.parameters.total
    request = _offloaded(**knobs)
    assert _gradients(request, "optimizer-step") == pytest.approx(params * buffer_bytes, rel=1e-6)
    assert _gradients(request, "forward") == pytest.approx(params * buffer_bytes, rel=1e-6)


@pytest.mark.parametrize(("knobs", "buffer_bytes"), BUFFERS)
def test_the_host_holds_each_ranks_shard_once(knobs: dict[str, object], buffer_bytes: int) -> None:
    """Per rank: fp32 main params and Adam m, v (12 B) and the pinned fp32 gradient copy (4 B) of
    its 1/DP shard; per node DP ranks of it. The planner used to put a whole unsharded fp32
    gradient on the host for every rank of a 16-bit buffer (4 B per parameter, not 4 / DP)."""
    params = MODEL.parameters.total
    plan = compute_plan(_offloaded(**knobs))
    assert plan.host_bytes == pytest.approx(DP * params * (12 + 4) / DP, rel=1e-6)


def test_without_offload_the_16_bit_buffer_is_still_copied_to_fp32_at_the_step() -> None:
    """The fix is the offload's: the distributed optimizer without it still makes
    ``main_grad.float()`` copies of its shard (2 + 4 / DP B per parameter at the step)."""
    params = MODEL.parameters.total
    request = _offloaded(grad_reduce_in_fp32=False, offload=Offload.NONE)
    assert _gradients(request, "optimizer-step") == pytest.approx(params * (2 + 4 / DP), rel=1e-6)
    assert compute_plan(request).host_bytes == 0
