"""Downsampling math (raw → 1 min → 1 h) and retention, checked against Python over the inputs."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwarden.telemetry.store import Store
from gpuwarden.types.telemetry import DeviceSample, DeviceState

from . import captures
from .captures import snapshot
from .conftest import xid_event

MINUTES = 3


@pytest.fixture
def recording(
    tmp_path: Path, h100_row: dict[str, str], h100_idle_row: dict[str, str], t0: float
) -> tuple[Path, float, list[DeviceSample]]:
    """3 minutes at 1 s of one H100 alternating its real load and idle readings (load twice,
    idle once), starting on a minute boundary; one reading lost the GPU."""
    start = (int(t0) // 60) * 60
    written: list[DeviceSample] = []
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        for k in range(MINUTES * 60):
            row = h100_idle_row if k % 3 == 0 else h100_row
            sample = captures.sample_from_row(row, start + k)
            if k == 75:
                sample = replace(sample, state=DeviceState.GPU_LOST, error="GPU is lost")
            written.append(sample)
            store.write(snapshot((sample,), start + k))
    return path, float(start), written


def _by_minute(samples: list[DeviceSample]) -> dict[int, list[DeviceSample]]:
    buckets: dict[int, list[DeviceSample]] = defaultdict(list)
    for s in samples:
        buckets[int(s.timestamp_s) // 60 * 60].append(s)
    return buckets


def _check_minute(got: DeviceSample, inputs: list[DeviceSample]) -> None:
    util = [s.gpu_utilization_percent for s in inputs if s.gpu_utilization_percent is not None]
    power = [s.power_draw_watts for s in inputs if s.power_draw_watts is not None]
    assert got.gpu_utilization_percent == pytest.approx(statistics.fmean(util))
    assert got.power_draw_watts == pytest.approx(statistics.fmean(power))
    assert got.memory_used_bytes == max(s.memory_used_bytes or 0 for s in inputs)
    assert got.memory_free_bytes == min(s.memory_free_bytes or 0 for s in inputs)
    assert got.pstate == inputs[-1].pstate
    assert got.power_violation_ns_total == inputs[-1].power_violation_ns_total
    assert got.ecc_mode_enabled is inputs[-1].ecc_mode_enabled
    assert got.fan_speed_percent is None  # not reported by this H100: stays None
    lost = any(s.state is DeviceState.GPU_LOST for s in inputs)
    assert got.state is (DeviceState.GPU_LOST if lost else DeviceState.OK)
    assert got.info == inputs[0].info


def test_minute_rollup_mean_peak_low_last_worst(
    recording: tuple[Path, float, list[DeviceSample]],
) -> None:
    """Written by the store as it wrote the readings: nothing else ran before this read."""
    path, _, written = recording
    with Store.open(path, readonly=True) as store:
        rolled = store.samples(resolution="1m")
        # the fast path gives the same rolled-up values (ints stay ints)
        projected = store.series(["memory_used_bytes", "power_draw_watts"], resolution="1m")
    assert projected == [
        (s.timestamp_s, s.info.uuid, s.memory_used_bytes, s.power_draw_watts) for s in rolled
    ]
    expected = _by_minute(written)
    assert [s.timestamp_s for s in rolled] == sorted(expected)
    for got in rolled:
        _check_minute(got, expected[int(got.timestamp_s)])
    # the two captures differ, so the mean is neither of them
    assert rolled[0].gpu_utilization_percent not in {
        written[0].gpu_utilization_percent,
        written[1].gpu_utilization_percent,
    }


def test_a_minute_still_filling_and_a_late_batch_are_rolled_up(
    tmp_path: Path, h100_row: dict[str, str], h100_idle_row: dict[str, str], t0: float
) -> None:
    """A bucket is there while it fills, and rows that arrive after a later minute was written
    (another writer's batch) are folded into their own minute, not left raw only."""
    start = (int(t0) // 60) * 60
    path = tmp_path / "t.db"
    early = [captures.sample_from_row(h100_row, start + k) for k in range(0, 30)]
    later = [captures.sample_from_row(h100_row, start + 60 + k) for k in range(10)]
    late = [captures.sample_from_row(h100_idle_row, start + 30 + k) for k in range(20)]
    with Store.open(path) as store:
        for sample in early:
            store.write(snapshot((sample,), sample.timestamp_s))
        store.flush()
        (filling,) = store.samples(resolution="1m")
        _check_minute(filling, early)
        for sample in later:
            store.write(snapshot((sample,), sample.timestamp_s))
    with Store.open(path) as other:  # a second writer, behind by 30 s
        for sample in late:
            other.write(snapshot((sample,), sample.timestamp_s))
    with Store.open(path, readonly=True) as store:
        first, second = store.samples(resolution="1m")
    _check_minute(first, sorted(early + late, key=lambda s: s.timestamp_s))
    _check_minute(second, later)


def test_hour_rollup_weights_minutes_by_their_readings(
    recording: tuple[Path, float, list[DeviceSample]], h100_row: dict[str, str]
) -> None:
    path, start, written = recording
    hour = int(start) // 3600 * 3600
    with Store.open(path) as store:
        # 30 more readings in the next minute, all "load", so minutes have unequal counts
        for k in range(30):
            sample = captures.sample_from_row(h100_row, start + MINUTES * 60 + k)
            written.append(sample)
            store.write(snapshot((sample,), sample.timestamp_s))
        (hourly,) = [s for s in store.samples(resolution="1h") if int(s.timestamp_s) == hour] or [
            None
        ]
    assert hourly is not None
    inputs = [s for s in written if int(s.timestamp_s) // 3600 * 3600 == hour]
    util = [s.gpu_utilization_percent for s in inputs if s.gpu_utilization_percent is not None]
    assert hourly.gpu_utilization_percent == pytest.approx(statistics.fmean(util))
    assert hourly.memory_used_bytes == max(s.memory_used_bytes or 0 for s in inputs)
    assert hourly.state is DeviceState.GPU_LOST
    assert hourly.pstate == inputs[-1].pstate


def test_prune_keeps_each_tier_for_its_time_and_rolls_up_first(
    recording: tuple[Path, float, list[DeviceSample]], xid_lines: dict[int, str]
) -> None:
    path, start, written = recording
    end = start + MINUTES * 60
    with Store.open(path) as store:
        store.write(
            snapshot((), start + 1, events=(xid_event(written[1], start + 1, 79, xid_lines[79]),))
        )
        deleted = store.prune(end, raw_keep_s=60, minute_keep_s=3600, hour_keep_s=86400)
        raw = store.samples()
        minutes = store.samples(resolution="1m")
        events = store.events()
    assert min(s.timestamp_s for s in raw) == end - 60
    assert len(raw) == 60
    assert deleted >= len(written) - 60
    assert len(minutes) == MINUTES  # rolled up before the raw rows went
    assert len(events) == 1  # events live as long as the longest tier


def test_a_late_row_does_not_rebuild_a_pruned_minute(
    recording: tuple[Path, float, list[DeviceSample]], h100_idle_row: dict[str, str]
) -> None:
    """After prune deleted a minute's raw rows, a row arriving for that minute must not
    replace its rollup with one computed from that row alone."""
    path, start, _ = recording
    with Store.open(path) as store:
        (before, *_) = store.samples(resolution="1m")
        store.prune(start + MINUTES * 60, raw_keep_s=60, minute_keep_s=3600, hour_keep_s=86400)
        late = captures.sample_from_row(h100_idle_row, start + 5.5)
        store.write(snapshot((late,), late.timestamp_s))
        (after, *_) = store.samples(resolution="1m")
    assert after == before


def test_prune_drops_old_rollups_and_events(
    recording: tuple[Path, float, list[DeviceSample]], xid_lines: dict[int, str]
) -> None:
    path, start, written = recording
    with Store.open(path) as store:
        store.write(
            snapshot((), start + 1, events=(xid_event(written[1], start + 1, 79, xid_lines[79]),))
        )
        now = start + 10 * 86400
        store.prune(now, raw_keep_s=60, minute_keep_s=3600, hour_keep_s=86400)
        assert store.samples() == []
        assert store.samples(resolution="1m") == []
        assert store.samples(resolution="1h") == []
        assert store.events() == []
