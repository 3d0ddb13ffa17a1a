"""The CUDA context by module loading: lazy (CUDA >= 11.7 under PyTorch >= 1.13) or eager."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.fixes import fixes_for
from gpuwarden.planner.overheads import cuda_context, module_loading_for_cuda
from gpuwarden.planner.versions import release
from gpuwarden.types.plan import ModuleLoading, PlanRequest, Precision
from gpuwarden.units import MIB

# pytorch/pytorch PR #86509: one process creating one tensor, cudaMemGetInfo's used bytes with
# CUDA_MODULE_LOADING=LAZY and with DEFAULT (eager under CUDA 11.7)
PR_86509_LAZY = 287_047_680
PR_86509_EAGER = 666_632_192


def _bert(**knobs: object) -> PlanRequest:
    """The transformers single-GPU guide's job shape: BERT-large, 512 tokens, a V100 16GB."""
    base = PlanRequest(
        model=resolve_model("bert-large-uncased"),
        gpu=resolve_gpu("V100-16GB"),
        seq_len=512,
        micro_batch=4,
        precision=Precision.FP32,
    )
    return dataclasses.replace(base, **knobs)  # type: ignore[arg-type]


def test_lazy_is_the_default_and_changes_nothing() -> None:
    assert PlanRequest(model=resolve_model("bert-large-uncased")).module_loading is (
        ModuleLoading.LAZY
    )
    gpu = resolve_gpu("H100 80GB")
    assert cuda_context(gpu) == cuda_context(gpu, ModuleLoading.LAZY)
    assert "lazily loaded kernels" in cuda_context(gpu).detail


@pytest.mark.parametrize("gpu", ["V100-16GB", "A100 80GB", "H100 80GB", "T4", None])
def test_eager_adds_the_unused_kernels_measured_in_pr_86509(gpu: str | None) -> None:
    spec = resolve_gpu(gpu) if gpu else None
    lazy = cuda_context(spec, ModuleLoading.LAZY)
    eager = cuda_context(spec, ModuleLoading.EAGER)
    assert eager.bytes - lazy.bytes == PR_86509_EAGER - PR_86509_LAZY  # 362 MiB
    # eager loads them with the context: vLLM's start-up snapshot already holds them
    assert eager.bare_bytes - lazy.bare_bytes == PR_86509_EAGER - PR_86509_LAZY
    assert eager.loading is ModuleLoading.EAGER and "eagerly" in eager.detail


def test_eager_volta_context_agrees_with_the_older_readings() -> None:
    eager = cuda_context(resolve_gpu("V100-16GB"), ModuleLoading.EAGER)
    # "Before CUDA 11.7, *all* kernels were loaded into the context ..., which took >1000MB"
    # (ptrblck, pytorch/pytorch#107667)
    assert eager.bytes > 1000 * 1000 * 1000
    # Titan V (Volta, 80 SMs like the V100), PyTorch 1.3: one small tensor's process 1008 MiB
    # (pytorch/pytorch#28394); a training step also loads cuBLAS, so the plan is not below it
    assert eager.bytes >= 1008 * MIB


@pytest.mark.parametrize(
    ("cuda", "loading"),
    [
        ("10.2", ModuleLoading.EAGER),
        ("11.2", ModuleLoading.EAGER),
        ("11.6.2", ModuleLoading.EAGER),
        ("11.7", ModuleLoading.LAZY),  # lazy loading's first release (CUDA Programming Guide)
        ("11.8", ModuleLoading.LAZY),
        ("12.1", ModuleLoading.LAZY),
        ("12.2", ModuleLoading.LAZY),  # CUDA's own default from here
        ("13.0", ModuleLoading.LAZY),
    ],
)
def test_cuda_runtime_decides_the_loading(cuda: str, loading: ModuleLoading) -> None:
    parts = release(cuda)
    assert parts is not None
    assert module_loading_for_cuda(parts) is loading


def test_eager_context_shows_in_nvidia_smi_only() -> None:
    lazy = plan_memory(_bert())
    eager = plan_memory(_bert(module_loading=ModuleLoading.EAGER))
    extra = PR_86509_EAGER - PR_86509_LAZY
    assert eager.predicted.nvidia_smi_used_bytes - lazy.predicted.nvidia_smi_used_bytes == extra
    assert eager.predicted.max_reserved_bytes == lazy.predicted.max_reserved_bytes
    assert eager.predicted.max_allocated_bytes == lazy.predicted.max_allocated_bytes
    assert eager.component("runtime_overhead") - lazy.component("runtime_overhead") == extra
    # the plan says which context it assumed
    assert "cuda_context" not in lazy.notes
    assert "eagerly" in eager.notes["cuda_context"]
    overhead = next(c for c in eager.components if c.key == "runtime_overhead")
    assert "eagerly" in overhead.detail


def test_lazy_loading_is_offered_as_a_fix_for_an_eager_job() -> None:
    eager = plan_memory(_bert(module_loading=ModuleLoading.EAGER))
    lazy_fix = [f for f in fixes_for(eager) if f.key == "lazy-module-loading"]
    assert len(lazy_fix) == 1
    assert lazy_fix[0].changes == {"module_loading": "lazy"}
    assert lazy_fix[0].saved_bytes == PR_86509_EAGER - PR_86509_LAZY
    assert not [f for f in fixes_for(plan_memory(_bert())) if f.key == "lazy-module-loading"]
