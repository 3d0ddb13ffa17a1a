"""Twelfth held-out set of public Kineto traces (tests/data/traces_public12/, SOURCES.md there):
the one real, licensed capture its frame (training and inference profiling examples) found in
the index: a ROCm torch.profiler capture of TraceLens' event replay of one fp16
aten::convolution_backward on an AMD Instinct MI300X, committed to amd/HPCTrainingExamples (MIT).

The host runs its ten steps in 1.5 ms, then waits 29.3 ms in hipDeviceSynchronize while the GPU
runs 29 MIOpen assembly Winograd kernels (``miopenSp3AsmConv_..._fp16_dot2_edc_...``) back to
back: the GPU is the bottleneck, and its kernels are fp16 convolutions already. Every breakdown
``hta_report`` gives must equal what HTA 0.5.0 returned on the file (expected.json); the facts
read by hand must come out of ``trace analyze``; MIOpen's convolutions are GEMM-family kernels in
fp16 whose names do not say whether the matrix cores ran them, so the verdict must not ask for
the fp16 autocast that already runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.traces.classify import classify_name, gemm_dtype, is_tensor_core_gemm
from gpuwarden.traces.model import Category
from gpuwarden.types.trace import VerdictKind
from gpuwarden.types.trace_insights import GemmDtype, KernelKind
from tests.traces.public_sets import (
    analyze_json,
    assert_steps_launches_and_verdict,
    breakdowns_check,
    decoders_check,
    expected_traces,
    subset_fuzz,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public12"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
REPLAY = "hpctraining_mi300x_conv_replay/replay_trace.json"
FACTS = EXPECTED[REPLAY]["facts"]
WINOGRAD = sorted(FACTS["miopen_winograd"])

# HTA raises loading this file under pandas 3.1.1; the recorded tables are HTA's with its
# correlation column widened as pandas 2.2.3 did (expected.json "about")
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)

test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


def test_cli_reports_the_facts_read_from_the_trace(capsys: pytest.CaptureFixture[str]) -> None:
    """Events, the host steps' walls, the 20 launches joined to their kernels (9 more kernels were
    launched before the record window), the GPU's busy time and span: 29 kernels back to back."""
    document = analyze_json(DATA / REPLAY, capsys)
    rank = assert_steps_launches_and_verdict(document, FACTS)
    assert rank["gpu_busy_us"] == pytest.approx(FACTS["gpu_busy_us"], abs=1e-2)
    assert rank["gpu_span_us"] == pytest.approx(FACTS["gpu_span_us"], abs=1e-2)
    launch = rank["launch"]
    assert launch["cpu_launch_p50_us"] == pytest.approx(FACTS["launch_call_p50_us"], abs=1e-6)
    assert launch["gpu_kernel_p50_us"] == pytest.approx(
        FACTS["kernel_p50_us_of_launched"], abs=1e-6
    )
    assert launch["launch_delay_p50_us"] == pytest.approx(FACTS["launch_delay_p50_us"], abs=1e-2)
    before_window = FACTS["kernels_launched_before_window"]["count"]
    assert rank["gpu_events"] == FACTS["launches"] + before_window


@pytest.mark.parametrize("name", WINOGRAD)
def test_miopen_winograd_kernels_are_fp16_convolutions(name: str) -> None:
    """MIOpen names its assembly Winograd kernels miopenSp3AsmConv (kernel files Conv_Winograd_*)
    and appends the problem's data type, _fp16_dot2[_edc] or _fp32: a convolution, GEMM family as
    cuDNN's winograd/fprop/dgrad/wgrad are, in fp16, the name silent on the matrix cores."""
    assert classify_name(name, int(Category.KERNEL)) is KernelKind.GEMM
    assert gemm_dtype(name) is GemmDtype.FP16
    assert is_tensor_core_gemm(name) is None


def test_a_gpu_busy_with_fp16_convolutions_is_not_told_to_autocast(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The GPU runs the convolutions back to back (HTA: 0.09 % idle) while the host waits: compute
    bound, in GEMM-family kernels that already run in fp16, so the fix is not bf16/fp16 autocast
    or TF32; neither tensor cores nor FP32 SIMT is claimed for them."""
    document = analyze_json(DATA / REPLAY, capsys)
    rank = document["ranks"]["0"]
    kinds = {k["kind"]: (k["count"], k["time_us"]) for k in rank["kinds"]}
    winograd = FACTS["miopen_winograd"].values()
    assert kinds == {
        KernelKind.GEMM.name.lower(): (
            sum(k["count"] for k in winograd),
            pytest.approx(sum(k["time_us"] for k in winograd), abs=1e-3),
        )
    }
    tc = rank["tensor_cores"]
    assert (tc["tensor_core_us"], tc["simt_us"]) == (0.0, 0.0)
    assert tc["unknown_us"] == pytest.approx(FACTS["gpu_busy_us"], abs=1e-2)
    assert [(d["dtype"], d["kernels"]) for d in tc["dtypes"]] == [("fp16", FACTS["kernels"])]
    verdict = document["verdict"]
    assert verdict["kind"] == VerdictKind.COMPUTE_BOUND.value
    assert verdict["summary"].endswith("mostly in GEMM/attention kernels")
    assert verdict["evidence"][2:] == [
        "GEMM time on tensor cores 0.0 %, FP32 SIMT 0.0 %; the kernel names do not say which "
        "for 100.0 %",
        "GEMM input precision (kernel names): fp16 100.0 % of GEMM time",
    ]
    assert verdict["fix"].startswith("the GEMMs already run in fp16")
    assert "autocast or TF32" not in verdict["fix"]


def test_the_host_waits_for_the_gpu_not_the_other_way(capsys: pytest.CaptureFixture[str]) -> None:
    """The host's steps end before the first kernel starts and one device synchronize outlasts all
    the GPU work: not launch-bound, not work the GPU held back, not too little to judge."""
    assert FACTS["host_steps_end_to_first_kernel_us"] > 0
    assert FACTS["device_synchronize_us"] > FACTS["gpu_span_us"]
    (temporal,) = EXPECTED[REPLAY]["hta"]["tables"]["temporal_breakdown"]
    assert temporal["idle_time_pctg"] < 1
    verdict = analyze_json(DATA / REPLAY, capsys)["verdict"]
    assert verdict["kind"] not in {
        VerdictKind.CPU_LAUNCH_BOUND.value,
        VerdictKind.NOT_ENOUGH_DATA.value,
    }


# dropping any events (launches, flows, kernels, steps, metadata): read whole, never an error
test_any_subset_of_a_capture_is_read_whole = subset_fuzz(DATA, TRACES, set(VerdictKind))
