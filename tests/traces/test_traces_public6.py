"""Sixth held-out set of public Kineto traces (tests/data/traces_public6/, SOURCES.md there): a
PyTorch 2.14-nightly capture on a node of 8 NVIDIA H200 of FlashAttention-3 (Hopper) forward
calls, three ProfilerStep windows each launching one FA3 ``cutlass::device_kernel<flash::
...FlashAttnFwdSm90...>`` and one fill kernel. Every breakdown ``hta_report`` gives must equal
what HTA 0.5.0 returned on the same file (recorded in expected.json), the facts read from the
trace by hand must come out of ``trace analyze``, the FA3 kernels must be classed as attention,
and with 8 GPU events the verdict is "not enough data"."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.types.trace import VerdictKind
from tests.traces.public_sets import (
    analyze_json,
    analyze_kept,
    assert_steps_launches_and_verdict,
    breakdowns_check,
    decoders_check,
    expected_traces,
    trace_document,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public6"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)


# HTA leaves out the last ProfilerStep and clips the fill kernels to whole µs (a -1 µs sum):
# our HTA-compatible report must give the same rows and values
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)

test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    assert_steps_launches_and_verdict(document, facts)


@pytest.mark.parametrize("name", TRACES)
def test_the_fa3_hopper_kernels_are_attention(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """FA3's kernel is a CUTLASS ``device_kernel`` template whose arguments name
    ``flash::FlashAttnFwdSm90``: it is fused attention (the flash backend), not a GEMM; the
    fill kernel is elementwise."""
    facts = EXPECTED[name]["facts"]
    rank = next(iter(analyze_json(DATA / name, capsys)["ranks"].values()))
    kinds = {k["kind"]: k for k in rank["kinds"]}
    assert set(kinds) == {"attention", "elementwise"}
    for kind, key in (("attention", "attention_kernels"), ("elementwise", "elementwise_kernels")):
        assert kinds[kind]["count"] == facts[key]["count"]
        assert kinds[kind]["time_us"] == pytest.approx(facts[key]["time_us"], abs=1e-6)
    (backend,) = rank["attention"]["backends"]
    assert backend["backend"] == "flash"
    assert backend["kernel_time_us"] == pytest.approx(facts["attention_kernels"]["time_us"])


@pytest.mark.parametrize("name", TRACES)
def test_too_few_gpu_events_is_not_enough_data(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = EXPECTED[name]["facts"]
    verdict = analyze_json(DATA / name, capsys)["verdict"]
    assert verdict["kind"] == "not-enough-data"
    assert verdict["evidence"][0].startswith(
        f"{facts['kernels']} kernel/memcpy/memset event(s) on 1 rank(s)"
    )


@pytest.mark.parametrize("name", TRACES)
def test_steps_holding_the_gpu_work_are_not_called_light(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 3 steps are one FA3 call each: they hold 87.4 of the trace's 116.7 µs of GPU work,
    the GPU busy 12 % of their 731 µs; too little to weigh, not steps without GPU work."""
    verdict = analyze_json(DATA / name, capsys)["verdict"]
    assert verdict["kind"] == "not-enough-data"
    assert not any("not the GPU-heavy ones" in e for e in verdict["evidence"])
    assert verdict["evidence"][2] == (
        "the 3 ProfilerStep window(s) in the trace (0.7 ms) hold 87.4 µs of GPU work, 74.9 % of "
        "the trace's 0.1 ms: the steps run on the GPU, too few of them or too little in each "
        "to weigh"
    )
    assert "repeat the op inside each profiled step" in verdict["fix"]


_SUBSET = TRACES[0]
_N_EVENTS = len(trace_document(DATA / _SUBSET)["traceEvents"])


@settings(max_examples=40, deadline=None)
@given(keep=st.lists(st.booleans(), min_size=_N_EVENTS, max_size=_N_EVENTS))
def test_any_subset_of_the_capture_is_read_whole(keep: list[bool]) -> None:
    """Dropping any events (launches, flows, kernels, steps, metadata) never raises; every kept
    event is counted and too few GPU events never give a bottleneck verdict."""
    document = trace_document(DATA / _SUBSET)
    report, kept = analyze_kept(document, keep)
    (file,) = report.files
    assert file.events == len(kept)
    assert report.verdict.kind in {VerdictKind.NOT_ENOUGH_DATA, VerdictKind.NO_GPU_ACTIVITY}
