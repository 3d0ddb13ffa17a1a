"""Memory outside the model's tensors: CUDA context, cuBLAS workspaces, NCCL buffers, and the
caching allocator's slack between ``max_memory_allocated`` and ``max_memory_reserved``
(memory.md §2.10).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.catalog.gpus import max_resident_threads_per_sm
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.plan import ModuleLoading
from gpuwarden.units import MIB

# --- CUDA context -------------------------------------------------------------------------------
# The driver reserves local memory (the per-thread stack, cudaLimitStackSize = 1 KiB by default)
# for every thread the GPU can hold at once: SMs × max resident threads per SM. The rest of a bare
# context is fixed driver state. Calibration: the nvidia-smi fixture
# linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01 shows memhog processes at 2566 MiB and 1542 MiB
# for 2048 MiB and 1024 MiB allocations: a bare context of 518 MiB on an H100 SXM (132 SMs) with
# driver 590 → 518 − 132·2048·1 KiB = 254 MiB fixed.
STACK_BYTES_PER_THREAD = 1024
DRIVER_FIXED = 254 * MIB
# PyTorch loads its kernels lazily (CUDA_MODULE_LOADING=LAZY, default since CUDA 11.7): the cuBLAS,
# cuBLASLt, cuDNN and ATen kernel images a training or inference step touches. Estimate.
FRAMEWORK_MODULES = 400 * MIB

# --- CUDA module loading ------------------------------------------------------------------------
# Lazy loading: "first introduced, disabled by default" in CUDA 11.7, "enabled by default for
# Linux" in 12.2 (CUDA Programming Guide, Lazy Loading, change history table,
# https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/lazy-loading.html). It
# needs the 11.7+ runtime, which PyTorch links statically ("Libraries compiled using older CUDA
# runtime versions will load all modules eagerly"), and a driver >= R515 (same page). PyTorch
# sets CUDA_MODULE_LOADING=LAZY when the user has not set it since 1.13 (pytorch/pytorch PR
# #86509, "[1.13] Sets CUDA_MODULE_LOADING to LAZY when not set by the user",
# https://github.com/pytorch/pytorch/pull/86509); every PyTorch built with CUDA >= 11.7 is 1.13
# or newer, so torch.version.cuda >= 11.7 means lazy unless the driver or the user says otherwise.
CUDA_LAZY_LOADING = (11, 7, 0)
# An eager context also holds every kernel image the step never touches. Calibration: PR #86509
# measured one process creating one tensor (torch.randn(...).cuda(), cudaMemGetInfo used) with
# CUDA_MODULE_LOADING=LAZY and =DEFAULT (eager under 11.7): 287,047,680 B vs 666,632,192 B, so
# 379,584,512 B (362 MiB) of PyTorch kernels that only eager loading brings in. Cross-checks (not
# fitted): on a Titan V (Volta, 80 SMs) with PyTorch 1.3 a tensor's process used 1008 MiB against
# 320 MiB for a PyCUDA context (pytorch/pytorch#28394): 688 MiB of eagerly loaded torch kernels,
# ~290 MiB over FRAMEWORK_MODULES; "Before CUDA 11.7, *all* kernels were loaded into the context
# ... which took >1000MB" against "~300MB" lazily (ptrblck, pytorch/pytorch#107667). The A/B
# figure is the lower end: eager cuBLAS/cuDNN images a step initialises add to it, unmeasured.
# Not modelled per GPU: no source isolates the architecture from the build (the PyTorch build's
# kernel count grew between releases: 934, 992, 1106 MB for 1.8.1, 1.10.2, 1.11.0 in #74536).
EAGER_UNUSED_MODULES = 379_584_512


def _sm_facts(gpu: GpuSpec) -> tuple[int, int] | None:
    """(SMs, max resident threads per SM): the catalog's SM count (whitepapers / datasheets) and
    the threads CUDA's compute-capability table allows per SM."""
    threads = max_resident_threads_per_sm(gpu.compute_capability)
    if gpu.sm_count is None or threads is None:
        return None
    return gpu.sm_count, threads


@dataclass(frozen=True, slots=True)
class Context:
    bytes: int
    detail: str
    # the bare context (driver state + local memory) that exists as soon as the process selects
    # the GPU, before any kernel image is loaded: vLLM's baseline snapshot already contains it
    # (eager loading adds the kernels it loads with the context)
    bare_bytes: int
    loading: ModuleLoading  # which of the two the kernel images were sized for


def module_loading_for_cuda(cuda_release: tuple[int, int, int]) -> ModuleLoading:
    """How a PyTorch built with CUDA runtime ``cuda_release`` (torch.version.cuda) loads its
    kernels when neither the user nor an old driver (< R515) forces eager loading."""
    return ModuleLoading.LAZY if cuda_release >= CUDA_LAZY_LOADING else ModuleLoading.EAGER


