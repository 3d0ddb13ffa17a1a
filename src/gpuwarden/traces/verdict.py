"""The bottleneck of a trace in one line: the diagnosis tree the field uses, over our numbers.

1. No GPU event on any rank → nothing to diagnose on the GPU (``no-gpu-activity``, with what
   the host side recorded deciding why: lost GPU records, no GPU work, no CUDA capture, no GPU);
   fewer than ``MIN_GPU_EVENTS`` → too little to judge (``not-enough-data``, saying what is
   missing).
2. GPU idle → the host side: what the idle time was spent on decides between the data loader
   (``data-loading-bound``) and launching/synchronising (``cpu-launch-bound``; when one CPU op
   whose calls queue no GPU work runs during most of the idle time, the verdict names it: the
   host computes there rather than launching).
3. Multi-GPU → communication the GPUs wait on (exposed, not overlapped by compute); when some
   ranks arrive late at the collectives, the late ranks are the cause (``straggler-bound``),
   else the communication itself (``communication-bound``).
4. GPU busy computing → the kernels: mostly bandwidth-bound kernels (elementwise, reductions,
   norms) → ``memory-bound-kernels``; mostly GEMM/attention → ``compute-bound``.

Steps 2 and 3 both measure time lost outside compute, as a share of the GPU-active span; the
larger one wins when it passes ``BOTTLENECK_RATIO``. Over several ranks the shares are pooled
(Σ of the time over the ranks ÷ Σ of their spans) and the times are sums over the ranks; the
evidence says so next to each number. Pure: numbers in, a Verdict out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuwarden.traces.precision_advice import cheaper_precision
from gpuwarden.types.trace import Verdict, VerdictKind
from gpuwarden.types.trace_hta import HtaReport
from gpuwarden.types.trace_insights import GemmDtype, KernelKind, RankInsights, SdpaBackend

if TYPE_CHECKING:
    from gpuwarden.types.trace_stragglers import StragglerReport
    from gpuwarden.types.trace_tensor_cores import TensorCoreReport

# A loss of a quarter of the GPU-active span: removing it speeds the job up by ≥ 1.33×, more
# than tuning kernels usually gives, so it is the thing to fix first.
BOTTLENECK_RATIO = 0.25
# Kernels with low arithmetic intensity (elementwise, reductions/norms/softmax) are limited by
# memory bandwidth on every current GPU; when they take most of the compute time, faster math
# (tensor cores, a bigger GPU's FLOPS) cannot help, fewer bytes moved can.
MEMORY_BOUND_KERNEL_RATIO = 0.5
# Fused attention kernels (FlashAttention, PyTorch SDPA's flash / mem-efficient / cuDNN
# backends, Triton or CK attn_fwd) are what the generic advice would suggest; when they hold
# most of the math time the attention is already fused, and only doing less attention work
# (or a bigger GPU) helps.
FUSED_ATTENTION_RATIO = 0.5

# A GEMM precision worth changing once it holds this share of GEMM time: the share at which
# insights.tensor_cores (SIMT_FIX_RATIO) advises leaving FP32 CUDA-core kernels.
PRECISION_FIX_RATIO = 0.2
# The kernel names must say the precision of most GEMM time before the advice relies on it.
KNOWN_PRECISION_RATIO = 0.5

# The least GPU work a verdict rests on. Its shares (idle, exposed communication, kernel mix)
# and the launch statistics (median kernel, share of kernels shorter than their launch) are
# over GPU events and the gaps between them: with fewer than 10, one event or one gap is a
# tenth or more of what the verdict weighs, and the trace is a glimpse of a job, not a
# measurement of it (a profiler window that missed the steps, a toy script).
MIN_GPU_EVENTS = 10
_PROFILE_HINT = (
    "profile whole training steps: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
    "ProfilerActivity.CUDA], schedule=torch.profiler.schedule(wait=1, warmup=1, active=3)) "
    "with prof.step() at the end of every iteration"
)

_RUN_ON_GPU_FIX = (
    "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] and make sure the "
    "model runs on the GPU (model.to('cuda'), tensors on the device)"
)
# Why a profiler that was asked for CUDA activity can return none (pytorch/pytorch#117935 and
# NVIDIA/TensorRT-LLM#9073: a second CUPTI subscriber; pytorch/pytorch#99615: CUPTI failing to
# initialise; pytorch/kineto#996: every GPU record dropped as out of the capture window).
_CUPTI_FIX = (
    "look in the job's log for the profiler's CUPTI warnings: "
    "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED when Nsight Systems/Compute, DCGM profiling "
    "or another CUPTI tool is attached (profile without it), a CUPTI initialisation error when "
    "the driver is older than the CUDA PyTorch was built with, or GPU records dropped as out of "
    "range (keep the profiled steps inside the capture window)"
)

# PyTorch's CUDA-event fallback (ProfilerState.KINETO_GPU_FALLBACK, torch/autograd/profiler.py):
# torch.autograd.profiler.profile(use_cuda=True) / use_device='cuda' with use_kineto=False, or on
# a build whose Kineto lacks CUDA (ProfilerActivity.CUDA not in supported_activities()), times
# each op with a pair of CUDA events and asks Kineto for CPU activity only; Kineto's CPU
# activities include the CUDA runtime and driver calls (kCpuTypes, torch/csrc/profiler/
# kineto_shim.cpp), so the trace holds the launches and never a kernel. When most CPU ops carry
# such a pair, the GPU records were never requested, not lost.
FALLBACK_OP_SHARE = 0.5
_FALLBACK_FIX = (
    "profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
    "ProfilerActivity.CUDA]) (or torch.autograd.profiler.profile(use_device='cuda') with "
    "use_kineto=True) so Kineto records the kernels; if ProfilerActivity.CUDA is missing from "
    "torch.profiler.supported_activities(), this PyTorch build cannot trace CUDA: install one "
    "built with Kineto's CUDA support (the official CUDA wheels)"
)

# A kernel launched onto an idle GPU starts within microseconds of its launch call (the launch
# latency); HTA counts gaps under its consecutive_kernel_delay (30 µs) as back-to-back kernels.
# When the median kernel of a mostly idle GPU starts later than that after its own launch, either
# the GPU held this process's work and did not run it (another process, a wait the trace does not
# record) or the GPU's timestamps are offset from the host's (CUPTI maps the GPU clock onto the
# host's; every kernel then lags its launch by about the same time): in neither case is the idle
# time the host launching too slowly, and the trace alone cannot tell the two apart. A stream runs
# its work in issue order, so the wait of a kernel queued behind a running kernel of its own stream
# is the GPU busy with recorded work, and the few µs the stream then takes to start it are HTA's
# kernel_wait: only the idle time launched work waited with its stream free, beyond that gap,
# counts (QUEUED_IDLE_SHARE).
QUEUED_LAUNCH_DELAY_US = 30.0
_QUEUED_FIX = (
    "find what held the GPU while this process's work waited: another process or container on "
    "the same GPU (nvidia-smi --query-compute-apps=pid,process_name,used_memory during the run, "
    "DCGM per-process stats, MPS or time-slicing settings), else GPU work the profiler did not "
    "record (its CUPTI warnings about dropped records); an Nsight Systems capture of the whole "
    "node (nsys profile --gpuctxsw=true) shows whose contexts ran. If every kernel lags its "
    "launch by about the same time, suspect an offset between the GPU's and the host's clocks "
    "in this capture: a second capture decides. Meanwhile keep host syncs "
    "(.item(), .cpu(), .tolist(), bincount/nonzero on GPU tensors) out of the step: each one "
    "makes the host wait for that queue"
)

# The queued reading explains the idle time only if the kernels' waits can fill it: the idle time
# during which launched work waited with its stream free, measured on every rank and summed, must
# be at least half the idle time. A GPU idle for 500 ms between kernels that each start 69 µs
# after their launch idles for another reason.
QUEUED_IDLE_SHARE = 0.5
# One CPU op (or, where none does, one Python call) that neither queues GPU work nor waits for
# it, running during most of the GPU's idle time: the host was computing there, not launching
# (insights/host_idle.py); shortening launches (CUDA graphs, fusion) cannot help.
HOST_OP_IDLE_RATIO = 0.5

_MEMORY_BOUND_KINDS = frozenset({KernelKind.ELEMENTWISE, KernelKind.REDUCTION})
_MATH_KINDS = frozenset({KernelKind.GEMM, KernelKind.ATTENTION})


@dataclass(frozen=True, slots=True)
class HostRecord:
    """What one rank's host side recorded, read when no rank has a GPU event: whether the
    profiler saw CUDA at all, and whether the process queued GPU work, decide why."""

    gpus_listed: tuple[str, ...]  # deviceProperties names (Kineto lists every visible GPU)
    runtime_calls: int  # cuda_runtime / cuda_driver events
    gpu_work_calls: int  # of those, calls that queue GPU work: launches, copies, memsets
    cpu_ops: int
    counter_ranges: int = 0  # cuda_profiler_range events: a CUPTI range-profiler capture
    # CPU ops bracketed by two cudaEventRecord calls with their External id: timed by PyTorch's
    # CUDA-event fallback
    event_timed_ops: int = 0


@dataclass(frozen=True, slots=True)
class HostOpIdle:
    """The CPU op (``aten::*``) one rank's host ran during most of its GPU idle time, or the
    Python call (a ``with_stack`` frame) where no CPU op did."""

    name: str
    covered_us: float  # GPU idle time, inside the GPU-active span, during which the op ran
    idle_us: float  # the rank's GPU idle time inside its GPU-active span (gaps between events)
    python: bool = False  # a python_function frame, not a CPU op


@dataclass(frozen=True, slots=True)
class Signals:
    """The job-wide numbers the tree reads; sums over the ranks that ran GPU work."""

    ranks_with_gpu: int
    gpu_events: int  # Σ kernels, memcpy and memset over the ranks
    comm_ranks: int  # ranks whose communication is in exposed_comm_us / comm_busy_us
    span_us: float  # Σ HTA kernel_time (span of GPU activity); ours where HTA has no row
    idle_us: float  # Σ HTA idle_time; ours (span − union of GPU events) where HTA has no row
    data_loading_idle_us: float  # idle while the host was in the DataLoader
    launch_idle_us: float  # idle before the next op was launched, or in short launch gaps
    wait_idle_us: float  # idle with the next op launched: waiting on a sync/event/other rank
    idle_cause_source: str  # where the split of idle time comes from
    span_source: str  # where span and idle come from
    gpu_span_us: float  # Σ insights gpu_span_us (the denominator of exposed comm)
    exposed_comm_us: float
    comm_busy_us: float
    compute_us: float  # Σ durations of compute kernels (GEMM, attention, elementwise, ...)
    memory_bound_us: float  # elementwise + reduction part of it
    math_us: float  # GEMM + attention part of it
    attention_us: float  # fused attention kernels (flash, fmha, attn_fwd ...) part of it

    @property
    def idle_ratio(self) -> float:
        return self.idle_us / self.span_us if self.span_us > 0 else 0.0

    @property
    def exposed_comm_ratio(self) -> float:
        return self.exposed_comm_us / self.gpu_span_us if self.gpu_span_us > 0 else 0.0

    @property
    def memory_bound_ratio(self) -> float:
        return self.memory_bound_us / self.compute_us if self.compute_us > 0 else 0.0


def _idle_causes(
    hta: HtaReport, ranks: Mapping[int, RankInsights], idle_us: float
) -> tuple[float, float, float, str]:
    """(data loading, launch, wait) idle µs: from the per-step split when the trace has
    ProfilerSteps, else HTA's per-stream idle categories scaled to the all-stream idle time."""
    splits = [
        (s.idle_data_loading_us, s.idle_host_launch_us + s.idle_kernel_gap_us, s.idle_wait_us)
        for r in ranks.values()
        for s in r.steps
        if s.gpu_idle_us is not None
        and s.gpu_idle_us > 0
        and s.idle_data_loading_us is not None
        and s.idle_host_launch_us is not None
        and s.idle_kernel_gap_us is not None
        and s.idle_wait_us is not None
    ]
    if splits:
        return (
            sum(d for d, _, _ in splits),
            sum(h for _, h, _ in splits),
            sum(w for _, _, w in splits),
            "ProfilerStep windows",
        )
    data = sum(r.data_loading.gpu_idle_us for r in ranks.values() if r.data_loading)
    by_cat = {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}
    for row in hta.idle_time_breakdown:
        if row.idle_category in by_cat:
            by_cat[row.idle_category] += max(row.idle_time_us, 0.0)
    total = sum(by_cat.values())
    rest = max(idle_us - data, 0.0)
    if total <= 0:
        return data, rest, 0.0, "HTA idle-time breakdown"
    launch = rest * (by_cat["host_wait"] + by_cat["kernel_wait"]) / total
    return data, launch, rest * by_cat["other"] / total, "HTA idle-time breakdown"


