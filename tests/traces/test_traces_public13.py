"""Thirteenth held-out set of public Kineto traces (tests/data/traces_public13/, SOURCES.md there):
the one real, licensed capture its frame (``trace.json`` committed in project sub-folders) found
small enough to rebuild: a profile of dictionary-learning code on an NVIDIA A40, committed to
jacobcd52/dictionary_learning (a copy of saprmarks/dictionary_learning, MIT).

The profiler ran in PyTorch's CUDA-event fallback (ProfilerState.KINETO_GPU_FALLBACK: the legacy
``torch.autograd.profiler.profile(use_cuda=True)`` with ``use_kineto=False``): every op is timed
by two cudaEventRecord calls and Kineto is asked for CPU activity only, which includes the CUDA
runtime and driver calls. The trace holds 10 calls that queue GPU work and no kernel: the GPU
records were never requested, so the verdict must say so and not send the user after lost CUPTI
records. HTA raises on the file; our report says why instead."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.traces.insights import host_record
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.verdict import FALLBACK_OP_SHARE
from gpuwarden.types.trace import VerdictKind
from tests.traces.public_sets import (
    analyze_subset,
    assert_file_and_rank_facts,
    breakdowns_check,
    decoders_check,
    expected_traces,
    subset_fuzz,
    trace_document,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public13"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
FALLBACK = "dictlearn_a40_event_fallback/trace.json"
FACTS = EXPECTED[FALLBACK]["facts"]

# HTA raises on a trace without GPU events (IndexError / ValueError): our report says why instead
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)

test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """``trace analyze --json`` of the capture as a user runs it, once for the module."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["trace", "analyze", str(DATA / FALLBACK), "--json"])
    assert code == 0, out.getvalue()
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_cli_reports_the_facts_read_from_the_trace(document: dict[str, Any]) -> None:
    """The file's GPU and event count, nothing set aside, no GPU event and no step."""
    rank = assert_file_and_rank_facts(document, FACTS)
    assert rank["gpu_events"] == FACTS["kernels"] == FACTS["memcpy"] == 0
    assert rank["steps"] == []
    assert (rank["launch"], rank["tensor_cores"]) == (None, None)


def test_the_host_record_counts_the_ops_the_event_fallback_timed() -> None:
    """Read by hand: 315 runtime/driver calls, 10 of them queueing GPU work (5 cudaLaunchKernel,
    4 cuLaunchKernel, 1 cudaMemsetAsync), and all 136 aten ops carrying two cudaEventRecord
    calls with their External id."""
    (rank,) = load_traces([DATA / FALLBACK]).ranks.values()
    record = host_record(rank)
    assert record.gpus_listed == (FACTS["device"],)
    assert record.runtime_calls == FACTS["cuda_runtime"]
    assert record.gpu_work_calls == FACTS["gpu_work_calls"]
    assert record.cpu_ops == FACTS["cpu_ops"]
    assert record.event_timed_ops == FACTS["event_timed_ops"] == FACTS["cpu_ops"]


def test_gpu_records_never_requested_are_not_called_lost(document: dict[str, Any]) -> None:
    """No GPU event while the host queued GPU work and most ops were timed by CUDA-event pairs:
    the profiler ran in PyTorch's CUDA-event fallback, which never asks for GPU activity, so the
    fix is to profile with CUDA activity, not to hunt CUPTI warnings about lost records."""
    assert FACTS["event_timed_ops"] >= FALLBACK_OP_SHARE * FACTS["cpu_ops"]
    verdict = document["verdict"]
    assert verdict["kind"] == FACTS["verdict"] == VerdictKind.NO_GPU_ACTIVITY.value
    assert verdict["evidence"][1] == (
        f"the host recorded {FACTS['gpu_work_calls']} call(s) that queue GPU work (kernel "
        f"launches, copies, memsets) and the GPU side none; {FACTS['event_timed_ops']} of its "
        f"{FACTS['cpu_ops']} CPU ops each carry two cudaEventRecord calls with their External "
        "id: the profiler ran in PyTorch's CUDA-event fallback (KINETO_GPU_FALLBACK), which times "
        "ops with CUDA events and never asks for the GPU activity"
    )
    assert "were lost" not in verdict["evidence"][1]
    assert verdict["fix"].startswith(
        "profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
        "ProfilerActivity.CUDA])"
    )
    assert "CUPTI" not in verdict["fix"]


def test_without_the_event_pairs_the_same_launches_read_as_lost_records() -> None:
    """The fallback reading rests on the CUDA-event pairs: the same capture without its
    cudaEventRecord calls is a host that queued GPU work and a GPU side that recorded none, the
    lost-records reading with its CUPTI fix."""
    raw = trace_document(DATA / FALLBACK)
    kept = [e for e in raw["traceEvents"] if e.get("name") != "cudaEventRecord"]
    verdict = analyze_subset(raw, kept).verdict
    assert verdict.kind is VerdictKind.NO_GPU_ACTIVITY
    assert verdict.evidence[1].endswith("the GPU activity records were lost, not the work")
    assert "CUPTI" in verdict.fix


def test_hta_raises_where_our_report_says_why(document: dict[str, Any]) -> None:
    """HTA 0.5.0 raises on the three idle/temporal analyses of a trace without GPU events (as
    recorded); the report lists each as a problem instead of a row."""
    errors = EXPECTED[FALLBACK]["hta"]["errors"]
    problems = {p["analysis"]: p["hta_behaviour"] for p in document["hta"]["problems"]}
    assert problems == errors


# dropping any events (launches, flows, ops, metadata): read whole, never an error
test_any_subset_of_a_capture_is_read_whole = subset_fuzz(DATA, TRACES, set(VerdictKind))
