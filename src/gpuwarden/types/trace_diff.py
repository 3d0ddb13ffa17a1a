"""Two traces compared (`gpuwarden trace diff`).

A module of its own, imported where a trace calls for it: a trace without them does not pay
for creating their classes (see ``gpuwarden.types.trace_insights``), which still names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuwarden.types.trace_insights import KernelKind


@dataclass(frozen=True, slots=True)
class KindDelta:
    """GPU time of one kernel kind before and after (per step or per trace, see TraceDiff)."""

    kind: KernelKind
    before_us: float
    after_us: float
    delta_us: float  # after − before
    ratio: float | None  # after ÷ before, None when before is 0


@dataclass(frozen=True, slots=True)
class KernelDelta:
    """One kernel name before and after; counts are averages, so they can be fractional."""

    name: str
    kind: KernelKind
    before_count: float
    after_count: float
    before_us: float
    after_us: float
    delta_us: float


@dataclass(frozen=True, slots=True)
class TraceDiff:
    """Before → after: GPU time per kernel kind and per kernel name. Values are per step when
    both traces have ProfilerSteps (``per_step``), else per trace; averaged over ranks."""

    per_step: bool
    before_steps: int
    after_steps: int
    before_step_us: float | None  # median step wall time
    after_step_us: float | None
    # GPU busy (any stream): per step, the median over steps of the busy time inside each
    # step's window (beside the median step wall); per trace, the trace's, averaged over ranks
    before_busy_us: float
    after_busy_us: float
    kinds: tuple[KindDelta, ...]  # by |delta| desc
    top_kernels: tuple[KernelDelta, ...]  # by |delta| desc, at most 20
    new_kernels: int  # names only in after
    gone_kernels: int  # names only in before
    faster: tuple[str, ...]  # short summary lines
    slower: tuple[str, ...]
    # what makes the two sides hard to compare (another GPU, job size or step definition),
    # said before any number; empty when they match
    warnings: tuple[str, ...] = ()
