"""Issue 13, fourth hostile pass (b): ProfilerStep windows that overlap.

torch.profiler's steps follow one another, but a trace may carry windows that overlap or nest
(hand-written annotations, merged files, every step at ts 0). Per-step idle sliced every GPU gap
inside each window: n nested steps over n gaps cost n² (80,000 steps: `trace analyze` 24.6 s).
Each window now clips only its two boundary gaps and takes the gaps between from prefix sums.
"""

from __future__ import annotations

import functools
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import pytest

from gpuwarden.traces.insights.steps import KERNEL_GAP_US, _gaps, step_stats
from gpuwarden.traces.insights.view import RankView, build_view
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.model import RankTrace
from gpuwarden.types.trace_insights import IdleKind, StepStats
from tests.traces.insights import raw


def _event(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    gpu = cat == "kernel"
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0 if gpu else 1,
        "tid": 7 if gpu else 1,
        "ts": ts,
        "dur": dur,
        "args": {**args, **({"device": 0, "stream": 7} if gpu else {})},
    }


def _kernel(corr: int, launched: float, ts: float, dur: float) -> list[dict[str, Any]]:
    return [
        _event("cuda_runtime", "cudaLaunchKernel", launched, 1, correlation=corr),
        _event("kernel", "k", ts, dur, correlation=corr),
    ]


def _rank(tmp_path: Path, events: list[dict[str, Any]]) -> RankTrace:
    path = tmp_path / "rank0.pt.trace.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return next(iter(load_traces([path]).ranks.values()))


def _steps(windows: list[tuple[float, float]]) -> list[dict[str, Any]]:
    return [
        _event("user_annotation", f"ProfilerStep#{n}", a, b - a) for n, (a, b) in enumerate(windows)
    ]


def _nested(n: int) -> list[dict[str, Any]]:
    """``n`` steps all at ts 0 over the whole run, one kernel each (100 µs apart, 50 µs long,
    launched 10 µs before it starts)."""
    events = _steps([(0, n * 100)] * n)
    for i in range(n):
        events += _kernel(i + 1, i * 100, i * 100 + 10, 50)
    return events


def _nested_view(directory: Path, n: int) -> RankView:
    directory.mkdir(exist_ok=True)
    return build_view(_rank(directory, _nested(n)))


