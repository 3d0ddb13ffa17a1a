"""HTA 0.5.0's temporal breakdown (§1.3), comm/comp overlap (§1.5) and kernel breakdowns (§1.6),
vectorised with numpy. Sorts use numpy's quicksort on the same arrays, in the same order, as
pandas' ``sort_values`` does inside HTA, so ties break the same way."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwarden.traces.arrays import distinct, quantile, sort_order, sum_mean_std
from gpuwarden.traces.hta.frame import HtaFrame
from gpuwarden.traces.hta.kernel_types import KernelType, kernel_type
from gpuwarden.types.trace_hta import KernelRow, KernelTypeRow, OverlapRow, TemporalRow

if TYPE_CHECKING:
    import numpy.typing as npt

    F64 = npt.NDArray[Any]

NUM_KERNELS = 10  # HTA get_gpu_kernel_breakdown defaults
DURATION_RATIO = 0.8
_BREAKDOWN_TYPES = (KernelType.COMPUTATION, KernelType.COMMUNICATION, KernelType.MEMORY)


class HtaAssertionError(Exception):
    """HTA's temporal breakdown asserts on this rank (it would raise AssertionError)."""


def type_of_rows(frame: HtaFrame) -> npt.NDArray[np.int64]:
    """KernelType value of every GPU row (by name); 0 on other rows, which no breakdown reads
    (the names of CPU ops, often most of them, are not matched at all)."""
    if len(frame.name_id) == 0:
        return np.zeros(0, dtype=np.int64)
    used = distinct(frame.name_id[gpu_rows(frame)])
    per_name = np.zeros(len(frame.names), dtype=np.int64)
    per_name[used] = [int(kernel_type(frame.names[i])) for i in used.tolist()]
    return per_name[frame.name_id]


def merge_intervals(ts: F64, dur: F64) -> tuple[F64, F64]:
    """HTA's ``merge_kernel_intervals``: sort by ts, merge rows whose start is not after the
    running max end of the rows before; groups re-sorted by start."""
    if len(ts) == 0:
        return ts, ts
    order = np.argsort(ts, kind="stable")  # the order of tied starts changes no merged interval
    t = ts[order]
    e = t + dur[order]
    new = np.zeros(len(t), dtype=bool)
    new[1:] = t[1:] > np.maximum.accumulate(e)[:-1]
    starts = np.flatnonzero(np.concatenate(([True], new[1:])))
    g_ts = np.minimum.reduceat(t, starts)
    g_end = np.maximum.reduceat(e, starts)
    regroup = np.argsort(g_ts, kind="stable")
    return g_ts[regroup], g_end[regroup]


def gpu_rows(frame: HtaFrame) -> npt.NDArray[np.intp]:
    return np.flatnonzero(frame.stream != -1)


Merged = dict[KernelType, tuple["F64", "F64"]]


def merged_by_type(frame: HtaFrame, types: npt.NDArray[np.int64]) -> Merged:
    """The merged intervals of each breakdown type's kernels, which the temporal, overlap and
    kernel-type breakdowns all start from (computed once per rank)."""
    rows = gpu_rows(frame)
    return {kind: _merged_of_type(frame, rows, types, kind) for kind in _BREAKDOWN_TYPES}


def temporal_row(frame: HtaFrame, merged: Merged) -> TemporalRow:
    """Raises IndexError-equivalent ValueError when there is no GPU row, HtaAssertionError where
    HTA's own asserts fail."""
    rows = gpu_rows(frame)
    if len(rows) == 0:
        raise ValueError("no GPU activity")
    g_ts, g_end = merge_intervals(frame.ts[rows], frame.dur[rows])
    kernel_time = float(g_end[-1] - g_ts[0])
    idle = kernel_time - float(g_end.sum() - g_ts.sum())
    c_ts, c_end = merged[KernelType.COMPUTATION]
    compute = float(c_end.sum() - c_ts.sum())
    non_compute = kernel_time - compute - idle
    if not (idle <= kernel_time and compute <= kernel_time and non_compute >= 0):
        raise HtaAssertionError(
            f"idle {idle}, compute {compute}, non-compute {non_compute}, span {kernel_time}"
        )

    def pct(x: float) -> float | None:
        if kernel_time == 0:
            return None
        return float(np.round(100 * (x / kernel_time), 2))

    return TemporalRow(
        rank=frame.rank,
        idle_time_us=idle,
        compute_time_us=compute,
        non_compute_time_us=non_compute,
        kernel_time_us=kernel_time,
        idle_time_pctg=pct(idle),
        compute_time_pctg=pct(compute),
        non_compute_time_pctg=pct(non_compute),
    )


