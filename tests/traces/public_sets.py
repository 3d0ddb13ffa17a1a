"""What the held-out public trace sets (tests/data/traces_public*) check alike: every breakdown
``hta_report`` gives equals what HTA 0.5.0 returned on the same files (recorded in the set's
expected.json), and ``trace analyze --json`` runs on a file as a user runs it."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.traces.analyze import analyze
from gpuwarden.traces.hta import NO_GPU_ACTIVITY, hta_report
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.native import DECODER_ENV
from gpuwarden.types.trace import TraceReport, VerdictKind

# the columns that identify a row of each HTA table (as tests/traces/test_hta_parity.py)
KEYS: dict[str, tuple[str, ...]] = {
    "temporal_breakdown": ("rank",),
    "idle_time_breakdown": ("rank", "stream", "idle_category"),
    "idle_interval_stats": ("rank", "stream", "idle_category"),
    "comm_comp_overlap": ("rank",),
    "kernel_type_breakdown": ("kernel_type",),
    "kernel_breakdown_top": ("kernel_type", "name", "rank"),
}


def expected_traces(data: Path) -> dict[str, Any]:
    traces: dict[str, Any] = json.loads((data / "expected.json").read_text())["traces"]
    return traces


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


def assert_breakdowns_match_recorded_hta(data: Path, name: str, hta: dict[str, Any]) -> None:
    """Every HTA table row and value as recorded, ranks mapped by file; where HTA raised, our
    report says why instead, naming HTA's exception."""
    files = {int(rank): data / rel for rank, rel in hta["files_by_rank"].items()}
    trace = load_traces(files)
    by_path = {str(p): r for r, p in files.items()}
    rank_map = {ours: by_path[rt.meta.path] for ours, rt in trace.ranks.items()}
    report = hta_report(trace)
    compared = 0
    for table, all_cols in KEYS.items():
        if table in hta["errors"]:
            continue
        # HTA leaves idle_category out of the idle-interval row of a stream with no idle
        # interval at all (its count 0): rows are matched on the columns HTA gave
        cols = tuple(c for c in all_cols if all(c in r for r in hta["tables"][table]))
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
    problems = {p.analysis: p for p in report.problems}
    assert set(problems) == set(hta["errors"]), name
    for analysis, problem in problems.items():
        hta_error = hta["errors"][analysis]
        assert problem.hta_behaviour.split(":")[0] == hta_error.split(":")[0]
        if not hta_error.startswith("AssertionError"):
            assert problem.message == NO_GPU_ACTIVITY
    assert compared > 0 or problems, f"{name}: nothing compared"


