"""Second held-out set of public Kineto traces (tests/data/traces_public2/, SOURCES.md there): an
A100 capture with runtime calls only and three AMD TraceLens ROCm captures (MI300X rocprofiler-sdk
elementwise; gfx942 GEMMs without streams). Every breakdown ``hta_report`` gives must equal what
HTA 0.5.0 returned on the same file (recorded in expected.json), the facts read from each trace by
hand must come out of ``trace analyze``, and the CLI must give JSON, exit 0, no traceback. Helpers
are those of test_traces_public.py."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.traces.hta import NO_GPU_ACTIVITY, hta_report
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.native import DECODER_ENV
from tests.traces.public_sets import (
    analyze_json,
    analyze_subset,
    assert_file_and_rank_facts,
    breakdowns_check,
    expected_traces,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public2"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
RUNTIME_ONLY = DATA / "particle_transformer_a100" / "profiler_trace.json"
# ROCm variants: integer streams and correlation ids (rocprofiler-sdk, MI300X) and GPU events
# with only "External id" behind hipExtModuleLaunchKernel with stream "0x0" (gfx942 GEMMs)
ROCM = (
    DATA / "tracelens_rocm_eval" / "elem_01_add_poor_bw.json",
    DATA / "tracelens_rocm_eval" / "gemm_02_compute_non_pow2.json",
)


test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    rank = assert_file_and_rank_facts(document, facts)
    assert len(rank["steps"]) == facts["profiler_steps"]
    assert document["verdict"]["kind"] == facts["verdict"]
    gemm = rank["tensor_cores"]
    if facts["matmul_ops"] is None:
        assert gemm is None
    else:
        assert gemm["matmul_ops_with_shapes"] == facts["matmul_ops"]
        assert gemm["misaligned_ops"] == facts["misaligned_matmul_ops"]


@pytest.mark.parametrize("name", TRACES)
def test_both_decoders_read_the_same_trace(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The native decoder and the msgspec reference agree on every file of the set: the GPU list,
    the event count and what was set aside (string streams "0x0", External-id-only GPU events,
    rocprofiler-sdk metadata keys)."""
    facts = EXPECTED[name]["facts"]
    native = load_traces([DATA / name])
    monkeypatch.setenv(DECODER_ENV, "msgspec")
    reference = load_traces([DATA / name])
    for trace in (native, reference):
        (rank,) = trace.ranks.values()
        assert len(rank.meta.device_properties) == facts["device_entries"]
        assert {p["name"] for p in rank.meta.device_properties} <= {facts["device"]}
        assert rank.meta.event_count == facts["events"]
        assert rank.meta.skipped_events == facts["skipped_events"]


def test_runtime_only_capture_is_no_gpu_activity_for_both_decoders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seven cuda_runtime calls with ac2g flows (six flow ends without a start, one start without
    an end) and no kernel: both decoders see the A100 and no GPU event, and read every event."""
    native = load_traces([RUNTIME_ONLY])
    monkeypatch.setenv(DECODER_ENV, "msgspec")
    reference = load_traces([RUNTIME_ONLY])
    for trace in (native, reference):
        (rank,) = trace.ranks.values()
        assert [p["name"] for p in rank.meta.device_properties] == ["NVIDIA A100-PCIE-40GB"]
        assert rank.meta.event_count == 73
        assert rank.meta.skipped_events == {}
    assert {p.analysis for p in hta_report(native).problems} == {
        "temporal_breakdown",
        "idle_time_breakdown",
        "idle_interval_stats",
    }


_EVENTS: list[dict[str, Any]] = json.loads(RUNTIME_ONLY.read_text())["traceEvents"]


@settings(max_examples=60, deadline=None)
@given(keep=st.lists(st.booleans(), min_size=len(_EVENTS), max_size=len(_EVENTS)))
def test_any_subset_of_a_runtime_only_capture_has_no_gpu_activity(keep: list[bool]) -> None:
    """Dropping any events (flows, metadata, runtime calls, the span) from a capture without GPU
    work never raises and never invents GPU activity."""
    kept = [e for e, k in zip(_EVENTS, keep, strict=True) if k]
    head = json.loads(RUNTIME_ONLY.read_text())
    head["traceEvents"] = kept
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "subset.json"
        path.write_text(json.dumps(head))
        (rank,) = load_traces([path]).ranks.values()
        assert rank.meta.event_count == len(kept)
        report = hta_report(load_traces([path]))
    assert not report.temporal_breakdown
    assert all(p.message == NO_GPU_ACTIVITY for p in report.problems)


def _is_kernel_without_stream(event: dict[str, Any]) -> bool:
    return event.get("cat") == "kernel" and not isinstance(event["args"].get("stream"), int)


@pytest.mark.parametrize("path", ROCM, ids=lambda p: p.name)
def test_any_subset_of_a_rocm_capture_is_read_whole(path: Path) -> None:
    """Dropping any events (launches, flow halves, metadata, kernels) from a ROCm capture never
    raises; every kept event is counted, the kept kernels are the GPU events, and exactly those
    without an integer stream are set aside, as HTA does."""
    document = json.loads(path.read_text())
    events: list[dict[str, Any]] = document["traceEvents"]

    @settings(max_examples=40, deadline=None)
    @given(keep=st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    def check(keep: list[bool]) -> None:
        kept = [e for e, k in zip(events, keep, strict=True) if k]
        report = analyze_subset(document, kept, path.name)
        (file,) = report.files
        assert file.events == len(kept)
        kernels = [e for e in kept if e.get("cat") == "kernel"]
        (rank,) = report.ranks.values()
        assert rank.gpu_events == len(kernels)
        without = sum(map(_is_kernel_without_stream, kernels))
        assert file.skipped_events == ({"gpu-event-without-stream": without} if without else {})

    check()
