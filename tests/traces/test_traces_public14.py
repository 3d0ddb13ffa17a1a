"""Fourteenth held-out set of public Kineto traces (tests/data/traces_public14/, SOURCES.md there):
the two real, licensed captures its frame (repositories the code search names for scripts that
profile distributed PyTorch runs) found small enough to rebuild: "launch queue" puzzles of
anupambhatnagar/GPUPuzzlers (BSD-3-Clause), one on an A100, one on a 56-SM GPU.

The A100 capture was written by a PyTorch 1.13-era profiler: legacy ``Kernel``/``Memcpy``
categories and the events array closed with ``],`` and then ``}`` (libkineto's finalizeTrace
before it wrote a closing ``traceName`` key), which strict JSON parsers (json, msgspec, HTA)
reject; the file is whole, and is read as such. Its GPU idles 61 % of the time while the host
sleeps (``time.sleep`` between the puzzle's phases, recorded as with_stack Python frames): the
verdict names that call instead of asking for CUDA graphs. The 56-SM capture's zero-length
memsets make ties that HTA's kernel-type breakdown orders with pandas' quicksort."""

from __future__ import annotations

import io
import json
import re
import tempfile
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.errors import CorruptInputError
from gpuwarden.traces.hta import hta_report
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.native import DECODER_ENV
from gpuwarden.traces.verdict import HOST_OP_IDLE_RATIO
from gpuwarden.types.trace import VerdictKind
from tests.traces.public_sets import (
    analyze_subset,
    assert_launch_and_busy_facts,
    breakdowns_check,
    expected_traces,
    subset_fuzz,
    trace_document,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public14"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
A100 = "gpupuzzlers_a100_n1600/N=1600-cuda-queue-puzzlers.trace.json"
SM56 = "gpupuzzlers_sm56_launch_queue3/launch_queue3.json"
SLEEP = "<built-in function sleep>"

# every HTA table row as recorded (the A100 file's from its text with the closing comma blanked:
# HTA cannot load it as written)
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)


def _analyze_json(name: str) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["trace", "analyze", str(DATA / name), "--json"])
    assert code == 0, out.getvalue()
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    """``trace analyze --json`` of each capture as a user runs it, once for the module."""
    return {name: _analyze_json(name) for name in TRACES}


def _comma_free(name: str) -> dict[str, Any]:
    """The trace's JSON object, its closing comma (if any) blanked so ``json`` reads it."""
    text = re.sub(r",(\s*\}\s*)$", r" \1", (DATA / name).read_text())
    document: dict[str, Any] = json.loads(text)
    return document


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, documents: dict[str, dict[str, Any]]
) -> None:
    """Events, GPU events, launches, kernel and launch medians, busy time and span as read by
    hand; no deviceProperties, no ProfilerStep."""
    assert_launch_and_busy_facts(documents[name], EXPECTED[name]["facts"])


