"""DeepSpeed ZeRO-1/2 with offload_optimizer, as deepspeed/runtime/zero/stage_1_and_2.py holds it
(DeepSpeedZeroOptimizer's ``cpu_offload`` path; read at deepspeedai/DeepSpeed @02aa38c3 and
@7dee2e06, and in 2020-2023 copies: the same lines).

- ``copy_grads_in_partition`` returns before it allocates ``grads_in_partition`` (the 16-bit
  gradient partition): each reduced gradient's slice is copied to the host fp32 buffer
  (``async_inplace_copy_grad_to_fp32_buffer_from_gpu``) and its ``.grad`` set to None. ZeRO-2
  reduces from backward hooks; ZeRO-1 (overlap_comm off) in ``reduce_gradients`` after backward,
  so its 16-bit ``.grad`` all live to the end of backward. No 16-bit gradient is left at the step.
- ``__init__`` allocates ``temp_grad_buffer_for_gpu_offload``: the largest trainable parameter's
  numel in the 16-bit dtype, on the GPU.
- ``set_norm_for_param_grad_in_gpu`` takes each slice's norm on a float64 copy (8 B per element)
  before the fp32 copy (4 B) goes to the host.

V475 (deepseek-math-7b, 2x RTX 4090, ZeRO-2 + offload, bf16) is the row: its largest parameters
are the 102,400 x 4,096 embedding and untied head, one on each rank."""

from __future__ import annotations

from dataclasses import replace

from benchmarks.measured_rows import map_validation

from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import MemoryPlan, Mode, Offload, PlanRequest

BF16 = 2
FLOAT64 = 8
VOCAB_BY_HIDDEN = 102_400 * 4_096  # deepseek-math-7b's embedding and head, each


def _v475() -> PlanRequest:
    row = next(m for m in map_validation() if m.row.id == "V475")
    assert row.request is not None
    return row.request


def _phase(plan: MemoryPlan, name: str) -> dict[str, int]:
    return next(p for p in plan.phases if p.name == name).bytes_by_component


def _added(plan: MemoryPlan, without: MemoryPlan, phase: str, component: str) -> int:
    """Bytes of ``component`` at ``phase`` that ``plan`` holds beyond ``without``."""
    return _phase(plan, phase)[component] - _phase(without, phase)[component]


def test_zero2_offload_keeps_no_16bit_gradient_partition() -> None:
    offloaded = plan_memory(_v475())
    # before: the 16-bit partition, 6,910,365,696 x 2 B / 2 ranks = 6.44 GiB, at the step
    assert _phase(offloaded, "optimizer-step")["gradients"] == 0
    assert _phase(offloaded, "backward-end")["gradients"] == 0
    assert "zero_offload_gradients" in offloaded.notes


def test_zero2_offload_holds_the_staging_buffer_all_run() -> None:
    request = _v475()
    offloaded = plan_memory(request)
    kept = plan_memory(replace(request, offload=Offload.NONE))
    staging = VOCAB_BY_HIDDEN * BF16  # 0.78 GiB
    for phase in ("forward", "backward", "backward-end", "optimizer-step"):
        assert _added(offloaded, kept, phase, "communication") == staging, phase
    comm = next(c for c in offloaded.components if c.key == "communication")
    assert "temp_grad_buffer_for_gpu_offload 0.78 GiB" in comm.detail


def test_zero2_offload_copies_the_largest_slice_in_float64_for_its_norm() -> None:
    request = _v475()
    offloaded = plan_memory(request)
    kept = plan_memory(replace(request, offload=Offload.NONE))
    norm_copy = VOCAB_BY_HIDDEN * FLOAT64  # 3.12 GiB: the embedding (or head) on its rank
    for phase in ("backward", "backward-end"):  # ZeRO-2 reduces from hooks: both
        assert _added(offloaded, kept, phase, "temporaries") == norm_copy, phase
    # no GPU step under offload (as before)
    assert _phase(offloaded, "optimizer-step")["temporaries"] == 0


def test_v475_lands_between_the_old_plan_and_its_card() -> None:
    # logged: OOM on 24 GB cards ("short by 1.56G"); before this model 23.28 GiB nvidia-smi
    # (`tight`, the optimizer step); now the backward: 12.87 parameters + 1.71 buffers + 3.16
    # temporaries + ... = 21.17 GiB: still planned to fit, the OOM stays missed
    plan = plan_memory(_v475())
    assert plan.peak_phase == "backward"
    assert round(plan.predicted.nvidia_smi_used_bytes / 2**30, 2) == 21.17


def test_zero1_offload_keeps_every_grad_through_backward_and_none_at_the_step() -> None:
    request = replace(_v475(), zero_stage=1)
    plan = plan_memory(request)
    trainable = plan.total_parameters
    spec = request.model
    # ZeRO-1 reduces after backward: all 16-bit .grad alive but the first block's and the
    # embedding's, still being computed at the end of backward
    first_block = trainable / len(spec.parameters.layers)
    late = first_block + spec.parameters.embedding
    assert _phase(plan, "backward-end")["gradients"] == int((trainable - late) * BF16)
    assert _phase(plan, "optimizer-step")["gradients"] == 0
    kept = plan_memory(replace(request, offload=Offload.NONE))
    # its reduction runs after backward: the float64 copy at backward-end only
    assert _added(plan, kept, "backward", "temporaries") == 0
    assert _added(plan, kept, "backward-end", "temporaries") == VOCAB_BY_HIDDEN * FLOAT64


def test_zero3_offload_is_not_this_path() -> None:
    plan = plan_memory(replace(_v475(), zero_stage=3))
    comm = next(c for c in plan.components if c.key == "communication")
    assert "temp_grad_buffer_for_gpu_offload" not in comm.detail
    assert "zero_offload_gradients" not in plan.notes


def test_lora_zero2_offload_stages_the_largest_adapter_at_most() -> None:
    request = replace(_v475(), mode=Mode.LORA)
    offloaded = plan_memory(request)
    kept = plan_memory(replace(request, offload=Offload.NONE))
    added = _added(offloaded, kept, "optimizer-step", "communication")
    assert 0 < added <= offloaded.trainable_parameters * 4
