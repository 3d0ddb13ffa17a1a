"""``analyze`` and the timeline it draws from, on real traces: every number checked against an
independent computation over the raw trace events (orjson + plain Python)."""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import GpuwardenError, InputError
from gpuwarden.report.trace_html import render_trace_html
from gpuwarden.report.trace_json import trace_document
from gpuwarden.traces.analyze import analyze, select_ranks
from gpuwarden.traces.hta import hta_report
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.model import LoadedTrace
from gpuwarden.traces.timeline import MAX_SPANS_PER_LANE, _lane, stream_timelines
from gpuwarden.types.trace import SpanKind, VerdictKind

MEGATRON = "astra_megatron_tp8_a100"
CONTROL = "trace_diff/control/control.json.gz"
CPU_ONLY = "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
AMD = "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}


@pytest.fixture(scope="module")
def megatron(fixtures: Path) -> LoadedTrace:
    return load_traces([fixtures / "traces" / MEGATRON])


@functools.cache
def _amd_bytes(fixtures: Path) -> bytes:
    return gzip.decompress((fixtures / "traces" / AMD).read_bytes())


def _events(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    events: list[dict[str, Any]] = orjson.loads(data)["traceEvents"]
    return events


def _stream_intervals(path: Path) -> dict[int, list[tuple[float, float]]]:
    """GPU kernel/memcpy/memset intervals per stream, straight from the JSON."""
    out: dict[int, list[tuple[float, float]]] = {}
    for e in _events(path):
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATS:
            continue
        stream = (e.get("args") or {}).get("stream")
        if not isinstance(stream, int) or stream < 0:
            continue
        out.setdefault(stream, []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    return out


def _union(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def test_timeline_lanes_keep_exact_busy_time_and_event_counts(fixtures: Path) -> None:
    path = fixtures / "traces" / CONTROL
    lanes, end_us = stream_timelines(load_traces([path]))
    raw = _stream_intervals(path)
    assert {lane.stream for lane in lanes} == set(raw)
    first = min(s for iv in raw.values() for s, _ in iv)
    last = max(e for iv in raw.values() for _, e in iv)
    assert end_us == pytest.approx(last - first)
    for lane in lanes:
        intervals = raw[lane.stream]
        assert lane.events == len(intervals)
        assert lane.busy_us == pytest.approx(_union(intervals))
        # Downsampling merges spans but never loses or invents busy time or events.
        assert sum(s.busy_us for s in lane.spans) == pytest.approx(lane.busy_us)
        assert sum(s.events for s in lane.spans) == lane.events
        assert len(lane.spans) <= MAX_SPANS_PER_LANE + 1
        for span in lane.spans:
            assert 0 <= span.start_us <= span.end_us <= end_us + 1e-6
            assert span.busy_us <= span.end_us - span.start_us + 1e-6
        starts = [s.start_us for s in lane.spans]
        assert starts == sorted(starts)
    # The trace has 8 964 kernels on stream 7 (SOURCES.md counts 8 568 kernels in total over
    # the whole file... per stream the raw count above is the reference).
    assert max(lane.events for lane in lanes) > MAX_SPANS_PER_LANE  # so merging happened


def test_timeline_colours_nccl_streams_as_communication(megatron: LoadedTrace) -> None:
    lanes, _ = stream_timelines(megatron)
    assert len(lanes) == 16  # 8 ranks x (compute stream 7, NCCL stream 24), per SOURCES.md
    for lane in lanes:
        kinds = {s.kind for s in lane.spans}
        assert kinds == ({SpanKind.COMMUNICATION} if lane.stream == 24 else {SpanKind.COMPUTE})


def test_timeline_of_a_cpu_only_trace_is_empty(fixtures: Path) -> None:
    assert stream_timelines(load_traces([fixtures / "traces" / CPU_ONLY])) == ((), 0.0)


def test_select_ranks_keeps_the_named_ranks_and_rejects_unknown_ones(
    megatron: LoadedTrace,
) -> None:
    trace = megatron
    assert list(select_ranks(trace, [3, 1]).ranks) == [1, 3]
    with pytest.raises(InputError, match=r"--ranks 9: not among the loaded ranks \(0, 1, 2"):
        select_ranks(trace, [1, 9])


@given(
    intervals=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 500)), min_size=1, max_size=300
    ),
    resolution=st.floats(0.0, 2_000.0),
)
@settings(max_examples=150, deadline=None)
def test_lane_downsampling_never_loses_busy_time(
    intervals: list[tuple[int, int]], resolution: float
) -> None:
    ts = np.array([float(s) for s, _ in intervals])
    end = ts + np.array([float(d) for _, d in intervals])
    kinds = np.zeros(ts.shape[0], dtype=np.int8)
    lane = _lane(0, 7, ts, end, kinds, 0.0, resolution)
    as_pairs = [(float(s), float(s + d)) for s, d in intervals]
    assert lane.busy_us == pytest.approx(_union(as_pairs))
    assert sum(s.busy_us for s in lane.spans) == pytest.approx(lane.busy_us)
    assert sum(s.events for s in lane.spans) == len(intervals)
    for a, b in itertools.pairwise(lane.spans):
        # Spans are disjoint and at least `resolution` apart, so at most span/resolution + 1.
        assert b.start_us > a.end_us + resolution