def signals(hta: HtaReport, ranks: Mapping[int, RankInsights]) -> Signals:
    gpu_ranks = [r for r in ranks.values() if r.gpu_events > 0]
    temporal = {r.rank: r for r in hta.temporal_breakdown if r.kernel_time_us > 0}
    span = idle = 0.0
    own: list[int] = []
    for insights in gpu_ranks:
        row = temporal.get(insights.rank)
        if row is not None:
            span += row.kernel_time_us
            idle += max(row.idle_time_us, 0.0)
        else:
            # HTA has no temporal row for this rank (its consistency assert fails on some
            # ns-resolution traces): the same definition from our own union of GPU events.
            own.append(insights.rank)
            span += insights.gpu_span_us
            idle += max(insights.gpu_span_us - insights.gpu_busy_us, 0.0)
    span_source = "HTA temporal breakdown"
    if own:
        ranks_text = ", ".join(map(str, own))
        span_source = (
            f"union of GPU events (HTA has no temporal row for rank(s) {ranks_text})"
            if len(own) == len(gpu_ranks)
            else f"HTA temporal breakdown; union of GPU events for rank(s) {ranks_text}"
        )
    data, launch, wait, source = _idle_causes(hta, ranks, idle)
    comm = [r.communication for r in gpu_ranks if r.communication is not None]
    kinds = [k for r in gpu_ranks for k in r.kinds]
    return Signals(
        ranks_with_gpu=len(gpu_ranks),
        gpu_events=sum(r.gpu_events for r in gpu_ranks),
        comm_ranks=len(comm),
        span_us=span,
        idle_us=idle,
        data_loading_idle_us=data,
        launch_idle_us=launch,
        wait_idle_us=wait,
        idle_cause_source=source,
        span_source=span_source,
        gpu_span_us=sum(r.gpu_span_us for r in gpu_ranks),
        exposed_comm_us=sum(c.exposed_us for c in comm),
        comm_busy_us=sum(c.comm_busy_us for c in comm),
        compute_us=sum(k.time_us for k in kinds if k.kind.is_compute),
        memory_bound_us=sum(k.time_us for k in kinds if k.kind in _MEMORY_BOUND_KINDS),
        math_us=sum(k.time_us for k in kinds if k.kind in _MATH_KINDS),
        attention_us=sum(k.time_us for k in kinds if k.kind is KernelKind.ATTENTION),
    )


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _share(x: float) -> str:
    """A share that rounds to 0.0 % but is not zero says so."""
    return "< 0.1 %" if 0 < x < 0.0005 else _pct(x)


