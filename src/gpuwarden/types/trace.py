"""What ``gpuwarden trace analyze`` found: the files, HTA's tables, per-rank insights, the verdict.

Times are microseconds (``_us``) as in the trace; ratios are 0..1 (``_ratio``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuwarden.types.trace_hta import HtaReport
    from gpuwarden.types.trace_insights import RankInsights
    from gpuwarden.types.trace_stragglers import StragglerReport


class VerdictKind(StrEnum):
    """The one bottleneck of a trace, in the order the diagnosis tree tests them."""

    NO_GPU_ACTIVITY = "no-gpu-activity"
    NOT_ENOUGH_DATA = "not-enough-data"  # GPU work, but too little to judge a bottleneck
    DATA_LOADING_BOUND = "data-loading-bound"
    CPU_LAUNCH_BOUND = "cpu-launch-bound"
    STRAGGLER_BOUND = "straggler-bound"
    COMMUNICATION_BOUND = "communication-bound"
    MEMORY_BOUND_KERNELS = "memory-bound-kernels"
    COMPUTE_BOUND = "compute-bound"


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: VerdictKind
    summary: str  # one line a person reads first
    evidence: tuple[str, ...]  # each with the numbers it rests on
    fix: str
    rank: int | None = None  # the rank the numbers come from (the worst one), None = all


class SpanKind(StrEnum):
    """Colour of a timeline span: what the GPU was doing."""

    COMPUTE = "compute"
    COMMUNICATION = "communication"
    MEMORY = "memory"  # memcpy / memset


@dataclass(frozen=True, slots=True)
class TimelineSpan:
    """Busy time on one stream, possibly several merged events (downsampled for drawing)."""

    start_us: float  # from the earliest event of any rank (HTA's alignment)
    end_us: float
    kind: SpanKind  # the kind with most busy time inside the span
    events: int
    busy_us: float  # sum of event time inside; ≤ end_us - start_us


@dataclass(frozen=True, slots=True)
class StreamTimeline:
    rank: int
    stream: int
    spans: tuple[TimelineSpan, ...]
    events: int  # GPU events on this stream before downsampling
    busy_us: float  # union of their intervals


@dataclass(frozen=True, slots=True)
class TraceFile:
    path: str
    rank: int
    rank_source: str  # "distributedInfo", "file name", "default"
    size_bytes: int  # uncompressed JSON
    events: int  # traceEvents entries, all phases
    device: str | None  # deviceProperties name of the GPU the rank used, when known
    # events left out of the analyses, by reason (traces.model.SKIP_REASONS); empty = none
    skipped_events: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SkippedFile:
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class TraceReport:
    files: tuple[TraceFile, ...]
    skipped: tuple[SkippedFile, ...]
    hta: HtaReport
    ranks: dict[int, RankInsights]
    stragglers: StragglerReport | None
    verdict: Verdict
    timelines: tuple[StreamTimeline, ...]
    timeline_end_us: float
    warnings: tuple[str, ...]
