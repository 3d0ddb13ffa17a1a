"""What the trace analyses HTA does not give found in one rank (and across ranks, and between
two traces): steps, data loading, host-to-device copies, launch overhead, tensor cores,
communication, stragglers, diff.

Times are microseconds (``_us``) as in the trace; ratios are 0..1 (``_ratio``); bandwidths are
decimal GB/s (``_gb_s``). ``None`` means the trace cannot tell (no ProfilerStep, no shapes
recorded, no such events), never a sentinel. ``fix`` is a short remedy, ``None`` when the numbers
do not call for one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwarden.types.trace_attention import AttentionReport, SdpaBackendUse
    from gpuwarden.types.trace_communication import CollectiveStats, CommunicationReport
    from gpuwarden.types.trace_data_loading import DataLoadingReport, StepDataLoading
    from gpuwarden.types.trace_diff import KernelDelta, KindDelta, TraceDiff
    from gpuwarden.types.trace_h2d import H2DReport
    from gpuwarden.types.trace_stragglers import RankStraggler, StragglerReport
    from gpuwarden.types.trace_tensor_cores import (
        DtypeTime,
        GemmShape,
        KernelTime,
        TensorCoreReport,
    )

# The reports a trace may not call for (no data loading, copies, GEMMs, attention or
# communication; one rank; no diff) live in modules of their own, imported by the analysis that
# finds something to report: a frozen slots dataclass costs ~0.5 ms to create, and a small
# trace's whole run is ~0.1 s. They are still found here, by the module's __getattr__.
_MODULE_OF = {
    "StepDataLoading": "trace_data_loading",
    "DataLoadingReport": "trace_data_loading",
    "H2DReport": "trace_h2d",
    "KernelTime": "trace_tensor_cores",
    "DtypeTime": "trace_tensor_cores",
    "GemmShape": "trace_tensor_cores",
    "TensorCoreReport": "trace_tensor_cores",
    "SdpaBackendUse": "trace_attention",
    "AttentionReport": "trace_attention",
    "CollectiveStats": "trace_communication",
    "CommunicationReport": "trace_communication",
    "RankStraggler": "trace_stragglers",
    "StragglerReport": "trace_stragglers",
    "KindDelta": "trace_diff",
    "KernelDelta": "trace_diff",
    "TraceDiff": "trace_diff",
}

# its own classes and those of _MODULE_OF (named here for the type checker too)
__all__ = [
    "AttentionReport",
    "CollectiveStats",
    "CommunicationReport",
    "DataLoadingReport",
    "DtypeTime",
    "GemmDtype",
    "GemmShape",
    "H2DReport",
    "IdleKind",
    "KernelDelta",
    "KernelKind",
    "KernelTime",
    "KindDelta",
    "KindTime",
    "LaunchReport",
    "RankInsights",
    "RankStraggler",
    "SdpaBackend",
    "SdpaBackendUse",
    "StepDataLoading",
    "StepStats",
    "StragglerReport",
    "TensorCoreReport",
    "TraceDiff",
]


def __getattr__(name: str) -> Any:
    """``trace_insights.TraceDiff`` and the other reports of their own modules (PEP 562)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"gpuwarden.types.{module}"), name)


class KernelKind(IntEnum):
    """What a trace row did on the GPU, from its category, name and collective args."""

    GEMM = 0  # matrix multiply, incl. implicit-GEMM / cuDNN convolutions
    ATTENTION = 1  # flash / fused multi-head attention kernels
    ELEMENTWISE = 2
    REDUCTION = 3  # reductions, norms, softmax, scans, sorts
    COMPUTE_OTHER = 4
    COMM_ALLREDUCE = 5
    COMM_ALLGATHER = 6
    COMM_REDUCESCATTER = 7
    COMM_ALLTOALL = 8
    COMM_BROADCAST = 9
    COMM_SENDRECV = 10
    COMM_OTHER = 11  # reduce, gather, scatter, barrier, unknown collective
    MEMCPY_H2D = 12
    MEMCPY_D2H = 13
    MEMCPY_D2D = 14  # incl. peer-to-peer
    MEMCPY_OTHER = 15
    MEMSET = 16
    SYNC = 17  # cuda_sync events (stream/event/context sync, stream wait event)
    NOT_GPU = 18  # CPU ops, runtime calls, annotations, ...

    @property
    def is_compute(self) -> bool:
        return self <= KernelKind.COMPUTE_OTHER

    @property
    def is_communication(self) -> bool:
        return KernelKind.COMM_ALLREDUCE <= self <= KernelKind.COMM_OTHER

    @property
    def is_memory(self) -> bool:
        return KernelKind.MEMCPY_H2D <= self <= KernelKind.MEMSET