def _ms(us: float) -> str:
    return f"{us / 1000:,.1f} ms"


def _pooled(ranks: int) -> str:
    return "" if ranks <= 1 else f" ({ranks} ranks pooled)"


def _first_fix(ranks: Mapping[int, RankInsights], attr: str) -> str | None:
    for insights in ranks.values():
        part = getattr(insights, attr)
        if part is not None and part.fix:
            return str(part.fix)
    return None


def _idle_evidence(s: Signals) -> tuple[str, str]:
    causes = s.data_loading_idle_us + s.launch_idle_us + s.wait_idle_us

    def share(us: float) -> str:
        return _pct(us / causes if causes > 0 else 0.0)

    split = (
        f"of the idle time ({s.idle_cause_source}): data loading {share(s.data_loading_idle_us)}"
        f", launch/host {share(s.launch_idle_us)}, waiting on syncs/other ranks "
        f"{share(s.wait_idle_us)}"
    )
    n = s.ranks_with_gpu
    idle = (
        f"GPU idle {_pct(s.idle_ratio)} of the GPU-active span{_pooled(n)} "
        f"({_ms(s.idle_us)} of {_ms(s.span_us)}{' summed over the ranks' if n > 1 else ''}, "
        f"{s.span_source})"
    )
    return idle, split


def _comm_evidence(s: Signals) -> str:
    """The exposed share is pooled over the ranks; the times next to it are sums over them,
    said so, with the mean per rank (one rank: plain times)."""
    n, exposed, busy = s.comm_ranks, s.exposed_comm_us, s.comm_busy_us
    share = f"exposed communication {_pct(s.exposed_comm_ratio)} of the GPU-active span"
    everything = _ms(exposed) == _ms(busy)  # equal as printed: say so once
    if n <= 1:
        what = f"all {_ms(busy)}" if everything else f"{_ms(exposed)} of {_ms(busy)}"
        return f"{share} ({what} of communication not overlapped by compute)"
    if everything:
        times = (
            f"all their communication, {_ms(busy)} summed over the {n} ranks "
            f"({_ms(busy / n)} per rank),"
        )
    else:
        times = (
            f"{_ms(exposed)} of their {_ms(busy)} of communication, summed over the {n} ranks "
            f"({_ms(exposed / n)} of {_ms(busy / n)} per rank),"
        )
    return f"{share}, {n} ranks pooled: {times} not overlapped by compute"


