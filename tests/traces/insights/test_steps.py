"""Per-step stats against an independent plain-Python pass over the raw events."""

from __future__ import annotations

import bisect

import pytest

from gpuwarden.traces.insights import rank_insights
from gpuwarden.types.trace_insights import IdleKind
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of


@pytest.mark.parametrize("rel", [raw.CONTROL, raw.NS, raw.NCCL, raw.H100_QWEN, raw.megatron(6)])
def test_step_wall_and_gpu_busy(rel: str) -> None:
    insights = rank_insights(rank_of(rel))
    expected_steps = raw.steps(rel)
    assert [s.step for s in insights.steps] == [
        int(e["name"].split("#")[1]) for e in expected_steps
    ]
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in raw.gpu_events(rel)]
    for got, e in zip(insights.steps, expected_steps, strict=True):
        lo, hi = e["ts"], e["ts"] + e["dur"]
        busy = raw.covered(gpu, lo, hi)
        assert got.wall_us == pytest.approx(e["dur"])
        assert got.gpu_busy_us == pytest.approx(busy, abs=1.0)  # float64 at ~1e15 µs: ±0.25 µs
        assert got.gpu_idle_us == pytest.approx(e["dur"] - busy, abs=1.0)
        parts = (
            got.idle_data_loading_us
            + got.idle_host_launch_us
            + got.idle_kernel_gap_us
            + got.idle_wait_us
        )
        assert parts == pytest.approx(got.gpu_idle_us, abs=1.0)
        kernels = sum(1 for k in raw.complete(rel) if k["cat"] == "kernel" and lo <= k["ts"] < hi)
        assert got.kernels == kernels


def test_megatron_rank6_dataloader_idle_counted() -> None:
    """Rank 6 waited 27 ms in the DataLoader with its GPU idle: that idle is data loading."""
    rel = raw.megatron(6)
    dl = [e for e in raw.complete(rel) if "DataLoader" in e["name"]]
    assert len(dl) == 1
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in raw.gpu_events(rel)]
    start, end = dl[0]["ts"], dl[0]["ts"] + dl[0]["dur"]
    idle_in_dl = (end - start) - raw.covered(gpu, start, end)
    (step,) = rank_insights(rank_of(rel)).steps
    assert step.idle_data_loading_us == pytest.approx(idle_in_dl)
    assert idle_in_dl > 20_000


def _idle_by_kind(rel: str) -> list[dict[IdleKind, float]]:
    """The idle rule written out in plain Python: gaps of the all-stream GPU union; the part
    inside DataLoader ranges is data loading; the rest goes by the op that ends the gap."""
    events = raw.complete(rel)
    gpu = sorted(raw.gpu_events(rel), key=lambda e: e["ts"])
    launch: dict[int, float] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e["cat"] in ("cuda_runtime", "cuda_driver") and isinstance(corr, int):
            launch.setdefault(corr, e["ts"])
    dl = [(e["ts"], e["ts"] + e["dur"]) for e in events if "DataLoader" in e["name"]]
    busy = raw.union([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
    starts = [e["ts"] for e in gpu]
    out = []
    for step in raw.steps(rel):
        lo, hi = step["ts"], step["ts"] + step["dur"]
        idle = dict.fromkeys(IdleKind, 0.0)
        edges = [(-float("inf"), busy[0][0])] if busy else []
        edges += [(busy[k][1], busy[k + 1][0]) for k in range(len(busy) - 1)]
        edges += [(busy[-1][1], float("inf"))]
        for g0, g1 in edges:
            a, b = max(g0, lo), min(g1, hi)
            if b <= a:
                continue
            in_dl = raw.covered(dl, a, b)
            idle[IdleKind.DATA_LOADING] += in_dl
            k = bisect.bisect_left(starts, g1)
            nxt = gpu[k] if k < len(gpu) else None
            corr = (nxt or {}).get("args", {}).get("correlation")
            t = float("inf") if nxt is None else launch.get(corr, float("nan"))
            start = g0 if g0 != -float("inf") else min(lo, gpu[0]["ts"])
            if t > start:
                kind = IdleKind.HOST_LAUNCH
            elif g1 - start < 30:
                kind = IdleKind.KERNEL_GAP
            else:
                kind = IdleKind.WAIT
            idle[kind] += (b - a) - in_dl
        out.append(idle)
    return out


@pytest.mark.parametrize("rel", [raw.CONTROL, raw.H100_QWEN, raw.megatron(6)])
def test_idle_kinds_match_plain_python(rel: str) -> None:
    expected = _idle_by_kind(rel)
    got = rank_insights(rank_of(rel)).steps
    assert len(got) == len(expected)
    for s, e in zip(got, expected, strict=True):
        assert s.idle_data_loading_us == pytest.approx(e[IdleKind.DATA_LOADING], abs=1.0)
        assert s.idle_host_launch_us == pytest.approx(e[IdleKind.HOST_LAUNCH], abs=1.0)
        assert s.idle_kernel_gap_us == pytest.approx(e[IdleKind.KERNEL_GAP], abs=1.0)
        assert s.idle_wait_us == pytest.approx(e[IdleKind.WAIT], abs=1.0)
