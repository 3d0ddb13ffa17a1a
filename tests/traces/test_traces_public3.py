"""Third held-out set of public Kineto traces (tests/data/traces_public3/, SOURCES.md there): two
AMD TraceLens captures of torch SDPA on an MI300X (rocprofiler-sdk metadata, python_function
events, a Triton ``attn_fwd`` kernel launched by ``hipModuleLaunchKernel`` with a zero grid, the
second case of the process starting at External id 513). Every breakdown ``hta_report`` gives
must equal what HTA 0.5.0 returned on the same file (recorded in expected.json), the facts read
from each trace by hand must come out of ``trace analyze``, and the CLI must give JSON, exit 0,
no traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.traces.public_sets import (
    analyze_json,
    analyze_subset,
    assert_file_and_rank_facts,
    breakdowns_check,
    decoders_check,
    expected_traces,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public3"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
# a GEMM-bound capture of another set: the fused-attention advice must not reach it
GEMM_BOUND = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "traces_public2"
    / "tracelens_rocm_eval"
    / "gemm_02_compute_non_pow2.json"
)


def _events(name: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads((DATA / name).read_text())["traceEvents"]
    return events


def _kernel_union_us(events: list[dict[str, Any]]) -> float:
    """Busy time of the kernels, overlaps counted once (two kernels here start before their
    predecessor ends)."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel")
    busy, end = 0.0, float("-inf")
    for start, stop in spans:
        busy += max(stop - max(start, end), 0.0)
        end = max(end, stop)
    return busy


test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    rank = assert_file_and_rank_facts(document, facts)
    assert len(rank["steps"]) == facts["profiler_steps"]
    assert rank["tensor_cores"] is None  # no GEMM op: attention only
    assert rank["gpu_busy_us"] == pytest.approx(_kernel_union_us(_events(name)), abs=1e-3)
    assert document["verdict"]["kind"] == facts["verdict"]


@pytest.mark.parametrize("name", TRACES)
def test_hip_module_launches_are_joined_to_their_kernels(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """hipModuleLaunchKernel (Triton on ROCm) is a launch: every attention kernel is matched to
    its launch through the correlation id, whatever the first External id of the process."""
    facts = EXPECTED[name]["facts"]
    (rank,) = analyze_json(DATA / name, capsys)["ranks"].values()
    launch = rank["launch"]
    assert launch["launches"] == facts["launches"] == facts["attention_kernels"]
    assert launch["graph_launches"] == 0
    launch_cpu_us = sum(e["dur"] for e in _events(name) if e["name"] == "hipModuleLaunchKernel")
    assert launch["cpu_launch_total_us"] == pytest.approx(launch_cpu_us, abs=1e-3)
    assert launch["short_kernel_ratio"] == 0.0  # 54-143 ms kernels, µs launches
    assert launch["fix"] is None


@pytest.mark.parametrize("name", TRACES)
def test_fused_attention_is_not_told_to_use_flash_attention(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The math is all in a fused attention kernel (aten::_flash_attention_forward → attn_fwd):
    the advice is to do less attention work, not to switch to FlashAttention."""
    fix = analyze_json(DATA / name, capsys)["verdict"]["fix"]
    assert "fused attention" in fix
    assert "FlashAttention)" not in fix


def test_gemm_bound_capture_keeps_the_gemm_advice(capsys: pytest.CaptureFixture[str]) -> None:
    verdict = analyze_json(GEMM_BOUND, capsys)["verdict"]
    assert verdict["kind"] == "compute-bound"
    assert "fused attention" not in verdict["fix"]
    assert "multiples of 8" in verdict["fix"]


# The native decoder and the msgspec reference agree: the GPU list, the event count and
# nothing set aside (rocprofiler-sdk metadata keys, ``"Python parent id": null``).
test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


_SUBSET = TRACES[0]


@settings(max_examples=30, deadline=None)
@given(keep=st.lists(st.booleans(), min_size=len(_events(_SUBSET)), max_size=len(_events(_SUBSET))))
def test_any_subset_of_an_sdpa_capture_is_read_whole(keep: list[bool]) -> None:
    """Dropping any events (launches, flow halves, python_function parents, metadata, kernels)
    never raises; every kept event is counted and the kept kernels are the GPU events."""
    document = json.loads((DATA / _SUBSET).read_text())
    kept = [e for e, k in zip(document["traceEvents"], keep, strict=True) if k]
    report = analyze_subset(document, kept)
    (file,) = report.files
    assert file.events == len(kept)
    (rank,) = report.ranks.values()
    assert rank.gpu_events == sum(e.get("cat") == "kernel" for e in kept)