def test_files_carry_rank_size_events_and_device_from_the_json(megatron: LoadedTrace) -> None:
    report = analyze(megatron)
    assert [f.rank for f in report.files] == list(range(8))
    for f in report.files:
        raw = gzip.decompress(Path(f.path).read_bytes())
        doc = orjson.loads(raw)
        assert f.rank == doc["distributedInfo"]["rank"]
        assert f.rank_source == "distributedInfo"
        assert f.size_bytes == len(raw)
        assert f.events == len(doc["traceEvents"])
        # The device is the deviceProperties entry whose id the rank's kernels ran on.
        pids = {e["pid"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
        names = {d["name"] for d in doc["deviceProperties"] if d["id"] in pids}
        assert {f.device} == names
    assert report.skipped == ()
    assert set(report.ranks) == set(range(8))
    assert report.stragglers is not None


def test_a_truncated_rank_file_is_reported_and_the_rest_analysed(
    fixtures: Path, tmp_path: Path
) -> None:
    folder = fixtures / "traces" / MEGATRON
    for rank in (0, 1):
        (tmp_path / f"megatron_kineto_{rank}.json.gz").write_bytes(
            (folder / f"megatron_kineto_{rank}.json.gz").read_bytes()
        )
    raw = gzip.decompress((folder / "megatron_kineto_2.json.gz").read_bytes())
    (tmp_path / "megatron_kineto_2.json").write_bytes(raw[:100_000])
    report = analyze(load_traces([tmp_path]))
    assert set(report.ranks) == {0, 1}
    (skipped,) = report.skipped
    assert skipped.path.endswith("megatron_kineto_2.json")
    assert "megatron_kineto_2.json" in skipped.reason
    assert [r.rank for r in report.hta.temporal_breakdown] == [0, 1]


def test_warnings_name_missing_steps_and_htas_refusals(fixtures: Path) -> None:
    report = analyze(load_traces([fixtures / "traces" / CPU_ONLY]))
    problems = {(p.rank, p.analysis) for p in report.hta.problems}
    assert (34, "temporal_breakdown") in problems
    for rank, analysis in problems:
        assert any(w.startswith(f"rank {rank}: HTA {analysis}:") for w in report.warnings)
    b200 = analyze(load_traces([fixtures / "traces" / "tracelens_b200_eager"]))
    # Eager capture without a schedule: no ProfilerStep (SOURCES.md), said once.
    assert not b200.ranks[0].steps
    assert any("no ProfilerStep" in w for w in b200.warnings)


def test_partial_world_is_flagged(megatron: LoadedTrace) -> None:
    trace = select_ranks(megatron, [0, 1, 2])
    report = analyze(trace)
    assert "3 of 8 ranks loaded" in " ".join(report.warnings)


def test_report_carries_htas_tables_unchanged(fixtures: Path) -> None:
    trace = load_traces([fixtures / "traces" / AMD])
    assert analyze(trace).hta == hta_report(trace)


# Any float (1e154 µs durations are rejected by the loader, traces.model.MAX_TIME_US), ints
# beyond 64 bits, device ids like 3159750215 (insights.view counts ids with np.unique).
_ODD_VALUES = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.sampled_from([2.68e154, -1e300, 3159750215, 2**63, 9.3e15, 9.2e15]),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.text(max_size=8),
    st.sampled_from(["0x0", "nccl", "kernel", "ProfilerStep#1", "cuda_runtime", -1, 0]),
)
_FIELDS = ("ts", "dur", "name", "cat", "ph", "pid", "tid", "stream", "correlation", "device")


@given(
    edits=st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(_FIELDS), _ODD_VALUES), max_size=12
    ),
    cut=st.one_of(st.none(), st.integers(0, 10_000)),
)
@settings(max_examples=60, deadline=None)
def test_mutated_trace_gives_a_report_or_a_clear_error(
    fixtures: Path, tmp_path_factory: pytest.TempPathFactory, edits: Any, cut: Any
) -> None:
    """Odd values in any field, or events cut off: the whole pipeline (load, analyze, JSON,
    HTML) gives a result or a GpuwardenError, never another exception."""
    doc = orjson.loads(_amd_bytes(fixtures))
    events = doc["traceEvents"]
    for index, field, value in edits:
        event = events[index % len(events)]
        if field in ("stream", "correlation", "device"):
            if isinstance(event.get("args"), dict):
                event["args"][field] = value
        else:
            event[field] = value
    if cut is not None:
        doc["traceEvents"] = events[: cut % (len(events) + 1)]
    path = tmp_path_factory.mktemp("mutated") / "rank-0.json"
    # The stdlib writer: it also writes ints beyond 64 bits and NaN/Infinity, as broken
    # producers do.
    path.write_text(json.dumps(doc))
    try:
        report = analyze(load_traces([path]))
    except GpuwardenError:
        return
    assert report.verdict.kind in set(VerdictKind)
    document = trace_document(report)
    assert document["schema"] == "gpuwarden.trace/1"
    assert render_trace_html(report).startswith("<!DOCTYPE html>")


