"""Fast reads: columns() per device, count(), the newest ``last`` samples, the slot builder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuwarden.errors import InputError
from gpuwarden.telemetry.store import DeviceSeries, Store
from gpuwarden.telemetry.store import rows as rows_module
from gpuwarden.types.telemetry import DeviceSample, DeviceState

from .captures import snapshot

# A float, an integer, a bool, text, the device state and an integer that rollups average.
FIELDS = [
    "power_draw_watts",
    "memory_used_bytes",
    "ecc_mode_enabled",
    "pstate",
    "state",
    "gpu_utilization_percent",
]


def _expected(samples: list[DeviceSample]) -> dict[str, DeviceSeries]:
    """What columns() must return, projected from whole DeviceSamples."""
    out: dict[str, DeviceSeries] = {}
    for uuid in dict.fromkeys(s.info.uuid for s in samples):
        mine = [s for s in samples if s.info.uuid == uuid]
        out[uuid] = DeviceSeries(
            mine[0].info,
            tuple(s.timestamp_s for s in mine),
            {f: tuple(getattr(s, f) for s in mine) for f in FIELDS},
        )
    return out


def _assert_same(got: tuple[DeviceSeries, ...], want: dict[str, DeviceSeries]) -> None:
    assert [s.info.uuid for s in got] == sorted(want, key=lambda u: want[u].info.index)
    for series in got:
        expected = want[series.info.uuid]
        assert series.info == expected.info
        assert series.timestamps_s == expected.timestamps_s
        assert dict(series.values) == dict(expected.values)
        for field in FIELDS:  # 0 stays 0 (int), True stays a bool, state a DeviceState
            got_types = [type(v) for v in series.values[field]]
            assert got_types == [type(v) for v in expected.values[field]], field


@pytest.fixture
def uneven(tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float) -> Path:
    """Three real devices over 90 s; the MIG H100 misses every 7th snapshot, the RTX falls off
    the bus at 40 s: not every snapshot holds the same devices."""
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        for k in range(90):
            samples = list(rich_samples)
            if k % 7 == 3:
                samples.pop(1)
            if k == 40:
                samples[-1] = dataclasses.replace(samples[-1], state=DeviceState.GPU_LOST)
            store.write(snapshot(tuple(samples), t0 + k))
    return path


def test_columns_match_the_samples_they_project(uneven: Path, t0: float) -> None:
    with Store.open(uneven, readonly=True) as store:
        samples = store.samples()
        _assert_same(store.columns(FIELDS), _expected(samples))
        later = [s for s in samples if s.timestamp_s >= t0 + 30]
        _assert_same(store.columns(FIELDS, since_s=t0 + 30), _expected(later))
        one = samples[1].info.uuid
        _assert_same(
            store.columns(FIELDS, uuids=[one]),
            _expected([s for s in samples if s.info.uuid == one]),
        )
        assert any(s.state is DeviceState.GPU_LOST for s in samples)
        for resolution in ("1m", "1h"):
            rolled = store.samples(resolution=resolution)
            assert rolled
            _assert_same(store.columns(FIELDS, resolution=resolution), _expected(rolled))


def test_columns_of_a_regular_recording_and_empty_ranges(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    with Store.open(tmp_path / "t.db") as store:
        for k in range(20):  # every snapshot the same three devices: the sliced path
            store.write(snapshot(rich_samples, t0 + k))
        samples = store.samples()
        _assert_same(store.columns(FIELDS), _expected(samples))
        assert store.columns(FIELDS, since_s=t0 + 100) == ()
        assert store.columns(FIELDS, uuids=["GPU-not-recorded"]) == ()
        with pytest.raises(InputError) as caught:
            store.columns(["processes"], since_s=t0 + 100)
    assert caught.value.reference == "unknown-field"


def test_count_and_last_read_the_newest_samples(uneven: Path, t0: float) -> None:
    with Store.open(uneven, readonly=True) as store:
        samples = store.samples()
        assert store.count() == len(samples)
        assert store.count(since_s=t0 + 30) == sum(s.timestamp_s >= t0 + 30 for s in samples)
        assert store.count(resolution="1m") == len(store.samples(resolution="1m"))
        assert store.count(uuids=["GPU-not-recorded"]) == 0
        for last in (1, 2, 5, 100, len(samples), len(samples) + 3):
            got = [s.sample for s in store.iter_stored_samples(last=last)]
            assert got == samples[-last:]
        assert list(store.iter_stored_samples(last=0)) == []
        with pytest.raises(ValueError, match="last=-1"):
            list(store.iter_stored_samples(last=-1))
        one = samples[0].info.uuid
        mine = [s for s in samples if s.info.uuid == one and s.timestamp_s <= t0 + 50]
        got = [s.sample for s in store.iter_stored_samples(until_s=t0 + 50, uuids=[one], last=4)]
        assert got == mine[-4:]


def test_slot_builder_equals_the_constructor(
    rich_samples: tuple[DeviceSample, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    for sample in rich_samples:
        values = [getattr(sample, f.name) for f in dataclasses.fields(DeviceSample)]
        built = rows_module.build_sample(values)
        assert type(built) is DeviceSample
        assert built == sample and hash(built.info) == hash(sample.info)
        monkeypatch.setattr(rows_module, "_FAST_BUILD", False)
        assert rows_module.build_sample(values) == sample
        monkeypatch.setattr(rows_module, "_FAST_BUILD", True)
    assert rows_module._FAST_BUILD  # DeviceSample has no __post_init__ the builder would skip
