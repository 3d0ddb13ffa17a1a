"""`record --interval 600 -- job`: the job ended and the recording went on sleeping the rest of
the interval (20 s after a 0.2 s job with --interval 20; an hour with 3600). The loop now looks
at its stop condition at least once a second while it waits; a wait within a second is still
one sleep (the grid tests of test_collector.py hold)."""

from __future__ import annotations

from gpuwarden.telemetry.collector import Collector
from gpuwarden.telemetry.sim import open_sim
from gpuwarden.types.telemetry import Snapshot
from tests.telemetry.test_collector import T0, Clock

JOB_SECONDS = 2.5


def test_a_job_that_ends_inside_a_long_interval_ends_the_recording_within_a_second() -> None:
    clock = Clock()
    backend = open_sim("healthy-training", gpus=1, seed=3, clock=clock)
    collector = Collector(backend, interval_s=600.0, clock=clock, sleep=clock.sleep)
    seen: list[Snapshot] = []
    polls = collector.run(until=lambda: clock.now >= T0 + JOB_SECONDS, sink=seen.append)
    assert polls == 1 and [s.timestamp_s for s in seen] == [T0]
    assert clock.now - T0 <= JOB_SECONDS + 1.0  # before: 600 s
    assert max(clock.slept) <= 1.0


def test_a_long_interval_still_reads_on_its_grid() -> None:
    clock = Clock()
    backend = open_sim("healthy-training", gpus=1, seed=3, clock=clock)
    collector = Collector(backend, interval_s=30.0, clock=clock, sleep=clock.sleep)
    seen: list[Snapshot] = []
    collector.run(until=lambda: len(seen) >= 3, sink=seen.append)
    assert [s.timestamp_s - T0 for s in seen] == [0.0, 30.0, 60.0]
    assert sum(clock.slept) == 60.0