def _lag_fills_idle(s: Signals, held_idle: Mapping[int, float]) -> bool:
    """The kernels' waits cover ``QUEUED_IDLE_SHARE`` of the idle time: summed over the ranks,
    the idle time during which launched work waited with its stream free (``held_idle``,
    measured on every rank with launches); a rank not measured adds nothing (its launches
    times its median wait would count waits that overlap, and kernels queued behind their own
    stream's running kernel, as held)."""
    return sum(held_idle.values()) >= QUEUED_IDLE_SHARE * s.idle_us


def _dominant_host_op(host_ops: Mapping[int, HostOpIdle]) -> HostOpIdle | None:
    """The op that ran during ``HOST_OP_IDLE_RATIO`` of the GPU idle time, pooled over the ranks
    (times summed per op name)."""
    idle = sum(h.idle_us for h in host_ops.values())
    covered: dict[str, float] = {}
    python: dict[str, bool] = {}
    for h in host_ops.values():
        covered[h.name] = covered.get(h.name, 0.0) + h.covered_us
        python[h.name] = h.python
    if idle <= 0 or not covered:
        return None
    name = max(covered, key=lambda n: covered[n])
    if covered[name] < HOST_OP_IDLE_RATIO * idle:
        return None
    return HostOpIdle(name=name, covered_us=covered[name], idle_us=idle, python=python[name])


def _host_op_verdict(
    s: Signals, op: HostOpIdle, n_ranks: int, evidence: tuple[str, ...]
) -> Verdict:
    """The GPU waits for the host, and the host spends that time inside one CPU op (or, where
    no CPU op does, one Python call that queues no GPU work)."""
    if op.python:
        what = (
            "a Python call that queues no GPU work (a with_stack frame), so the host is busy there"
        )
        move = (
            "do that work ahead of time off the training loop (a DataLoader worker, a background "
            "thread), or not at all,"
        )
    else:
        what = "a CPU op, so the host is computing there"
        move = (
            "run it on the GPU (tensors created with device='cuda', not on the CPU and copied), "
            "or compute it ahead of time off the training loop (a DataLoader worker, a background "
            "thread)"
        )
    where = (
        f"the host runs {op.name} during {_ms(op.covered_us)} of the GPU's {_ms(op.idle_us)} "
        f"idle time between GPU events ({_pct(op.covered_us / op.idle_us)}"
        f"{'' if n_ranks <= 1 else f', {n_ranks} ranks summed'}): {what}, not launching"
    )
    return Verdict(
        VerdictKind.CPU_LAUNCH_BOUND,
        f"the GPU is idle {_pct(s.idle_ratio)} of the time waiting for the host, which spends "
        f"it in {op.name}",
        (*evidence, where),
        f"take {op.name} off the host's path to the next GPU op: {move} so the next GPU work "
        "is launched without waiting for it; CUDA graphs and kernel fusion shorten launches, "
        "not host-side ops",
    )


def _host_verdict(
    s: Signals,
    ranks: Mapping[int, RankInsights],
    stragglers: StragglerReport | None,
    host_ops: Mapping[int, HostOpIdle] | None = None,
    held_idle: Mapping[int, float] | None = None,
) -> Verdict:
    idle, split = _idle_evidence(s)
    host = max(s.data_loading_idle_us, s.launch_idle_us, s.wait_idle_us)
    if host == s.data_loading_idle_us and host > 0:
        fix = _first_fix(ranks, "data_loading") or (
            "feed the GPU faster: more DataLoader workers (num_workers), pin_memory=True, "
            "persistent_workers=True, a larger prefetch_factor; move decoding and augmentation "
            "off the training loop"
        )
        return Verdict(
            VerdictKind.DATA_LOADING_BOUND,
            f"the GPU is idle {_pct(s.idle_ratio)} of the time, mostly waiting for the next batch",
            (idle, split),
            fix,
        )
    if host == s.wait_idle_us and s.comm_busy_us > 0:
        # Launched work that does not start while every stream is idle waits on other ranks.
        return _comm_verdict(s, ranks, stragglers, (idle, split))
    launch = next((r.launch for r in ranks.values() if r.launch is not None), None)
    evidence = [idle, split]
    if (
        launch is not None
        and launch.launch_delay_p50_us > QUEUED_LAUNCH_DELAY_US
        and _lag_fills_idle(s, held_idle or {})
    ):
        # the split names a gap by when its next kernel was launched, which here says nothing of
        # how fast the host was: those kernels then waited queued (the verdict's last line)
        counted = f"{split} (a gap is launch/host when its next kernel was launched after it began)"
        return _queued_verdict(s, launch.launch_delay_p50_us, (idle, counted))
    if launch is not None:
        evidence.append(
            f"median kernel {launch.gpu_kernel_p50_us:.1f} µs vs median launch call "
            f"{launch.cpu_launch_p50_us:.1f} µs; {_pct(launch.short_kernel_ratio)} of kernels "
            "are shorter than their own launch"
        )
    op = _dominant_host_op(host_ops or {})
    if op is not None:
        return _host_op_verdict(s, op, len(host_ops or {}), tuple(evidence))
    fix = _first_fix(ranks, "launch") or (
        "cut the host work per GPU op: CUDA graphs (torch.compile(mode='reduce-overhead')), "
        "fuse small ops (torch.compile), larger batches, and no host syncs (.item(), .cpu(), "
        "printing tensors) inside the step"
    )
    return Verdict(
        VerdictKind.CPU_LAUNCH_BOUND,
        f"the GPU is idle {_pct(s.idle_ratio)} of the time waiting for the host to launch work",
        tuple(evidence),
        fix,
    )