def test_a_gpu_less_rank_among_several_gpus_of_one_model_names_the_model(fixtures: Path) -> None:
    """The CUPTI-profiler capture lists 8 GPUs but has no GPU event: which one the rank used is
    unknown, but all 8 are one model, and the file row and the rank's insights name it alike
    (they once disagreed: the insights named the first GPU listed, the row none)."""
    path = fixtures / "traces" / "cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"
    loaded = load_traces([path])
    assert len(loaded.ranks[0].meta.device_properties) == 8
    report = analyze(loaded)
    (rank,) = report.ranks.values()
    assert rank.gpu_events == 0
    assert report.files[0].device == rank.device_name == "NVIDIA A100-PG509-200"


def test_device_name_follows_a_huge_device_id(fixtures: Path, tmp_path: Path) -> None:
    """A raw device id like 3159750215 is looked up, not used as an array size."""
    from gpuwarden.traces.insights.view import build_view

    doc = orjson.loads(_amd_bytes(fixtures))
    doc["deviceProperties"][1].update(id=3159750215, name="big-id GPU")
    gpu = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    for e in gpu:
        e["args"]["device"] = 3159750215
    path = tmp_path / "rank-0.json"
    path.write_bytes(orjson.dumps(doc))
    assert build_view(load_traces([path]).ranks[0]).device_name == "big-id GPU"
