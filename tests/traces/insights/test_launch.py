"""Launch overhead: launch calls joined to kernels on the correlation id, checked against a
plain-Python join of the raw events."""

from __future__ import annotations

import statistics

import pytest

from gpuwarden.traces.insights import rank_insights
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of

LAUNCH_NAMES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
)


def _pairs(rel: str) -> list[tuple[float, float, float]]:
    """(cpu launch dur, gpu kernel dur, launch delay) for every kernel with a launch call."""
    launches: dict[int, dict] = {}  # type: ignore[type-arg]
    for e in raw.complete(rel):
        if e["cat"] in ("cuda_runtime", "cuda_driver") and e["name"].startswith(LAUNCH_NAMES):
            launches.setdefault(e["args"]["correlation"], e)
    out = []
    for k in raw.complete(rel):
        if k["cat"] != "kernel":
            continue
        cpu = launches.get(k["args"].get("correlation"))
        if cpu is not None:
            delay = max(0.0, k["ts"] - (cpu["ts"] + cpu["dur"]))
            out.append((cpu["dur"], k["dur"], delay))
    return out


@pytest.mark.parametrize(
    "rel", [raw.NCCL, raw.CONTROL, raw.B200, raw.H100_BERT, raw.AMD, raw.TRITON]
)
def test_launch_stats_match_plain_join(rel: str) -> None:
    pairs = _pairs(rel)
    report = rank_insights(rank_of(rel)).launch
    assert report is not None
    assert report.launches == len(pairs)
    cpu = [p[0] for p in pairs]
    gpu = [p[1] for p in pairs]
    delay = [p[2] for p in pairs]
    assert report.cpu_launch_p50_us == pytest.approx(statistics.median(cpu))
    assert report.gpu_kernel_p50_us == pytest.approx(statistics.median(gpu))
    assert report.launch_delay_p50_us == pytest.approx(statistics.median(delay), abs=0.5)
    short = [g < c for c, g, _ in pairs]
    assert report.short_kernel_ratio == pytest.approx(sum(short) / len(short))
    assert report.cpu_launch_total_us == pytest.approx(sum(cpu))
    assert report.gpu_kernel_total_us == pytest.approx(sum(gpu))


def test_small_kernels_get_the_cuda_graph_fix() -> None:
    """BERT-small inference on H100: most kernels are shorter than their launch, and the host
    is not ahead of the GPU (short launch delay): launch-bound."""
    report = rank_insights(rank_of(raw.H100_BERT)).launch
    assert report is not None
    assert report.short_kernel_ratio > 0.5 and report.launch_delay_p50_us < 50
    assert report.fix is not None and "CUDA graph" in report.fix


def test_deep_queue_gets_no_fix() -> None:
    """trace_diff/test: kernels start ~40 ms after their launch: the GPU is the limit."""
    report = rank_insights(rank_of(raw.TEST)).launch
    assert report is not None and report.launch_delay_p50_us > 1000 and report.fix is None
    graph_calls = sum(1 for e in raw.complete(raw.TEST) if e["name"] == "cudaGraphLaunch")
    assert report.graph_launches == graph_calls
