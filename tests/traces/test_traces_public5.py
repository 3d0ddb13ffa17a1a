"""Fifth held-out set of public Kineto traces (tests/data/traces_public5/, SOURCES.md there): a
PyTorch 2.14-nightly capture on a node of 8 NVIDIA H200 whose script asked for CPU and CUDA
activity, yet whose file holds three ProfilerStep windows of bf16 ``aten::mm`` and not one CUDA
runtime call, kernel or copy. Every breakdown ``hta_report`` gives must equal what HTA 0.5.0
returned on the same file (recorded in expected.json), the facts read from the trace by hand
must come out of ``trace analyze``, and the verdict must say why there is no GPU event: the
profiler captured no CUDA activity on a host that lists its GPUs, not "run the model on the
GPU"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.traces.analyze import analyze
from gpuwarden.traces.load import load_traces
from gpuwarden.types.trace import Verdict, VerdictKind
from tests.traces.public_sets import (
    analyze_json,
    analyze_kept,
    analyze_subset,
    breakdowns_check,
    decoders_check,
    expected_traces,
    trace_document,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public5"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)


# HTA raises on the temporal and idle-time breakdowns (no GPU activity) and gives an empty
# kernel breakdown and a NaN overlap: our report names HTA's exceptions and matches the rest.
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)

test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    (file,) = document["files"]
    assert file["events"] == facts["events"]
    assert file["skipped_events"] == facts["skipped_events"]
    (rank,) = document["ranks"].values()
    assert rank["gpu_events"] == facts["kernels"] + facts["memcpy"] == 0
    assert rank["gpu_busy_us"] == 0
    walls = [step["wall_us"] for step in rank["steps"]]
    assert len(walls) == facts["profiler_steps"]
    assert walls == pytest.approx(facts["step_wall_us"], abs=1e-3)
    assert all(step["kernels"] is None for step in rank["steps"])
    assert document["verdict"]["kind"] == facts["verdict"]


def _verdict(document: dict[str, Any], name: str = "variant.json") -> Verdict:
    return analyze_subset(document, document["traceEvents"], name).verdict


@pytest.mark.parametrize("name", TRACES)
def test_the_verdict_says_the_cuda_side_was_not_captured(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """CPU ops ran and the file lists its GPUs, but no CUDA runtime call was recorded: the
    profiler captured no CUDA activity (the script asked for it), so the advice is to request
    it and, if it was requested, to look for the CUPTI failure, not to move the model to the
    GPU."""
    facts = EXPECTED[name]["facts"]
    verdict = analyze_json(DATA / name, capsys)["verdict"]
    assert verdict["kind"] == "no-gpu-activity"
    assert verdict["evidence"][1] == (
        f"{facts['cpu_ops']} CPU op(s) and not one CUDA runtime call, while the trace lists "
        f"{facts['device_entries']} GPU(s) ({facts['device']}): the profiler captured no CUDA "
        "activity"
    )
    assert verdict["fix"].startswith("add ProfilerActivity.CUDA to the profiler's activities")
    assert "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in verdict["fix"]
    assert "model.to('cuda')" not in verdict["fix"]


def _launch(document: dict[str, Any]) -> dict[str, Any]:
    """A cudaLaunchKernel runtime event inside the capture's first aten::mm, as Kineto writes
    one when CUPTI's runtime callbacks work."""
    mm = next(e for e in document["traceEvents"] if e.get("name") == "aten::mm")
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": mm["pid"],
        "tid": mm["tid"],
        "ts": mm["ts"] + 1.0,
        "dur": 5.0,
        "args": {"External id": mm["args"]["External id"], "correlation": 1, "cbid": 211},
    }


def test_launches_without_gpu_records_blame_the_lost_records() -> None:
    """The same capture with one kernel launch recorded on the host: the work was queued, so
    the GPU records were lost (CUPTI), and asking for ProfilerActivity.CUDA is not the fix."""
    document = trace_document(DATA / TRACES[0])
    document["traceEvents"] = [*document["traceEvents"], _launch(document)]
    verdict = _verdict(document)
    assert verdict.kind is VerdictKind.NO_GPU_ACTIVITY
    assert verdict.evidence[1].startswith("the host recorded 1 call(s) that queue GPU work")
    assert verdict.fix.startswith("the profiler was asked for CUDA activity")
    assert "CUPTI" in verdict.fix


def test_without_listed_gpus_the_process_saw_no_gpu() -> None:
    """The same capture without deviceProperties reads as a run that saw no GPU: the advice to
    run the model on the GPU stands."""
    document = trace_document(DATA / TRACES[0])
    del document["deviceProperties"]
    verdict = _verdict(document)
    assert verdict.kind is VerdictKind.NO_GPU_ACTIVITY
    assert verdict.evidence[1] == (
        "6 CPU op(s), no CUDA runtime call and no GPU listed (no deviceProperties): the "
        "process saw no GPU"
    )
    assert "model.to('cuda')" in verdict.fix


@pytest.mark.parametrize("name", TRACES)
def test_the_file_row_names_the_model_every_listed_gpu_shares(name: str) -> None:
    report = analyze(load_traces([DATA / name]))
    assert report.files[0].device == EXPECTED[name]["facts"]["device"]


_SUBSET = TRACES[0]
_N_EVENTS = len(trace_document(DATA / _SUBSET)["traceEvents"])


@settings(max_examples=40, deadline=None)
@given(keep=st.lists(st.booleans(), min_size=_N_EVENTS, max_size=_N_EVENTS))
def test_any_subset_of_the_capture_is_read_whole(keep: list[bool]) -> None:
    """Dropping any events (steps, CPU ops, Python frames, metadata) never raises; every kept
    event is counted, and the verdict stays no-gpu-activity with the host-side reason."""
    document = trace_document(DATA / _SUBSET)
    report, kept = analyze_kept(document, keep)
    (file,) = report.files
    assert file.events == len(kept)
    assert report.verdict.kind is VerdictKind.NO_GPU_ACTIVITY
    cpu_ops = sum(e.get("cat") == "cpu_op" for e in kept)
    assert report.verdict.evidence[1].startswith(f"{cpu_ops} CPU op(s) and not one CUDA")
