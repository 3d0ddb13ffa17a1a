"""What the trace analyses HTA does not give found in one rank (and across ranks, and between
two traces): steps, data loading, host-to-device copies, launch overhead, tensor cores,
communication, stragglers, diff.

Times are microseconds (``_us``) as in the trace; ratios are 0..1 (``_ratio``); bandwidths are
decimal GB/s (``_gb_s``). ``None`` means the trace cannot tell (no ProfilerStep, no shapes
recorded, no such events), never a sentinel. ``fix`` is a short remedy, ``None`` when the numbers
do not call for one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum


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
class StepDataLoading:
    """Data-loading wait inside one ProfilerStep."""

    step: int
    dataloader_us: float  # host time inside DataLoader ranges in this step
    gpu_idle_us: float  # GPU idle while the host was in the DataLoader
    gpu_idle_ratio_of_step: float


@dataclass(frozen=True, slots=True)
class DataLoadingReport:
    """GPU idle while the host waited for the next batch (``enumerate(DataLoader)``,
    ``DataLoaderIter.__next__``). ``None`` in RankInsights when the trace has no such events."""

    events: int
    dataloader_us: float  # union of the DataLoader ranges
    gpu_idle_us: float  # part of that with no GPU stream busy
    gpu_idle_ratio_of_steps: float | None  # ÷ total step wall time; None without steps
    max_single_wait_us: float  # longest DataLoader range
    multiprocess: bool | None  # _MultiProcessingDataLoaderIter (True), _SingleProcess (False)
    per_step: tuple[StepDataLoading, ...]
    fix: str | None


@dataclass(frozen=True, slots=True)
class H2DReport:
    """Host-to-device copies: pinned vs pageable, blocking, achieved bandwidth vs the PCIe
    link. ``None`` in RankInsights when the trace has no HtoD copy."""

    copies: int
    bytes_total: int | None  # None when no copy recorded its size
    time_us: float  # sum of copy durations
    exposed_us: float  # copy time with no compute kernel running on the GPU
    pageable_copies: int
    pinned_copies: int
    unknown_source_copies: int  # names without Pageable/Pinned (e.g. ROCm "Host -> Device")
    pageable_bytes: int
    blocking_copies: int  # launched by a synchronous runtime call (cudaMemcpy, hipMemcpy...)
    achieved_gb_s: float | None  # Σ bytes ÷ Σ duration of copies with a size
    pageable_gb_s: float | None
    pinned_gb_s: float | None
    device_name: str | None  # deviceProperties name of the GPU used
    pcie_generation: int | None  # None when the device is not in our table
    pcie_limit_gb_s: float | None  # per direction, x16, PCI-SIG line rate after encoding
    achieved_ratio_of_pcie: float | None
    per_step_us: tuple[tuple[int, float], ...]  # (step, HtoD time in the step window)
    fix: str | None


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


@dataclass(frozen=True, slots=True)
class KernelTime:
    """GPU time of one kernel name: ``count`` launches, ``time_us`` summed durations."""

    name: str
    count: int
    time_us: float


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


@dataclass(frozen=True, slots=True)
class DtypeTime:
    """GEMM kernels of one input precision: ``kernels`` launches, ``time_us`` summed."""

    dtype: GemmDtype
    kernels: int
    time_us: float


@dataclass(frozen=True, slots=True)
class GemmShape:
    """A matmul op (and its recorded Input Dims) whose K or N is not a multiple of 8."""

    op: str
    dims: str  # the recorded Input Dims, as text
    count: int


@dataclass(frozen=True, slots=True)
class TensorCoreReport:
    """Share of GEMM time in tensor-core kernels (HMMA/WGMMA/MFMA) vs FP32 SIMT kernels, from
    kernel names. ``None`` in RankInsights when the trace has no GEMM kernel."""

    gemm_kernels: int
    gemm_time_us: float
    tensor_core_us: float
    simt_us: float
    unknown_us: float  # names that do not say
    tensor_core_ratio: float  # ÷ gemm_time_us
    simt_ratio: float
    top_simt_kernels: tuple[KernelTime, ...]
    matmul_ops_with_shapes: int | None  # None: no shapes recorded (record_shapes off)
    misaligned_ops: int | None  # matmul ops with K or N not a multiple of 8 (GEMV-like left out)
    misaligned_examples: tuple[GemmShape, ...]
    fix: str | None
    # GEMM time per input precision read from the kernel names (by time desc), and the time of
    # kernels whose names do not say it (nvjet, Triton templates)
    dtypes: tuple[DtypeTime, ...] = ()
    unknown_dtype_us: float = 0.0


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
class SdpaBackendUse:
    """One attention backend in a rank: ``calls`` of its SDPA CPU op (0 when only its kernels
    are in the trace), ``kernel_time_us`` of its kernels (0 for math, which has none of its own)."""

    backend: SdpaBackend
    calls: int
    kernel_time_us: float


@dataclass(frozen=True, slots=True)
class AttentionReport:
    """Attention backends that ran in one rank, from SDPA's CPU ops
    (``aten::_scaled_dot_product_flash_attention``, ``..._efficient_attention``,
    ``..._cudnn_attention``, ``aten::_scaled_dot_product_attention_math``) and fused attention
    kernel names. ``None`` in RankInsights when the trace has neither."""

    sdpa_calls: int  # aten::scaled_dot_product_attention ops
    backends: tuple[SdpaBackendUse, ...]  # by calls, then kernel time, desc
    fix: str | None

    @property
    def math_calls(self) -> int:
        return sum(b.calls for b in self.backends if b.backend is SdpaBackend.MATH)

    @property
    def fused_calls(self) -> int:
        return sum(b.calls for b in self.backends if b.backend is not SdpaBackend.MATH)


@dataclass(frozen=True, slots=True)
class CollectiveStats:
    """Communication kernels of one collective kind (by kernel name or `Collective name`)."""

    kind: KernelKind
    count: int
    time_us: float  # sum of kernel durations
    bytes_total: int | None  # from the collective's message size args; None if not recorded


@dataclass(frozen=True, slots=True)
class CommunicationReport:
    """Communication kernels per collective, their overlap with compute, and the exposed
    (non-overlapped) part. ``None`` in RankInsights when the trace has no communication."""

    collectives: tuple[CollectiveStats, ...]
    comm_busy_us: float  # union of communication kernels
    overlapped_us: float  # part of it while a compute kernel ran
    exposed_us: float
    overlap_ratio: float  # overlapped ÷ comm busy
    exposed_ratio_of_steps: float | None  # exposed comm in steps ÷ step wall time
    exposed_ratio_of_busy: float  # exposed ÷ GPU busy time
    fix: str | None


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


@dataclass(frozen=True, slots=True)
class RankStraggler:
    """One rank's numbers in the straggler analysis. ``late_arrival_us`` is how much later than
    the median rank it starts collectives (clock offsets removed), averaged."""

    rank: int
    step_time_median_us: float | None
    late_arrival_mean_us: float | None  # None without matched collectives
    last_arrivals: int  # collectives where this rank started last (the others waited)
    waited_us: float  # total time this rank's collective kernels waited for later ranks
    score: float | None  # modified z-score (Iglewicz & Hoaglin), on late arrival or step time
    is_straggler: bool


@dataclass(frozen=True, slots=True)
class StragglerReport:
    """Which ranks hold the others back: late arrival at collectives (matched across ranks by
    collective kind and order) and per-step time, scored robustly with median/MAD."""

    ranks: tuple[RankStraggler, ...]
    stragglers: tuple[int, ...]
    matched_collectives: int  # collectives found on every rank and compared
    metric: str  # "late-arrival" or "step-time"
    step_times_us: dict[int, tuple[tuple[int, float], ...]]  # rank → ((step, wall), ...)
    fix: str | None


@dataclass(frozen=True, slots=True)
class KindDelta:
    """GPU time of one kernel kind before and after (per step or per trace, see TraceDiff)."""

    kind: KernelKind
    before_us: float
    after_us: float
    delta_us: float  # after − before
    ratio: float | None  # after ÷ before, None when before is 0


@dataclass(frozen=True, slots=True)
class KernelDelta:
    """One kernel name before and after; counts are averages, so they can be fractional."""

    name: str
    kind: KernelKind
    before_count: float
    after_count: float
    before_us: float
    after_us: float
    delta_us: float


@dataclass(frozen=True, slots=True)
class TraceDiff:
    """Before → after: GPU time per kernel kind and per kernel name. Values are per step when
    both traces have ProfilerSteps (``per_step``), else per trace; averaged over ranks."""

    per_step: bool
    before_steps: int
    after_steps: int
    before_step_us: float | None  # median step wall time
    after_step_us: float | None
    # GPU busy (any stream): per step, the median over steps of the busy time inside each
    # step's window (beside the median step wall); per trace, the trace's, averaged over ranks
    before_busy_us: float
    after_busy_us: float
    kinds: tuple[KindDelta, ...]  # by |delta| desc
    top_kernels: tuple[KernelDelta, ...]  # by |delta| desc, at most 20
    new_kernels: int  # names only in after
    gone_kernels: int  # names only in before
    faster: tuple[str, ...]  # short summary lines
    slower: tuple[str, ...]
    # what makes the two sides hard to compare (another GPU, job size or step definition),
    # said before any number; empty when they match
    warnings: tuple[str, ...] = ()
