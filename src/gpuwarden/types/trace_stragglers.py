"""Which ranks hold the others back (``TraceReport.stragglers``).

A module of its own, imported where a trace calls for it: a trace without them does not pay
for creating their classes (see ``gpuwarden.types.trace_insights``), which still names them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RankStraggler:
    """One rank's numbers in the straggler analysis. ``late_arrival_us`` is how much later than
    the median rank it starts collectives (clock offsets removed), averaged."""

    rank: int
    step_time_median_us: float | None
    late_arrival_mean_us: float | None  # None without matched collectives
    last_arrivals: int  # collectives where this rank started last (the others waited)
    waited_us: float  # total time this rank's collective kernels waited for later ranks
    score: float | None  # modified z-score (Iglewicz & Hoaglin), on late arrival or step time
    is_straggler: bool


@dataclass(frozen=True, slots=True)
class StragglerReport:
    """Which ranks hold the others back: late arrival at collectives (matched across ranks by
    collective kind and order) and per-step time, scored robustly with median/MAD."""

    ranks: tuple[RankStraggler, ...]
    stragglers: tuple[int, ...]
    matched_collectives: int  # collectives found on every rank and compared
    metric: str  # "late-arrival" or "step-time"
    step_times_us: dict[int, tuple[tuple[int, float], ...]]  # rank → ((step, wall), ...)
    fix: str | None
