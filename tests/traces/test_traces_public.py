"""Held-out public Kineto traces (tests/data/traces_public/, SOURCES.md there): every breakdown
``hta_report`` gives must equal what HTA 0.5.0 returned when it was run on the same file
(recorded in expected.json; HTA itself does not run here), the facts read from each trace by hand
must come out of ``trace analyze``, and the CLI must give JSON, exit 0, no traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.traces import decode
from gpuwarden.traces.hta import NO_GPU_ACTIVITY, hta_report
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.native import DECODER_ENV

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public"
EXPECTED: dict[str, Any] = json.loads((DATA / "expected.json").read_text())["traces"]
TRACES = sorted(EXPECTED)

# the columns that identify a row of each HTA table (as tests/traces/test_hta_parity.py)
KEYS: dict[str, tuple[str, ...]] = {
    "temporal_breakdown": ("rank",),
    "idle_time_breakdown": ("rank", "stream", "idle_category"),
    "idle_interval_stats": ("rank", "stream", "idle_category"),
    "comm_comp_overlap": ("rank",),
    "kernel_type_breakdown": ("kernel_type",),
    "kernel_breakdown_top": ("kernel_type", "name", "rank"),
}


def _key(row: dict[str, Any], cols: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(
        str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
        for v in (row[c] for c in cols)
    )


def _same(ours: Any, theirs: Any) -> bool:
    """Equal within the parity tests' tolerance; HTA's NaN (null here) is our None."""
    if theirs is None:
        return ours is None
    return ours is not None and math.isclose(float(ours), float(theirs), rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("name", TRACES)
def test_breakdowns_match_recorded_hta(name: str) -> None:
    hta = EXPECTED[name]["hta"]
    files = {int(rank): DATA / rel for rank, rel in hta["files_by_rank"].items()}
    trace = load_traces(files)
    by_path = {str(p): r for r, p in files.items()}
    rank_map = {ours: by_path[rt.meta.path] for ours, rt in trace.ranks.items()}
    report = hta_report(trace)
    compared = 0
    for table, cols in KEYS.items():
        if table in hta["errors"]:
            continue
        ours: dict[tuple[str, ...], dict[str, Any]] = {}
        for row in getattr(report, table):
            d = row.to_row()
            if "rank" in d:
                d["rank"] = rank_map[d["rank"]]
            ours[_key(d, cols)] = d
        theirs = {_key(r, cols): r for r in hta["tables"][table]}
        assert sorted(ours) == sorted(theirs), f"{name}/{table}: rows differ"
        for key, row in theirs.items():
            for col, value in row.items():
                if col not in cols:
                    assert _same(ours[key][col], value), (table, key, col, ours[key][col], value)
                    compared += 1
    # where HTA raised, we say why instead, naming HTA's exception
    problems = {p.analysis: p for p in report.problems}
    assert set(problems) == set(hta["errors"]), name
    for analysis, problem in problems.items():
        hta_error = hta["errors"][analysis]
        assert problem.hta_behaviour.split(":")[0] == hta_error.split(":")[0]
        if not hta_error.startswith("AssertionError"):
            assert problem.message == NO_GPU_ACTIVITY
    assert compared > 0 or problems, f"{name}: nothing compared"


def _analyze_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["trace", "analyze", str(path), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    document: dict[str, Any] = json.loads(out)
    return document


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = EXPECTED[name]["facts"]
    document = _analyze_json(DATA / name, capsys)
    (file,) = document["files"]
    assert file["device"] == facts["device"]
    assert file["events"] > 0
    (rank,) = document["ranks"].values()
    # the kernel/memcpy/memset events of the rank (cuda_sync markers are not GPU work)
    assert rank["gpu_events"] == facts["kernels"] + facts["memcpy"]
    assert len(rank["steps"]) == facts["profiler_steps"]
    assert document["verdict"]["kind"] == facts["verdict"]


def test_legacy_gpu_list_is_read_by_both_decoders(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2021 trace names its GPUs under ``computeProperties``: the simdjson scanner and the
    msgspec reference decoder both find the GPU the kernels ran on (args.device 0)."""
    path = DATA / "kineto_tb_plugin_v100" / "gpu_metrics_input.json"
    native = load_traces([path])
    monkeypatch.setenv(DECODER_ENV, "msgspec")
    reference = load_traces([path])
    for trace in (native, reference):
        (rank,) = trace.ranks.values()
        names = [p["name"] for p in rank.meta.device_properties]
        assert names == ["Tesla V100-DGXS-32GB"] * 4
    from gpuwarden.traces import kineto_structs

    assert kineto_structs.LEGACY_DEVICES_KEY == decode.LEGACY_DEVICES_KEY == "computeProperties"


def test_current_gpu_list_wins_over_a_legacy_one(tmp_path: Path) -> None:
    """Both keys present (a hand-merged file): ``deviceProperties`` is the one Kineto reads."""
    path = tmp_path / "both.json"
    path.write_text(
        json.dumps(
            {
                "computeProperties": [{"id": 0, "name": "old"}],
                "deviceProperties": [{"id": 0, "name": "new"}],
                "traceEvents": [],
            }
        )
    )
    (rank,) = load_traces([path]).ranks.values()
    assert [p["name"] for p in rank.meta.device_properties] == ["new"]


@settings(max_examples=150, deadline=None)
@given(
    before=st.text(max_size=40),
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=8,
    ),
    cut=st.integers(min_value=0, max_value=200),
)
def test_legacy_gpu_list_reader_never_raises(before: str, value: Any, cut: int) -> None:
    """Any opening text naming the legacy key: a dict back (the key's value when it parses,
    else the head unchanged), never an exception."""
    text = '{"x": ' + json.dumps(before) + ', "computeProperties": ' + json.dumps(value) + ", "
    opening = (text + '"traceEvents":[]}').encode()
    for data in (opening, opening[:cut]):
        head = decode._with_legacy_devices({}, data)
        assert isinstance(head, dict)
    assert decode._with_legacy_devices({}, opening)["computeProperties"] == value
