"""JSON documents of ``gpuwarden trace analyze`` (``gpuwarden.trace/1``) and ``trace diff``
(``gpuwarden.trace-diff/1``).

``hta`` rows carry HTA's own column names (``to_row()``), so scripts written against HTA's
DataFrames read them unchanged. Everything else is our dataclasses as plain JSON: field names
as in Python (units in the names), enums as their text, NaN/inf as null.

``skipped_events`` (top level: summed over the files; each ``files[i]`` has its own) counts the
events left out of the analyses by reason, keys as in ``traces.model.SKIP_REASONS``
(``dur-not-a-number``, ``ts-not-a-number``, ``ts-missing``, ``gpu-event-without-stream``); an
empty object when nothing was.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, Any

from gpuwarden.report.output import print_json
from gpuwarden.types.trace import TraceReport
from gpuwarden.types.trace_hta import HtaReport

if TYPE_CHECKING:
    from gpuwarden.types.trace_diff import TraceDiff

TRACE_SCHEMA = "gpuwarden.trace/1"
DIFF_SCHEMA = "gpuwarden.trace-diff/1"


def plain(value: Any) -> Any:
    """A dataclass tree as JSON-ready values."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, IntEnum):
        return value.name.lower()  # KernelKind.COMM_ALLREDUCE → "comm_allreduce"
    if isinstance(value, Enum):
        return value.value
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value)


def _rows(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [plain(r.to_row()) for r in rows]


def hta_document(hta: HtaReport) -> dict[str, Any]:
    return {
        "hta_version": hta.hta_version,
        "last_step_dropped": hta.last_step_dropped,
        "temporal_breakdown": _rows(hta.temporal_breakdown),
        "idle_time_breakdown": _rows(hta.idle_time_breakdown),
        "idle_interval_stats": _rows(hta.idle_interval_stats),
        "comm_comp_overlap": _rows(hta.comm_comp_overlap),
        "kernel_type_breakdown": _rows(hta.kernel_type_breakdown),
        "kernel_breakdown": _rows(hta.kernel_breakdown_top),
        "problems": plain(hta.problems),
    }


def _skipped_events(report: TraceReport) -> dict[str, int]:
    total: dict[str, int] = {}
    for f in report.files:
        for reason, count in f.skipped_events.items():
            total[reason] = total.get(reason, 0) + count
    return total


def trace_document(report: TraceReport) -> dict[str, Any]:
    return {
        "schema": TRACE_SCHEMA,
        "verdict": plain(report.verdict),
        "files": plain(report.files),
        "skipped": plain(report.skipped),
        "skipped_events": _skipped_events(report),
        "warnings": list(report.warnings),
        "ranks": {str(rank): plain(ins) for rank, ins in report.ranks.items()},
        "stragglers": plain(report.stragglers),
        "hta": hta_document(report.hta),
    }


def print_trace_json(report: TraceReport) -> None:
    print_json(trace_document(report))


def diff_document(diff: TraceDiff, *, a_path: str, b_path: str) -> dict[str, Any]:
    return {"schema": DIFF_SCHEMA, "before": a_path, "after": b_path, **plain(diff)}


def print_diff_json(diff: TraceDiff, *, a_path: str, b_path: str) -> None:
    print_json(diff_document(diff, a_path=a_path, b_path=b_path))
