"""Analyses HTA does not give (reference/traces.md §1.19): per-step breakdown, data loading,
host-to-device copies, launch overhead, tensor cores, communication, stragglers.

Pure functions over loaded traces; numpy is imported only when one of them runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwarden.errors import MissingExtraError

if TYPE_CHECKING:
    from gpuwarden.traces.insights.view import RankView
    from gpuwarden.traces.model import LoadedTrace, RankTrace
    from gpuwarden.types.trace_insights import RankInsights, StragglerReport

__all__ = ["rank_insights", "rank_views", "straggler_report"]


def _need_numpy() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("trace analysis", "trace", "numpy") from exc


def rank_views(trace: LoadedTrace) -> dict[int, RankView]:
    """The per-rank groundwork (kinds, unions, steps) every analysis shares, built once per rank
    and handed to ``rank_insights``/``straggler_report``/``stream_timelines``."""
    _need_numpy()
    from gpuwarden.traces.insights.view import build_view

    return {r: build_view(t) for r, t in trace.ranks.items()}


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
    from gpuwarden.traces.insights.stragglers import stragglers

    if len(trace.ranks) < 2:
        return None
    if views is None:
        views = rank_views(trace)
    return stragglers(views)
