"""Results of the HTA-compatible analyses (``gpuwarden.traces.hta``): the numbers Meta's Holistic
Trace Analysis 0.5.0 returns on the same trace, one row dataclass per HTA table.

``to_row()`` gives HTA's exact column names (reference/traces.md §1.3-1.6), NaN as ``None``.
Times are microseconds (HTA's docstrings say ns; the values are µs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HTA_VERSION = "0.5.0"


def _num(value: float | None) -> float | None:
    """NaN (HTA's "no value") → None; everything else unchanged."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


@dataclass(frozen=True, slots=True)
class TemporalRow:
    """``get_temporal_breakdown``: GPU idle / compute / other busy time within the span of GPU
    activity of one rank."""

    rank: int
    idle_time_us: float
    compute_time_us: float
    non_compute_time_us: float
    kernel_time_us: float  # span of GPU activity: last end - first start
    idle_time_pctg: float | None
    compute_time_pctg: float | None
    non_compute_time_pctg: float | None

    def to_row(self) -> dict[str, float | int | None]:
        return {
            "rank": self.rank,
            "idle_time(us)": self.idle_time_us,
            "compute_time(us)": self.compute_time_us,
            "non_compute_time(us)": self.non_compute_time_us,
            "kernel_time(us)": self.kernel_time_us,
            "idle_time_pctg": _num(self.idle_time_pctg),
            "compute_time_pctg": _num(self.compute_time_pctg),
            "non_compute_time_pctg": _num(self.non_compute_time_pctg),
        }


@dataclass(frozen=True, slots=True)
class IdleTimeRow:
    """``get_idle_time_breakdown``: idle time between kernels of one stream, by cause."""

    rank: int
    stream: int
    idle_category: str  # "host_wait", "kernel_wait", "other"
    idle_time_us: float  # rounded to 2 decimals like HTA
    idle_time_ratio: float | None  # share of the stream's idle time; None when HTA has NaN

    def to_row(self) -> dict[str, float | int | str | None]:
        return {
            "rank": self.rank,
            "stream": self.stream,
            "idle_category": self.idle_category,
            "idle_time": self.idle_time_us,
            "idle_time_ratio": _num(self.idle_time_ratio),
        }


@dataclass(frozen=True, slots=True)
class IdleIntervalStatsRow:
    """``get_idle_time_breakdown(show_idle_interval_stats=True)[1]``: pandas ``describe()`` of the
    gaps of one (stream, category), rounded to 2 decimals; None where pandas gives NaN."""

    rank: int
    stream: int
    idle_category: str
    count: int
    mean_us: float | None
    std_us: float | None  # sample standard deviation (ddof=1)
    min_us: float | None
    p25_us: float | None
    p50_us: float | None
    p75_us: float | None
    max_us: float | None

    def to_row(self) -> dict[str, float | int | str | None]:
        return {
            "idle_category": self.idle_category,
            "rank": self.rank,
            "stream": self.stream,
            "count": self.count,
            "mean": _num(self.mean_us),
            "std": _num(self.std_us),
            "min": _num(self.min_us),
            "25%": _num(self.p25_us),
            "50%": _num(self.p50_us),
            "75%": _num(self.p75_us),
            "max": _num(self.max_us),
        }


@dataclass(frozen=True, slots=True)
class OverlapRow:
    """``get_comm_comp_overlap``: % of communication time during which compute also runs."""

    rank: int
    comp_comm_overlap_pctg: float | None  # None: no communication kernels (HTA: NaN)

    def to_row(self) -> dict[str, float | int | None]:
        return {"rank": self.rank, "comp_comm_overlap_pctg": _num(self.comp_comm_overlap_pctg)}


@dataclass(frozen=True, slots=True)
class KernelTypeRow:
    """``get_gpu_kernel_breakdown()[0]``: time per kernel type or overlap of types, all ranks."""

    kernel_type: str  # "COMPUTATION", "COMPUTATION overlapping COMMUNICATION", ...
    sum_us: float
    percentage: float | None  # rounded to 1 decimal; None when every type sums to 0 µs

    def to_row(self) -> dict[str, float | str | None]:
        return {"kernel_type": self.kernel_type, "sum": self.sum_us, "percentage": self.percentage}


@dataclass(frozen=True, slots=True)
class KernelRow:
    """``get_gpu_kernel_breakdown()[1]``: top kernels per rank and type.

    Compatibility-only: when a rank/type has more than 10 kernel names HTA re-aggregates the
    per-name sums, so those rows show max = min = mean = sum and stddev 0, and "others" holds
    statistics over per-name sums (HTA bug, reproduced on purpose; reference §1.6).
    """

    name: str
    sum_us: float
    max_us: float
    min_us: float
    stddev_us: float
    mean_us: float
    kernel_type: str
    rank: int

    def to_row(self) -> dict[str, float | int | str | None]:
        return {
            "name": self.name,
            "sum (us)": self.sum_us,
            "max (us)": self.max_us,
            "min (us)": self.min_us,
            "stddev": _num(self.stddev_us),
            "mean (us)": self.mean_us,
            "kernel_type": self.kernel_type,
            "rank": self.rank,
        }


@dataclass(frozen=True, slots=True)
class HtaProblem:
    """An analysis HTA cannot compute for a rank (where HTA itself raises)."""

    rank: int
    analysis: str  # "temporal_breakdown", "idle_time_breakdown", ...
    message: str  # e.g. "no GPU activity in this trace"
    hta_behaviour: str  # what HTA 0.5.0 does instead, e.g. "IndexError"


@dataclass(frozen=True, slots=True)
class HtaReport:
    """Every HTA-compatible table for one loaded trace (all its ranks)."""

    temporal_breakdown: tuple[TemporalRow, ...]
    idle_time_breakdown: tuple[IdleTimeRow, ...]
    idle_interval_stats: tuple[IdleIntervalStatsRow, ...]
    comm_comp_overlap: tuple[OverlapRow, ...]
    kernel_type_breakdown: tuple[KernelTypeRow, ...]
    kernel_breakdown_top: tuple[KernelRow, ...]
    problems: tuple[HtaProblem, ...] = ()
    hta_version: str = HTA_VERSION
    last_step_dropped: bool = False  # HTA's last-ProfilerStep filter was applied
