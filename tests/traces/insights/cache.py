"""Loaded fixtures shared by the insight tests (loading is the slow part; do it once)."""

from __future__ import annotations

from functools import cache

from gpuwarden.traces.load import load_traces
from gpuwarden.traces.model import LoadedTrace, RankTrace
from tests.traces.insights.raw import FIXTURES


@cache
def loaded(rel: str) -> LoadedTrace:
    return load_traces([FIXTURES / rel])


def rank_of(rel: str) -> RankTrace:
    trace = loaded(rel)
    return next(iter(trace.ranks.values()))
