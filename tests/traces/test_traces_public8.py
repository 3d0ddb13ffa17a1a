"""Eighth held-out set of public Kineto traces (tests/data/traces_public8/, SOURCES.md there): a
PyTorch-profiler capture from XAheli/torch-profiler of one torch.compile'd ScatterMoE
mixture-of-experts layer on an NVIDIA H200 (ProfilerStep#2; steps #3/#4 dropped whole). Its
expert matmuls are ScatterMoE's Triton grouped GEMM ``_scatter2scatter`` (launched through
``cuLaunchKernelEx``) and its router reads ``torch.bincount``'s min/max back to the host: a
blocking D2H copy and a 2.3 ms ``cudaStreamSynchronize``. The GPU is idle 89 % of its active span
although every launched kernel starts a millisecond or more after its launch call: the work was
queued and the GPU did not run it. Every breakdown ``hta_report`` gives must equal what HTA 0.5.0
returned on the file (expected.json), the facts read by hand must come out of ``trace
analyze``, the MoE GEMMs must be classed as GEMMs, and the verdict must not blame the host's
launch rate for an idle GPU that had the work."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.traces.classify import classify_name
from gpuwarden.traces.model import Category
from gpuwarden.traces.verdict import QUEUED_LAUNCH_DELAY_US
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

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public8"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)
MOE = "xaheli_h200_scattermoe/scattermoe_step2.json"

# HTA rounds each kernel to whole µs and warns that one iteration may be inaccurate: our
# HTA-compatible report must give the same rows and values
test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)

test_both_decoders_read_the_same_trace = decoders_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Events, the step's wall, the launches (runtime cudaLaunchKernel and the driver API's
    cuLaunchKernel/cuLaunchKernelEx alike) and how long after its launch the median kernel
    started."""
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    rank = assert_steps_launches_and_verdict(document, facts)
    assert rank["launch"]["launch_delay_p50_us"] == pytest.approx(
        facts["launch_delay_p50_us"], abs=1e-3
    )


def test_the_moe_grouped_gemms_are_gemms(capsys: pytest.CaptureFixture[str]) -> None:
    """ScatterMoE's ``_scatter2scatter`` multiplies each expert's rows by its weights (a tl.dot
    loop): a GEMM like the cuBLASLt ``nvjet`` bmm next to it, not the scatter copy its name
    suggests."""
    facts = EXPECTED[MOE]["facts"]
    rank = next(iter(analyze_json(DATA / MOE, capsys)["ranks"].values()))
    kinds = {k["kind"]: (k["count"], k["time_us"]) for k in rank["kinds"]}
    count, time_us = kinds["gemm"]
    assert count == facts["gemm"]["count"]
    assert time_us == pytest.approx(facts["gemm"]["time_us"], abs=1e-6)
    assert rank["tensor_cores"]["gemm_kernels"] == facts["gemm"]["count"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("_scatter2scatter", "GEMM"),  # ScatterMoE forward / input-gradient grouped GEMM
        ("_groupXtY", "GEMM"),  # ScatterMoE weight-gradient grouped GEMM
        ("fused_moe_kernel", "GEMM"),  # vLLM / SGLang Triton fused MoE
        ("moe_align_block_size_kernel", "COMPUTE_OTHER"),  # vLLM's token sort, no matmul
        (
            "void at::native::_scatter_gather_elementwise_kernel<128, 8, "
            "at::native::_cuda_scatter_gather_internal_kernel<true, float>::operator()>(int)",
            "ELEMENTWISE",
        ),
    ],
)
def test_moe_kernels_are_classed_by_what_they_compute(name: str, kind: str) -> None:
    assert classify_name(name, int(Category.KERNEL)) == KernelKind[kind]


def test_an_idle_gpu_that_held_the_work_is_not_called_launch_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """89 % idle, yet the median kernel starts 2.2 ms after its launch (none under 998 µs): a GPU
    waiting for launches starts kernels within µs. What held the GPU (or a clock offset) is outside
    the trace, so the verdict says so and what would decide, instead of prescribing CUDA graphs."""
    facts = EXPECTED[MOE]["facts"]
    assert facts["launch_delay_min_us"] > QUEUED_LAUNCH_DELAY_US
    verdict = analyze_json(DATA / MOE, capsys)["verdict"]
    assert verdict["kind"] == VerdictKind.NOT_ENOUGH_DATA.value
    assert "kernels start long after their launches" in verdict["summary"]
    assert verdict["evidence"][0].startswith("GPU idle 89.0 % of the GPU-active span")
    assert "the median kernel starts 2.2 ms after its own launch call" in verdict["evidence"][-1]
    assert "another process" in verdict["fix"]
    assert "offset between the GPU's and the host's clocks" in verdict["fix"]
    assert "CUDA graphs" not in verdict["fix"]


# dropping any events (launches, flows, kernels, the step, metadata)
test_any_subset_of_the_capture_is_read_whole = subset_fuzz(DATA, TRACES, set(VerdictKind))
