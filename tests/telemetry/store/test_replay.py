"""The replay backend: stored snapshots back in order, at recorded or accelerated speed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuwarden.errors import GpuwardenError, InputError
from gpuwarden.telemetry.backend import Backend
from gpuwarden.telemetry.replay import ReplayFinished, open_replay
from gpuwarden.types.telemetry import DeviceSample

from .captures import snapshot
from .conftest import xid_event

# Recorded gaps in seconds: a 1 s collector with one late reading and one burst.
GAPS = (1.0, 1.0, 2.5, 0.25, 1.0)


@pytest.fixture
def recorded(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float, xid_lines: dict[int, str]
) -> tuple[Path, list[float]]:
    from gpuwarden.telemetry.store import Store

    times = [t0]
    for gap in GAPS:
        times.append(round((times[-1] + gap) * 1000) / 1000)
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        for i, t in enumerate(times):
            events = (xid_event(rich_samples[0], t, 79, xid_lines[79]),) if i == 3 else ()
            store.write(snapshot(rich_samples, t, simulated=True, events=events))
    return path, times


def test_replay_returns_every_snapshot_in_order_then_finishes(
    recorded: tuple[Path, list[float]], rich_samples: tuple[DeviceSample, ...]
) -> None:
    path, times = recorded
    backend = open_replay(path)
    assert isinstance(backend, Backend)
    assert backend.name == "replay"
    assert backend.simulated is True  # recorded from the simulator: still says so
    assert backend.devices() == tuple(s.info for s in rich_samples)
    got = []
    while not backend.exhausted:
        got.append(backend.read())
    with pytest.raises(ReplayFinished) as caught:
        backend.read()
    assert isinstance(caught.value, GpuwardenError)
    backend.close()
    assert [s.timestamp_s for s in got] == times
    assert all(s.backend == "replay" and s.simulated and s.source == str(path) for s in got)
    assert got[0].samples == snapshot(rich_samples, times[0]).samples
    assert [len(s.events) for s in got] == [0, 0, 0, 1, 0, 0]


def test_speed_sleeps_the_recorded_gaps_divided_by_speed(
    recorded: tuple[Path, list[float]],
) -> None:
    path, _ = recorded
    slept: list[float] = []
    backend = open_replay(path, speed=10.0, sleep=slept.append)
    while not backend.exhausted:
        backend.read()
    backend.close()
    assert slept == pytest.approx([gap / 10 for gap in GAPS])


def test_without_speed_it_never_sleeps_and_since_until_select(
    recorded: tuple[Path, list[float]],
) -> None:
    path, times = recorded
    slept: list[float] = []
    backend = open_replay(path, since_s=times[1], until_s=times[3], sleep=slept.append)
    got = [backend.read() for _ in range(3)]
    assert backend.exhausted
    backend.close()
    assert [s.timestamp_s for s in got] == times[1:4]
    assert slept == []


def test_replay_pages_through_long_recordings(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    from gpuwarden.telemetry.store import Store

    path = tmp_path / "long.db"
    with Store.open(path) as store:
        for k in range(600):  # more than one page of 256
            store.write(snapshot(rich_samples[:1], t0 + k))
    backend = open_replay(path)
    count = 0
    while not backend.exhausted:
        assert backend.read().timestamp_s == pytest.approx(t0 + count)
        count += 1
    backend.close()
    assert count == 600


def test_bad_speed_and_missing_file(tmp_path: Path, recorded: tuple[Path, list[float]]) -> None:
    with pytest.raises(InputError) as caught:
        open_replay(recorded[0], speed=0)
    assert caught.value.reference == "invalid-replay-speed"
    with pytest.raises(InputError) as caught:
        open_replay(tmp_path / "none.db")
    assert caught.value.reference == "store-not-found"


def test_latest_is_the_newest_snapshot_in_range(recorded: tuple[Path, list[float]]) -> None:
    """`snapshot --backend replay` shows the newest reading of the range, with its events."""
    path, times = recorded
    backend = open_replay(path)
    assert backend.latest().timestamp_s == times[-1]
    backend.close()
    backend = open_replay(path, since_s=times[1], until_s=times[3])
    newest = backend.latest()
    assert newest.timestamp_s == times[3] and len(newest.events) == 1
    assert newest.backend == "replay" and newest.source == str(path)
    assert backend.read().timestamp_s == times[1]  # latest() does not consume the replay
    backend.close()
    empty = open_replay(path, since_s=times[-1] + 10)
    with pytest.raises(ReplayFinished):
        empty.latest()
    empty.close()


def test_snapshots_of_two_writers_in_the_same_millisecond_all_replay(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    """300 milliseconds each holding two writers' snapshots: the replay pages (256 snapshots)
    end between the two of one millisecond, and the next page starts with the other one."""
    from gpuwarden.telemetry.store import Store

    path = tmp_path / "t.db"
    writers = [Store.open(path, flush_every_samples=10**6) for _ in range(2)]
    for k in range(300):
        for host, store in zip(("node-a", "node-b"), writers, strict=True):
            store.write(replace(snapshot(rich_samples[:1], t0 + k * 0.02), host=host))
        if k % 50 == 49:
            for store in writers:
                store.flush()
    for store in writers:
        store.close()
    backend = open_replay(path)
    got = []
    while not backend.exhausted:
        got.append(backend.read())
    backend.close()
    assert len(got) == 600
    assert [s.host for s in got[254:260]] == ["node-a", "node-b"] * 3
    assert [s.timestamp_s for s in got] == sorted(s.timestamp_s for s in got)