def _merged_of_type(
    frame: HtaFrame, rows: npt.NDArray[np.intp], types: npt.NDArray[np.int64], kind: KernelType
) -> tuple[F64, F64]:
    sel = rows[types[rows] == kind]
    return merge_intervals(frame.ts[sel], frame.dur[sel])


def _sweep(intervals: list[tuple[F64, F64, int]]) -> tuple[F64, npt.NDArray[np.int64]]:
    """Edges (+bit at start, -bit at end) sorted by time; the segment from each edge to the next
    and the running sum of bits over it. Ties only create zero-length segments."""
    times = np.concatenate([np.concatenate([s, e]) for s, e, _ in intervals])
    status = np.concatenate(
        [np.concatenate([np.full(len(s), b), np.full(len(e), -b)]) for s, e, b in intervals]
    ).astype(np.int64)
    order = np.argsort(times, kind="stable")
    t = times[order]
    running = np.cumsum(status[order])
    seg = np.diff(t)
    return seg, running[:-1]


def overlap_row(frame: HtaFrame, merged: Merged) -> OverlapRow:
    comp = merged[KernelType.COMPUTATION]
    comm = merged[KernelType.COMMUNICATION]
    comm_time = float((comm[1] - comm[0]).sum())
    if comm_time == 0:
        return OverlapRow(rank=frame.rank, comp_comm_overlap_pctg=None)
    seg, running = _sweep([(comm[0], comm[1], 1), (comp[0], comp[1], 2)])
    both = float(seg[running == 3].sum())
    return OverlapRow(
        rank=frame.rank, comp_comm_overlap_pctg=float(np.round(100 * (both / comm_time), 2))
    )


def _type_label(running: int) -> str:
    names = [k.name for k in _BREAKDOWN_TYPES if running & k.value]
    return " overlapping ".join(names)


def _hta_ordered_sweep(intervals: list[tuple[F64, F64, int]]) -> tuple[F64, npt.NDArray[np.int64]]:
    """``_sweep`` with the edges in the order HTA's ``_get_gpu_kernel_type_time`` leaves them:
    one type at a time, its starts then its ends appended (``melt``) and the whole table
    re-sorted by time with pandas' quicksort. A zero-length interval (a 0 µs memset) makes a
    tie, and which edge comes first decides whether its type gets a row of 0 µs; no sum
    changes."""
    times: F64 = np.zeros(0, dtype=np.float64)
    status: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
    for starts, ends, bit in intervals:
        times = np.concatenate([times, starts, ends]).astype(np.float64)
        status = np.concatenate([status, np.full(len(starts), bit), np.full(len(ends), -bit)])
        order = np.argsort(times, kind="quicksort")
        times, status = times[order], status[order]
    return np.diff(times), np.cumsum(status)[:-1]


def kernel_type_sums(merged: Merged) -> dict[str, float]:
    """Per rank: time per set of simultaneously active kernel types (OTHER ignored)."""
    intervals = [(*merged[k], int(k.value)) for k in _BREAKDOWN_TYPES]
    if sum(len(s) for s, _, _ in intervals) == 0:
        return {}
    seg, running = _hta_ordered_sweep(intervals)
    out: dict[str, float] = {}
    for value in distinct(running[running > 0]).tolist():
        # HTA casts each segment to int before summing
        out[_type_label(value)] = float(np.trunc(seg[running == value]).sum())
    return out


def kernel_type_rows(per_rank: list[dict[str, float]]) -> tuple[KernelTypeRow, ...]:
    totals: dict[str, float] = {}
    for sums in per_rank:
        for k, v in sums.items():
            totals[k] = totals.get(k, 0.0) + v
    grand = sum(totals.values())
    ordered = sorted(totals.items(), key=lambda kv: -kv[1])
    return tuple(
        KernelTypeRow(
            kernel_type=k,
            sum_us=v,
            percentage=float(np.round(100 * (v / grand), 1)) if grand else None,
        )
        for k, v in ordered
    )


_MAX, _MIN = np.maximum.reduce, np.minimum.reduce


def _desc_order(values: F64, *, ties_as_pandas: bool = True) -> npt.NDArray[np.intp]:
    """pandas ``sort_values(ascending=False)`` (quicksort on the reversed array, reversed); with
    ``ties_as_pandas=False`` equal values may come in another order."""
    idx = np.arange(len(values))[::-1]
    if ties_as_pandas:
        return idx[sort_order(values[::-1])][::-1]
    return idx[np.argsort(values[::-1], kind="stable")][::-1]


