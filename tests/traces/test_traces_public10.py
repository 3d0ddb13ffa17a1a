"""Tenth held-out set of public Kineto traces (tests/data/traces_public10/, SOURCES.md there): five
PyTorch-profiler captures from XAheli/torch-profiler on an NVIDIA H200. Four are a causal
flash-attention forward at sequence lengths 2048 and 4096, one call per ProfilerStep, the middle of
the range sets 6-9 hold (512 and 8192): PyTorch SDPA's FlashAttention-2 kernel (0.48 / 4.2 ms)
and FlashAttention-3's persistent Hopper kernel (0.22 / 0.78 ms, one call of the 4096 capture
3.3 ms), each after a 0.8 µs fill of its tile-scheduler semaphore; the kernels outlast the host's
steps (0.1-0.3 ms), so the GPU runs 0.5-12 ms behind the host. The fifth is a SonicMoE
mixture-of-experts layer (72 GPU events: QuACK CuTe-DSL grouped GEMMs, Triton routing kernels,
three launch APIs) whose GPU sits idle 86 % of its active span with the next kernel already
launched, for 2 ms at a time. Every breakdown ``hta_report`` gives must equal what HTA 0.5.0
returned on the file (expected.json), the facts read by hand must come out of ``trace analyze``,
with too few GPU events the verdict must say so with figures that describe the same GPU events it
counts, and a GPU that held launched work must not be called launch-bound."""

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

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public10"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
MOE = "xaheli_h200_sonicmoe/sonicmoe.json"
FLASH = [name for name in TRACES if name != MOE]
FA3 = {name for name in FLASH if "fa3" in name}

# HTA rounds each kernel to whole µs (a 0.77 µs fill comes out at -1 µs) and drops the last
# ProfilerStep with the warm-up step's kernels: our HTA-compatible report must give the same rows
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)

test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Events, the steps' walls, the launches, how long after its launch call the median kernel
    started, the GPU's busy time and span."""
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    rank = assert_steps_launches_and_verdict(document, facts)
    assert rank["launch"]["launch_delay_p50_us"] == pytest.approx(
        facts["launch_delay_p50_us"], abs=1e-3
    )
    assert rank["gpu_busy_us"] == pytest.approx(facts["gpu_busy_us"], abs=1e-2)
    assert rank["gpu_span_us"] == pytest.approx(facts["gpu_span_us"], abs=1e-2)