@pytest.mark.parametrize("name", TRACES)
def test_both_decoders_read_the_same_trace(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The native decoder and the msgspec reference agree: every event, none set aside, no GPU
    list (neither file has deviceProperties)."""
    facts = EXPECTED[name]["facts"]
    native = load_traces([DATA / name])
    monkeypatch.setenv(DECODER_ENV, "msgspec")
    reference = load_traces([DATA / name])
    for trace in (native, reference):
        (rank,) = trace.ranks.values()
        assert rank.meta.device_properties == ()
        assert rank.meta.event_count == facts["events"]
        assert rank.meta.skipped_events == facts["skipped_events"]


@pytest.mark.parametrize("decoder", ["native", "msgspec"])
def test_a_trace_closed_with_a_comma_is_read_whole(
    decoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libkineto's older writer ends the events with ``],`` and then ``}``: the file is whole,
    read as the same text without that comma (before: refused as invalid or truncated JSON)."""
    if decoder == "msgspec":
        monkeypatch.setenv(DECODER_ENV, "msgspec")
    assert EXPECTED[A100]["facts"]["closing_comma"]
    (rank,) = load_traces([DATA / A100]).ranks.values()
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "plain.json"
        plain.write_text(json.dumps(_comma_free(A100)))
        (same,) = load_traces([plain]).ranks.values()
    assert rank.meta.event_count == same.meta.event_count == EXPECTED[A100]["facts"]["events"]
    assert rank.ts.tolist() == same.ts.tolist()
    assert rank.dur.tolist() == same.dur.tolist()


def test_a_trace_cut_after_its_events_is_still_refused() -> None:
    """Only a comma before the closing ``}`` is the writer's: the same file cut after ``],``
    (no ``}``) stays an invalid or truncated JSON."""
    text = (DATA / A100).read_text()
    with tempfile.TemporaryDirectory() as tmp:
        cut = Path(tmp) / "cut.json"
        cut.write_text(text[: text.rindex("}")])
        with pytest.raises(CorruptInputError, match="invalid or truncated JSON"):
            load_traces([cut])


def test_zero_length_memsets_get_no_kernel_type_row() -> None:
    """The 56-SM capture's two memsets last 0 µs between kernels: HTA sorts each type's edges
    into the table with pandas' quicksort, which puts their end before their start, so MEMORY
    gets no row (before: a MEMORY row of 0 µs)."""
    report = hta_report(load_traces([DATA / SM56]))
    rows = [(r.kernel_type, r.sum_us, r.percentage) for r in report.kernel_type_breakdown]
    busy = float(EXPECTED[SM56]["facts"]["gpu_busy_us"])
    assert rows == [("COMPUTATION", busy, 100.0)]


def test_a_sleeping_host_is_named_instead_of_launch_overhead(
    documents: dict[str, dict[str, Any]],
) -> None:
    """The A100 GPU idles while the host sleeps between the puzzle's phases: 2.74 of its
    3.44 ms idle inside ``time.sleep`` (a with_stack Python frame, no CPU op there), so the
    verdict names that call and moves it off the path, instead of CUDA graphs (before: "waiting
    for the host to launch work", fix "CUDA graphs ... fuse small ops")."""
    facts = EXPECTED[A100]["facts"]
    assert facts["sleep_in_gpu_idle_us"] >= HOST_OP_IDLE_RATIO * facts["gpu_idle_us"]
    verdict = documents[A100]["verdict"]
    assert verdict["kind"] == facts["verdict"] == VerdictKind.CPU_LAUNCH_BOUND.value
    assert verdict["summary"] == (
        f"the GPU is idle 60.7 % of the time waiting for the host, which spends it in {SLEEP}"
    )
    share = 100 * facts["sleep_in_gpu_idle_us"] / facts["gpu_idle_us"]
    assert verdict["evidence"][-1] == (
        f"the host runs {SLEEP} during 2.7 ms of the GPU's 3.4 ms idle time between GPU events "
        f"({share:.1f} %): a Python call that queues no GPU work (a with_stack frame), so the "
        "host is busy there, not launching"
    )
    assert verdict["fix"].startswith(f"take {SLEEP} off the host's path to the next GPU op")
    assert "device='cuda'" not in verdict["fix"]


def test_without_python_frames_the_same_idle_reads_as_launches() -> None:
    """The Python-call reading rests on the with_stack frames: the same capture without its
    python_function events is a host that launches too slowly, the launch-overhead fix."""
    raw = _comma_free(A100)
    kept = [e for e in raw["traceEvents"] if e.get("cat") != "python_function"]
    verdict = analyze_subset(raw, kept).verdict
    assert verdict.kind is VerdictKind.CPU_LAUNCH_BOUND
    assert verdict.summary.endswith("waiting for the host to launch work")
    assert SLEEP not in verdict.fix


def test_launch_bound_small_kernels_keep_the_launch_verdict(
    documents: dict[str, dict[str, Any]],
) -> None:
    """The 56-SM capture: 20 of 22 kernels are shorter than their launch call, and its one sleep
    covers 293 of 717 µs of GPU idle (under half): the launch-overhead verdict stands."""
    facts = EXPECTED[SM56]["facts"]
    assert facts["sleep_in_gpu_idle_us"] < HOST_OP_IDLE_RATIO * facts["gpu_idle_us"]
    verdict = documents[SM56]["verdict"]
    assert verdict["kind"] == facts["verdict"]
    assert verdict["summary"] == (
        "the GPU is idle 46.3 % of the time waiting for the host to launch work"
    )
    assert verdict["evidence"][2] == (
        "median kernel 4.0 µs vs median launch call 6.0 µs; 90.9 % of kernels are shorter than "
        "their own launch"
    )


def test_diff_of_the_two_puzzles_compares_their_kernel_time() -> None:
    """``trace diff`` of the two captures (two programs, two GPUs: no before/after pair) exits 0
    with the busy time and GEMM time read by hand."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["trace", "diff", str(DATA / SM56), str(DATA / A100), "--json"])
    assert code == 0, out.getvalue()
    diff = json.loads(out.getvalue())
    before, after = EXPECTED[SM56]["facts"], EXPECTED[A100]["facts"]
    assert (diff["before_busy_us"], diff["after_busy_us"]) == (
        before["gpu_busy_us"],
        after["gpu_busy_us"],
    )
    gemm = {k["kind"]: (k["before_us"], k["after_us"]) for k in diff["kinds"]}["gemm"]
    sgemm = [k for n, k in after["kernels_by_name"].items() if "sgemm" in n]
    assert gemm == (before["gpu_busy_us"], sum(k["time_us"] for k in sgemm))


# dropping any events (launches, flows, kernels, frames, metadata): read whole, never an error
test_any_subset_of_a_capture_is_read_whole = subset_fuzz(DATA, [SM56], set(VerdictKind))


def test_trace_document_helper_reads_the_comma_free_capture() -> None:
    """The 56-SM file is plain JSON for the shared helper; the A100 file needs its comma
    blanked (the module's ``_comma_free``)."""
    assert len(trace_document(DATA / SM56)["traceEvents"]) == EXPECTED[SM56]["facts"]["events"]
    assert len(_comma_free(A100)["traceEvents"]) == EXPECTED[A100]["facts"]["events"]
