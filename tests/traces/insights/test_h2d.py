"""Host-to-device copies against the raw memcpy events and their runtime calls."""

from __future__ import annotations

import pytest

from gpuwarden.traces.insights import rank_insights
from gpuwarden.traces.insights.h2d import PCIE_X16_GB_S, pcie_generation
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of


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


def test_pcie_generation_of_fixture_devices() -> None:
    assert pcie_generation("Tesla V100-SXM2-16GB") == 3
    assert pcie_generation("NVIDIA A100-SXM4-80GB") == 4
    assert pcie_generation("NVIDIA H100 80GB HBM3") == 5
    assert pcie_generation("AMD Radeon Graphics") is None
    assert pcie_generation("NVIDIA GH200 480GB") is None
    assert pcie_generation(None) is None
