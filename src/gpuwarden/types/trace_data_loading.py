"""Data loading's share of a rank's GPU idle time (``RankInsights.data_loading``).

A module of its own, imported where a trace calls for it: a trace without them does not pay
for creating their classes (see ``gpuwarden.types.trace_insights``), which still names them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StepDataLoading:
    """Data-loading wait inside one ProfilerStep."""

    step: int
    dataloader_us: float  # host time inside DataLoader ranges in this step
    gpu_idle_us: float  # GPU idle while the host was in the DataLoader
    gpu_idle_ratio_of_step: float


@dataclass(frozen=True, slots=True)
class DataLoadingReport:
    """GPU idle while the host waited for the next batch (``enumerate(DataLoader)``,
    ``DataLoaderIter.__next__``). ``None`` in RankInsights when the trace has no such events."""

    events: int
    dataloader_us: float  # union of the DataLoader ranges
    gpu_idle_us: float  # part of that with no GPU stream busy
    gpu_idle_ratio_of_steps: float | None  # ÷ total step wall time; None without steps
    max_single_wait_us: float  # longest DataLoader range
    multiprocess: bool | None  # _MultiProcessingDataLoaderIter (True), _SingleProcess (False)
    per_step: tuple[StepDataLoading, ...]
    fix: str | None