def _queued_verdict(s: Signals, delay_p50_us: float, evidence: tuple[str, ...]) -> Verdict:
    """The GPU idles with work already launched: the trace cannot say what it waited for."""
    waited = (
        f"the median kernel starts {_duration(delay_p50_us)} after its own launch call, where a "
        f"GPU waiting for launches starts it within {QUEUED_LAUNCH_DELAY_US:.0f} µs: the work was "
        "queued and the GPU did not run it, so the idle time is not the host launching too slowly"
    )
    return Verdict(
        VerdictKind.NOT_ENOUGH_DATA,
        f"the GPU is idle {_pct(s.idle_ratio)} of the time, yet this process's kernels start "
        "long after their launches: what held the GPU (or an offset of its clock) is not in the "
        "trace",
        (*evidence, waited),
        _QUEUED_FIX,
    )


def _comm_verdict(
    s: Signals,
    ranks: Mapping[int, RankInsights],
    stragglers: StragglerReport | None,
    extra: tuple[str, ...] = (),
) -> Verdict:
    evidence = (_comm_evidence(s), *extra)
    if stragglers is not None and stragglers.stragglers:
        late = ", ".join(str(r) for r in stragglers.stragglers)
        detail = [
            f"rank {r.rank}: late by {r.late_arrival_mean_us:.0f} µs on average, last at "
            f"{r.last_arrivals} of {stragglers.matched_collectives} collectives"
            if r.late_arrival_mean_us is not None
            else f"rank {r.rank}: median step {_ms(r.step_time_median_us or 0.0)}"
            for r in stragglers.ranks
            if r.is_straggler
        ]
        return Verdict(
            VerdictKind.STRAGGLER_BOUND,
            f"rank(s) {late} arrive late at the collectives and the other ranks wait for them",
            (*evidence, f"stragglers by {stragglers.metric}: " + "; ".join(detail)),
            stragglers.fix
            or f"find what slows rank(s) {late}: its host (CPU contention, data loading), its "
            "GPU (`gpuwarden doctor` on that node: throttling, ECC, PCIe/NVLink) or its network",
            rank=stragglers.stragglers[0],
        )
    return Verdict(
        VerdictKind.COMMUNICATION_BOUND,
        f"{_pct(s.exposed_comm_ratio)} of the GPU time is communication that compute does not hide",
        evidence,
        _first_fix(ranks, "communication")
        or "overlap communication with compute (DDP bucket_cap_mb, FSDP forward/backward "
        "prefetch), send fewer bytes (bf16 reductions, gradient accumulation), and check the "
        "interconnect's bandwidth with nccl-tests",
    )


def _kernel_verdict(s: Signals, ranks: Mapping[int, RankInsights], training: bool) -> Verdict:
    busy = (
        f"GPU busy {_pct(1 - s.idle_ratio)} of the GPU-active span ({s.span_source}); "
        f"exposed communication {_pct(s.exposed_comm_ratio)} of the span of GPU events"
    )
    mix = (
        f"compute kernel time {_ms(s.compute_us)}: elementwise/reduction "
        f"{_pct(s.memory_bound_ratio)}, GEMM/attention "
        f"{_pct(s.math_us / s.compute_us if s.compute_us else 0.0)}"
    )
    precision = GemmPrecision.of(ranks)
    attention = AttentionUse.of(ranks)
    facts = [line for line in (precision.evidence(), attention.evidence()) if line]
    if s.memory_bound_ratio >= MEMORY_BOUND_KERNEL_RATIO:
        return Verdict(
            VerdictKind.MEMORY_BOUND_KERNELS,
            f"{_pct(s.memory_bound_ratio)} of compute time is "
            "elementwise and reduction kernels, limited by memory bandwidth",
            (busy, mix, *facts),
            _memory_fix(precision, attention, training),
        )
    evidence = [busy, mix]
    tc = next((r.tensor_cores for r in ranks.values() if r.tensor_cores is not None), None)
    if tc is not None:
        evidence.append(_tensor_core_evidence(tc))
    evidence += facts
    fix = _compute_fix(s, ranks, precision, attention)
    where = (
        "mostly in GEMM/attention kernels"
        if s.math_us >= s.compute_us / 2
        else "mostly in compute kernels other than elementwise/reduction"
    )
    return Verdict(
        VerdictKind.COMPUTE_BOUND,
        f"the GPU is busy {_pct(1 - s.idle_ratio)} of the time, {where}",
        tuple(evidence),
        fix,
    )


def _tensor_core_evidence(tc: TensorCoreReport) -> str:
    """The tensor-core and FP32 SIMT shares of GEMM time, and the share whose kernel names say
    neither when that is most of it (MIOpen's convolutions): two zeros alone would read as GEMMs
    on neither."""
    line = (
        f"GEMM time on tensor cores {_pct(tc.tensor_core_ratio)}, FP32 SIMT {_pct(tc.simt_ratio)}"
    )
    unnamed = tc.unknown_us / tc.gemm_time_us if tc.gemm_time_us > 0 else 0.0
    if unnamed >= KNOWN_PRECISION_RATIO:
        line += f"; the kernel names do not say which for {_pct(unnamed)}"
    return line