def _ties_decide(ordered: F64, others: list[bool]) -> bool:
    """Whether the order of equal sums changes which kernels keep their name: a run of equal
    values (or NaNs) that the "others" cut splits. Elsewhere equal values are interchangeable:
    the cumulative sums, the cut and every total come out the same."""
    same = (ordered[1:] == ordered[:-1]) | np.isnan(ordered[1:])
    split = np.asarray(others[1:]) != np.asarray(others[:-1])
    return bool(np.any(same & split))


def _stats(values: F64) -> tuple[float, float, float, float, float]:
    """sum, max, min, mean, std (ddof=1, NaN→0 as HTA's fillna)."""
    total, mean, std = sum_mean_std(values)
    return total, float(_MAX(values)), float(_MIN(values)), mean, std or 0.0


def _grouped(names: list[str], values: F64) -> list[tuple[str, F64]]:
    """pandas groupby(name): groups sorted by name (code-point order)."""
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        groups.setdefault(n, []).append(i)
    return [(n, values[np.array(groups[n])]) for n in sorted(groups)]


def _grouped_by_name(frame: HtaFrame, sel: npt.NDArray[np.intp]) -> list[tuple[str, F64]]:
    """``_grouped`` of the rows ``sel`` by their name text, with a stable sort instead of a loop:
    each group's values stay in row order (their sums and stds round the same)."""
    ids = frame.name_id[sel]
    used = distinct(ids)
    texts = [frame.names[i] for i in used.tolist()]
    ordered = sorted(set(texts))  # ids with the same text (None and "") are one group
    code_of = {t: c for c, t in enumerate(ordered)}
    lookup = np.zeros(int(used[-1]) + 1, dtype=np.intp)
    lookup[used] = [code_of[t] for t in texts]
    codes = lookup[ids]
    order = np.argsort(codes, kind="stable")
    values = frame.dur[sel][order]
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    return list(zip(ordered, np.split(values, bounds), strict=True))


Stats = tuple[str, float, float, float, float, float]  # name, sum, max, min, mean, std


def top_kernels(stats: list[Stats]) -> list[Stats]:
    """One type's kernels by descending total; those past NUM_KERNELS or beyond the
    DURATION_RATIO quantile of the cumulative time renamed "others" and re-aggregated over their
    totals, as HTA does. HTA's "keep" mask (``sum < 0``, meant to be always false) spares a
    kernel whose total is negative, which its rounding makes of sub-µs kernels (start rounded
    up, end down): that kernel keeps its own row wherever it sorts."""
    sums = np.array([s[1] for s in stats], dtype=np.float64)
    # the stable sort: quicksort's (pandas') order of ties only where it shows (below)
    order = _desc_order(sums, ties_as_pandas=False)
    table = [stats[i] for i in order.tolist()]
    if len(table) <= NUM_KERNELS:
        return table
    cumsum = np.cumsum([s[1] for s in table])
    q = quantile(cumsum, DURATION_RATIO)  # linear, like pandas
    others = [
        bool(table[i][1] >= 0 and (cumsum[i] > q or i >= NUM_KERNELS)) for i in range(len(table))
    ]
    if _ties_decide(sums[order], others):
        table = [stats[i] for i in _desc_order(sums).tolist()]
    relabel = ["others" if o else s[0] for o, s in zip(others, table, strict=True)]
    regrouped = _grouped(relabel, np.array([s[1] for s in table], dtype=np.float64))
    return [(n, *_stats(v)) for n, v in regrouped]


def kernel_rows(frame: HtaFrame, types: npt.NDArray[np.int64]) -> list[KernelRow]:
    """Top kernels of one rank, per type, with HTA's "others" re-aggregation (and its bug)."""
    rows = gpu_rows(frame)
    out: list[KernelRow] = []
    for kind in _BREAKDOWN_TYPES:
        sel = rows[types[rows] == kind]
        if len(sel) == 0:
            continue
        stats = [(n, *_stats(v)) for n, v in _grouped_by_name(frame, sel)]
        for name, total, mx, mn, mean, std in top_kernels(stats):
            out.append(
                KernelRow(
                    name=name,
                    sum_us=total,
                    max_us=mx,
                    min_us=mn,
                    stddev_us=std,
                    mean_us=mean,
                    kernel_type=kind.name,
                    rank=frame.rank,
                )
            )
    return out
