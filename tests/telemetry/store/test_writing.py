"""Batching, runs, a reader beside the writer, and kill -9 in the middle of writing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwarden.errors import InputError
from gpuwarden.telemetry.store import Store
from gpuwarden.types.telemetry import DeviceSample

from . import captures
from .captures import snapshot
from .conftest import xid_event

HERE = Path(__file__).resolve().parent


def _count(path: Path) -> int:
    with Store.open(path, readonly=True) as reader:
        return len(reader.samples())


def test_writes_are_buffered_until_the_sample_threshold(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    path = tmp_path / "t.db"
    per_snapshot = len(rich_samples)
    with Store.open(path, flush_every_samples=4 * per_snapshot, flush_every_s=3600) as store:
        for k in range(3):
            store.write(snapshot(rich_samples, t0 + k))
        assert _count(path) == 0  # a separate reader sees only commits
        store.write(snapshot(rich_samples, t0 + 3))  # 4th snapshot reaches the threshold
        assert _count(path) == 4 * per_snapshot
        store.write(snapshot(rich_samples, t0 + 4))
        assert _count(path) == 4 * per_snapshot
        assert store.flush() == per_snapshot
        assert store.flush() == 0
        assert _count(path) == 5 * per_snapshot
        store.write(snapshot(rich_samples, t0 + 5))
    assert _count(path) == 6 * per_snapshot  # close commits the rest


def test_writes_flush_after_the_time_threshold_of_snapshot_time(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    path = tmp_path / "t.db"
    with Store.open(path, flush_every_samples=10_000, flush_every_s=5.0) as store:
        store.write(snapshot(rich_samples, t0))
        store.write(snapshot(rich_samples, t0 + 4.999))
        assert _count(path) == 0
        store.write(snapshot(rich_samples, t0 + 5.0))  # 5 s of snapshot time since the first
        assert _count(path) == 3 * len(rich_samples)


def test_runs_record_command_and_outcome(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    with Store.open(tmp_path / "t.db") as store:
        run = store.begin_run(
            ["python", "train.py", "--lr", "3e-4"],
            started_s=t0,
            host="gpu-node-1",
            backend="smi",
            simulated=False,
            pid=4242,
        )
        store.write(snapshot(rich_samples, t0 + 1))
        (running,) = store.runs()
        assert running.ended_s is None and running.exit_code is None
        store.end_run(run, ended_s=t0 + 2, exit_code=3)
        (done,) = store.runs()
    assert done.id == run
    assert done.command == ("python", "train.py", "--lr", "3e-4")
    assert (done.pid, done.backend, done.simulated) == (4242, "smi", False)
    assert (done.started_s, done.ended_s, done.exit_code) == (t0, t0 + 2, 3)


def test_reader_sees_growing_data_while_a_writer_inserts(
    tmp_path: Path, fixtures: Path, t0: float
) -> None:
    path = tmp_path / "t.db"
    Store.open(path).close()
    batches, gpus = 30, 8
    errors: list[BaseException] = []
    seen: list[int] = []
    done = threading.Event()

    def write() -> None:
        try:
            with Store.open(path, flush_every_samples=gpus) as store:
                for k in range(batches):
                    store.write(snapshot(captures.h100_samples(fixtures, gpus, t0), t0 + k))
                    time.sleep(0.002)
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def read() -> None:
        try:
            with Store.open(path, readonly=True) as store:
                while not done.is_set():
                    seen.append(len(store.samples()))
                seen.append(len(store.samples()))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert seen == sorted(seen)  # never goes back
    assert all(n % gpus == 0 for n in seen)  # whole snapshots only: a batch is one transaction
    assert seen[-1] == batches * gpus


_WRITER = """
import sys
sys.path.insert(0, {here!r})
from pathlib import Path
import captures
from captures import snapshot
from gpuwarden.telemetry.store import Store

fixtures, path, t0 = Path({fixtures!r}), {path!r}, {t0!r}
samples = captures.h100_samples(fixtures, 8, t0)
store = Store.open(path, flush_every_samples=10**9, flush_every_s=10**9)
batch = 0
while True:
    for k in range(10):
        store.write(snapshot(samples, t0 + batch * 10 + k))
    store.flush()
    print(batch, flush=True)
    batch += 1
"""


def test_kill_9_loses_nothing_committed(tmp_path: Path, fixtures: Path, t0: float) -> None:
    path = tmp_path / "t.db"
    code = _WRITER.format(here=str(HERE), fixtures=str(fixtures), path=str(path), t0=t0)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    reported = []
    deadline = time.monotonic() + 60
    while len(reported) < 25 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        reported.append(int(line))
    os.kill(proc.pid, signal.SIGKILL)  # mid-write: it is already building the next batch
    proc.wait(timeout=30)
    for line in proc.stdout:  # committed and printed between our last read and the kill
        reported.append(int(line))
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert len(reported) >= 25, "the writer did not get going"
    with Store.open(path) as store:  # read-write: passes the page check before reopening
        assert store.check_integrity() == []
        times = {round(s.timestamp_s - t0) for s in store.samples() if s.info.index == 0}
    committed = {batch * 10 + k for batch in reported for k in range(10)}
    assert committed <= times


def test_a_value_sqlite_cannot_hold_is_refused_alone(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    # NVML reports "not available" for some 64-bit counters as 0xFFFFFFFFFFFFFFFF; a backend that
    # forgot to filter it must not poison the batch it would have joined.
    sentinel = replace(rich_samples[0], pcie_replay_total=0xFFFFFFFFFFFFFFFF)
    with Store.open(tmp_path / "t.db") as store:
        store.write(snapshot(rich_samples, t0))
        with pytest.raises(InputError) as caught:
            store.write(snapshot((sentinel,), t0 + 1))
        with pytest.raises(InputError):
            store.write(replace(snapshot(rich_samples, t0 + 3), timestamp_s=float("nan")))
        store.write(snapshot(rich_samples, t0 + 2))
    assert caught.value.reference == "store-bad-value"
    assert "pcie_replay_total" in caught.value.message
    assert _count(tmp_path / "t.db") == 2 * len(rich_samples)


@pytest.mark.parametrize("when", [float("nan"), 1e300, 1e15])  # 1e15 s: the year ~31.7 million
def test_an_event_off_the_time_axis_is_refused_alone(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float, when: float
) -> None:
    """Before, write() took it and the flush failed (NaN, 1e300: every later batch with it) or
    stored a time the reader then called damage (1e15)."""
    event = xid_event(rich_samples[0], when, 79, "Xid 79")
    with Store.open(tmp_path / "t.db") as store:
        with pytest.raises(InputError) as caught:
            store.write(snapshot(rich_samples, t0, events=(event,)))
        store.write(snapshot(rich_samples, t0 + 1))
    assert caught.value.reference == "store-bad-value"
    with Store.open(tmp_path / "t.db", readonly=True) as reader:
        assert [s.timestamp_s for s in reader.snapshots()] == [t0 + 1]
