"""CUDA context, cuBLAS, NCCL and allocator: what separates the three tools' readings."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.overheads import (
    DRIVER_FIXED,
    STACK_BYTES_PER_THREAD,
    cublas_workspace,
    cuda_context,
)
from gpuwarden.types.plan import Mode, Optimizer, PlanRequest, Precision
from gpuwarden.units import MIB


def test_bare_context_calibration_matches_the_h100_capture(fixtures: Path) -> None:
    # Two memhog processes on an H100 SXM (driver 590.48.01) use 2566 and 1542 MiB: the same
    # per-process overhead on top of 2048 and 1024 MiB allocations.
    csv = (
        fixtures
        / "nvidia-smi"
        / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.query-compute-apps.csv"
    )
    used = [int(line.rsplit(",", 1)[1].split()[0]) for line in csv.read_text().splitlines()[1:]]
    memhog = sorted(u for u in used if u < 4096)
    assert memhog[1] - memhog[0] == 1024
    bare = memhog[0] - 1024
    assert bare * MIB == DRIVER_FIXED + 132 * 2048 * STACK_BYTES_PER_THREAD
    h100 = cuda_context(resolve_gpu("H100 80GB"))
    a100 = cuda_context(resolve_gpu("A100 80GB"))
    assert h100.bytes > a100.bytes  # more SMs, more local memory reserved


def test_cublas_workspace_sizes() -> None:
    # PyTorch default CUBLAS_WORKSPACE_CONFIG ":4096:2:16:8"; 32 MiB per handle on Hopper
    assert cublas_workspace(resolve_gpu("A100 80GB"), 1) == 4096 * 1024 * 2 + 16 * 1024 * 8
    assert cublas_workspace(resolve_gpu("H100 80GB"), 2) == 64 * MIB


def test_three_readings_are_ordered_and_explained() -> None:
    gpu = resolve_gpu("H100 80GB")
    plan = plan_memory(
        PlanRequest(model=resolve_model("Llama-2-7b-hf"), gpu=gpu, num_gpus=8, zero_stage=3)
    )
    p = plan.predicted
    assert p.max_allocated_bytes < p.max_reserved_bytes < p.nvidia_smi_used_bytes
    assert p.max_active_bytes == p.max_allocated_bytes
    outside = p.nvidia_smi_used_bytes - p.max_reserved_bytes
    # nvidia-smi adds what lives outside PyTorch's allocator: the context and NCCL's buffers
    context = cuda_context(gpu).bytes
    assert outside > context
    assert plan.peak_bytes == p.nvidia_smi_used_bytes == sum(plan.at_peak().values())


def test_paged_optimizer_states_are_outside_the_allocator() -> None:
    spec = resolve_model("Llama-3.1-8B")
    base = {"model": spec, "precision": Precision.BF16, "seq_len": 2048}
    paged = plan_memory(PlanRequest(**base, optimizer=Optimizer.PAGED_ADAMW_8BIT))  # type: ignore[arg-type]
    plain = plan_memory(PlanRequest(**base, optimizer=Optimizer.ADAMW_8BIT))  # type: ignore[arg-type]
    states = plain.component("optimizer_states")
    assert paged.component("optimizer_states") == states
    assert plain.predicted.max_allocated_bytes - paged.predicted.max_allocated_bytes == states


def test_inference_has_one_cublas_handle_and_no_gradients() -> None:
    plan = plan_memory(PlanRequest(model=resolve_model("Qwen2.5-0.5B"), mode=Mode.INFER))
    assert plan.component("gradients") == 0 and plan.component("optimizer_states") == 0
    assert plan.peak_phase in {"prefill", "decode"}
