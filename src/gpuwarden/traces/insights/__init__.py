"""Analyses HTA does not give (reference/traces.md §1.19): per-step breakdown, data loading,
host-to-device copies, launch overhead, tensor cores, communication, stragglers.

Pure functions over loaded traces; numpy is imported only when one of them runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwarden.errors import MissingExtraError

if TYPE_CHECKING:
    from gpuwarden.traces.model import LoadedTrace, RankTrace
    from gpuwarden.types.trace_insights import RankInsights, StragglerReport

__all__ = ["rank_insights", "straggler_report"]


def _need_numpy() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("trace analysis", "trace", "numpy") from exc


def rank_insights(rank: RankTrace) -> RankInsights:
    """Every per-rank analysis of one rank. A rank without GPU events gets zeros and Nones."""
    _need_numpy()
    from gpuwarden.traces.insights.summary import summarize

    return summarize(rank)


def straggler_report(trace: LoadedTrace) -> StragglerReport | None:
    """Cross-rank stragglers; None for a single rank."""
    _need_numpy()
    from gpuwarden.traces.insights.stragglers import stragglers
    from gpuwarden.traces.insights.view import build_view

    if len(trace.ranks) < 2:
        return None
    return stragglers({r: build_view(t) for r, t in trace.ranks.items()})
