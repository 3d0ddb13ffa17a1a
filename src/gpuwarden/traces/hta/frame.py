"""HTA 0.5.0's view of each rank after ``TraceAnalysis(...)``: reference/traces.md §1.1 steps 3-11.

ns rounding (ceil start, floor end), ``index_correlation`` (CPU launch ↔ GPU activity by
``args.correlation``; last match wins; unmatched → 0, no correlation → -1), global min-ts
alignment, and the last-ProfilerStep filter with its duplicating inner merge. The row order and
the pandas "labels" of the filtered frame are kept because HTA's idle analysis joins on labels.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwarden.traces.arrays import distinct_counts, member
from gpuwarden.traces.model import LoadedTrace, RankTrace

if TYPE_CHECKING:
    import numpy.typing as npt

    from gpuwarden.traces.model import IdArray

_GPU_SYNC_NAMES = ("Event Sync", "Context Sync")


@dataclass(frozen=True, slots=True)
class HtaFrame:
    """One rank as HTA holds it after loading (rows possibly duplicated by the step filter, and
    then only the rows the breakdowns read)."""

    rank: int
    names: tuple[str, ...]
    cat_names: tuple[str, ...]
    ts: npt.NDArray[Any]  # µs, rounded (ns traces), aligned to the global min; HTA's dtype
    dur: npt.NDArray[Any]
    name_id: npt.NDArray[np.int32]
    cat_id: npt.NDArray[np.int32]
    stream: IdArray
    index_correlation: IdArray
    label: IdArray  # pandas index label of the row in HTA's frame


def _rounded(rank: RankTrace) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """ts and dur as HTA holds them: ns traces rounded (start up, end down), and in the dtypes
    pandas gives the columns — int64 unless some event lacks the value (or has a fraction).
    The dtype matters: HTA sums absolute timestamps, and float64 sums of ~1e15 µs round."""
    meta = rank.meta
    if not meta.ts_is_float:
        dur_int = not (meta.dur_missing or meta.dur_is_float)
        return _int64(rank.ts), _int64(rank.dur) if dur_int else rank.dur
    end = np.floor(rank.ts + rank.dur)
    ts = np.ceil(rank.ts)
    if not meta.ts_missing:
        ts = _int64(ts)
    if not (meta.ts_missing or meta.dur_missing):
        end = _int64(end)
    return ts, end - ts


def _int64(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Integral float64 values as int64, when they fit (absurd values stay float64)."""
    if len(values) and float(np.abs(values).max()) >= 2.0**62:
        return values
    return values.astype(np.int64)


def _gpu_mask(rank: RankTrace) -> npt.NDArray[np.bool_]:
    sync_ids = [i for i, n in enumerate(rank.names) if n in _GPU_SYNC_NAMES]
    mask: npt.NDArray[np.bool_] = (rank.stream >= 0) & (rank.correlation >= 0)
    if sync_ids:
        mask |= member(rank.name_id, sync_ids, len(rank.names))
    return mask


def _last_index_by_key(keys: IdArray, index: IdArray) -> tuple[IdArray, IdArray]:
    """Unique keys and, per key, the index of its last row (rows are in index order)."""
    rev_keys = keys[::-1]
    uniq, first_in_rev = np.unique(rev_keys, return_index=True)
    return uniq, index[::-1][first_in_rev]


def index_correlation(rank: RankTrace, gpu: npt.NDArray[np.bool_]) -> IdArray:
    """HTA's ``transform_correlation_to_index``: partner row's ``index``, last match winning."""
    corr = rank.correlation
    result = np.minimum(corr, 0)
    has = corr != -1
    cpu_rows = np.flatnonzero(has & ~gpu)
    gpu_rows = np.flatnonzero(has & gpu)
    if len(cpu_rows) == 0 or len(gpu_rows) == 0:
        return result
    for src, dst in ((gpu_rows, cpu_rows), (cpu_rows, gpu_rows)):
        # rows in dst take the index of the last src row with the same correlation
        keys, last = _last_index_by_key(corr[src], rank.index[src])
        pos = np.searchsorted(keys, corr[dst])
        pos_ok = np.minimum(pos, len(keys) - 1)
        hit = keys[pos_ok] == corr[dst]
        result[dst[hit]] = last[pos_ok[hit]]
    return result


