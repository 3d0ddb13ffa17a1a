"""What a rank's host side recorded of CUDA, read when no rank has a GPU event: whether the
profiler saw CUDA at all, and whether the process queued GPU work, decide why."""

from __future__ import annotations

import re

import numpy as np

from gpuwarden.traces.arrays import member
from gpuwarden.traces.model import Category, RankTrace
from gpuwarden.traces.verdict import HostRecord

# Runtime/driver calls that queue GPU work, CUDA and HIP spellings alike: kernel and graph
# launches (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, hipExtModuleLaunchKernel),
# copies (cudaMemcpyAsync, hipMemcpyWithStream) and memsets.
_GPU_WORK_CALL = re.compile(r"launch|memcpy|memset", re.IGNORECASE)


def runtime_calls(rank: RankTrace) -> tuple[np.ndarray, np.ndarray]:
    """Masks over ``rank``'s events: its CUDA / HIP runtime and driver calls, and those of them
    that queue GPU work."""
    runtime = member(
        rank.category, (int(Category.CUDA_RUNTIME), int(Category.CUDA_DRIVER)), len(Category)
    )
    queues = np.array([bool(_GPU_WORK_CALL.search(n)) for n in rank.names] or [False])
    return runtime, runtime & queues[rank.name_id] if len(rank) else runtime


def host_record(rank: RankTrace) -> HostRecord:
    """What ``rank``'s host side recorded of CUDA: the GPUs its file lists, its runtime/driver
    calls (and how many queue GPU work), its CPU ops and CUPTI range-profiler ranges."""
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
    )
