"""Ninth held-out set of public Kineto traces (tests/data/traces_public9/, SOURCES.md there): two
PyTorch-profiler captures from XAheli/torch-profiler of a causal flash-attention forward at
sequence length 8192 on an NVIDIA H200, one call per ProfilerStep: PyTorch SDPA's
FlashAttention-2 kernel (13.8 ms) and FlashAttention-3's persistent Hopper kernel (5.5-7.9 ms,
after a 0.8 µs fill of its tile-scheduler semaphore). The GPU-bound regime sets 1-8 lack: every
kernel outlasts the host's step many times, the GPU runs 10-53 ms behind the host, back to back,
and the step windows close before any of their kernels starts. Every breakdown ``hta_report``
gives must equal what HTA 0.5.0 returned on the file (expected.json), the facts read by hand must
come out of ``trace analyze``, FA3's kernel must be fused attention although no SDPA call
launched it, and with too few GPU events the verdict must say so, naming the steps as the ones
that queued the GPU work, never blaming the host's launches for a GPU that is busy."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.traces.verdict import MIN_GPU_EVENTS, QUEUED_LAUNCH_DELAY_US
from gpuwarden.types.trace import VerdictKind
from tests.traces.public_sets import (
    analyze_json,
    assert_flash_attention,
    assert_steps_launches_and_verdict,
    breakdowns_check,
    decoders_check,
    expected_traces,
    subset_fuzz,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public9"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
FA3 = "xaheli_h200_fa3_seq8192/fa3_seq8192.json"

# HTA rounds each kernel to whole µs (FA3's 0.77 µs fills come out at -1 µs in its top-kernel
# table) and drops the last ProfilerStep: our HTA-compatible report must give the same rows
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)

test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Events, the steps' walls, the launches, how long after its launch call the median kernel
    started, the GPU's busy time and the verdict."""
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    rank = assert_steps_launches_and_verdict(document, facts)
    assert rank["launch"]["launch_delay_p50_us"] == pytest.approx(
        facts["launch_delay_p50_us"], abs=1e-3
    )
    assert rank["gpu_busy_us"] == pytest.approx(facts["gpu_busy_us"], abs=1e-2)


@pytest.mark.parametrize("name", TRACES)
def test_flash_kernels_are_fused_attention(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """FA2's ``pytorch_flash::flash_fwd_kernel`` and FA3's
    ``cutlass::device_kernel<flash::enable_sm90<flash::FlashAttnFwdSm90<...>>>`` are attention
    (FA3's CUTLASS wrapper does not make it a GEMM); FA3's semaphore fill is elementwise. Both
    are the flash backend, FA3 without an SDPA call (flash_attn_interface's FlashAttnFunc)."""
    document = analyze_json(DATA / name, capsys)
    assert_flash_attention(document, EXPECTED[name]["facts"], sdpa=name != FA3)


@pytest.mark.parametrize("name", TRACES)
def test_a_busy_gpu_is_told_from_an_idle_one(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every kernel starts milliseconds after its launch call, as on set 8's idle GPU, but here
    the GPU is idle under 0.1 % of its active span (HTA's temporal breakdown, as HTA computed it
    on the file): the queue is a busy GPU's. The report says the GPU is busy, its own union of
    kernel intervals agreeing with the span."""
    facts = EXPECTED[name]["facts"]
    assert facts["launch_delay_min_us"] > QUEUED_LAUNCH_DELAY_US
    document = analyze_json(DATA / name, capsys)
    (row,) = document["hta"]["temporal_breakdown"]
    (recorded,) = EXPECTED[name]["hta"]["tables"]["temporal_breakdown"]
    assert row["idle_time_pctg"] == recorded["idle_time_pctg"] < 0.1
    rank = next(iter(document["ranks"].values()))
    assert rank["gpu_busy_us"] / rank["gpu_span_us"] > 0.999


@pytest.mark.parametrize("name", TRACES)
def test_steps_that_queued_a_busy_gpu_are_too_few_not_light_or_launch_bound(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fewer than MIN_GPU_EVENTS kernels: not enough to weigh. The steps' windows hold no GPU
    work, yet they launched most of it (the warm-up step's kernel the rest): the evidence says
    the GPU runs behind the host, and nothing blames the host's launches (the host waits in
    cudaDeviceSynchronize for tens of ms)."""
    facts = EXPECTED[name]["facts"]
    assert facts["kernels"] < MIN_GPU_EVENTS
    document = analyze_json(DATA / name, capsys)
    rank = next(iter(document["ranks"].values()))
    assert all(step["gpu_busy_us"] == 0.0 and step["kernels"] == 0 for step in rank["steps"])
    verdict = document["verdict"]
    assert verdict["kind"] == VerdictKind.NOT_ENOUGH_DATA.value
    assert verdict["evidence"][0].startswith(
        f"{facts['kernels']} kernel/memcpy/memset event(s) on 1 rank(s)"
    )
    third = verdict["evidence"][2]
    assert "hold 0.0 µs of GPU work, yet they launch" in third
    assert f"{facts['launched_in_steps_share']} of the trace's" in third
    assert "runs behind the host" in third
    assert not any("not the GPU-heavy ones" in e for e in verdict["evidence"])
    assert "repeat the op inside each profiled step" in verdict["fix"]
    assert "CUDA graphs" not in verdict["fix"]


# dropping any events (launches, flows, kernels, steps, metadata): too few GPU events never give
# a bottleneck verdict
test_any_subset_of_the_capture_is_read_whole = subset_fuzz(
    DATA, TRACES, {VerdictKind.NOT_ENOUGH_DATA, VerdictKind.NO_GPU_ACTIVITY}
)
