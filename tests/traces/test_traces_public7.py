"""Seventh held-out set of public Kineto traces (tests/data/traces_public7/, SOURCES.md there):
two PyTorch-profiler captures on a node of 8 NVIDIA H200 from XAheli/torch-profiler, each three
ProfilerStep windows of one op: PyTorch's FlashAttention-2 kernel through SDPA
(``pytorch_flash::flash_fwd_kernel``) and DeepGEMM's Hopper fp8 GEMM with its scale-factor
transpose, launched through the driver API (``cuLaunchKernelEx``). In both the GPU runs behind
the host: every kernel starts after the steps' CPU windows closed. Every breakdown
``hta_report`` gives must equal what HTA 0.5.0 returned on the same files (expected.json), the
facts read by hand must come out of ``trace analyze``, the kernels must be classed by what they
do, and with under 10 GPU events the verdict is "not enough data" that says the steps launched
the work."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.traces.classify import classify_name
from gpuwarden.traces.model import Category
from gpuwarden.types.trace import VerdictKind
from gpuwarden.types.trace_insights import KernelKind
from tests.traces.public_sets import (
    analyze_json,
    assert_steps_launches_and_verdict,
    breakdowns_check,
    decoders_check,
    expected_traces,
    subset_fuzz,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public7"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
FP8 = "xaheli_h200_deepgemm_fp8/gemm_fp8_deepgemm.json"
FA2 = "xaheli_h200_fa2/fa2_seq512.json"


# HTA leaves out the last ProfilerStep and rounds each kernel to whole µs: our HTA-compatible
# report must give the same rows and values
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)

test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Walls, launches (cudaLaunchKernel and the driver API's cuLaunchKernelEx alike) and the
    verdict kind; the steps' CPU windows hold no GPU time, the kernels running after them."""
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    rank = assert_steps_launches_and_verdict(document, facts)
    assert [step["gpu_busy_us"] for step in rank["steps"]] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name", TRACES)
def test_kernels_are_classed_by_what_they_do(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """FA2's flash_fwd_kernel is attention; DeepGEMM's fp8 GEMM is a GEMM and its
    ``deep_gemm::transpose_fp32`` (the scale-factor layout copy) elementwise, not a GEMM."""
    facts = EXPECTED[name]["facts"]
    rank = next(iter(analyze_json(DATA / name, capsys)["ranks"].values()))
    kinds = {k["kind"]: (k["count"], k["time_us"]) for k in rank["kinds"]}
    expected = {k: (v["count"], v["time_us"]) for k, v in facts["kinds"].items()}
    assert set(kinds) == set(expected)
    for kind, (count, time_us) in expected.items():
        assert kinds[kind][0] == count
        assert kinds[kind][1] == pytest.approx(time_us, abs=1e-6)


def test_the_fa2_sdpa_calls_use_the_flash_backend(capsys: pytest.CaptureFixture[str]) -> None:
    facts = EXPECTED[FA2]["facts"]
    rank = next(iter(analyze_json(DATA / FA2, capsys)["ranks"].values()))
    assert rank["attention"]["sdpa_calls"] == facts["profiler_steps"]
    (backend,) = rank["attention"]["backends"]
    assert backend["backend"] == "flash"
    assert backend["kernel_time_us"] == pytest.approx(facts["kinds"]["attention"]["time_us"])


def test_the_deepgemm_gemms_are_fp8_on_tensor_cores(capsys: pytest.CaptureFixture[str]) -> None:
    """Only the GEMM kernels are weighed: all fp8 on tensor cores (sm90 WGMMA), nothing of
    unknown kind left by the transpose kernels."""
    facts = EXPECTED[FP8]["facts"]
    tc = next(iter(analyze_json(DATA / FP8, capsys)["ranks"].values()))["tensor_cores"]
    assert tc["gemm_kernels"] == facts["kinds"]["gemm"]["count"]
    assert tc["tensor_core_ratio"] == facts["tensor_core_ratio"]
    assert tc["unknown_us"] == 0.0
    dtypes = {d["dtype"]: d["time_us"] for d in tc["dtypes"]}
    assert dtypes == pytest.approx(facts["gemm_dtypes"])


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (
            "void deep_gemm::transpose_fp32<512u, 64u, 32u, 33u>(float const*, float*)",
            "ELEMENTWISE",
        ),
        ("void deep_gemm::sm90_fp8_gemm_1d2d_impl<(cute::UMMA::Major)0, 0u>(float*)", "GEMM"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_128x64_64x3_nn>", "GEMM"),
        ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int> >(int)", "GEMM"),
        ("void cutlass::gemm::kernel::GemvBatchedStrided<float>(int)", "GEMM"),
    ],
)
def test_a_library_namespace_does_not_make_a_gemm(name: str, kind: str) -> None:
    """The GEMM test reads a kernel's own name and template arguments, not the namespaces it
    lives in (DeepGEMM, CUTLASS)."""
    assert classify_name(name, int(Category.KERNEL)) == KernelKind[kind]


@pytest.mark.parametrize("name", TRACES)
def test_steps_that_launched_the_gpu_work_are_not_called_light(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The steps' windows close before their kernels run (a GPU behind the host until the
    closing cudaDeviceSynchronize): counted by launch, the steps queued the trace's GPU work
    (the warm-up step's pair aside); too few or too small to weigh, not steps without GPU
    work."""
    facts = EXPECTED[name]["facts"]
    verdict = analyze_json(DATA / name, capsys)["verdict"]
    assert verdict["kind"] == "not-enough-data"
    assert verdict["evidence"][0].startswith(
        f"{facts['kernels']} kernel/memcpy/memset event(s) on 1 rank(s)"
    )
    assert not any("not the GPU-heavy ones" in e for e in verdict["evidence"])
    third = verdict["evidence"][2]
    assert "hold 0.0 µs of GPU work, yet they launch" in third
    assert f"{facts['launched_in_steps_share']} of the trace's" in third
    assert "repeat the op inside each profiled step" in verdict["fix"]


# dropping any events (launches, flows, kernels, steps, metadata): too few GPU events never give
# a bottleneck verdict
test_any_subset_of_the_capture_is_read_whole = subset_fuzz(
    DATA, TRACES, {VerdictKind.NOT_ENOUGH_DATA, VerdictKind.NO_GPU_ACTIVITY}
)