def _python_lines(call: Callable[[], object]) -> int:
    """Lines of Python ``call`` runs: a loop over each window's gaps runs n² of them, the
    vectorised pass a fixed number plus one output record a step."""
    lines = 0

    def count(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return count

    previous = sys.gettrace()
    sys.settrace(count)
    try:
        call()
    finally:
        sys.settrace(previous)
    return lines


def test_nested_steps_cost_linear_time(tmp_path: Path) -> None:
    """40,000 steps all at ts 0, one kernel each: before, 1.6 billion gap slices (~8 s). Checked
    without a clock (a loaded runner slowed the CPU-time bound this had past it): the Python run
    per step, at two sizes, and the memory of the whole pass (an n × n array of windows against
    gaps would be 1.6 GB at 40,000)."""
    small, large = (
        _python_lines(functools.partial(step_stats, _nested_view(tmp_path / str(n), n)))
        for n in (1_000, 2_000)
    )
    assert large < 2.2 * small, (small, large)  # a loop over windows × gaps: 4×
    n = 40_000
    view = _nested_view(tmp_path, n)
    tracemalloc.start()
    try:
        steps = step_stats(view)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the pass's arrays are a few per step and per gap (8 bytes each), its output one record a
    # step: tens of MB at 40,000; n × n booleans would be 1.6 GB
    assert peak < 200 * 2**20, f"{peak / 2**20:.0f} MiB"
    # every window is the whole run: the first gap (10 µs) ends with a kernel launched as it
    # began (a kernel gap); the next 39,999 (50 µs each) with one launched 40 µs after they
    # began; the last (40 µs) with none at all: both host-launch
    assert {s.idle_kernel_gap_us for s in steps} == {10.0}
    assert {s.idle_host_launch_us for s in steps} == {(n - 1) * 50.0 + 40.0}
    assert {s.kernels for s in steps} == {n}


def _idle(step: StepStats) -> dict[IdleKind, float | None]:
    return {
        IdleKind.DATA_LOADING: step.idle_data_loading_us,
        IdleKind.HOST_LAUNCH: step.idle_host_launch_us,
        IdleKind.KERNEL_GAP: step.idle_kernel_gap_us,
        IdleKind.WAIT: step.idle_wait_us,
    }


def test_nested_windows_split_idle_by_kind_at_their_edges(tmp_path: Path) -> None:
    """Gaps (µs): [0,100) host-launch (kernel A queued at 50), [200,210) kernel-gap (B queued at
    150), [260,400) wait (C queued at 150), half of it in the DataLoader [300,350)."""
    events = _steps([(0, 500), (50, 300), (205, 320), (220, 240)])
    events += _kernel(1, 50, 100, 100) + _kernel(2, 150, 210, 50) + _kernel(3, 150, 400, 100)
    events.append(_event("python_function", "enumerate(DataLoader)#_next", 300, 50))
    steps = step_stats(build_view(_rank(tmp_path, events)))
    host, gap, wait, dl = (
        IdleKind.HOST_LAUNCH,
        IdleKind.KERNEL_GAP,
        IdleKind.WAIT,
        IdleKind.DATA_LOADING,
    )
    expected = [
        {dl: 50.0, host: 100.0, gap: 10.0, wait: 90.0},  # [0,500] holds every gap
        {dl: 0.0, host: 50.0, gap: 10.0, wait: 40.0},  # [50,300]: two clipped ends, one whole
        {dl: 20.0, host: 0.0, gap: 5.0, wait: 40.0},  # [205,320]: both ends clipped
        {dl: 0.0, host: 0.0, gap: 0.0, wait: 0.0},  # [220,240]: inside kernel B
    ]
    assert [_idle(s) for s in steps] == expected
    assert [s.dominant_idle for s in steps] == [host, host, wait, None]


def test_a_window_opening_where_the_last_gap_ends_meets_no_gap(tmp_path: Path) -> None:
    """Found by test_insights_fuzz on a first draft of the prefix sums: the one gap [0,100)
    ends where the empty step #1 [100,100] opens, so that window starts past every gap."""
    events = _steps([(0, 100), (100, 100)]) + _kernel(1, 50, 100, 100)
    first, empty = step_stats(build_view(_rank(tmp_path, events)))
    assert _idle(first) == {
        IdleKind.DATA_LOADING: 0.0,
        IdleKind.HOST_LAUNCH: 100.0,
        IdleKind.KERNEL_GAP: 0.0,
        IdleKind.WAIT: 0.0,
    }
    assert _idle(empty) == dict.fromkeys(IdleKind, 0.0)
    assert empty.dominant_idle is None


def _sliced(view: RankView, lo: float, hi: float) -> dict[IdleKind, float]:
    """The per-window rule written out: every gap clipped to the window, the DataLoader part
    apart, the rest by the gap's kind (launched after it began, under 30 µs, else a wait)."""
    (starts, ends), launch, full = _gaps(view)
    dl_starts, dl_ends = view.dataloader_union
    idle = dict.fromkeys(IdleKind, 0.0)
    for g0, g1, t, length in zip(starts, ends, launch, full, strict=True):
        a, b = min(max(g0, lo), hi), min(max(g1, lo), hi)
        if b <= a:
            continue
        in_dl = sum(
            max(min(b, e) - max(a, s), 0.0) for s, e in zip(dl_starts, dl_ends, strict=True)
        )
        idle[IdleKind.DATA_LOADING] += in_dl
        if t > g0:
            kind = IdleKind.HOST_LAUNCH
        elif length < KERNEL_GAP_US:
            kind = IdleKind.KERNEL_GAP
        else:
            kind = IdleKind.WAIT
        idle[kind] += max(b - a - in_dl, 0.0)
    return idle


def test_overlapping_windows_on_a_real_rank_match_the_plain_rule(tmp_path: Path) -> None:
    """Megatron rank 6 (a 27 ms DataLoader wait, every idle kind) with its one step replaced by
    windows that overlap, nest and stick out of the GPU's span."""
    rel = raw.megatron(6)
    base = [e for e in raw.events(rel) if not str(e.get("name", "")).startswith("ProfilerStep#")]
    (real,) = raw.steps(rel)
    lo, hi = real["ts"], real["ts"] + real["dur"]
    third = (hi - lo) / 3
    windows = [(lo, hi), (lo + third, hi), (lo - third, lo + third), (lo + 1, lo + 2 * third)]
    view = build_view(_rank(tmp_path, base + _steps(windows)))
    steps = step_stats(view)
    assert len(steps) == len(windows)
    for step in steps:
        assert _idle(step) == pytest.approx(_sliced(view, *windows[step.step]), abs=1e-6)
    assert max(s.idle_data_loading_us or 0.0 for s in steps) > 20_000
