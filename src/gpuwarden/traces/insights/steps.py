"""Per ``ProfilerStep#N``: wall time, GPU busy/idle inside the step's CPU window, and why the
GPU was idle.

Each idle gap of the GPU (no kernel, memcpy or memset on any stream) is split into the part
where the host was inside the DataLoader (DATA_LOADING) and the rest, classified by the next GPU
op after the gap, as HTA classifies per-stream gaps (reference §1.4) but over all streams:
launched after the gap began → HOST_LAUNCH (the CPU was late); else a gap under 30 µs →
KERNEL_GAP; else WAIT (sync, event, another rank).
"""

from __future__ import annotations

import numpy as np

from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.insights.view import RankView
from gpuwarden.traces.model import Category
from gpuwarden.types.trace_insights import IdleKind, StepStats

# HTA's consecutive_kernel_delay default (30, in µs; reference §1.4).
KERNEL_GAP_US = 30.0


def _gaps(view: RankView) -> tuple[iv.Union, np.ndarray, np.ndarray]:
    """Every GPU idle gap inside [first step start, last step end], the launch time of the GPU
    op that ends it (NaN: none or unknown) and its full length."""
    lo = float(view.step_start.min())
    hi = float(view.step_end.max())
    gpu_rows = np.flatnonzero(view.gpu)
    lo = min(lo, float(view.rank.ts[gpu_rows].min())) if gpu_rows.size else lo
    gs, ge = iv.complement(view.gpu_union, lo, max(hi, float(view.gpu_union[1].max(initial=hi))))
    order = np.argsort(view.rank.ts[gpu_rows], kind="stable")
    sorted_rows = gpu_rows[order]
    sorted_ts = view.rank.ts[sorted_rows]
    pos = np.searchsorted(sorted_ts, ge, side="left")
    has_next = pos < sorted_rows.size
    launch = np.full(ge.shape, np.nan)
    if has_next.any():
        launch[has_next] = view.launch_ts(sorted_rows[pos[has_next]])
    # After the last GPU op the host never launched anything in time: host side.
    launch[~has_next] = np.inf
    return (gs, ge), launch, ge - gs


def _cpu_only_steps(view: RankView) -> tuple[StepStats, ...]:
    """Wall time only: with no GPU activity on the rank there is no busy/idle split to make."""
    return tuple(
        StepStats(
            step=int(n),
            start_us=float(a),
            wall_us=float(w),
            gpu_busy_us=None,
            gpu_idle_us=None,
            gpu_busy_ratio=None,
            idle_data_loading_us=None,
            idle_host_launch_us=None,
            idle_kernel_gap_us=None,
            idle_wait_us=None,
            dominant_idle=None,
            kernels=None,
            comm_us=None,
            exposed_comm_us=None,
        )
        for n, a, w in zip(
            view.step_ids.tolist(), view.step_start.tolist(), view.step_dur.tolist(), strict=True
        )
    )


# Rows of the idle matrices below, in the order the dominant kind is chosen on ties.
_IDLE_KINDS = (IdleKind.DATA_LOADING, IdleKind.HOST_LAUNCH, IdleKind.KERNEL_GAP, IdleKind.WAIT)