def _kernel_images(loading: ModuleLoading) -> tuple[int, int, str]:
    """(kernel images in the context, the part loaded with the context itself, how)."""
    if loading is ModuleLoading.EAGER:
        total = FRAMEWORK_MODULES + EAGER_UNUSED_MODULES
        return (
            total,
            EAGER_UNUSED_MODULES,
            f"every kernel loaded eagerly ~{total // MIB} MiB (CUDA_MODULE_LOADING eager: "
            f"CUDA < 11.7, driver < R515 or EAGER; {EAGER_UNUSED_MODULES // MIB} MiB of it "
            "never used)",
        )
    return FRAMEWORK_MODULES, 0, f"lazily loaded kernels ~{FRAMEWORK_MODULES // MIB} MiB"


def cuda_context(gpu: GpuSpec | None, loading: ModuleLoading = ModuleLoading.LAZY) -> Context:
    """Per process: shows in nvidia-smi, never in ``torch.cuda.memory_*``."""
    facts = _sm_facts(gpu) if gpu is not None else None
    if facts is None:
        # Unknown GPU: the calibrated H100 context (the largest of the common data-center parts).
        sms, threads = 132, 2048
        if gpu is not None:
            threads = max_resident_threads_per_sm(gpu.compute_capability) or threads
        basis = "SM count unknown: H100-sized local-memory reserve assumed"
    else:
        sms, threads = facts
        basis = f"{sms} SMs × {threads} threads × 1 KiB stack"
    local = sms * threads * STACK_BYTES_PER_THREAD
    kernels, with_context, how = _kernel_images(loading)
    return Context(
        DRIVER_FIXED + local + kernels,
        f"driver {DRIVER_FIXED // MIB} MiB + local memory {local // MIB} MiB ({basis}) + {how}",
        DRIVER_FIXED + local + with_context,
        loading,
    )


@dataclass(frozen=True, slots=True)
class Overheads:
    """Memory outside the model's tensors for one GPU: CUDA context, NCCL buffers, cuBLAS
    workspaces, and the line that says how each was sized."""

    context: Context
    nccl: int
    cublas: int
    detail: str

    @property
    def non_torch(self) -> int:
        """Everything outside PyTorch's allocator: the whole CUDA context and NCCL."""
        return self.context.bytes + self.nccl

    @property
    def total(self) -> int:
        return self.non_torch + self.cublas


def cublas_workspace(gpu: GpuSpec | None, handles: int) -> int:
    """PyTorch's cuBLAS workspace per (handle, stream), allocated through the caching allocator.

    Default CUBLAS_WORKSPACE_CONFIG ":4096:2:16:8" = 4096 KiB × 2 + 16 KiB × 8; 32 MiB on Hopper
    and Blackwell (aten/src/ATen/cuda/CublasHandlePool.cpp). Training has two handles: the
    forward thread's and the autograd engine's.
    """
    per = 8_519_680
    if gpu is not None and gpu.architecture.lower() in {"hopper", "blackwell"}:
        per = 32 * MIB
    return per * handles


# --- NCCL ---------------------------------------------------------------------------------------
# Per channel and peer NCCL allocates a Simple buffer (NCCL_BUFFSIZE 4 MiB), an LL128 buffer
# (120 elems × 640 threads × 8 steps × 8 B ≈ 4.7 MiB) and an LL buffer (512 KiB); rings and trees
# connect each rank to about two peers per channel. Channel counts are typical NCCL choices.
_PER_CHANNEL_PEER = 4 * MIB + 4_915_200 + 512 * 1024
_NVLS = 512 * MIB  # NVLink SHARP buffers on NVSwitch systems (Hopper, Blackwell), estimate


@dataclass(frozen=True, slots=True)
class Communicator:
    name: str
    size: int
    spans_nodes: bool


def nccl_bytes(gpu: GpuSpec | None, comms: tuple[Communicator, ...]) -> int:
    total = 0
    arch = gpu.architecture.lower() if gpu is not None else ""
    nvlink = (
        gpu is not None and gpu.nvlink_bytes_per_s is not None and "PCIE" not in gpu.variant.upper()
    )
    for comm in comms:
        if comm.size <= 1:
            continue
        channels = (24 if arch in {"hopper", "blackwell"} else 16) if nvlink else 4
        if comm.spans_nodes:
            channels = max(channels, 8)
        if comm.name == "pp":
            channels = 2  # point-to-point send/recv between neighbouring stages
        total += channels * 2 * _PER_CHANNEL_PEER
        if nvlink and arch in {"hopper", "blackwell"} and comm.name != "pp":
            total += _NVLS
    return total


# --- caching allocator --------------------------------------------------------------------------
# Requests ≥ 10 MiB are rounded up to 2 MiB, 1-10 MiB requests share 20 MiB segments, and blocks
# freed in one phase are split for another, so reserved exceeds allocated by a share of what is
# allocated and freed every step. The shares are estimates; expandable segments remove most of it.
DYNAMIC_SLACK = 0.12
DYNAMIC_SLACK_EXPANDABLE = 0.02
SEGMENT_ROUNDING = 2 * MIB


def allocator_slack(dynamic_bytes: int, tensors: int, expandable: bool) -> int:
    share = DYNAMIC_SLACK_EXPANDABLE if expandable else DYNAMIC_SLACK
    return int(share * dynamic_bytes + tensors * SEGMENT_ROUNDING / 2)
