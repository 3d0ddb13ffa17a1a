"""What a rank's host side recorded of CUDA, read when no rank has a GPU event: whether the
profiler saw CUDA at all, and whether the process queued GPU work, decide why."""

from __future__ import annotations

import re

import numpy as np

from gpuwarden.traces.arrays import distinct_counts, member
from gpuwarden.traces.insights.view import name_mask
from gpuwarden.traces.model import Category, RankTrace
from gpuwarden.traces.verdict import HostRecord

# Runtime/driver calls that queue GPU work, CUDA and HIP spellings alike: kernel and graph
# launches (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, hipExtModuleLaunchKernel),
# copies (cudaMemcpyAsync, hipMemcpyWithStream) and memsets.
_GPU_WORK_CALL = re.compile(r"launch|memcpy|memset", re.IGNORECASE)
# PyTorch's CUDA-event fallback (ProfilerState.KINETO_GPU_FALLBACK, torch/csrc/profiler/
# collection.cpp): begin_op and end_op each record a CUDA event for the op, so the runtime trace
# carries two cudaEventRecord calls with the op's External id around every op it times.
_EVENT_RECORD = "cudaEventRecord"
_FALLBACK_EVENTS_PER_OP = 2


def runtime_calls(rank: RankTrace) -> tuple[np.ndarray, np.ndarray]:
    """Masks over ``rank``'s events: its CUDA / HIP runtime and driver calls, and those of them
    that queue GPU work."""
    runtime = member(
        rank.category, (int(Category.CUDA_RUNTIME), int(Category.CUDA_DRIVER)), len(Category)
    )
    return runtime, runtime & name_mask(rank, _GPU_WORK_CALL)


def event_timed_ops(rank: RankTrace, runtime: np.ndarray) -> int:
    """``rank``'s CPU ops that carry exactly two ``cudaEventRecord`` runtime calls with their
    External id (``runtime``: the mask of runtime/driver calls): the ops the profiler's
    CUDA-event fallback timed."""
    if _EVENT_RECORD not in rank.names:
        return 0
    records = runtime & (rank.name_id == rank.names.index(_EVENT_RECORD))
    ids, counts = distinct_counts(rank.external_id[records & (rank.external_id >= 0)])
    bracketed = ids[counts == _FALLBACK_EVENTS_PER_OP]
    ops = rank.external_id[rank.category == int(Category.CPU_OP)]
    return int(np.isin(ops, bracketed).sum())


def host_record(rank: RankTrace) -> HostRecord:
    """What ``rank``'s host side recorded of CUDA: the GPUs its file lists, its runtime/driver
    calls (and how many queue GPU work), its CPU ops, CUPTI range-profiler ranges and the ops
    timed by the profiler's CUDA-event fallback."""
    runtime, queuing = runtime_calls(rank)
    listed = tuple(
        name for p in rank.meta.device_properties if isinstance(name := p.get("name"), str)
    )
    return HostRecord(
        gpus_listed=listed,
        runtime_calls=int(runtime.sum()),
        gpu_work_calls=int(queuing.sum()),
        cpu_ops=int((rank.category == int(Category.CPU_OP)).sum()),
        counter_ranges=int((rank.category == int(Category.CUDA_PROFILER_RANGE)).sum()),
        event_timed_ops=event_timed_ops(rank, runtime),
    )