def analyze_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["trace", "analyze", str(path), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    document: dict[str, Any] = json.loads(out)
    return document


def breakdowns_check(data: Path, expected: dict[str, Any]) -> Callable[[str], None]:
    """``assert_breakdowns_match_recorded_hta`` on each trace of the set, as a test its module
    binds under a ``test_*`` name."""

    @pytest.mark.parametrize("name", sorted(expected))
    def check(name: str) -> None:
        assert_breakdowns_match_recorded_hta(data, name, expected[name]["hta"])

    return check


def assert_file_and_rank_facts(document: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """``trace analyze --json`` of a one-file trace names the file's GPU, counts its events and
    what was set aside (only GPU events without an integer stream, HTA's rule), and its one rank's
    GPU events; the rank's part of the document, for the set's own checks."""
    (file,) = document["files"]
    assert file["device"] == facts["device"]
    assert file["events"] == facts["events"]
    assert file["skipped_events"] == facts["skipped_events"]
    (rank,) = document["ranks"].values()
    assert rank["device_name"] == facts["device"]
    assert rank["gpu_events"] == facts["kernels"] + facts["memcpy"]
    rank_part: dict[str, Any] = rank
    return rank_part


def assert_launch_and_busy_facts(document: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """``assert_file_and_rank_facts`` for a capture without ProfilerSteps, then its launches,
    kernel and launch-call medians, short-kernel share, busy time and span as read by hand; the
    rank's part of the document, for the set's own checks."""
    rank = assert_file_and_rank_facts(document, facts)
    assert rank["steps"] == facts["step_wall_us"] == []
    launch = rank["launch"]
    assert launch["launches"] == facts["launches"]
    assert launch["gpu_kernel_p50_us"] == facts["kernel_p50_us"]
    assert launch["cpu_launch_p50_us"] == facts["launch_call_p50_us"]
    assert launch["short_kernel_ratio"] == pytest.approx(
        facts["kernels_shorter_than_launch"] / facts["kernels"]
    )
    assert rank["gpu_busy_us"] == facts["gpu_busy_us"]
    assert rank["gpu_span_us"] == facts["gpu_span_us"]
    return rank


def assert_steps_launches_and_verdict(
    document: dict[str, Any], facts: dict[str, Any]
) -> dict[str, Any]:
    """``assert_file_and_rank_facts``, then each step's wall, the launches and the verdict's kind
    are the facts'; the rank's part of the document, for the set's own checks."""
    rank = assert_file_and_rank_facts(document, facts)
    walls = [step["wall_us"] for step in rank["steps"]]
    assert walls == pytest.approx(facts["step_wall_us"], abs=1e-3)
    assert rank["launch"]["launches"] == facts["launches"]
    assert document["verdict"]["kind"] == facts["verdict"]
    return rank


def assert_flash_attention(document: dict[str, Any], facts: dict[str, Any], *, sdpa: bool) -> None:
    """A flash-attention capture's kernels (FA2's ``pytorch_flash::flash_fwd_kernel``, FA3's
    CUTLASS-wrapped Hopper kernel) are attention on the flash backend, its semaphore fills
    elementwise, each kind's count and time the facts'; ``sdpa``: launched through PyTorch's SDPA
    (one call a ProfilerStep), else through flash_attn_interface (none)."""
    rank = next(iter(document["ranks"].values()))
    kinds = {k["kind"]: (k["count"], k["time_us"]) for k in rank["kinds"]}
    expected = {
        kind: (facts[kind]["count"], facts[kind]["time_us"])
        for kind in ("attention", "elementwise")
        if facts[kind]["count"]
    }
    assert set(kinds) == set(expected)
    for kind, (count, time_us) in expected.items():
        assert kinds[kind][0] == count
        assert kinds[kind][1] == pytest.approx(time_us, abs=1e-6)
    (backend,) = rank["attention"]["backends"]
    assert backend["backend"] == "flash"
    assert backend["kernel_time_us"] == pytest.approx(facts["attention"]["time_us"], abs=1e-6)
    assert rank["attention"]["sdpa_calls"] == (facts["profiler_steps"] if sdpa else 0)
    assert rank["tensor_cores"] is None  # no GEMM to weigh


def decoders_check(
    data: Path, expected: dict[str, Any]
) -> Callable[[str, pytest.MonkeyPatch], None]:
    """The native decoder and the msgspec reference agree on each trace of the set: its GPU list
    (the one GPU the facts name), the event count and what was set aside; a test its module binds
    under a ``test_*`` name."""

    @pytest.mark.parametrize("name", sorted(expected))
    def check(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
        facts = expected[name]["facts"]
        native = load_traces([data / name])
        monkeypatch.setenv(DECODER_ENV, "msgspec")
        reference = load_traces([data / name])
        for trace in (native, reference):
            (rank,) = trace.ranks.values()
            assert len(rank.meta.device_properties) == facts["device_entries"]
            assert {p["name"] for p in rank.meta.device_properties} == {facts["device"]}
            assert rank.meta.event_count == facts["events"]
            assert rank.meta.skipped_events == facts["skipped_events"]

    return check


def trace_document(path: Path) -> dict[str, Any]:
    """The trace file's JSON object, as a test reads facts from it by hand."""
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def analyze_kept(
    document: dict[str, Any], keep: list[bool]
) -> tuple[TraceReport, list[dict[str, Any]]]:
    """``analyze_subset`` of the events of ``document`` that ``keep`` (one flag per event, in
    order, as the fuzz tests draw it) keeps, with the kept events."""
    kept = [e for e, k in zip(document["traceEvents"], keep, strict=True) if k]
    return analyze_subset(document, kept), kept


def analyze_subset(
    document: dict[str, Any], kept: list[dict[str, Any]], name: str = "subset.json"
) -> TraceReport:
    """``analyze`` of the trace ``document`` with only the ``kept`` events, written to a
    temporary file ``name`` as a user's would be."""
    with tempfile.TemporaryDirectory() as tmp:
        subset = Path(tmp) / name
        subset.write_text(json.dumps({**document, "traceEvents": kept}))
        return analyze(load_traces([subset]))


def subset_fuzz(folder: Path, traces: list[str], verdicts: set[VerdictKind]) -> Callable[..., None]:
    """Dropping any events (launches, flows, kernels, steps, metadata) of any of the set's
    ``traces`` never raises, every kept event is counted and the verdict is one of ``verdicts``,
    as a test its module binds under a ``test_*`` name."""

    @settings(max_examples=30, deadline=None)
    @given(name=st.sampled_from(traces), data=st.data())
    def check(name: str, data: st.DataObject) -> None:
        document = trace_document(folder / name)
        n = len(document["traceEvents"])
        keep = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        report, kept = analyze_kept(document, keep)
        (file,) = report.files
        assert file.events == len(kept)
        assert report.verdict.kind in verdicts

    return check
