"""Kernel launch overhead: CPU time of each launch call vs the GPU time of the kernel it
launched (joined on the correlation id), launch delay, and kernels shorter than their launch.

HTA's ``get_cuda_kernel_launch_stats`` (reference §1.8) gives the per-launch table; this adds
the summary, Triton/driver and ROCm launch names, CUDA-graph launches, and the fix.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from gpuwarden.traces.arrays import member, quantile
from gpuwarden.traces.hta.idle import CONSECUTIVE_KERNEL_DELAY_US
from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.insights.view import RankView, name_mask
from gpuwarden.traces.model import Category
from gpuwarden.types.trace_insights import LaunchReport

if TYPE_CHECKING:
    import numpy.typing as npt

_LAUNCH = re.compile(
    r"^(cuda|cu|hip)(Ext)?(Module)?Launch(Cooperative)?Kernel|^cudaLaunchKernelExC"
    r"|^runFunction - job_prep_and_submit_for_execution"
)
_GRAPH = re.compile(r"^(cuda|hip|cu)GraphLaunch")
# Fix when most kernels are shorter than their launch and the host is not far ahead of the GPU
# (a long launch delay means a full queue: the GPU, not the launch path, is the limit).
SHORT_RATIO_FIX = 0.5
QUEUED_DELAY_US = 50.0


def _matches(view: RankView, pattern: re.Pattern[str]) -> np.ndarray:
    rank = view.rank
    host = member(
        rank.category,
        [int(Category.CUDA_RUNTIME), int(Category.CUDA_DRIVER), int(Category.MTIA_RUNTIME)],
        len(Category),
    )
    return name_mask(rank, pattern) & host


def _launched_kernels(view: RankView) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The kernel rows a launch call (cudaLaunchKernel and kin) launched, and those calls' rows."""
    rank = view.rank
    kernels = np.flatnonzero(
        member(rank.category, [int(Category.KERNEL), int(Category.MTIA_CCP_EVENTS)], len(Category))
    )
    lr = view.launch_row[kernels]
    ok = lr >= 0
    kernels, lr = kernels[ok], lr[ok]
    sel = _matches(view, _LAUNCH)[lr]
    return kernels[sel], lr[sel]


def launch(view: RankView) -> LaunchReport | None:
    rank = view.rank
    kernels, lr = _launched_kernels(view)
    if kernels.size == 0:
        return None
    cpu = rank.dur[lr]
    gpu = rank.dur[kernels]
    delay = np.maximum(rank.ts[kernels] - (rank.ts[lr] + rank.dur[lr]), 0.0)
    short = gpu < cpu
    short_ratio = float(short.mean())
    delay_p50 = float(_percentile(delay, 50))
    fix = None
    if short_ratio >= SHORT_RATIO_FIX and delay_p50 < QUEUED_DELAY_US:
        fix = (
            "most kernels take less GPU time than their launch takes on the CPU: capture the "
            "step in a CUDA graph (torch.compile(mode='reduce-overhead') or "
            "torch.cuda.CUDAGraph), fuse small ops (torch.compile), or raise the batch size"
        )
    gpu_total = float(gpu.sum())
    return LaunchReport(
        launches=int(kernels.size),
        graph_launches=int(_matches(view, _GRAPH).sum()),
        cpu_launch_p50_us=float(_percentile(cpu, 50)),
        cpu_launch_p90_us=float(_percentile(cpu, 90)),
        gpu_kernel_p50_us=float(_percentile(gpu, 50)),
        gpu_kernel_p90_us=float(_percentile(gpu, 90)),
        launch_delay_p50_us=delay_p50,
        launch_delay_p90_us=float(_percentile(delay, 90)),
        launch_delay_p99_us=float(_percentile(delay, 99)),
        short_kernel_ratio=short_ratio,
        short_kernel_gpu_ratio=float(gpu[short].sum()) / gpu_total if gpu_total > 0 else 0.0,
        cpu_launch_total_us=float(cpu.sum()),
        gpu_kernel_total_us=gpu_total,
        fix=fix,
    )


def held_idle_us(view: RankView) -> float | None:
    """GPU idle time (gaps of the union of its GPU events) during which a launched kernel waited
    with its launch call returned and its stream free: the wait of each kernel beyond
    max(launch call end, end of the GPU work queued before it on its stream), its intervals'
    union within the gaps; None without launched kernels. A CUDA stream runs its work in issue
    order, so a kernel queued behind a running kernel of its own stream waits for that kernel:
    the GPU was busy with this process's recorded work there, not holding the new one; and the
    few µs the stream then takes to start it (HTA's kernel_wait, ``_stream_gap``) are the
    stream's own, not held either."""
    rank = view.rank
    kernels, lr = _launched_kernels(view)
    gpu = view.gpu_union
    if kernels.size == 0 or gpu[0].size == 0:
        return None
    stream_done = _stream_busy_until(view)[kernels]
    ready = np.maximum(rank.ts[lr] + rank.dur[lr], stream_done)
    start = rank.ts[kernels]
    waited = (start > ready) & ~_stream_gap(rank.ts[lr], stream_done, start)
    gaps = iv.gaps(gpu)
    return iv.length(iv.intersect(iv.union(ready[waited], start[waited]), gaps))


def _stream_gap(
    launch_start: npt.NDArray[np.float64],
    stream_done: npt.NDArray[np.float64],
    start: npt.NDArray[np.float64],
) -> npt.NDArray[np.bool_]:
    """Per kernel: HTA's kernel_wait (idle_time_breakdown): its launch call began by the time its
    stream's earlier work ended (not host_wait, so it sat queued behind that work) and it
    started less than ``consecutive_kernel_delay`` after that end, the gap a stream leaves
    between back-to-back kernels. False for a stream's first kernel (``stream_done`` -inf)."""
    return (launch_start <= stream_done) & (start - stream_done < CONSECUTIVE_KERNEL_DELAY_US)


def _stream_busy_until(view: RankView) -> npt.NDArray[np.float64]:
    """Per row: the latest end among the GPU events that start before it on its stream (ties
    in start broken by row order); -inf for the first event of a stream and for non-GPU rows."""
    rank = view.rank
    out = np.full(len(rank), -np.inf)
    rows = np.flatnonzero(view.gpu)
    if rows.size == 0:
        return out
    rows = rows[np.lexsort((rows, rank.ts[rows], rank.stream[rows]))]
    streams = rank.stream[rows]
    first = np.flatnonzero(np.r_[True, streams[1:] != streams[:-1]])
    ended = view.end[rows]
    for start, stop in zip(first, np.r_[first[1:], rows.size], strict=True):
        ended[start:stop] = np.maximum.accumulate(ended[start:stop])
    before = np.r_[-np.inf, ended[:-1]]
    before[first] = -np.inf
    out[rows] = before
    return out


def _percentile(values: npt.NDArray[np.float64], pct: int) -> float:
    """``np.percentile(values, pct)``: numpy divides by 100 first, as here."""
    return quantile(values, pct / 100)