def _step_names(trace: LoadedTrace) -> set[str]:
    return {n for r in trace.ranks.values() for n in r.names if "ProfilerStep" in n}


def hta_frames(trace: LoadedTrace) -> tuple[Iterator[HtaFrame], bool]:
    """Every rank as HTA sees it (made one at a time as the iterator is consumed, so that one
    rank's copy is alive at once), and whether the last-ProfilerStep filter runs."""
    # the global min of the rounded ts, rank by rank (the single rank's rounding is kept)
    kept: dict[int, tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}
    nonempty = []
    for k, r in trace.ranks.items():
        ts, dur = _rounded(r)
        if len(ts):
            nonempty.append(ts.min())
        if len(trace.ranks) == 1:
            kept[k] = ts, dur
    # a numpy scalar, as in HTA: its dtype decides the dtype of every rank's aligned ts
    min_ts = min(nonempty) if nonempty else np.int64(0)
    filtering = len(_step_names(trace)) >= 2

    def frames() -> Iterator[HtaFrame]:
        for k, rank in trace.ranks.items():
            ts, dur = kept.pop(k) if k in kept else _rounded(rank)
            yield _frame(k, rank, ts - min_ts, dur, filtering)

    return frames(), filtering


def _frame(
    k: int, rank: RankTrace, ts: npt.NDArray[Any], dur: npt.NDArray[Any], filtering: bool
) -> HtaFrame:
    gpu = _gpu_mask(rank)
    icorr = index_correlation(rank, gpu)
    label = rank.index
    order: npt.NDArray[np.int64] | None = None
    if filtering:
        order, label = _read_rows(rank, icorr, *_last_step_rows(rank, ts, gpu))
    take = _taker(order)
    return HtaFrame(
        rank=k,
        names=rank.names,
        cat_names=rank.cat_names,
        ts=take(ts),
        dur=take(dur),
        name_id=take(rank.name_id),
        cat_id=take(rank.cat_id),
        stream=take(rank.stream),
        index_correlation=take(icorr),
        label=label,
    )


def _taker(order: npt.NDArray[np.int64] | None) -> Any:
    """Row selection for the frame: the filtered order, or the rows as loaded (no copies)."""
    if order is None:
        return lambda a: a
    return lambda a: a[order]


def _read_rows(
    rank: RankTrace,
    icorr: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
    label: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The rows of the filtered frame that HTA's breakdowns read: those on a stream, and those
    whose label some stream row's index_correlation names (the idle join). The others (most
    CPU rows) are not copied; the kept ones stay in order, so every result is the same."""
    on_stream = rank.stream[order] != -1
    keep = on_stream | np.isin(label, icorr[order[on_stream]])
    return order[keep], label[keep]


def _last_step_rows(
    rank: RankTrace, ts: npt.NDArray[Any], gpu: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """HTA's ``_filter_irrelevant_gpu_kernels``: rows kept (GPU rows repeated once per kept CPU
    row sharing their correlation, then the kept CPU rows) and their pandas labels."""
    cpu = ~gpu
    step_ids = [i for i, n in enumerate(rank.names) if "ProfilerStep" in n]
    is_step = cpu & member(rank.name_id, step_ids, len(rank.names))
    if is_step.any():
        last_start = ts[is_step].max()
        kept_cpu = np.flatnonzero(cpu & (ts < last_start))
    else:  # HTA compares with NaN: nothing is kept
        kept_cpu = np.zeros(0, dtype=np.int64)
    gpu_rows = np.flatnonzero(gpu)
    keys, counts = distinct_counts(rank.correlation[kept_cpu])
    g_corr = rank.correlation[gpu_rows]
    if len(keys):
        pos = np.minimum(np.searchsorted(keys, g_corr), len(keys) - 1)
        reps = np.where(keys[pos] == g_corr, counts[pos], 0)
    else:
        reps = np.zeros(len(gpu_rows), dtype=np.int64)
    gpu_kept = np.repeat(gpu_rows, reps)
    order = np.concatenate([gpu_kept, kept_cpu]).astype(np.int64)
    label = np.concatenate([np.arange(len(gpu_kept), dtype=np.int64), rank.index[kept_cpu]])
    return order, label
