"""HTA 0.5.0 itself (a dev dependency) against ``hta_report`` on multi-rank combinations of real
fixtures that hta_expected/ does not hold: two ranks that both pass through HTA's global
last-ProfilerStep filter and cross-rank alignment, and a job with a GPU-less rank."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.traces.hta import hta_report
from gpuwarden.traces.load import load_traces

COMBOS = {
    "two_ranks_with_step_filter": {
        0: "nccl_parser_config/nccl_data.json.gz",
        1: "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    },
    "gpu_rank_and_cpu_only_rank": {
        0: "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
        34: "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    },
}
KEYS = {
    "temporal_breakdown": ("rank",),
    "idle_time_breakdown": ("rank", "stream", "idle_category"),
    "comm_comp_overlap": ("rank",),
    "kernel_type_breakdown": ("kernel_type",),
    "kernel_breakdown_top": ("kernel_type", "name", "rank"),
}


def _hta_tables(files: dict[int, Path]) -> tuple[dict[str, list[dict[str, Any]]], set[str]]:
    hta = pytest.importorskip("hta.trace_analysis")
    tables: dict[str, list[dict[str, Any]]] = {}
    failed: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = hta.TraceAnalysis(trace_files={r: str(p) for r, p in files.items()}, trace_dir="/")
        calls = {
            "temporal_breakdown": lambda: ta.get_temporal_breakdown(visualize=False),
            "idle_time_breakdown": lambda: ta.get_idle_time_breakdown(
                ranks=sorted(files), visualize=False
            )[0],
            "comm_comp_overlap": lambda: ta.get_comm_comp_overlap(visualize=False),
            "kernel_type_breakdown": lambda: ta.get_gpu_kernel_breakdown(visualize=False)[0],
            "kernel_breakdown_top": lambda: ta.get_gpu_kernel_breakdown(visualize=False)[1],
        }
        for name, call in calls.items():
            try:
                tables[name] = call().to_dict("records")
            except (IndexError, ValueError, AssertionError):
                failed.add(name)
    return tables, failed


def _key(row: dict[str, Any], cols: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for c in cols:
        v = row[c]
        out.append(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v))
    return tuple(out)


def _same(ours: Any, theirs: Any) -> bool:
    if theirs is None or (isinstance(theirs, float) and math.isnan(theirs)):
        return ours is None
    return ours is not None and math.isclose(float(ours), float(theirs), rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("combo", sorted(COMBOS))
def test_multi_rank_matches_live_hta(fixtures: Path, combo: str) -> None:
    files = {r: fixtures / "traces" / rel for r, rel in COMBOS[combo].items()}
    theirs, failed = _hta_tables(files)
    trace = load_traces(files)  # ranks as given, as HTA's trace_files
    by_path = {str(p): r for r, p in files.items()}
    rank_map = {ours: by_path[rt.meta.path] for ours, rt in trace.ranks.items()}
    report = hta_report(trace)
    compared = 0
    for name, cols in KEYS.items():
        if name in failed:
            assert any(p.analysis == name for p in report.problems), name
            continue
        ours: dict[tuple[str, ...], dict[str, Any]] = {}
        for row in getattr(report, name):
            d = row.to_row()
            if "rank" in d:
                d["rank"] = rank_map[d["rank"]]
            ours[_key(d, cols)] = d
        hta_rows = {_key(r, cols): r for r in theirs[name]}
        assert sorted(ours) == sorted(hta_rows), name
        for key, row in hta_rows.items():
            for col, value in row.items():
                if col not in cols:
                    assert _same(ours[key][col], value), (name, key, col, ours[key][col], value)
                    compared += 1
    assert compared > 0
    # ns_resolution_trace has 5 ProfilerStep names, so HTA's filter ran on both ranks
    assert report.last_step_dropped == (combo == "two_ranks_with_step_filter")
