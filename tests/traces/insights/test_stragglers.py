"""Stragglers on the 8 ranks of one Megatron TP=8 job (astra-sim fixtures), cross-checked with a
plain-Python computation of late arrival at the all-reduces."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from gpuwarden.traces.insights import straggler_report
from gpuwarden.traces.insights.stragglers import Z_OUTLIER, modified_z
from tests.traces.insights import raw
from tests.traces.insights.cache import loaded, rank_of

RANKS = range(8)


def _nccl(rank: int) -> list[tuple[float, float]]:
    return sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in raw.complete(raw.megatron(rank))
        if e["cat"] == "kernel" and e["name"].startswith("ncclDevKernel_AllReduce")
    )


def _late_arrivals() -> tuple[dict[int, float], dict[int, int]]:
    """Mean lateness vs the median rank and times-last, after removing each rank's clock offset
    (median difference of collective end times vs rank 0)."""
    kernels = {r: _nccl(r) for r in RANKS}
    n = min(len(k) for k in kernels.values())
    offset = {
        r: statistics.median(kernels[r][i][1] - kernels[0][i][1] for i in range(n)) for r in RANKS
    }
    late = dict.fromkeys(RANKS, 0.0)
    last = dict.fromkeys(RANKS, 0)
    for i in range(n):
        starts = {r: kernels[r][i][0] - offset[r] for r in RANKS}
        med = statistics.median(starts.values())
        for r in RANKS:
            late[r] += (starts[r] - med) / n
        last[max(starts, key=lambda r: starts[r])] += 1
    return late, last


def test_late_ranks_match_plain_computation() -> None:
    late, last = _late_arrivals()
    values = [late[r] for r in RANKS]
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    expected = {r for r in RANKS if 0.6745 * (late[r] - med) / mad > 3.5}
    report = straggler_report(loaded(raw.MEGATRON))
    assert report is not None
    assert report.metric == "late-arrival"
    assert report.matched_collectives == len(_nccl(0)) == 84
    assert set(report.stragglers) == expected
    assert expected  # the data has late ranks (0 and 6 arrive last most often)
    for r in report.ranks:
        assert r.late_arrival_mean_us == pytest.approx(late[r.rank], abs=1e-6)
        assert r.last_arrivals == last[r.rank]
    assert sum(r.last_arrivals for r in report.ranks) == 84
    assert report.fix is not None


def test_step_times_per_rank() -> None:
    report = straggler_report(loaded(raw.MEGATRON))
    assert report is not None
    for r in RANKS:
        (step,) = raw.steps(raw.megatron(r))
        assert report.step_times_us[r] == ((3, pytest.approx(step["dur"])),)


def test_single_rank_has_no_straggler_report() -> None:
    assert straggler_report(loaded(raw.NCCL)) is None


def test_modified_z_against_formula() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    z = modified_z(values)
    assert z[-1] == pytest.approx(0.6745 * (100 - 3) / 1.0)
    assert z[-1] > Z_OUTLIER > z[0]
    assert np.all(modified_z(np.array([5.0, 5.0, 5.0])) == 0)


def test_gpu_less_ranks_do_not_raise() -> None:
    from gpuwarden.traces.model import LoadedTrace

    trace = LoadedTrace(ranks={0: rank_of(raw.CPU_ONLY), 1: rank_of(raw.NON_GPU)})
    report = straggler_report(trace)
    assert report is not None
    assert report.matched_collectives == 0 and report.stragglers == ()
