"""Run every per-rank analysis on one rank and gather the results."""

from __future__ import annotations

from gpuwarden.traces.arrays import distinct
from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.insights.attention import attention
from gpuwarden.traces.insights.communication import communication
from gpuwarden.traces.insights.data_loading import data_loading
from gpuwarden.traces.insights.h2d import h2d
from gpuwarden.traces.insights.launch import launch
from gpuwarden.traces.insights.steps import step_stats
from gpuwarden.traces.insights.tensor_cores import tensor_cores
from gpuwarden.traces.insights.view import RankView, build_view
from gpuwarden.traces.model import RankTrace
from gpuwarden.types.trace_insights import KernelKind, KindTime, RankInsights


def kind_times(view: RankView) -> tuple[KindTime, ...]:
    """GPU time per kind (syncs and non-GPU rows left out), by time desc."""
    rank = view.rank
    out = []
    for k in distinct(view.kinds[view.gpu]).tolist():
        sel = view.kinds == k
        out.append(
            KindTime(
                kind=KernelKind(k),
                count=int(sel.sum()),
                time_us=float(rank.dur[sel].sum()),
                busy_us=iv.length(iv.union(rank.ts[sel], view.end[sel])),
            )
        )
    out.sort(key=lambda t: (-t.time_us, t.kind))
    return tuple(out)


def summarize(rank: RankTrace, view: RankView | None = None) -> RankInsights:
    """Every per-rank analysis; ``view`` when the caller already built it for ``rank``."""
    if view is None or view.rank is not rank:
        view = build_view(rank)
    busy = iv.length(view.gpu_union)
    span = float(view.gpu_union[1][-1] - view.gpu_union[0][0]) if view.gpu.any() else 0.0
    steps = step_stats(view)
    return RankInsights(
        rank=rank.meta.rank,
        device_name=view.device_name,
        compute_capability=view.compute_capability,
        gpu_events=int(view.gpu.sum()),
        gpu_busy_us=busy,
        gpu_span_us=span,
        kinds=kind_times(view),
        steps=steps,
        data_loading=data_loading(view),
        h2d=h2d(view),
        launch=launch(view),
        tensor_cores=tensor_cores(view),
        communication=communication(view, steps, busy),
        attention=attention(view),
    )
