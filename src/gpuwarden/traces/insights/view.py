"""What every per-rank analysis needs, computed once: kinds per row, GPU/compute/comm unions,
ProfilerStep windows, the launch call of each GPU row, DataLoader ranges, the device name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwarden.traces.arrays import distinct_counts, member
from gpuwarden.traces.classify import classify_rank
from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.model import Category
from gpuwarden.types.trace_insights import KernelKind

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy.typing as npt

    from gpuwarden.traces.model import RankTrace

# torch.profiler names each step "ProfilerStep#" + str(step_num), a counter from 0: a number of
# more digits than an int64 holds is no step torch wrote (and would overflow the step column)
_STEP = re.compile(r"^ProfilerStep#([0-9]{1,18})$")
# `enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__` (record_function of the
# DataLoader iterator) and, with with_stack, python frames of torch/utils/data/dataloader.py.
_DATALOADER = re.compile(r"DataLoader|dataloader\.py\(\d+\): (__next__|_next_data)")
_HOST_CATS = (Category.USER_ANNOTATION, Category.CPU_OP, Category.PYTHON_FUNCTION)
_LAUNCH_CATS = (Category.CUDA_RUNTIME, Category.CUDA_DRIVER, Category.MTIA_RUNTIME)


@dataclass(frozen=True, slots=True)
class RankView:
    rank: RankTrace
    kinds: npt.NDArray[np.int8]
    end: npt.NDArray[np.float64]
    gpu: npt.NDArray[np.bool_]  # kernels, memcpy, memset (not syncs)
    compute: npt.NDArray[np.bool_]
    comm: npt.NDArray[np.bool_]
    gpu_union: iv.Union
    compute_union: iv.Union
    comm_union: iv.Union
    step_ids: npt.NDArray[np.int64]
    step_start: npt.NDArray[np.float64]
    step_end: npt.NDArray[np.float64]
    step_dur: npt.NDArray[np.float64]  # exact; step_end - step_start loses precision at ~1e15 µs
    launch_row: npt.NDArray[np.int64]  # per row: the runtime row with its correlation, or -1
    dataloader_rows: npt.NDArray[np.int64]
    dataloader_union: iv.Union
    device_name: str | None
    compute_capability: tuple[int, int] | None  # (major, minor) of deviceProperties

    def launch_ts(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Start of each row's launch call, NaN where it has none."""
        lr = self.launch_row[rows]
        out = np.full(rows.shape, np.nan)
        ok = lr >= 0
        out[ok] = self.rank.ts[lr[ok]]
        return out


def name_mask(rank: RankTrace, pattern: re.Pattern[str]) -> npt.NDArray[np.bool_]:
    """Rows whose name matches, testing each distinct name once."""
    hits = np.array([bool(pattern.search(n)) for n in rank.names] or [False], dtype=bool)
    return hits[rank.name_id] if len(rank) else np.zeros(0, dtype=bool)


def _steps(rank: RankTrace) -> tuple[Any, Any, Any, Any]:
    host = member(rank.category, [int(c) for c in _HOST_CATS], len(Category))
    ids = {i: int(m.group(1)) for i, n in enumerate(rank.names) if (m := _STEP.match(n))}
    is_step = member(rank.name_id, list(ids), len(rank.names))
    rows = np.flatnonzero(host & is_step).tolist()
    rows.sort(key=lambda r: (float(rank.ts[r]), r))
    seen: set[int] = set()
    kept = []
    for r in rows:
        n = ids[int(rank.name_id[r])]
        if n not in seen:
            seen.add(n)
            kept.append(r)
    idx = np.array(kept, dtype=np.int64)
    return (
        np.array([ids[int(rank.name_id[r])] for r in kept], dtype=np.int64),
        rank.ts[idx],
        rank.ts[idx] + rank.dur[idx],
        rank.dur[idx],
    )