def _idle_by_kind(view: RankView, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """GPU idle time inside each window [lo, hi], one row per kind of ``_IDLE_KINDS``.

    Windows may overlap or nest (every step at ts 0), so a pass over the gaps of each window
    would be quadratic. The gaps are sorted and disjoint: a window meets a run of them, of which
    only the first and the last can stick out of it. Those two are clipped; the ones between
    come whole from prefix sums over the gaps, O((steps + gaps) log gaps)."""
    (gs, ge), launch, full = _gaps(view)
    if gs.size == 0:
        return np.zeros((len(_IDLE_KINDS), lo.size))
    host = launch > gs
    short = ~host & (full < KERNEL_GAP_US)
    kind_of_gap = np.stack([host, short, ~host & ~short])

    def split(gap: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Idle of [start, end], a part of gap number ``gap``, by kind: the part inside the
        DataLoader, the rest by the kind of its gap."""
        dl = iv.covered_in(view.dataloader_union, start, end)
        rest = np.maximum(end - start - dl, 0.0)
        return np.vstack([dl, np.where(kind_of_gap[:, gap], rest, 0.0)])

    def clipped(gap: np.ndarray) -> np.ndarray:
        return split(gap, np.clip(gs[gap], lo, hi), np.clip(ge[gap], lo, hi))

    first = np.searchsorted(ge, lo, side="right")  # first gap ending after the window opens
    last = np.searchsorted(gs, hi, side="left") - 1  # last gap starting before it closes
    at_first = np.where(last >= first, clipped(np.minimum(first, gs.size - 1)), 0.0)
    at_last = np.where(last > first, clipped(np.maximum(last, 0)), 0.0)
    whole = split(np.arange(gs.size), gs, ge)
    prefix = np.concatenate([np.zeros((len(_IDLE_KINDS), 1)), np.cumsum(whole, axis=1)], axis=1)
    after_first = np.minimum(first + 1, gs.size)  # a window past every gap meets none
    inner = prefix[:, np.maximum(last, after_first)] - prefix[:, after_first]
    idle: np.ndarray = at_first + at_last + inner
    return idle


def step_stats(view: RankView) -> tuple[StepStats, ...]:
    if view.step_ids.size == 0:
        return ()
    if not view.gpu.any():
        return _cpu_only_steps(view)
    rank = view.rank
    kernel_ts = np.sort(rank.ts[rank.category == int(Category.KERNEL)], kind="stable")
    comm_exposed = iv.subtract(view.comm_union, view.compute_union)
    lo, hi = view.step_start, view.step_end
    busy = iv.covered_in(view.gpu_union, lo, hi)
    comm = iv.covered_in(view.comm_union, lo, hi)
    exposed = iv.covered_in(comm_exposed, lo, hi)
    idle_by_step = _idle_by_kind(view, lo, hi).T.tolist()
    kernels = np.searchsorted(kernel_ts, hi, side="left") - np.searchsorted(
        kernel_ts, lo, side="left"
    )
    out = []
    for i in range(view.step_ids.size):
        idle = dict(zip(_IDLE_KINDS, idle_by_step[i], strict=True))
        wall = float(view.step_dur[i])
        worst = max(idle, key=lambda k: idle[k])
        out.append(
            StepStats(
                step=int(view.step_ids[i]),
                start_us=float(lo[i]),
                wall_us=wall,
                gpu_busy_us=float(busy[i]),
                gpu_idle_us=max(wall - float(busy[i]), 0.0),
                gpu_busy_ratio=float(busy[i]) / wall if wall > 0 else 0.0,
                idle_data_loading_us=idle[IdleKind.DATA_LOADING],
                idle_host_launch_us=idle[IdleKind.HOST_LAUNCH],
                idle_kernel_gap_us=idle[IdleKind.KERNEL_GAP],
                idle_wait_us=idle[IdleKind.WAIT],
                dominant_idle=worst if idle[worst] > 0 else None,
                kernels=int(kernels[i]),
                comm_us=float(comm[i]),
                exposed_comm_us=float(exposed[i]),
            )
        )
    return tuple(out)


def launched_in_steps_us(view: RankView) -> float:
    """GPU busy time (union over streams) of the kernels, copies and memsets whose launch call
    starts inside a ProfilerStep window, joined on the correlation id. A step's CPU window holds
    its own GPU work only while the GPU keeps up with the host; when the GPU runs behind (a
    closing ``cudaDeviceSynchronize`` after a few asynchronous launches) that work runs after
    the windows close, but it was still queued by the steps."""
    if view.step_ids.size == 0 or not view.gpu.any():
        return 0.0
    rows = np.flatnonzero(view.gpu)
    launched = view.launch_ts(rows)
    order = np.argsort(view.step_start, kind="stable")
    starts, ends = view.step_start[order], view.step_end[order]
    ok = ~np.isnan(launched)
    pos = np.searchsorted(starts, launched[ok], side="right") - 1
    inside = np.zeros(rows.shape, dtype=bool)
    inside[ok] = (pos >= 0) & (launched[ok] < ends[np.maximum(pos, 0)])
    chosen = rows[inside]
    return iv.length(iv.union(view.rank.ts[chosen], view.end[chosen]))
