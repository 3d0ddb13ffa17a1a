"""HTA-compatible analyses: the numbers Meta's Holistic Trace Analysis 0.5.0 gives on the same
trace (reference/traces.md §1), as pure functions over a ``LoadedTrace``.

Where HTA raises (traces without GPU kernels: IndexError / ValueError; its temporal consistency
asserts), the rank gets an ``HtaProblem`` instead and the other ranks and tables still come out.
"""

from __future__ import annotations

from typing import Any

from gpuwarden.errors import MissingExtraError
from gpuwarden.traces.memory import release_free_heap
from gpuwarden.traces.model import LoadedTrace
from gpuwarden.types.trace_hta import HtaProblem, HtaReport

NO_GPU_ACTIVITY = "no GPU activity in this trace"


def hta_report(trace: LoadedTrace) -> HtaReport:
    """Temporal, idle-time (+ interval stats), comm/comp overlap and kernel breakdowns, HTA 0.5.0
    style, over every rank of ``trace``."""
    try:
        from gpuwarden.traces.hta import breakdowns, idle
        from gpuwarden.traces.hta.frame import hta_frames
    except ImportError as exc:  # numpy is in the `trace` extra
        raise MissingExtraError("trace analysis", "trace", "numpy") from exc

    import numpy as np

    # Overflow on absurd values (1e300 µs) gives inf/NaN, silently, as in HTA (pandas).
    with np.errstate(all="ignore"):
        return _report(trace, breakdowns, idle, hta_frames)


def _report(trace: LoadedTrace, breakdowns: Any, idle: Any, hta_frames: Any) -> HtaReport:
    frames, filtered = hta_frames(trace)
    temporal = []
    idle_rows = []
    stats_rows = []
    overlap = []
    type_sums = []
    kernels = []
    problems: list[HtaProblem] = []
    for frame in frames:
        rank = frame.rank
        types = breakdowns.type_of_rows(frame)
        merged = breakdowns.merged_by_type(frame, types)
        try:
            temporal.append(breakdowns.temporal_row(frame, merged))
        except breakdowns.HtaAssertionError as exc:
            problems.append(
                HtaProblem(
                    rank,
                    "temporal_breakdown",
                    f"HTA 0.5.0's consistency check fails on this rank ({exc}); "
                    "it has GPU events with negative duration after HTA's ns rounding",
                    "AssertionError",
                )
            )
        except ValueError:
            problems.append(
                HtaProblem(
                    rank,
                    "temporal_breakdown",
                    NO_GPU_ACTIVITY,
                    "IndexError: single positional indexer is out-of-bounds",
                )
            )
        try:
            rows, stats = idle.idle_breakdown(frame)
            idle_rows.extend(rows)
            stats_rows.extend(stats)
        except ValueError:
            for analysis in ("idle_time_breakdown", "idle_interval_stats"):
                problems.append(
                    HtaProblem(
                        rank, analysis, NO_GPU_ACTIVITY, "ValueError: No objects to concatenate"
                    )
                )
        overlap.append(breakdowns.overlap_row(frame, merged))
        type_sums.append(breakdowns.kernel_type_sums(merged))
        kernels.extend(breakdowns.kernel_rows(frame, types))
        del frame, types, merged  # before the next rank's frame is made (peak memory)
        release_free_heap()
    kernels.sort(key=lambda k: (k.kernel_type, k.name, k.rank))
    return HtaReport(
        temporal_breakdown=tuple(temporal),
        idle_time_breakdown=tuple(idle_rows),
        idle_interval_stats=tuple(stats_rows),
        comm_comp_overlap=tuple(overlap),
        kernel_type_breakdown=breakdowns.kernel_type_rows(type_sums),
        kernel_breakdown_top=tuple(kernels),
        problems=tuple(problems),
        last_step_dropped=filtered,
    )
