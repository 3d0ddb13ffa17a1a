"""GPU busy intervals per rank and stream, merged down to a drawable number of spans.

A trace can hold millions of kernels; a plot 700 px wide shows about one span per pixel. Events
closer than the resolution merge into one span that keeps its event count, its exact busy time
and the kind (compute/communication/memory) that filled most of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gpuwarden.traces.classify import classify_rank
from gpuwarden.traces.model import GPU_CATEGORIES, Category, LoadedTrace, RankTrace
from gpuwarden.types.trace import SpanKind, StreamTimeline, TimelineSpan
from gpuwarden.types.trace_insights import KernelKind

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# About one span per pixel of the timeline plot (≈ 730 px wide): finer detail is invisible.
MAX_SPANS_PER_LANE = 800
# Whole-page bound (≈ 150 bytes of HTML per span): a 64-rank job with 4 streams each still
# makes a page of a few MB that a browser opens quickly.
MAX_SPANS_TOTAL = 24_000

_KIND_ORDER = (SpanKind.COMPUTE, SpanKind.COMMUNICATION, SpanKind.MEMORY)


def _kind_codes(
    rank: RankTrace, rows: npt.NDArray[np.int64], kinds: npt.NDArray[np.int8] | None
) -> npt.NDArray[np.int8]:
    """0 compute, 1 communication, 2 memory (index into _KIND_ORDER), by ``classify``'s rules
    (``kinds``: ``classify_rank(rank)`` when the caller has it)."""
    import numpy as np

    kinds = (classify_rank(rank) if kinds is None else kinds)[rows]
    codes = np.zeros(rows.shape[0], dtype=np.int8)
    codes[(kinds >= KernelKind.COMM_ALLREDUCE) & (kinds <= KernelKind.COMM_OTHER)] = 1
    codes[(kinds >= KernelKind.MEMCPY_H2D) & (kinds <= KernelKind.MEMSET)] = 2
    return codes


def gpu_rows(rank: RankTrace) -> npt.NDArray[np.int64]:
    """Rows of kernels, memcpy and memset that ran on a stream."""
    import numpy as np

    from gpuwarden.traces.arrays import member

    gpu_cats = [int(c) for c in GPU_CATEGORIES]
    mask = (rank.stream >= 0) & member(rank.category, gpu_cats, len(Category))
    return np.flatnonzero(mask).astype(np.int64)


def _lane(
    rank_id: int,
    stream: int,
    ts: npt.NDArray[np.float64],
    end: npt.NDArray[np.float64],
    kinds: npt.NDArray[np.int8],
    t0: float,
    resolution_us: float,
) -> StreamTimeline:
    import numpy as np

    order = np.argsort(ts, kind="stable")
    ts, end, kinds = ts[order], end[order], kinds[order]
    run_end = np.maximum.accumulate(end)
    # Exact union first (touching intervals merge, as HTA does), for the busy time.
    exact_break = np.concatenate(([True], ts[1:] > run_end[:-1]))
    union_start = ts[exact_break]
    union_end = np.maximum.reduceat(end, np.flatnonzero(exact_break))
    # Then spans: a new one only where the gap is wider than the drawing resolution.
    coarse_break = np.concatenate(([True], ts[1:] > run_end[:-1] + resolution_us))
    starts = np.flatnonzero(coarse_break)
    span_id = np.cumsum(coarse_break) - 1
    n = starts.shape[0]
    span_start = ts[starts]
    span_end = np.maximum.reduceat(end, starts)
    span_events = np.diff(np.append(starts, ts.shape[0]))
    union_span = span_id[np.flatnonzero(exact_break)]
    span_busy = np.bincount(union_span, weights=union_end - union_start, minlength=n)
    by_kind = np.zeros((n, len(_KIND_ORDER)))
    np.add.at(by_kind, (span_id, kinds.astype(np.int64)), np.maximum(end - ts, 0.0))
    dominant = np.argmax(by_kind, axis=1)
    # columns to Python lists first: a float() of a numpy scalar per field cost more than the span
    spans = tuple(
        TimelineSpan(start_us=a, end_us=b, kind=_KIND_ORDER[k], events=e, busy_us=busy)
        for a, b, k, e, busy in zip(
            (span_start - t0).tolist(),
            (span_end - t0).tolist(),
            dominant.tolist(),
            span_events.tolist(),
            span_busy.tolist(),
            strict=True,
        )
    )
    return StreamTimeline(
        rank=rank_id,
        stream=stream,
        spans=spans,
        events=int(ts.shape[0]),
        busy_us=float(np.sum(union_end - union_start)),
    )


def stream_timelines(
    trace: LoadedTrace, kinds_of: Mapping[int, npt.NDArray[np.int8]] | None = None
) -> tuple[tuple[StreamTimeline, ...], float]:
    """Every (rank, stream) lane, and the end of the last GPU event; times from the first GPU
    event of any rank (ranks' clocks are not synchronised; this is HTA's alignment).
    ``kinds_of``: ``classify_rank`` of each rank, when the caller already has it."""
    import numpy as np

    from gpuwarden.traces.arrays import distinct

    selected = {r: gpu_rows(t) for r, t in trace.ranks.items()}
    starts = [float(t.ts[rows].min()) for r, t in trace.ranks.items() if (rows := selected[r]).size]
    if not starts:
        return (), 0.0
    t0 = min(starts)
    t_end = max(
        float((t.ts[rows] + t.dur[rows]).max())
        for r, t in trace.ranks.items()
        if (rows := selected[r]).size
    )
    duration = max(t_end - t0, 1e-9)
    lanes_total = sum(
        int(distinct(trace.ranks[r].stream[rows]).size) for r, rows in selected.items()
    )
    per_lane = max(min(MAX_SPANS_PER_LANE, MAX_SPANS_TOTAL // max(lanes_total, 1)), 20)
    resolution = duration / per_lane
    lanes: list[StreamTimeline] = []
    for rank_id, rank in trace.ranks.items():
        rows = selected[rank_id]
        if not rows.size:
            continue
        kinds = _kind_codes(rank, rows, None if kinds_of is None else kinds_of.get(rank_id))
        streams = rank.stream[rows]
        for stream in distinct(streams):
            pick = streams == stream
            sub = rows[pick]
            ts = rank.ts[sub]
            lanes.append(
                _lane(
                    rank_id,
                    int(stream),
                    ts,
                    ts + np.maximum(rank.dur[sub], 0.0),
                    kinds[pick],
                    t0,
                    resolution,
                )
            )
    return tuple(lanes), t_end - t0
