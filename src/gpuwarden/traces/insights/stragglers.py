"""Stragglers across the ranks of one job.

Collectives are matched across ranks by kind and order (the k-th all-reduce of every rank is the
same collective). A collective ends at about the same moment on every rank, so the median
difference of end times gives each rank's clock offset; after removing it, the rank whose
collective kernel starts last is the one the others waited for. Ranks are scored with the
modified z-score 0.6745·(x − median)/MAD, outlier above 3.5 (Iglewicz & Hoaglin, "How to Detect
and Handle Outliers", ASQC 1993), on the mean late arrival, or on the median step time when no
collective can be matched. Works with any comm kernel name (``ncclDevKernel_*`` included),
unlike HTA's ``ncclKernel`` prefix (reference §1.14, issue #360).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpuwarden.traces.arrays import distinct, median
from gpuwarden.traces.insights.view import RankView

if TYPE_CHECKING:
    from gpuwarden.types.trace_stragglers import StragglerReport

Z_OUTLIER = 3.5
_MAD_TO_SIGMA = 0.6745
# When MAD is 0, Iglewicz & Hoaglin scale the mean absolute deviation instead.
_MEAN_AD_TO_SIGMA = 0.7979


def modified_z(values: np.ndarray) -> np.ndarray:
    med = float(median(values))
    dev = np.abs(values - med)
    mad = float(median(dev))
    if mad > 0:
        return np.asarray(_MAD_TO_SIGMA * (values - med) / mad, dtype=np.float64)
    mean_ad = float(dev.mean())
    if mean_ad > 0:
        return np.asarray(_MEAN_AD_TO_SIGMA * (values - med) / mean_ad, dtype=np.float64)
    return np.zeros(values.shape, dtype=np.float64)


@dataclass(frozen=True)
class RankTimings:
    """What the cross-rank analysis needs of one rank, so that its view can be dropped before
    the next rank's is built: step ids and wall times, and the start and end of each comm
    kernel, in time order, per collective kind."""

    step_ids: np.ndarray
    step_dur: np.ndarray
    collectives: dict[int, tuple[np.ndarray, np.ndarray]]


def rank_timings(view: RankView) -> RankTimings:
    rows = np.flatnonzero(view.comm)
    rows = rows[np.argsort(view.rank.ts[rows], kind="stable")]
    kinds = view.kinds[rows]
    return RankTimings(
        step_ids=view.step_ids,
        step_dur=view.step_dur,
        collectives={
            int(k): (view.rank.ts[rows[kinds == k]], view.end[rows[kinds == k]])
            for k in distinct(kinds).tolist()
        },
    )


def _matched(timings: dict[int, RankTimings]) -> tuple[np.ndarray, np.ndarray] | None:
    """Start and end time matrices [rank, collective] of collectives present on every rank."""
    per_rank = {r: t.collectives for r, t in timings.items()}
    common = set.intersection(*(set(d) for d in per_rank.values()))
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    order = sorted(timings)
    for k in sorted(common):
        m = min(per_rank[r][k][0].size for r in order)
        if m == 0:
            continue
        starts.append(np.stack([per_rank[r][k][0][:m] for r in order]))
        ends.append(np.stack([per_rank[r][k][1][:m] for r in order]))
    if not starts:
        return None
    return np.concatenate(starts, axis=1), np.concatenate(ends, axis=1)


def _step_times(timing: RankTimings) -> tuple[tuple[int, float], ...]:
    wall = timing.step_dur
    return tuple((int(s), float(w)) for s, w in zip(timing.step_ids.tolist(), wall, strict=True))


def stragglers(timings: dict[int, RankTimings]) -> StragglerReport | None:
    if len(timings) < 2:
        return None
    from gpuwarden.types.trace_stragglers import RankStraggler, StragglerReport

    order = sorted(timings)
    step_times = {r: _step_times(timings[r]) for r in order}
    step_med = {
        r: float(median([w for _, w in st])) if st else None for r, st in step_times.items()
    }
    matched = _matched(timings)
    n = len(order)
    late_mean: list[float | None] = [None] * n
    last = np.zeros(n, dtype=np.int64)
    waited = np.zeros(n)
    scores: np.ndarray | None = None
    metric = "late-arrival"
    n_matched = 0
    if matched is not None:
        s, e = matched
        n_matched = int(s.shape[1])
        offset = median(e - e[0:1, :], axis=1)  # clock of each rank vs the first
        aligned = s - offset[:, None]
        late = aligned - median(aligned, axis=0)[None, :]
        late_mean = [float(x) for x in late.mean(axis=1)]
        last = np.bincount(np.argmax(aligned, axis=0), minlength=n)
        waited = np.clip(aligned.max(axis=0, keepdims=True) - aligned, 0.0, None).sum(axis=1)
        scores = modified_z(late.mean(axis=1))
    elif all(v is not None for v in step_med.values()):
        metric = "step-time"
        scores = modified_z(np.array([step_med[r] for r in order], dtype=np.float64))
    flagged = [bool(scores is not None and scores[i] > Z_OUTLIER) for i in range(n)]
    ranks = tuple(
        RankStraggler(
            rank=r,
            step_time_median_us=step_med[r],
            late_arrival_mean_us=late_mean[i],
            last_arrivals=int(last[i]),
            waited_us=float(waited[i]),
            score=float(scores[i]) if scores is not None else None,
            is_straggler=flagged[i],
        )
        for i, r in enumerate(order)
    )
    slow = tuple(r for r, f in zip(order, flagged, strict=True) if f)
    fix = None
    if slow:
        fix = (
            f"rank(s) {', '.join(map(str, slow))} hold the others back: check those hosts' CPU "
            "load and data loading, their GPUs' clocks, temperature and errors (gpuwarden "
            "doctor), and uneven inputs (batch or sequence length per rank)"
        )
    return StragglerReport(
        ranks=ranks,
        stragglers=slow,
        matched_collectives=n_matched,
        metric=metric if scores is not None else "none",
        step_times_us=step_times,
        fix=fix,
    )