class IdleKind(StrEnum):
    """Why the GPU (all streams) was idle during a stretch of a step."""

    DATA_LOADING = "data-loading"  # the host was inside the DataLoader
    HOST_LAUNCH = "host-launch"  # the next GPU op was not even launched yet: CPU-bound
    KERNEL_GAP = "kernel-gap"  # launched, short (< 30 µs) gap between ops: launch/queue latency
    WAIT = "wait"  # launched, long gap: waiting on a sync, an event, another rank, ...


@dataclass(frozen=True, slots=True)
class KindTime:
    """GPU time of one KernelKind: ``time_us`` is the sum of event durations, ``busy_us`` the
    union of their intervals (overlapping events of that kind counted once)."""

    kind: KernelKind
    count: int
    time_us: float
    busy_us: float


@dataclass(frozen=True, slots=True)
class StepStats:
    """One ``ProfilerStep#N`` (the CPU annotation's window): wall time, how much of it some GPU
    stream was busy (kernels, memcpy, memset), and what the idle rest was. The GPU fields are
    None when the rank has no GPU activity at all (CPU-only trace): there is no GPU to be idle."""

    step: int  # N of ProfilerStep#N
    start_us: float  # raw trace ts
    wall_us: float
    gpu_busy_us: float | None
    gpu_idle_us: float | None
    gpu_busy_ratio: float | None
    idle_data_loading_us: float | None
    idle_host_launch_us: float | None
    idle_kernel_gap_us: float | None
    idle_wait_us: float | None
    dominant_idle: IdleKind | None  # None when the step had no idle time or no GPU activity
    kernels: int | None  # kernels that started in the window
    comm_us: float | None  # union of communication kernels in the window
    exposed_comm_us: float | None  # communication not overlapped by compute in the window


@dataclass(frozen=True, slots=True)
class LaunchReport:
    """CPU launch calls vs the GPU kernels they launched, joined on the correlation id."""

    launches: int  # launch calls matched with a kernel
    graph_launches: int  # cudaGraphLaunch / hipGraphLaunch calls
    cpu_launch_p50_us: float
    cpu_launch_p90_us: float
    gpu_kernel_p50_us: float
    gpu_kernel_p90_us: float
    launch_delay_p50_us: float  # max(0, kernel start − launch call end)
    launch_delay_p90_us: float
    launch_delay_p99_us: float
    short_kernel_ratio: float  # kernels shorter than their own launch call
    short_kernel_gpu_ratio: float  # their share of kernel time
    cpu_launch_total_us: float
    gpu_kernel_total_us: float
    fix: str | None


class GemmDtype(StrEnum):
    """Input precision of a GEMM/convolution kernel."""

    FP64 = "fp64"
    FP32 = "fp32"  # full FP32 math: CUDA-core SIMT, or AMD's FP32 MFMA
    TF32 = "tf32"  # FP32 data on tensor cores (TF32, AMD xf32)
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"

    @property
    def is_reduced(self) -> bool:
        """16 bits or fewer: what autocast or quantisation gives; no cheaper precision to ask
        for short of FP8/INT8."""
        return self in (GemmDtype.FP16, GemmDtype.BF16, GemmDtype.FP8, GemmDtype.INT8)


class SdpaBackend(StrEnum):
    """Which attention implementation ran: one of PyTorch SDPA's backends (by its CPU op) or, by
    kernel name, the family of a fused attention kernel (FlashAttention's flash_fwd/flash_bwd and
    AOTriton's attn_fwd are ``flash`` whoever launched them)."""

    FLASH = "flash"
    EFFICIENT = "efficient"  # memory-efficient (CUTLASS fmha_cutlassF/B, xformers)
    CUDNN = "cudnn"
    MATH = "math"  # unfused: matmuls and a softmax over the whole score matrix
    OTHER_FUSED = "other-fused"  # other fused attention kernels (TensorRT-LLM fmha, paged, ...)


@dataclass(frozen=True, slots=True)
class RankInsights:
    """Every per-rank analysis HTA does not give. A rank without GPU events has zeros, no steps
    and ``None`` for every report."""

    rank: int
    device_name: str | None
    compute_capability: tuple[int, int] | None  # deviceProperties' (major, minor)
    gpu_events: int  # kernels + memcpy + memset
    gpu_busy_us: float  # union of GPU events over all streams
    gpu_span_us: float  # first GPU event start → last GPU event end
    kinds: tuple[KindTime, ...]  # kinds with at least one event, by time desc
    steps: tuple[StepStats, ...]
    data_loading: DataLoadingReport | None
    h2d: H2DReport | None
    launch: LaunchReport | None
    tensor_cores: TensorCoreReport | None
    communication: CommunicationReport | None
    attention: AttentionReport | None = None
