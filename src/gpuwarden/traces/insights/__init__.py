"""Analyses HTA does not give (reference/traces.md §1.19): per-step breakdown, data loading,
host-to-device copies, launch overhead, tensor cores, communication, stragglers.

Pure functions over loaded traces; numpy is imported only when one of them runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwarden.errors import MissingExtraError

if TYPE_CHECKING:
    from gpuwarden.traces.insights.stragglers import RankTimings
    from gpuwarden.traces.insights.view import RankView
    from gpuwarden.traces.model import LoadedTrace, RankTrace
    from gpuwarden.traces.verdict import HostOpIdle, HostRecord
    from gpuwarden.types.trace_insights import RankInsights
    from gpuwarden.types.trace_stragglers import StragglerReport

__all__ = [
    "held_idle_us",
    "host_op_idle",
    "host_record",
    "rank_insights",
    "rank_timings",
    "rank_view",
    "rank_views",
    "step_launched_us",
    "straggler_report",
    "stragglers_of",
]


def _need_numpy() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("trace analysis", "trace", "numpy") from exc


def rank_view(rank: RankTrace) -> RankView:
    """One rank's groundwork (kinds, unions, steps) every analysis shares, built once and handed
    to ``rank_insights``, ``rank_timings`` and ``stream_timelines`` (its ``kinds``)."""
    _need_numpy()
    from gpuwarden.traces.insights.view import build_view

    return build_view(rank)


def rank_views(trace: LoadedTrace) -> dict[int, RankView]:
    """``rank_view`` of every rank, all held at once (``analyze`` builds one at a time)."""
    return {r: rank_view(t) for r, t in trace.ranks.items()}


def host_record(rank: RankTrace) -> HostRecord:
    """What ``rank``'s host side recorded of CUDA (``host.host_record``)."""
    _need_numpy()
    from gpuwarden.traces.insights.host import host_record as record

    return record(rank)


def host_op_idle(view: RankView) -> HostOpIdle | None:
    """The CPU op the rank's host ran during most of its GPU idle time
    (``host_idle.host_op_in_idle``)."""
    from gpuwarden.traces.insights.host_idle import host_op_in_idle

    return host_op_in_idle(view)


def held_idle_us(view: RankView) -> float | None:
    """GPU idle time during which the rank's launched kernels waited beyond their launch call
    with their stream free (``launch.held_idle_us``)."""
    from gpuwarden.traces.insights.launch import held_idle_us as held

    return held(view)


def step_launched_us(view: RankView) -> float:
    """GPU busy time of the work launched from inside the rank's ProfilerStep windows, wherever
    on the GPU timeline it ran (``steps.launched_in_steps_us``)."""
    from gpuwarden.traces.insights.steps import launched_in_steps_us

    return launched_in_steps_us(view)


def rank_timings(view: RankView) -> RankTimings:
    """What the straggler analysis needs of one rank (steps, comm kernel times)."""
    from gpuwarden.traces.insights.stragglers import rank_timings as timings

    return timings(view)


def stragglers_of(timings: dict[int, RankTimings]) -> StragglerReport | None:
    """Cross-rank stragglers from each rank's ``rank_timings``; None for a single rank."""
    from gpuwarden.traces.insights.stragglers import stragglers

    return stragglers(timings)


def rank_insights(rank: RankTrace, view: RankView | None = None) -> RankInsights:
    """Every per-rank analysis of one rank. A rank without GPU events gets zeros and Nones."""
    _need_numpy()
    from gpuwarden.traces.insights.summary import summarize

    return summarize(rank, view)


def straggler_report(
    trace: LoadedTrace, views: dict[int, RankView] | None = None
) -> StragglerReport | None:
    """Cross-rank stragglers; None for a single rank. ``views``: from ``rank_views(trace)``."""
    _need_numpy()
    if len(trace.ranks) < 2:
        return None
    timings = {
        r: rank_timings(views[r] if views is not None else rank_view(t))
        for r, t in trace.ranks.items()
    }
    return stragglers_of(timings)
