"""Every number HTA 0.5.0 produced on the trace fixtures (hta_expected/hta-0.5.0/, written by
running HTA itself) must come out of ``gpuwarden.traces.hta.hta_report`` on the same files."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.traces.hta import NO_GPU_ACTIVITY, breakdowns, hta_report
from gpuwarden.traces.load import load_traces
from gpuwarden.types.trace_hta import HtaReport

EXPECTED = Path(__file__).resolve().parents[3] / "shared/fixtures/traces/hta_expected/hta-0.5.0"
SETS = sorted(p.name for p in EXPECTED.iterdir() if (p / "meta.json").is_file())
BIG = {"trace_diff__control", "trace_diff__test", "ns_resolution_trace"}

# Per CSV: the columns that identify a row, and how our report yields its rows.
TABLES: dict[str, tuple[tuple[str, ...], str]] = {
    "temporal_breakdown.csv": (("rank",), "temporal_breakdown"),
    "idle_time_breakdown.csv": (("rank", "stream", "idle_category"), "idle_time_breakdown"),
    "idle_interval_stats.csv": (("rank", "stream", "idle_category"), "idle_interval_stats"),
    "comm_comp_overlap.csv": (("rank",), "comm_comp_overlap"),
    "kernel_type_breakdown.csv": (("kernel_type",), "kernel_type_breakdown"),
    "kernel_breakdown_top.csv": (("kernel_type", "name", "rank"), "kernel_breakdown_top"),
}


def _key_value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(text: str) -> float | None:
    return None if text == "" else float(text)


def _same(ours: Any, theirs: float | None) -> bool:
    if theirs is None or (isinstance(theirs, float) and math.isnan(theirs)):
        return ours is None
    if ours is None:
        return False
    return math.isclose(float(ours), theirs, rel_tol=1e-9, abs_tol=1e-9)


def _run(fixtures: Path, name: str) -> tuple[HtaReport, dict[str, Any], dict[int, int]]:
    meta = json.loads((EXPECTED / name / "meta.json").read_text())
    files = {int(r): fixtures / "traces" / rel for r, rel in meta["files_by_rank"].items()}
    trace = load_traces(list(files.values()))
    # HTA's rank = the dict key it was given; ours comes from the file (also the file name).
    by_path = {str(p): r for r, p in files.items()}
    rank_map = {ours: by_path[rt.meta.path] for ours, rt in trace.ranks.items()}
    return hta_report(trace), meta, rank_map


def _check_set(fixtures: Path, name: str) -> None:
    report, meta, rank_map = _run(fixtures, name)
    compared = 0
    for csv_name, (key_cols, attr) in TABLES.items():
        path = EXPECTED / name / csv_name
        if not path.is_file():
            continue
        with path.open(newline="") as fh:
            expected_rows = list(csv.DictReader(fh))
        ours: dict[tuple[str, ...], dict[str, Any]] = {}
        for row in getattr(report, attr):
            d = row.to_row()
            if "rank" in d:
                d["rank"] = rank_map[d["rank"]]
            ours[tuple(_key_value(d[k]) for k in key_cols)] = d
        theirs = {tuple(_key_value(_maybe_num(r[k])) for k in key_cols): r for r in expected_rows}
        assert sorted(ours) == sorted(theirs), f"{name}/{csv_name}: rows differ"
        for key, expected in theirs.items():
            for col, text in expected.items():
                if col in key_cols:
                    continue
                assert _same(ours[key][col], _number(text)), (
                    f"{name}/{csv_name} {key} {col}: ours {ours[key][col]!r}, HTA {text!r}"
                )
                compared += 1
    errors = meta.get("errors", {})
    problems = {(p.analysis, rank_map[p.rank]): p for p in report.problems}
    expected_problems = {a.removesuffix("_error") for a in errors}
    assert {a for a, _ in problems} == expected_problems, name
    for (analysis, _), problem in problems.items():
        hta_error = errors[f"{analysis}_error"]
        assert problem.hta_behaviour.split(":")[0] == hta_error.split(":")[0]
        if not hta_error.startswith("AssertionError"):
            assert problem.message == NO_GPU_ACTIVITY
    assert compared > 0 or expected_problems, f"{name}: nothing compared"


@pytest.mark.parametrize("name", [s for s in SETS if s not in BIG])
def test_matches_hta_050(fixtures: Path, name: str) -> None:
    _check_set(fixtures, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BIG & set(SETS)))
def test_matches_hta_050_large(fixtures: Path, name: str) -> None:
    _check_set(fixtures, name)


def _maybe_num(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


_TOTALS = st.sampled_from([0.0, 1.0, 2.0, 5.0, 7.5, 40.0, 100.0, float("nan")])


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOTALS, min_size=1, max_size=40))
def test_top_kernels_keep_pandas_order_where_ties_decide_the_cut(totals: list[float]) -> None:
    """Equal totals (whole-µs sums tie often) come from the stable sort; where they straddle the
    "others" cut, which names stay is decided by pandas' quicksort order, as in HTA."""
    stats = [(f"k{i:02d}", t, t, t, t, 0.0) for i, t in enumerate(totals)]
    got = breakdowns.top_kernels(stats)
    with mock.patch.object(breakdowns, "_ties_decide", return_value=True):
        want = breakdowns.top_kernels(stats)
    # compared as HTA's report lists them (sorted by name); NaN compared as NaN
    assert repr(sorted(got)) == repr(sorted(want))