@pytest.mark.parametrize("name", FLASH)
def test_flash_kernels_are_fused_attention(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """FA2's ``pytorch_flash::flash_fwd_kernel`` and FA3's CUTLASS-wrapped Hopper kernel are
    attention on the flash backend (FA3's slow 3.3 ms call counted with the rest); FA3's
    semaphore fill is elementwise. FA3 runs without an SDPA call (flash_attn_interface)."""
    document = analyze_json(DATA / name, capsys)
    assert_flash_attention(document, EXPECTED[name]["facts"], sdpa=name not in FA3)


@pytest.mark.parametrize("name", FLASH)
def test_a_busy_gpu_is_told_from_an_idle_one(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every kernel starts long after its launch call, and the GPU is idle under 2 % of its
    active span (HTA's temporal breakdown, as HTA computed it on the file): the queue is a busy
    GPU's, its own union of kernel intervals agreeing with the span."""
    facts = EXPECTED[name]["facts"]
    assert facts["launch_delay_min_us"] > QUEUED_LAUNCH_DELAY_US
    document = analyze_json(DATA / name, capsys)
    (row,) = document["hta"]["temporal_breakdown"]
    (recorded,) = EXPECTED[name]["hta"]["tables"]["temporal_breakdown"]
    assert row["idle_time_pctg"] == recorded["idle_time_pctg"] < 2
    rank = next(iter(document["ranks"].values()))
    assert rank["gpu_busy_us"] / rank["gpu_span_us"] > 0.99


# what the trace's GPU events span (first kernel start to last kernel end, facts gpu_span_us),
# as the verdict prints a duration
SPAN_PRINTED = {
    "xaheli_h200_fa2_seq2048/fa2_seq2048.json": "1.9 ms",
    "xaheli_h200_fa2_seq4096/fa2_seq4096.json": "14.3 ms",
    "xaheli_h200_fa3_seq2048/fa3_seq2048.json": "0.9 ms",
    "xaheli_h200_fa3_seq4096/fa3_seq4096.json": "5.7 ms",
}


@pytest.mark.parametrize("name", FLASH)
def test_too_few_events_are_counted_over_their_own_span(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The verdict counts every GPU event of the trace, so the span it puts next to the count
    is theirs, not HTA's kernel time (HTA drops the last ProfilerStep and the warm-up step's
    kernels: 966 of the 1 927 µs of the FA2 2048 capture)."""
    facts = EXPECTED[name]["facts"]
    (hta_row,) = EXPECTED[name]["hta"]["tables"]["temporal_breakdown"]
    assert hta_row["kernel_time(us)"] < 0.75 * facts["gpu_span_us"]
    head = analyze_json(DATA / name, capsys)["verdict"]["evidence"][0]
    assert head == (
        f"{facts['kernels']} kernel/memcpy/memset event(s) on 1 rank(s) over "
        f"{SPAN_PRINTED[name]} of GPU activity: one event or gap would decide the shares"
    )


@pytest.mark.parametrize("name", FLASH)
def test_steps_that_queued_a_busy_gpu_are_too_few_not_light_or_launch_bound(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fewer than MIN_GPU_EVENTS kernels: not enough to weigh. The steps' windows hold little
    or no GPU work (in the FA3 2048 capture only the warm-up step's pair, 132.7 µs), yet they
    launched most of it: the evidence says the GPU runs behind the host, and nothing blames the
    host's launches."""
    facts = EXPECTED[name]["facts"]
    assert facts["kernels"] < MIN_GPU_EVENTS
    document = analyze_json(DATA / name, capsys)
    rank = next(iter(document["ranks"].values()))
    held = sum(step["gpu_busy_us"] for step in rank["steps"])
    assert held == pytest.approx(132.732 if name.endswith("fa3_seq2048.json") else 0.0, abs=1e-2)
    verdict = document["verdict"]
    assert verdict["kind"] == VerdictKind.NOT_ENOUGH_DATA.value
    third = verdict["evidence"][2]
    assert "yet they launch" in third
    assert f"{facts['launched_in_steps_share']} of the trace's" in third
    assert "runs behind the host" in third
    assert not any("not the GPU-heavy ones" in e for e in verdict["evidence"])
    assert "repeat the op inside each profiled step" in verdict["fix"]
    assert "CUDA graphs" not in verdict["fix"]


def test_the_moe_layer_gemms_run_on_tensor_cores(capsys: pytest.CaptureFixture[str]) -> None:
    """The cuBLASLt nvjet router GEMM and the QuACK CuTe-DSL grouped GEMMs (the gated up
    projection and the down projection, launched by cudaLaunchKernelExC) are the GEMM time, all
    of it on tensor cores; the 512-byte copies and the 4-byte memsets are counted as such."""
    facts = EXPECTED[MOE]["facts"]
    rank = next(iter(analyze_json(DATA / MOE, capsys)["ranks"].values()))
    kinds = {k["kind"]: (k["count"], k["time_us"]) for k in rank["kinds"]}
    assert kinds["gemm"][0] == facts["gemm"]["count"]
    assert kinds["gemm"][1] == pytest.approx(facts["gemm"]["time_us"], abs=1e-6)
    assert kinds["memcpy_d2d"][0] + kinds["memset"][0] == facts["memcpy"]
    tensor_cores = rank["tensor_cores"]
    assert tensor_cores["gemm_kernels"] == facts["gemm"]["count"]
    assert tensor_cores["tensor_core_ratio"] == 1.0
    assert rank["attention"] is None


def test_a_gpu_that_held_launched_work_is_not_called_launch_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """52 of the 66 kernels are shorter than their own launch call and the GPU is idle 84 % of
    HTA's span, which reads as launch-bound, yet the median kernel starts 1.4 ms after its
    launch call and the two longest idle holes (2.39 ms each) had the next kernel launched 2.2 ms
    before: the GPU held queued work. What held it is not in the trace, and the lag is not one
    constant clock offset (from 12 µs to 2.47 ms), so the verdict says so instead of prescribing
    CUDA graphs."""
    facts = EXPECTED[MOE]["facts"]
    assert facts["launch_delay_p50_us"] > QUEUED_LAUNCH_DELAY_US > facts["launch_delay_min_us"]
    assert min(facts["longest_gaps_us"]) > 2000
    document = analyze_json(DATA / MOE, capsys)
    rank = next(iter(document["ranks"].values()))
    assert rank["launch"]["short_kernel_ratio"] == pytest.approx(52 / 66)
    (recorded,) = EXPECTED[MOE]["hta"]["tables"]["temporal_breakdown"]
    verdict = document["verdict"]
    assert verdict["kind"] == VerdictKind.NOT_ENOUGH_DATA.value
    assert "kernels start long after their launches" in verdict["summary"]
    assert verdict["evidence"][0].startswith(
        f"GPU idle {recorded['idle_time_pctg']:.1f} % of the GPU-active span"
    )
    assert "the median kernel starts 1.4 ms after its own launch call" in verdict["evidence"][-1]
    # the idle split's "launch/host" share is said to count by launch time, not host speed, so it
    # does not contradict the line after it
    assert "launch/host" in verdict["evidence"][1]
    assert "next kernel was launched after it began" in verdict["evidence"][1]
    assert "another process" in verdict["fix"]
    assert "CUDA graphs" not in verdict["fix"]


# dropping any events (launches, flows, kernels, steps, metadata): too few GPU events never give
# a bottleneck verdict
test_any_subset_of_a_flash_capture_is_read_whole = subset_fuzz(
    DATA, FLASH, {VerdictKind.NOT_ENOUGH_DATA, VerdictKind.NO_GPU_ACTIVITY}
)

# any subset of the MoE capture may weigh differently, but is read whole without an error
test_any_subset_of_the_moe_capture_is_read_whole = subset_fuzz(DATA, [MOE], set(VerdictKind))
