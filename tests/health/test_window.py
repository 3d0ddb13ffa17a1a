"""Window arithmetic: per-GPU series, evidence minimums, trailing stretches, counter resets."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuwarden.health.window import (
    build_window,
    correlation,
    counter_increase,
    median,
    percentile,
    shortfall,
    trailing,
)
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.telemetry import DeviceSample, DeviceState, Snapshot

H100_DMON = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.dmon.txt"
H100_Q = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"


def _series(fixtures: Path) -> tuple[Snapshot, ...]:
    backend = open_backend("smi", str(fixtures / H100_DMON))
    return backend.snapshots()  # type: ignore[attr-defined, no-any-return]


def _sample(fixtures: Path) -> DeviceSample:
    return open_backend("smi", str(fixtures / H100_Q)).read().samples[0]


def test_a_dmon_log_is_one_series_per_gpu_in_time_order(fixtures: Path) -> None:
    snapshots = _series(fixtures)
    window = build_window(list(reversed(snapshots)))  # order given does not matter
    assert len(window) == 5 and window.span_s == pytest.approx(4.0)
    (series,) = window.series
    # the capture's pwr column: 631, 634, 633, 634, 636 W
    assert [s.power_draw_watts for s in series.samples] == [631, 634, 633, 634, 636]
    assert series.span_s == pytest.approx(4.0)


def test_a_lost_gpu_and_mig_instances_have_no_series(fixtures: Path) -> None:
    sample = _sample(fixtures)
    second = dataclasses.replace(sample.info, index=1, uuid="GPU-b")
    other = dataclasses.replace(sample, info=second)
    mig = dataclasses.replace(
        sample, info=dataclasses.replace(sample.info, mig_parent_uuid=sample.info.uuid)
    )

    def snap(t: float, second: DeviceSample) -> Snapshot:
        samples = (dataclasses.replace(sample, timestamp_s=t), second, mig)
        return Snapshot(t, "h", "smi", False, samples)

    lost = dataclasses.replace(other, state=DeviceState.GPU_LOST)
    window = build_window([snap(0.0, other), snap(1.0, other), snap(2.0, lost)])
    assert [s.key for s in window.series] == [sample.info.uuid]


def test_shortfall_says_what_is_missing() -> None:
    assert shortfall(5, 10.0, 5, 10.0) is None
    assert shortfall(5, 4.0, 5, 10.0) == (
        "not enough data (5 readings over 4 s; needs ≥ 5 over ≥ 10 s)"
    )
    assert shortfall(1, 0.0, 2, 0.0) == "not enough data (1 reading over 0 s; needs ≥ 2 over ≥ 0 s)"


def test_trailing_stops_at_the_first_false_or_unknown_reading(fixtures: Path) -> None:
    samples = _series(fixtures)
    readings = [s.samples[0] for s in samples]  # temperatures 63, 63, 64, 64, 65 °C
    hot = trailing(readings, lambda s: (s.temperature_gpu_celsius or 0) >= 64)
    assert [s.temperature_gpu_celsius for s in hot] == [64, 64, 65]
    unknown = trailing(readings, lambda s: None)
    assert unknown == ()


def test_counter_increase_skips_a_reset(fixtures: Path) -> None:
    sample = _sample(fixtures)
    values = [10, 12, 15, 0, 4, None, 9]  # driver reload after 15; one reading without the field
    readings = [
        dataclasses.replace(sample, timestamp_s=float(t), ecc_errors_corrected_volatile=v)
        for t, v in enumerate(values)
    ]
    grew = counter_increase(readings, lambda s: s.ecc_errors_corrected_volatile)
    assert grew is not None
    assert grew.amount == (12 - 10) + (15 - 12) + (4 - 0) + (9 - 4)
    assert (grew.first_s, grew.last_s, grew.span_s) == (0.0, 6.0, 6.0)
    assert counter_increase(readings[:1], lambda s: s.ecc_errors_corrected_volatile) is None


def test_statistics() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert percentile([float(v) for v in range(11)], 0.9) == 9.0
    assert correlation([1.0, 2.0, 3.0], [2.0, 4.0, 6.5]) == pytest.approx(0.9986, abs=1e-3)
    assert correlation([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None
