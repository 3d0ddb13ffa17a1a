"""Fourth held-out set of public Kineto traces (tests/data/traces_public4/, SOURCES.md there): a
capture on two NVIDIA TITAN RTX (Turing, sm 7.5) whose one ProfilerStep window holds a loss
``.item()``: no kernel, a 4-byte device-to-host copy. Every breakdown ``hta_report`` gives must
equal what HTA 0.5.0 returned on the same file (recorded in expected.json), the facts read from
the trace by hand must come out of ``trace analyze``, and the verdict must not name a bottleneck
nor ask for the step annotations the trace already has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.traces.analyze import analyze
from gpuwarden.traces.load import load_traces
from tests.traces.public_sets import (
    analyze_json,
    analyze_kept,
    assert_file_and_rank_facts,
    breakdowns_check,
    decoders_check,
    expected_traces,
    trace_document,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public4"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)


# Every value HTA gave, compared: its idle-interval row of a stream with no idle interval
# (count 0, no idle_category column) by rank and stream, its NaN kernel-type share (0 of
# 0 µs) as our None.
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    rank = assert_file_and_rank_facts(document, facts)
    assert rank["gpu_busy_us"] == pytest.approx(facts["memcpy_us"], abs=2e-3)
    (step,) = rank["steps"]
    assert len(rank["steps"]) == facts["profiler_steps"]
    assert step["wall_us"] == pytest.approx(facts["step_wall_us"], abs=1e-3)
    assert step["kernels"] == facts["kernels"]
    assert document["verdict"]["kind"] == facts["verdict"]
    (kernel_type,) = document["hta"]["kernel_type_breakdown"]
    assert kernel_type["percentage"] is None  # 0 / 0 µs: null in the JSON, as HTA's NaN


@pytest.mark.parametrize("name", TRACES)
def test_a_step_without_gpu_work_is_named_not_asked_for(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace has its ProfilerStep window: the verdict says that window holds next to no GPU
    work (µs, not "0.0 ms") and advises profiling GPU-heavy steps."""
    facts = EXPECTED[name]["facts"]
    verdict = analyze_json(DATA / name, capsys)["verdict"]
    assert verdict["kind"] == "not-enough-data"
    assert "over 1.3 µs of GPU activity" in verdict["evidence"][0]
    assert verdict["evidence"][2] == (
        f"the {facts['profiler_steps']} ProfilerStep window(s) in the trace (0.6 ms) hold 1.3 µs "
        "of GPU work: the profiled steps are not the GPU-heavy ones"
    )
    assert verdict["fix"].startswith("profile steps that do the GPU work")


def test_without_steps_the_advice_asks_for_step_annotations(tmp_path: Path) -> None:
    """The same capture with its ProfilerStep annotations removed: the old advice stands."""
    document = trace_document(DATA / TRACES[0])
    events = [e for e in document["traceEvents"] if not e.get("name", "").startswith("Profiler")]
    path = tmp_path / "no_steps.json"
    path.write_text(json.dumps({**document, "traceEvents": events}))
    verdict = analyze(load_traces([path])).verdict
    assert verdict.kind.value == "not-enough-data"
    assert len(verdict.evidence) == 2
    assert "prof.step()" in verdict.fix
    assert verdict.fix.startswith("profile whole training steps")


test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


_SUBSET = TRACES[0]
_N_EVENTS = len(trace_document(DATA / _SUBSET)["traceEvents"])


@settings(max_examples=40, deadline=None)
@given(keep=st.lists(st.booleans(), min_size=_N_EVENTS, max_size=_N_EVENTS))
def test_any_subset_of_the_capture_is_read_whole(keep: list[bool]) -> None:
    """Dropping any events (the step annotation, flow halves, the copy, metadata) never raises;
    every kept event is counted and the kept copy is the one GPU event."""
    document = trace_document(DATA / _SUBSET)
    report, kept = analyze_kept(document, keep)
    (file,) = report.files
    assert file.events == len(kept)
    (rank,) = report.ranks.values()
    assert rank.gpu_events == sum(e.get("cat") == "gpu_memcpy" for e in kept)
