"""HTA 0.5.0's idle-time breakdown per stream and its idle-interval statistics (reference §1.4).

Per stream, kernels sorted by start; the gap before each kernel is host_wait when its launching
runtime call started after the previous kernel ended, kernel_wait when shorter than
``consecutive_kernel_delay`` (30, which is µs although HTA's docstring says ns), else other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpuwarden.traces.arrays import member, quantile, sort_order, sum_mean_std
from gpuwarden.traces.hta.frame import HtaFrame
from gpuwarden.types.trace_hta import IdleIntervalStatsRow, IdleTimeRow

if TYPE_CHECKING:
    import numpy.typing as npt

CONSECUTIVE_KERNEL_DELAY_US = 30
KERNEL_CATS = frozenset(
    {"kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events"}
)
_CATEGORIES = ("host_wait", "kernel_wait", "other")  # HTA IdleTimeType 0, 1, 2


def _joined(frame: HtaFrame) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Kernel rows joined with the row whose pandas *label* is their index_correlation (a left
    join: a kernel repeats once per matching label, NaN runtime ts when none)."""
    kernel_cat_ids = [i for i, c in enumerate(frame.cat_names) if c in KERNEL_CATS]
    rows = np.flatnonzero(
        (frame.stream != -1) & member(frame.cat_id, kernel_cat_ids, len(frame.cat_names))
    )
    by_label = np.argsort(frame.label, kind="stable")
    labels = frame.label[by_label]
    ic = frame.index_correlation[rows]
    left = np.searchsorted(labels, ic, side="left")
    count = np.searchsorted(labels, ic, side="right") - left
    reps = np.maximum(count, 1)
    out_rows = np.repeat(rows, reps)
    # position of each output row within its kernel's matches
    first = np.repeat(np.cumsum(reps) - reps, reps)
    within = np.arange(len(out_rows)) - first
    matched = np.repeat(count, reps) > 0
    src = np.repeat(left, reps) + within
    ts_runtime = np.full(len(out_rows), np.nan)
    ts_runtime[matched] = frame.ts[by_label[src[matched]]]
    return out_rows, ts_runtime


def _unique_in_order(values: npt.NDArray[np.int64]) -> list[int]:
    _, first = np.unique(values, return_index=True)
    return [int(v) for v in values[np.sort(first, kind="stable")]]


def idle_breakdown(
    frame: HtaFrame, delay_us: float = CONSECUTIVE_KERNEL_DELAY_US
) -> tuple[list[IdleTimeRow], list[IdleIntervalStatsRow]]:
    """Raises ValueError (HTA: "No objects to concatenate") when the rank has no kernels."""
    rows, ts_runtime = _joined(frame)
    if len(rows) == 0:
        raise ValueError("no GPU kernels")
    streams = frame.stream[rows]
    breakdown: list[IdleTimeRow] = []
    stats: list[IdleIntervalStatsRow] = []
    for s in _unique_in_order(streams):
        sel = np.flatnonzero(streams == s)
        ts = frame.ts[rows[sel]]
        order = sort_order(ts)
        ts = ts[order]
        end = ts + frame.dur[rows[sel]][order]
        runtime = ts_runtime[sel][order]
        prev_end = np.concatenate(([np.nan], end[:-1]))
        gap = ts - prev_end
        with np.errstate(invalid="ignore"):
            host = runtime > prev_end
            kernel_wait = ~host & (gap < delay_us)
        category = np.where(host, 0, np.where(kernel_wait, 1, 2))
        present = [c for c in range(3) if (category == c).any()]
        sums = {c: float(np.nansum(gap[category == c])) for c in present}
        total = sum(sums.values())
        for c in present:
            ratio = sums[c] / total if total != 0 else float("nan")
            breakdown.append(
                IdleTimeRow(
                    rank=frame.rank,
                    stream=s,
                    idle_category=_CATEGORIES[c],
                    idle_time_us=float(np.round(sums[c], 2)),
                    idle_time_ratio=None if np.isnan(ratio) else float(np.round(ratio, 2)),
                )
            )
            stats.append(_describe(frame.rank, s, _CATEGORIES[c], gap[category == c]))
    return breakdown, stats


def _describe(
    rank: int, stream: int, category: str, gaps: npt.NDArray[np.float64]
) -> IdleIntervalStatsRow:
    """pandas ``Series.describe()`` rounded to 2 decimals (NaN gaps are not counted)."""
    v = gaps[~np.isnan(gaps)]

    def r(x: float) -> float:
        return float(np.round(x, 2))

    if len(v) == 0:
        return IdleIntervalStatsRow(
            rank, stream, category, 0, None, None, None, None, None, None, None
        )
    q25, q50, q75 = (quantile(v, q) for q in (0.25, 0.5, 0.75))
    _, mean, std = sum_mean_std(v)
    return IdleIntervalStatsRow(
        rank=rank,
        stream=stream,
        idle_category=category,
        count=len(v),
        mean_us=r(mean),
        std_us=r(std) if std is not None else None,
        min_us=r(float(v.min())),
        p25_us=r(q25),
        p50_us=r(q50),
        p75_us=r(q75),
        max_us=r(float(v.max())),
    )
