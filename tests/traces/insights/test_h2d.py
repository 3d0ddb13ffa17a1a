"""Host-to-device copies against the raw memcpy events and their runtime calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.catalog.host_link import PCIE_X16_GB_S, pcie_generation
from gpuwarden.traces.insights import rank_insights
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of

HELD_OUT = Path(__file__).resolve().parents[2] / "data" / "traces_public11"


def _h2d(rel: str) -> list[dict]:  # type: ignore[type-arg]
    return [e for e in raw.complete(rel) if e["cat"] == "gpu_memcpy" and "HtoD" in e["name"]]


@pytest.mark.parametrize("rel", [raw.CONTROL, raw.TEST, raw.SIMPLE_ADD, raw.B200, raw.AMD])
def test_counts_bytes_bandwidth(rel: str) -> None:
    copies = _h2d(rel)
    report = rank_insights(rank_of(rel)).h2d
    assert report is not None
    assert report.copies == len(copies)
    assert report.pageable_copies == sum("Pageable" in e["name"] for e in copies)
    assert report.pinned_copies == sum("Pinned" in e["name"] for e in copies)
    assert report.time_us == pytest.approx(sum(e["dur"] for e in copies))
    sized = [e for e in copies if "bytes" in e["args"]]
    if sized:
        total = sum(e["args"]["bytes"] for e in sized)
        assert report.bytes_total == total
        assert report.achieved_gb_s == pytest.approx(total / sum(e["dur"] for e in sized) / 1e3)
    else:
        assert report.bytes_total is None and report.achieved_gb_s is None


def test_pageable_copies_get_the_pin_memory_fix() -> None:
    report = rank_insights(rank_of(raw.SIMPLE_ADD)).h2d
    assert report is not None and report.pageable_copies == 16 == report.copies
    assert report.fix is not None and "pin_memory" in report.fix
    assert report.pcie_generation == 4  # A100
    assert report.pcie_limit_gb_s == PCIE_X16_GB_S[4] == 31.5
    assert report.achieved_ratio_of_pcie == pytest.approx(report.achieved_gb_s / 31.5)


def test_blocking_copies_from_runtime_call() -> None:
    """ROCm: the HtoD copies were issued by hipMemcpyWithStream, a synchronous call."""
    rel = raw.AMD
    corr = {e["args"]["correlation"] for e in _h2d(rel)}
    blocking = [
        e
        for e in raw.complete(rel)
        if e["cat"] == "cuda_runtime"
        and e["name"] == "hipMemcpyWithStream"
        and e["args"].get("correlation") in corr
    ]
    report = rank_insights(rank_of(rel)).h2d
    assert report is not None
    assert report.blocking_copies == len(blocking) == 2
    assert report.unknown_source_copies == 2  # "Host -> Device": pinned or not is not said


def test_exposed_copy_time() -> None:
    rel = raw.CONTROL
    copies = [(e["ts"], e["ts"] + e["dur"]) for e in _h2d(rel)]
    compute = [
        (e["ts"], e["ts"] + e["dur"])
        for e in raw.complete(rel)
        if e["cat"] == "kernel" and not e["name"].startswith("nccl")
    ]
    busy = sum(e - s for s, e in raw.union(copies))
    report = rank_insights(rank_of(rel)).h2d
    assert report is not None
    assert report.exposed_us == pytest.approx(busy - raw.overlap(copies, compute))


@pytest.mark.parametrize(
    ("name", "capability", "generation"),
    [
        ("Tesla V100-SXM2-16GB", (7, 0), 3),
        ("Tesla V100-DGXS-32GB", None, 3),  # a 2020 trace: no computeMajor
        ("Quadro P5000", (6, 1), 3),
        ("NVIDIA A100-SXM4-80GB", (8, 0), 4),
        ("NVIDIA L4", (8, 9), 4),
        ("NVIDIA H100 80GB HBM3", (9, 0), 5),
        ("NVIDIA B200", (10, 0), 5),
        ("NVIDIA GeForce RTX 5090", (12, 0), 5),
        ("AMD Instinct MI300X", (9, 4), 5),  # ROCm's gfx942 written as a "capability"
        ("AMD Radeon Graphics", None, None),
        ("AMD Radeon Graphics", (9, 4), None),
        ("NVIDIA GH200 480GB", (9, 0), None),  # NVLink-C2C to its CPU
        ("Orin", (8, 7), None),  # integrated
        ("NVIDIA GeForce GTX 1050 Ti with Max-Q Design", (6, 1), None),  # lanes: the laptop's
        (None, None, None),
    ],
)
def test_pcie_generation_of_a_device(
    name: str | None, capability: tuple[int, int] | None, generation: int | None
) -> None:
    assert pcie_generation(name, capability) == generation


@pytest.mark.parametrize(
    ("rel", "generation"),
    [
        (str(HELD_OUT / "gpumode_p5000_square/trace.json"), 3),
        (str(HELD_OUT / "gpumode_l4_square/test_trace_4.json"), 4),
        (str(HELD_OUT / "gpumode_rtx6000ada_square/trace.json"), 4),
    ],
)
def test_the_trace_s_device_properties_give_the_link(rel: str, generation: int) -> None:
    """GPUs the name table never listed (a Quadro P5000, an L4, an RTX 6000 Ada) by the compute
    capability Kineto writes beside the name."""
    report = rank_insights(rank_of(rel)).h2d
    assert report is not None
    assert report.pcie_generation == generation
    assert report.pcie_limit_gb_s == PCIE_X16_GB_S[generation]