@dataclass(frozen=True, slots=True)
class GemmPrecision:
    """GEMM time per input precision over the ranks, from the kernel names."""

    by_dtype: dict[GemmDtype, float]
    unknown_us: float
    simt_us: float  # FP32 kernels on CUDA cores (the rest of FP32 is AMD's FP32 MFMA)

    @classmethod
    def of(cls, ranks: Mapping[int, RankInsights]) -> GemmPrecision:
        by: dict[GemmDtype, float] = {}
        unknown = simt = 0.0
        for tc in (r.tensor_cores for r in ranks.values()):
            if tc is None:
                continue
            for d in tc.dtypes:
                by[d.dtype] = by.get(d.dtype, 0.0) + d.time_us
            unknown += tc.unknown_dtype_us
            simt += tc.simt_us
        return cls(by, unknown, simt)

    @property
    def total_us(self) -> float:
        return sum(self.by_dtype.values()) + self.unknown_us

    def share(self, *dtypes: GemmDtype) -> float:
        total = self.total_us
        return sum(self.by_dtype.get(d, 0.0) for d in dtypes) / total if total > 0 else 0.0

    @property
    def known(self) -> bool:
        """The names say the precision of most GEMM time."""
        return self.total_us > 0 and self.unknown_us / self.total_us < KNOWN_PRECISION_RATIO

    @property
    def reduced(self) -> tuple[GemmDtype, ...]:
        """The 16-bit-or-narrower precisions that ran, by time desc."""
        return tuple(d for d in self._by_time() if d.is_reduced)

    def _by_time(self) -> list[GemmDtype]:
        return sorted(self.by_dtype, key=lambda d: (-self.by_dtype[d], d))

    @property
    def already_reduced(self) -> bool:
        """Most GEMM time is fp16/bf16/fp8/int8 and FP32/TF32 are too little to matter."""
        full = self.share(GemmDtype.FP32, GemmDtype.FP64, GemmDtype.TF32)
        return (
            self.known
            and self.share(*self.reduced) >= KNOWN_PRECISION_RATIO
            and full < PRECISION_FIX_RATIO
        )

    def evidence(self) -> str | None:
        total = self.total_us
        if total <= 0:
            return None
        parts = [f"{d} {_share(self.by_dtype[d] / total)}" for d in self._by_time()]
        if self.unknown_us > 0:
            parts.append(f"not named {_share(self.unknown_us / total)}")
        return f"GEMM input precision (kernel names): {', '.join(parts)} of GEMM time"


@dataclass(frozen=True, slots=True)
class AttentionUse:
    """Attention backends over the ranks: SDPA calls per backend and fused kernel time."""

    sdpa_calls: int
    calls: dict[SdpaBackend, int]
    kernel_us: dict[SdpaBackend, float]
    math_fix: str | None

    @classmethod
    def of(cls, ranks: Mapping[int, RankInsights]) -> AttentionUse:
        calls: dict[SdpaBackend, int] = {}
        kernel_us: dict[SdpaBackend, float] = {}
        sdpa = 0
        for a in (r.attention for r in ranks.values()):
            if a is None:
                continue
            sdpa += a.sdpa_calls
            for b in a.backends:
                calls[b.backend] = calls.get(b.backend, 0) + b.calls
                kernel_us[b.backend] = kernel_us.get(b.backend, 0.0) + b.kernel_time_us
        return cls(sdpa, calls, kernel_us, _first_fix(ranks, "attention"))

    @property
    def math_calls(self) -> int:
        return self.calls.get(SdpaBackend.MATH, 0)

    @property
    def fused(self) -> tuple[SdpaBackend, ...]:
        """Fused backends that ran (an SDPA call or a kernel), most used first."""
        used = [b for b in SdpaBackend if b is not SdpaBackend.MATH and b in self.calls]
        used.sort(key=lambda b: (-self.calls[b], -self.kernel_us[b]))
        return tuple(used)

    def evidence(self) -> str | None:
        if not self.calls:
            return None
        parts = []
        for b in sorted(self.calls, key=lambda b: (-self.calls[b], -self.kernel_us[b])):
            what = [f"{self.calls[b]:,} SDPA call(s)"] if self.calls[b] else []
            if self.kernel_us[b] > 0:
                what.append(f"{_ms(self.kernel_us[b])} of kernels")
            parts.append(f"{b} ({', '.join(what)})")
        calls = (
            f"; {self.sdpa_calls:,} scaled_dot_product_attention call(s)" if self.sdpa_calls else ""
        )
        return f"attention backends (SDPA ops, kernel names): {', '.join(parts)}{calls}"


def _precision_gain(p: GemmPrecision) -> bool:
    """Enough FP32/TF32 GEMM time, by the names, for a cheaper precision to pay."""
    full = p.share(GemmDtype.FP32, GemmDtype.FP64, GemmDtype.TF32)
    return p.known and full >= PRECISION_FIX_RATIO


def _precision_fix(
    p: GemmPrecision, attention: AttentionUse, capability: tuple[int, int] | None
) -> str:
    """What the GEMMs' precision leaves to gain, from what the kernel names say it is, on the
    GPU of ``capability``."""
    flash = "" if attention.fused or attention.math_calls else ", FlashAttention"
    fp32 = p.share(GemmDtype.FP32, GemmDtype.FP64)
    if p.known and fp32 >= PRECISION_FIX_RATIO:
        where = "on CUDA cores, not tensor cores" if p.simt_us >= fp32 * p.total_us / 2 else ""
        return (
            f"{_pct(fp32)} of GEMM time is FP32{' ' + where if where else ''}: "
            + cheaper_precision(capability)
        )
    tf32 = p.share(GemmDtype.TF32)
    if p.known and tf32 >= PRECISION_FIX_RATIO:
        return (
            f"{_pct(tf32)} of GEMM time is TF32 on tensor cores: bf16/fp16 autocast "
            "(torch.autocast) runs those GEMMs at twice the TF32 rate of A100/H100 tensor cores"
        )
    if p.already_reduced:
        names = "/".join(str(d) for d in p.reduced)
        return (
            f"the GEMMs already run in {names} ({_pct(p.share(*p.reduced))} of GEMM time), so "
            "autocast has nothing left to give: cut the math itself (shorter or packed "
            f"sequences without padding tokens, a smaller model{flash}) or buy more GPU"
        )
    return (
        "the GPU is doing math: make it cheaper (bf16/fp16 autocast or TF32 so GEMMs use "
        f"tensor cores, dimensions multiples of 8{flash}) or buy more of it"
    )


