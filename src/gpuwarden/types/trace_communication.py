"""Communication kernels of a rank (``RankInsights.communication``).

A module of its own, imported where a trace calls for it: a trace without them does not pay
for creating their classes (see ``gpuwarden.types.trace_insights``), which still names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuwarden.types.trace_insights import KernelKind


@dataclass(frozen=True, slots=True)
class CollectiveStats:
    """Communication kernels of one collective kind (by kernel name or `Collective name`)."""

    kind: KernelKind
    count: int
    time_us: float  # sum of kernel durations
    bytes_total: int | None  # from the collective's message size args; None if not recorded


@dataclass(frozen=True, slots=True)
class CommunicationReport:
    """Communication kernels per collective, their overlap with compute, and the exposed
    (non-overlapped) part. ``None`` in RankInsights when the trace has no communication."""

    collectives: tuple[CollectiveStats, ...]
    comm_busy_us: float  # union of communication kernels
    overlapped_us: float  # part of it while a compute kernel ran
    exposed_us: float
    overlap_ratio: float  # overlapped ÷ comm busy
    exposed_ratio_of_steps: float | None  # exposed comm in steps ÷ step wall time
    exposed_ratio_of_busy: float  # exposed ÷ GPU busy time
    fix: str | None
