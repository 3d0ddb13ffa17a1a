"""The "work the GPU held" measure (insights/launch.py ``held_idle_us``) behind the queued reading
of the verdict (verdict.py ``_lag_fills_idle``), after review r26a:

- a multi-rank job: the reading's gate is the first rank's median launch-to-start delay, its sum
  runs over every rank. The measure was taken only on ranks whose median delay exceeds 30 µs;
  the others added launches × median delay, the upper estimate the measure replaced, which counts
  kernels queued behind their own stream's running kernel as held. Now every rank with launches
  is measured. No capture we hold shows it (every real rank at ≤ 30 µs adds an estimate far under
  half its job's idle time; the astra 8-rank set has every rank above 30 µs), so a minimal
  synthetic two-rank job does;
- the few µs a stream takes between back-to-back queued kernels (HTA 0.5.0's kernel_wait in its
  idle-time breakdown: the launch call began by the time the stream's previous kernel ended, and
  the kernel started less than ``consecutive_kernel_delay`` = 30 µs after that end) were counted
  as held; they are the stream's own gap, not another process holding the GPU. Set 15's A100
  capture (tests/data/traces_public15) shows it: 36 such kernels, the count HTA recorded.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.traces.analyze import analyze
from gpuwarden.traces.hta.idle import CONSECUTIVE_KERNEL_DELAY_US
from gpuwarden.traces.insights import held_idle_us, rank_view
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.verdict import QUEUED_IDLE_SHARE, QUEUED_LAUNCH_DELAY_US
from gpuwarden.types.trace import VerdictKind

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public15"
SMALL = "gpupuzzlers_a100_more_small_kernels/more_small_kernels.json"


def _waits_by_hand(path: Path) -> list[tuple[float, bool, bool]]:
    """Per kernel after the first of the capture's one stream, in start order: its wait beyond
    max(launch call end, previous kernel end), whether HTA calls its gap kernel_wait (launch call
    began by the previous kernel's end, started < 30 µs after it) and whether HTA calls it
    host_wait (launch call began after that end). Plain JSON, no gpuwarden code."""
    events = json.loads(path.read_text())["traceEvents"]
    calls = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    kernels = sorted((e for e in events if e.get("cat") == "Kernel"), key=lambda e: e["ts"])
    assert {e["args"]["stream"] for e in kernels} == {7}
    out = []
    for before, kernel in itertools.pairwise(kernels):
        call = calls[kernel["args"]["correlation"]]
        previous_end = before["ts"] + before["dur"]
        wait = kernel["ts"] - max(call["ts"] + call["dur"], previous_end)
        host_wait = call["ts"] > previous_end
        kernel_wait = not host_wait and kernel["ts"] - previous_end < CONSECUTIVE_KERNEL_DELAY_US
        out.append((max(wait, 0.0), kernel_wait, host_wait))
    return out


def test_the_streams_own_gap_between_queued_kernels_is_not_held() -> None:
    """Set 15's A100 capture: 36 kernels start 2-3 µs after the previous kernel of their stream
    ended, each launched before that end (HTA's kernel_wait: 36 intervals, 91 µs, as recorded in
    expected.json). Their 84 µs of wait is the stream's, left out: 73 µs remain, every one of
    them a kernel launched after its stream went idle and started 1-4 µs after its launch call
    (before: 157 µs, the kernel_wait waits included)."""
    waits = _waits_by_hand(DATA / SMALL)
    recorded = json.loads((DATA / "expected.json").read_text())["traces"][SMALL]["hta"]["tables"]
    (hta_kernel_wait,) = (
        row for row in recorded["idle_time_breakdown"] if row["idle_category"] == "kernel_wait"
    )
    assert (hta_kernel_wait["idle_time"], sum(kw for _, kw, _ in waits)) == (91.0, 36)
    left_out = sum(w for w, kw, _ in waits if kw)
    kept = [w for w, kw, _ in waits if not kw and w > 0]
    assert left_out == 84
    assert sum(kept) == 73 and max(kept) <= 4
    assert all(host for w, kw, host in waits if not kw and w > 0)
    (rank,) = load_traces([DATA / SMALL]).ranks.values()
    assert held_idle_us(rank_view(rank)) == sum(kept)


# A minimal two-rank job (µs). Rank 0: a 500 µs kernel, ten 10 µs kernels launched while it runs
# and queued behind it on the same stream (each starts ~500 µs after its launch call: the median
# delay opens the queued reading), then ~1 ms of host pause before one last kernel. Rank 1: 100
# kernels of 10 µs launched every 10 µs, each starting 20 µs after its launch call because the
# one before it still runs (≤ 30 µs: not measured before), then ~1 ms of host pause.
_CALL_US, _KERNEL_US = 5.0, 10.0


def _rank_events(launches: list[tuple[float, float, float]]) -> list[dict[str, Any]]:
    """(launch call start, kernel start, kernel duration) -> runtime and kernel events, one
    stream."""
    events: list[dict[str, Any]] = []
    for corr, (call, start, dur) in enumerate(launches, start=1):
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": call,
                "dur": _CALL_US,
                "args": {"correlation": corr},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{corr}",
                "pid": 0,
                "tid": 7,
                "ts": start,
                "dur": dur,
                "args": {"stream": 7, "device": 0, "correlation": corr},
            }
        )
    return events


def _rank0() -> list[tuple[float, float, float]]:
    long = (0.0, 6.0, 500.0)
    queued = [(10.0 + 10 * i, 508.0 + 12 * i, _KERNEL_US) for i in range(10)]
    return [long, *queued, (1620.0, 1627.0, _KERNEL_US)]


def _rank1() -> list[tuple[float, float, float]]:
    paced = [(10.0 * j, 10.0 * j + 25, _KERNEL_US) for j in range(100)]
    return [*paced, (2000.0, 2007.0, _KERNEL_US)]


def _job(tmp_path: Path) -> list[Path]:
    paths = []
    for rank, launches in enumerate((_rank0(), _rank1())):
        path = tmp_path / f"rank-{rank}.json"
        document = {
            "schemaVersion": 1,
            "distributedInfo": {"rank": rank, "world_size": 2},
            "traceEvents": _rank_events(launches),
        }
        path.write_text(json.dumps(document))
        paths.append(path)
    return paths


def test_every_rank_the_reading_sums_is_measured(tmp_path: Path) -> None:
    """Rank 0 opens the queued reading (median kernel ~500 µs after its launch); rank 1's kernels
    start 20 µs after their launch, each queued behind the one before. Measured, neither rank's
    GPU held launched work more than a launch latency (2 µs each), far under half the job's
    idle time: the host pauses are what the GPU waits for (before: rank 1 added 101 × 20 µs,
    the reading held and the verdict said "what held the GPU … is not in the trace")."""
    trace = load_traces(_job(tmp_path))
    report = analyze(trace)
    delays = {r: ins.launch.launch_delay_p50_us for r, ins in report.ranks.items() if ins.launch}
    assert delays[0] > QUEUED_LAUNCH_DELAY_US >= delays[1] == 20.0
    verdict = report.verdict
    assert verdict.kind is VerdictKind.CPU_LAUNCH_BOUND
    assert verdict.summary.endswith("waiting for the host to launch work")
    assert not verdict.fix.startswith("find what held the GPU")
    held = {r: held_idle_us(rank_view(t)) for r, t in trace.ranks.items()}
    assert held == {0: 2.0, 1: 2.0}
    idle = sum(ins.gpu_span_us - ins.gpu_busy_us for ins in report.ranks.values())
    assert idle == pytest.approx(1021 + 982)
    assert sum(held.values()) < QUEUED_IDLE_SHARE * idle <= 101 * delays[1]