def _compute_fix(
    s: Signals, ranks: Mapping[int, RankInsights], p: GemmPrecision, attention: AttentionUse
) -> str:
    if s.math_us > 0 and s.attention_us / s.math_us >= FUSED_ATTENTION_RATIO:
        return (
            "the math is mostly fused attention kernels, so FlashAttention-style fusion is "
            "already in use: do less attention work (shorter or packed sequences without "
            "padding tokens, causal or sliding-window masks, grouped-query attention) or buy "
            "more GPU"
        )
    parts = [attention.math_fix] if attention.math_fix else []
    capability = next(
        (r.compute_capability for r in ranks.values() if r.compute_capability is not None), None
    )
    precision = _precision_fix(p, attention, capability)
    tc = next(
        (r.tensor_cores for r in ranks.values() if r.tensor_cores and r.tensor_cores.fix), None
    )
    if tc is None or tc.fix is None:
        return "; ".join([*parts, precision])
    # the tensor-core analysis' own remedy (FP32 on CUDA cores, misaligned shapes) is specific;
    # the precision one goes first when it has something to give that remedy does not say
    if _precision_gain(p) and tc.simt_ratio < PRECISION_FIX_RATIO:
        parts.append(precision)
    parts.append(tc.fix)
    return "; ".join(parts)


def _memory_fix(p: GemmPrecision, attention: AttentionUse, training: bool) -> str:
    """Fewer bytes moved; the fused-attention and bf16 parts only where the trace does not show
    them in use already, the optimizer part only where it trains."""
    attn = "" if attention.fused else " and attention"
    bf16 = "" if p.already_reduced else ", bf16 activations"
    optimizer = "fused optimizers (fused=True / foreach), " if training else ""
    fix = (
        f"move fewer bytes: fuse elementwise chains (torch.compile), {optimizer}"
        f"fused LayerNorm/RMSNorm{attn} kernels{bf16}"
    )
    return f"{attention.math_fix}; {fix}" if attention.math_fix else fix


def _duration(us: float) -> str:
    """ms, or µs below a tenth of a millisecond (a glimpse would read "0.0 ms")."""
    return _ms(us) if us >= 100 else f"{us:,.1f} µs"


def _not_enough(
    s: Signals, ranks: Mapping[int, RankInsights], launched_in_steps: Mapping[int, float]
) -> Verdict:
    """Too little GPU work to weigh. When the trace already has ProfilerStep windows, asking for
    step annotations is no help: either the steps do run on the GPU, merely too few or too small
    (the work inside their windows, or else the work they launched, which a GPU running behind
    the host runs after the windows close), or the annotated steps hold (almost) no GPU work, so
    the profiled iterations were not the GPU-heavy ones (warm-up, evaluation/logging-only steps)
    or the work did not run on the GPU."""
    steps = [step for r in ranks.values() for step in r.steps]
    # the span of the events counted (all of them), not HTA's kernel time, which leaves out the
    # last ProfilerStep and the warm-up step's kernels
    head = (
        f"{s.gpu_events} kernel/memcpy/memset event(s) on {s.ranks_with_gpu} rank(s) over "
        f"{_duration(s.gpu_span_us)} of GPU activity: one event or gap would decide the shares"
    )
    summary = (
        f"not enough GPU work in the trace to name a bottleneck: {s.gpu_events} GPU event(s), "
        f"a verdict needs at least {MIN_GPU_EVENTS}"
    )
    missing = (
        f"missing: at least {MIN_GPU_EVENTS - s.gpu_events} more GPU events, best whole "
        "training steps (ProfilerStep annotations)"
    )
    if not steps:
        return Verdict(VerdictKind.NOT_ENOUGH_DATA, summary, (head, missing), _PROFILE_HINT)
    wall_us = sum(step.wall_us for step in steps)
    busy_us = sum(step.gpu_busy_us or 0.0 for step in steps)
    traced_us = sum(r.gpu_busy_us for r in ranks.values())
    held = (
        f"the {len(steps)} ProfilerStep window(s) in the trace ({_duration(wall_us)}) hold "
        f"{_duration(busy_us)} of GPU work"
    )
    if _steps_do_the_gpu_work(busy_us, traced_us, wall_us):
        small = (
            f"{held}, {_share(busy_us / traced_us)} of the trace's {_duration(traced_us)}: the "
            "steps run on the GPU, too few of them or too little in each to weigh"
        )
        return Verdict(VerdictKind.NOT_ENOUGH_DATA, summary, (head, missing, small), _MORE_STEPS)
    queued_us = sum(launched_in_steps.get(r, 0.0) for r in ranks)
    if _steps_do_the_gpu_work(queued_us, traced_us, wall_us):
        behind = (
            f"{held}, yet they launch {_duration(queued_us)} of it, "
            f"{_share(queued_us / traced_us)} of the trace's {_duration(traced_us)}, which the "
            "GPU runs after their windows close (it runs behind the host): the steps run on the "
            "GPU, too few of them or too little in each to weigh"
        )
        return Verdict(VerdictKind.NOT_ENOUGH_DATA, summary, (head, missing, behind), _MORE_STEPS)
    in_steps = f"{held}: the profiled steps are not the GPU-heavy ones"
    fix = (
        "profile steps that do the GPU work: start the schedule after warm-up and "
        "evaluation/logging-only iterations and raise active= "
        "(torch.profiler.schedule(wait=1, warmup=1, active=3)), keeping prof.step() at the end "
        "of every iteration; check that the model and its inputs are on the GPU"
    )
    return Verdict(VerdictKind.NOT_ENOUGH_DATA, summary, (head, missing, in_steps), fix)


# Steps that hold most of the trace's GPU work (at least _GPU_STEP_MIN_SHARE of it), busy for
# more than _GPU_STEP_MIN_BUSY of their wall time, are GPU steps that are merely few or small (a
# micro-benchmark of one op per step); below it the GPU did next to nothing in them: the profiled
# iterations were not the GPU-heavy ones, or the work did not run on the GPU.
_GPU_STEP_MIN_SHARE = 0.5
_GPU_STEP_MIN_BUSY = 0.01
_MORE_STEPS = (
    "profile more GPU work: raise active= in torch.profiler.schedule (e.g. wait=1, warmup=1, "
    "active=5), keeping prof.step() at the end of every iteration, or, in a micro-benchmark, "
    f"repeat the op inside each profiled step, so the trace holds at least {MIN_GPU_EVENTS} "
    "kernels"
)