def _launch_rows(rank: RankTrace, gpu_like: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    launch = member(rank.category, [int(c) for c in _LAUNCH_CATS], len(Category)) & (
        rank.correlation >= 0
    )
    out = np.full(len(rank), -1, dtype=np.int64)
    cpu_rows = np.flatnonzero(launch)
    if cpu_rows.size == 0:
        return out
    corr = rank.correlation[cpu_rows]
    order = np.argsort(corr, kind="stable")
    corr, cpu_rows = corr[order], cpu_rows[order]
    want = np.flatnonzero(gpu_like & (rank.correlation >= 0))
    pos = np.searchsorted(corr, rank.correlation[want])
    pos_ok = pos < corr.size
    hit = np.zeros(want.shape, dtype=bool)
    hit[pos_ok] = corr[pos[pos_ok]] == rank.correlation[want][pos_ok]
    out[want[hit]] = cpu_rows[pos[hit]]
    return out


def _device_entry(rank: RankTrace, gpu: npt.NDArray[np.bool_]) -> Mapping[str, Any] | None:
    """The deviceProperties entry of the GPU the rank ran on: the one of the device id its GPU
    events carry most (``args.device``), else the only entry, else one of the model every entry
    names (which of 8 H200s is unknown, the model is not); None when nothing decides (no GPU
    event among GPUs of several models)."""
    props = rank.meta.device_properties
    if not props:
        return None
    models = {p.get("name") for p in props}
    entry = props[0] if len(models) == 1 else None
    dev = rank.device[gpu]
    dev = dev[dev >= 0]
    if dev.size:
        # the most used id (smallest on ties); unique, not bincount: ids are raw file values
        # (a corrupt 3e9 would make bincount allocate 23 GiB)
        ids, counts = distinct_counts(dev)
        used = int(ids[int(np.argmax(counts))])
        entry = next((p for p in props if p.get("id") == used), entry)
    return entry


def _device_name(entry: Mapping[str, Any] | None) -> str | None:
    name = None if entry is None else entry.get("name")
    return name if isinstance(name, str) else None


def _compute_capability(entry: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """Kineto's ``computeMajor`` / ``computeMinor`` (cudaDeviceProp.major / .minor)."""
    if entry is None:
        return None
    major, minor = entry.get("computeMajor"), entry.get("computeMinor")
    if type(major) is not int or type(minor) is not int or not (0 < major < 100 and minor >= 0):
        return None
    return major, minor


def build_view(rank: RankTrace) -> RankView:
    kinds = classify_rank(rank)
    end = rank.ts + rank.dur
    k = kinds.astype(np.int16)
    compute = k <= int(KernelKind.COMPUTE_OTHER)
    comm = (k >= int(KernelKind.COMM_ALLREDUCE)) & (k <= int(KernelKind.COMM_OTHER))
    gpu = k <= int(KernelKind.MEMSET)
    host = member(rank.category, [int(c) for c in _HOST_CATS], len(Category))
    dl_rows = np.flatnonzero(host & name_mask(rank, _DATALOADER))
    step_ids, step_start, step_end, step_dur = _steps(rank)
    return RankView(
        rank=rank,
        kinds=kinds,
        end=end,
        gpu=gpu,
        compute=compute,
        comm=comm,
        gpu_union=iv.union(rank.ts[gpu], end[gpu]),
        compute_union=iv.union(rank.ts[compute], end[compute]),
        comm_union=iv.union(rank.ts[comm], end[comm]),
        step_ids=step_ids,
        step_start=step_start,
        step_end=step_end,
        step_dur=step_dur,
        launch_row=_launch_rows(rank, gpu | (k == int(KernelKind.SYNC))),
        dataloader_rows=dl_rows,
        dataloader_union=iv.union(rank.ts[dl_rows], end[dl_rows]),
        device_name=_device_name(entry := _device_entry(rank, gpu)),
        compute_capability=_compute_capability(entry),
    )
