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


def step_stats(view: RankView) -> tuple[StepStats, ...]:
    if view.step_ids.size == 0:
        return ()
    if not view.gpu.any():
        return _cpu_only_steps(view)
    rank = view.rank
    (gs, ge), launch, full = _gaps(view)
    kernel_ts = np.sort(rank.ts[rank.category == int(Category.KERNEL)], kind="stable")
    comm_exposed = iv.subtract(view.comm_union, view.compute_union)
    lo, hi = view.step_start, view.step_end
    busy = iv.covered_in(view.gpu_union, lo, hi)
    comm = iv.covered_in(view.comm_union, lo, hi)
    exposed = iv.covered_in(comm_exposed, lo, hi)
    out = []
    for i in range(view.step_ids.size):
        a, b = float(lo[i]), float(hi[i])
        j0 = int(np.searchsorted(ge, a, side="right"))
        j1 = int(np.searchsorted(gs, b, side="left"))
        cs = np.clip(gs[j0:j1], a, b)
        ce = np.clip(ge[j0:j1], a, b)
        dl = iv.covered_in(view.dataloader_union, cs, ce)
        rest = np.maximum(ce - cs - dl, 0.0)
        host = launch[j0:j1] > gs[j0:j1]
        short = ~host & (full[j0:j1] < KERNEL_GAP_US)
        wait = ~host & ~short
        idle = {
            IdleKind.DATA_LOADING: float(dl.sum()),
            IdleKind.HOST_LAUNCH: float(rest[host].sum()),
            IdleKind.KERNEL_GAP: float(rest[short].sum()),
            IdleKind.WAIT: float(rest[wait].sum()),
        }
        wall = float(view.step_dur[i])
        worst = max(idle, key=lambda k: idle[k])
        n_kernels = int(
            np.searchsorted(kernel_ts, b, side="left") - np.searchsorted(kernel_ts, a, side="left")
        )
        out.append(
            StepStats(
                step=int(view.step_ids[i]),
                start_us=a,
                wall_us=wall,
                gpu_busy_us=float(busy[i]),
                gpu_idle_us=max(wall - float(busy[i]), 0.0),
                gpu_busy_ratio=float(busy[i]) / wall if wall > 0 else 0.0,
                idle_data_loading_us=idle[IdleKind.DATA_LOADING],
                idle_host_launch_us=idle[IdleKind.HOST_LAUNCH],
                idle_kernel_gap_us=idle[IdleKind.KERNEL_GAP],
                idle_wait_us=idle[IdleKind.WAIT],
                dominant_idle=worst if idle[worst] > 0 else None,
                kernels=n_kernels,
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