def _steps_do_the_gpu_work(busy_us: float, traced_us: float, wall_us: float) -> bool:
    """The steps hold at least ``_GPU_STEP_MIN_SHARE`` of the trace's GPU work and keep the
    GPU busy for more than ``_GPU_STEP_MIN_BUSY`` of their time."""
    most = busy_us >= _GPU_STEP_MIN_SHARE * traced_us
    return traced_us > 0 and most and busy_us > _GPU_STEP_MIN_BUSY * wall_us


def _why_no_gpu_events(host: Mapping[int, HostRecord]) -> tuple[str, str]:
    """(evidence, fix) for a job without GPU events, from what its ranks' host side recorded:
    counter ranges → a range-profiler capture; GPU work queued, most ops timed by CUDA-event pairs
    → the profiler's CUDA-event fallback never asked for GPU records; GPU work queued but not
    recorded → the profiler lost the GPU records; CUDA calls but none queueing work → the region
    did no GPU work; no CUDA call while GPUs are listed → CUDA activity was not captured; no GPU
    listed → the process saw no GPU."""
    work = sum(h.gpu_work_calls for h in host.values())
    runtime = sum(h.runtime_calls for h in host.values())
    cpu_ops = sum(h.cpu_ops for h in host.values())
    listed = sorted({name for h in host.values() for name in h.gpus_listed})
    ranges = sum(h.counter_ranges for h in host.values())
    if ranges:
        # Kineto's CUPTI range profiler (experimental_config profiler_metrics, pytorch#94689)
        # reads performance counters per range instead of tracing GPU activity
        return (
            f"{ranges:,} CUPTI range-profiler range(s) (cuda_profiler_range): a performance-"
            "counter capture, which records counters per range, not the GPU timeline",
            "profile again without experimental_config profiler_metrics to trace the kernels "
            "(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    timed = sum(h.event_timed_ops for h in host.values())
    if work and cpu_ops and timed >= FALLBACK_OP_SHARE * cpu_ops:
        return (
            f"the host recorded {work:,} call(s) that queue GPU work (kernel launches, copies, "
            f"memsets) and the GPU side none; {timed:,} of its {cpu_ops:,} CPU ops each carry "
            "two cudaEventRecord calls with their External id: the profiler ran in PyTorch's "
            "CUDA-event fallback (KINETO_GPU_FALLBACK), which times ops with CUDA events and "
            "never asks for the GPU activity",
            _FALLBACK_FIX,
        )
    if work:
        return (
            f"the host recorded {work:,} call(s) that queue GPU work (kernel launches, copies, "
            "memsets) and the GPU side none: the GPU activity records were lost, not the work",
            "the profiler was asked for CUDA activity but returned no GPU record: " + _CUPTI_FIX,
        )
    if runtime:
        return (
            f"{runtime:,} CUDA runtime call(s), none a kernel launch, copy or memset: the "
            "profiled region queued no GPU work",
            _RUN_ON_GPU_FIX,
        )
    if listed:
        return (
            f"{cpu_ops:,} CPU op(s) and not one CUDA runtime call, while the trace lists "
            f"{sum(len(h.gpus_listed) for h in host.values())} GPU(s) ({', '.join(listed)}): "
            "the profiler captured no CUDA activity",
            "add ProfilerActivity.CUDA to the profiler's activities; if it is there already, "
            + _CUPTI_FIX,
        )
    return (
        f"{cpu_ops:,} CPU op(s), no CUDA runtime call and no GPU listed (no deviceProperties): "
        "the process saw no GPU",
        _RUN_ON_GPU_FIX,
    )


def _no_gpu_activity(n_ranks: int, host: Mapping[int, HostRecord] | None) -> Verdict:
    counts = f"{n_ranks} rank(s), 0 GPU events"
    evidence: tuple[str, ...] = (counts,)
    fix = _RUN_ON_GPU_FIX
    if host:
        why, fix = _why_no_gpu_events(host)
        evidence = (counts, why)
    return Verdict(
        VerdictKind.NO_GPU_ACTIVITY,
        "the trace has no kernel, memcpy or memset on any rank",
        evidence,
        fix,
    )


def diagnose(
    hta: HtaReport,
    ranks: Mapping[int, RankInsights],
    stragglers: StragglerReport | None,
    host: Mapping[int, HostRecord] | None = None,
    launched_in_steps: Mapping[int, float] | None = None,
    host_ops: Mapping[int, HostOpIdle] | None = None,
    held_idle: Mapping[int, float] | None = None,
    training: bool = True,
) -> Verdict:
    """Walk the tree (module docstring) over the job-wide ``signals``; ``host`` (what each
    rank's host side recorded) explains a job without GPU events; ``launched_in_steps`` (per
    rank, the GPU busy time of the work launched from inside its ProfilerStep windows) tells a
    GPU that runs behind the host from steps without GPU work when there is too little to
    weigh; ``host_ops`` (per rank, the CPU op running during most of its GPU idle time) tells a
    host that computes from one that launches slowly; ``held_idle`` (per rank, the GPU idle time
    during which launched kernels waited with their stream free) tells a GPU that held launched
    work from one whose kernels queued behind this process's own earlier kernels; ``training``:
    the trace shows a backward pass or an optimizer step (an inference trace has neither: no
    optimizer to fuse)."""
    s = signals(hta, ranks)
    if s.ranks_with_gpu == 0 or s.span_us <= 0:
        return _no_gpu_activity(len(ranks), host)
    if s.gpu_events < MIN_GPU_EVENTS:
        return _not_enough(s, ranks, launched_in_steps or {})
    idle_ratio, comm_ratio = s.idle_ratio, s.exposed_comm_ratio
    if idle_ratio >= BOTTLENECK_RATIO and idle_ratio >= comm_ratio:
        return _host_verdict(s, ranks, stragglers, host_ops, held_idle)
    if comm_ratio >= BOTTLENECK_RATIO:
        return _comm_verdict(s, ranks, stragglers)
    return _kernel_verdict(s, ranks, training)
