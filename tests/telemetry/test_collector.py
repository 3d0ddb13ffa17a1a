"""Collector: counters → rates, a lost device, a failing backend, bounded memory, the loop."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.telemetry.collector import Collector, counter_rate, derive_rates
from gpuwarden.telemetry.sim import SCENARIOS, open_sim
from gpuwarden.telemetry.sim.hardware import sim_gpu_model
from gpuwarden.types.telemetry import (
    DeviceInfo,
    DeviceSample,
    DeviceState,
    EventKind,
    NvLinkSample,
    Snapshot,
)

T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _collector(scenario: str, clock: Clock, **kw: object) -> Collector:
    backend = open_sim(scenario, seed=3, clock=clock)
    return Collector(backend, interval_s=1.0, clock=clock, sleep=clock.sleep, **kw)  # type: ignore[arg-type]


def _poll_at(collector: Collector, clock: Clock, t: float) -> Snapshot:
    clock.now = T0 + t
    return collector.poll()


def test_first_reading_has_no_rates_the_second_has_them() -> None:
    clock = Clock()
    collector = _collector("healthy-training", clock)
    first = _poll_at(collector, clock, 0.0)
    assert all(s.power_average_watts is None for s in first.samples)
    assert all(s.nvlink_tx_bytes_per_second is None for s in first.samples)
    second = _poll_at(collector, clock, 5.0)
    for before, after in zip(first.samples, second.samples, strict=True):
        expected = (after.energy_consumed_joules - before.energy_consumed_joules) / 5.0
        assert after.power_average_watts == pytest.approx(expected)
        # the sim draws steady power: the counter's average matches the gauge
        assert after.power_average_watts == pytest.approx(after.power_draw_watts, rel=0.02)
        assert after.power_throttled_ratio == 0.0 and after.thermal_throttled_ratio == 0.0


def test_nvlink_rate_from_per_link_byte_counters() -> None:
    clock = Clock()
    collector = _collector("healthy-training", clock)
    _poll_at(collector, clock, 0.0)
    sample = _poll_at(collector, clock, 4.0).samples[0]
    model = sim_gpu_model(SCENARIOS["healthy-training"].gpu_key)
    per_link = SCENARIOS["healthy-training"].workload.nvlink_gb_per_s_per_link * 1e9
    assert sample.nvlink_tx_bytes_per_second == pytest.approx(
        model.nvlink_count * per_link, rel=1e-3
    )
    assert sample.nvlink_rx_bytes_per_second == pytest.approx(
        model.nvlink_count * per_link, rel=1e-3
    )


def test_throttled_shares_from_violation_counters() -> None:
    clock = Clock()
    capped = _collector("power-capping", clock)
    _poll_at(capped, clock, 0.0)
    s = _poll_at(capped, clock, 10.0).samples[0]
    assert s.power_throttled_ratio == pytest.approx(1.0, abs=1e-6)
    assert s.thermal_throttled_ratio == 0.0
    hot_clock = Clock()
    hot = _collector("thermal-throttling", hot_clock)
    _poll_at(hot, hot_clock, 0.0)
    assert _poll_at(hot, hot_clock, 20.0).samples[0].thermal_throttled_ratio == 0.0
    _poll_at(hot, hot_clock, 70.0)  # throttled from ~25 s on
    assert _poll_at(hot, hot_clock, 80.0).samples[0].thermal_throttled_ratio == pytest.approx(
        1.0, abs=1e-6
    )


def _dcgm_value(text: str, metric: str) -> float:
    match = re.search(rf"^{metric}{{[^}}]*}} ([-\d.e+]+)$", text, re.M)
    assert match, metric
    return float(match.group(1))


@pytest.mark.parametrize(
    "name",
    [
        "datadog-integrations-core__tesla-t4__metrics.prom",
        "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom",
    ],
)
def test_rates_on_real_dcgm_counter_values(fixtures: Path, name: str) -> None:
    """Real counters (mJ since boot) and power gauges from dcgm-exporter scrapes. No fixture has
    two scrapes of one GPU, so the second reading is the first plus the scraped power for 15 s;
    a lower second reading (driver reload) must give None, not a negative power."""
    text = (fixtures / "dcgm" / name).read_text()
    joules = _dcgm_value(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") / 1000.0
    watts = _dcgm_value(text, "DCGM_FI_DEV_POWER_USAGE")
    info = DeviceInfo(index=0, uuid="GPU-x", name="real counter")
    first = DeviceSample(info=info, timestamp_s=T0, energy_consumed_joules=joules)
    later = DeviceSample(info=info, timestamp_s=T0 + 15, energy_consumed_joules=joules + watts * 15)
    assert derive_rates(first, later).power_average_watts == pytest.approx(watts)
    reset = dataclasses.replace(later, energy_consumed_joules=watts * 15)
    assert derive_rates(first, reset).power_average_watts is None
    assert derive_rates(None, first).power_average_watts is None


def test_counter_rate_edge_cases() -> None:
    assert counter_rate(10, 30, 2.0) == 10.0
    assert counter_rate(30, 10, 2.0) is None  # reset
    assert counter_rate(10, 30, 0.0) is None  # no time passed
    assert counter_rate(None, 30, 1.0) is None


def test_a_backend_rate_is_never_overwritten() -> None:
    info = DeviceInfo(index=0, uuid="GPU-x", name="x")
    links = (NvLinkSample(link=0, active=True, tx_bytes_total=0),)
    a = DeviceSample(info=info, timestamp_s=0.0, nvlinks=links, nvlink_tx_bytes_per_second=5.0)
    b = dataclasses.replace(
        a, timestamp_s=1.0, nvlinks=(NvLinkSample(link=0, active=True, tx_bytes_total=100),)
    )
    assert derive_rates(a, b).nvlink_tx_bytes_per_second == 5.0


def test_nvlink_counter_reset_on_one_link_gives_none() -> None:
    info = DeviceInfo(index=0, uuid="GPU-x", name="x")
    a = DeviceSample(
        info=info,
        timestamp_s=0.0,
        nvlinks=(
            NvLinkSample(link=0, active=True, tx_bytes_total=100),
            NvLinkSample(link=1, active=True, tx_bytes_total=100),
        ),
    )
    b = dataclasses.replace(
        a,
        timestamp_s=1.0,
        nvlinks=(
            NvLinkSample(link=0, active=True, tx_bytes_total=300),
            NvLinkSample(link=1, active=True, tx_bytes_total=5),
        ),
    )
    assert derive_rates(a, b).nvlink_tx_bytes_per_second is None
    c = dataclasses.replace(b, nvlinks=(NvLinkSample(link=0, active=True, tx_bytes_total=300),))
    assert derive_rates(a, c).nvlink_tx_bytes_per_second == 200.0


def test_pcie_rate_from_byte_totals_in_extra() -> None:
    info = DeviceInfo(index=0, uuid="GPU-x", name="x")
    a = DeviceSample(info=info, timestamp_s=0.0, extra={"pcie_tx_bytes_total": 1000.0})
    b = DeviceSample(info=info, timestamp_s=2.0, extra={"pcie_tx_bytes_total": 5000.0})
    derived = derive_rates(a, b)
    assert derived.pcie_tx_bytes_per_second == 2000.0
    assert derived.pcie_rx_bytes_per_second is None


def test_lost_gpu_from_the_backend_others_keep_rates() -> None:
    clock = Clock()
    collector = _collector("gpu-fallen-off-bus", clock)
    _poll_at(collector, clock, 20.0)
    snap = _poll_at(collector, clock, 31.0)
    lost = [s for s in snap.samples if s.state is DeviceState.GPU_LOST]
    assert len(lost) == 1
    ok = [s for s in snap.samples if s.state is DeviceState.OK]
    assert len(ok) == 7 and all(s.power_average_watts is not None for s in ok)
    assert [e.kind for e in snap.events].count(EventKind.GPU_LOST) == 1  # not duplicated


class _Dropping:
    """A sim whose backend stops listing GPU ``drop`` after ``after`` reads (as nvidia-smi does
    when a GPU falls off the bus), or raises on read number ``fail_at``."""

    name = "sim"
    simulated = True

    def __init__(self, after: int = 10**9, drop: int = 1, fail_at: int | None = None) -> None:
        self.reads = 0
        self.inner = open_sim("healthy-training", gpus=3, seed=1, clock=lambda: T0 + self.reads)
        self.after, self.drop, self.fail_at = after, drop, fail_at

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self.inner.devices()

    def read(self) -> Snapshot:
        self.reads += 1
        if self.fail_at is not None and self.reads == self.fail_at:
            raise EnvironmentProblemError("driver went away", reference="nvml-driver-gone")
        snap = self.inner.read()
        if self.reads > self.after:
            kept = tuple(s for s in snap.samples if s.info.index != self.drop)
            snap = dataclasses.replace(snap, samples=kept)
        return snap

    def close(self) -> None:
        return None


def test_device_missing_from_the_backend_becomes_gpu_lost_once() -> None:
    collector = Collector(_Dropping(after=2), interval_s=1.0)
    snaps = [collector.poll() for _ in range(5)]
    assert all(len(s.samples) == 3 for s in snaps)
    for snap in snaps[2:]:
        states = {s.info.index: s.state for s in snap.samples}
        assert states == {0: DeviceState.OK, 1: DeviceState.GPU_LOST, 2: DeviceState.OK}
    lost_events = [e for s in snaps for e in s.events if e.kind is EventKind.GPU_LOST]
    assert len(lost_events) == 1 and lost_events[0].index == 1


def test_backend_error_mid_run_is_an_event_and_collection_goes_on() -> None:
    collector = Collector(_Dropping(fail_at=3), interval_s=1.0, wall_clock=lambda: 42.0)
    snaps = [collector.poll() for _ in range(5)]
    failed = snaps[2]
    assert failed.samples == () and failed.timestamp_s == 42.0
    assert [e.kind for e in failed.events] == [EventKind.BACKEND_ERROR]
    assert "driver went away" in failed.events[0].message
    assert len(snaps[3].samples) == 3 and len(snaps[4].samples) == 3


def test_backend_error_on_the_first_read_propagates() -> None:
    collector = Collector(_Dropping(fail_at=1), interval_s=1.0)
    with pytest.raises(EnvironmentProblemError):
        collector.poll()


def test_history_is_a_bounded_ring_per_device() -> None:
    clock = Clock()
    collector = _collector("healthy-training", clock, max_samples=5)
    snaps = [_poll_at(collector, clock, float(t)) for t in range(20)]
    assert len(collector.uuids()) == 8
    for uuid in collector.uuids():
        history = collector.history(uuid)
        assert len(history) == 5
        assert [s.timestamp_s for s in history] == [T0 + t for t in range(15, 20)]
    assert snaps[-1].samples[0] in collector.history(snaps[-1].samples[0].info.uuid)
    assert len(collector.events) <= 5


def test_run_polls_on_the_interval_grid_until_told_to_stop() -> None:
    clock = Clock()
    backend = open_sim("healthy-training", gpus=2, seed=3, clock=clock)
    collector = Collector(backend, interval_s=0.5, clock=clock, sleep=clock.sleep)
    seen: list[Snapshot] = []
    count = collector.run(until=lambda: len(seen) >= 6, sink=seen.append)
    assert count == 6
    assert [s.timestamp_s - T0 for s in seen] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert clock.slept == [0.5] * 5  # no sleep after the last poll
    assert seen[-1].samples[0].power_average_watts is not None


def test_run_after_a_start_up_poll_continues_its_grid() -> None:
    """`record` polls once to fail fast; the loop must not read again a few ms later (rates over
    a tiny interval), but one interval after that first reading."""
    clock = Clock()
    backend = open_sim("healthy-training", gpus=1, seed=3, clock=clock)
    collector = Collector(backend, interval_s=0.5, clock=clock, sleep=clock.sleep)
    first = collector.poll()
    clock.now += 0.01  # the job starts in between
    seen: list[Snapshot] = [first]
    collector.run(until=lambda: len(seen) >= 4, sink=seen.append)
    assert [round(s.timestamp_s - T0, 6) for s in seen] == [0.0, 0.5, 1.0, 1.5]
    assert clock.slept[0] == pytest.approx(0.49)


def test_run_skips_missed_ticks_after_a_slow_poll() -> None:
    clock = Clock()

    class Slow:
        name, simulated = "sim", True

        def __init__(self) -> None:
            self.inner = open_sim("fake-load", clock=clock)
            self.reads = 0

        def devices(self) -> tuple[DeviceInfo, ...]:
            return self.inner.devices()

        def read(self) -> Snapshot:
            self.reads += 1
            snap = self.inner.read()
            clock.now += 2.5 if self.reads == 2 else 0.1  # the second read takes 2.5 s
            return snap

        def close(self) -> None:
            return None

    collector = Collector(Slow(), interval_s=1.0, clock=clock, sleep=clock.sleep)
    seen: list[Snapshot] = []
    collector.run(until=lambda: len(seen) >= 4, sink=seen.append)
    starts = [round(s.timestamp_s - T0, 6) for s in seen]
    assert starts == [0.0, 1.0, 4.0, 5.0]


def test_rates_over_the_fake_nvml_built_from_the_h100_load_capture(fixtures: Path) -> None:
    """NVML energy and violation counters of the fake driver (tests/fakes, built from the real
    H100 capture) through the real NVML backend: the average power over 10 s is the captured
    draw, and nothing is throttled (the capture's clock-event reasons are all Not Active)."""
    from gpuwarden.telemetry.nvml.backend import NvmlBackend
    from tests.fakes.fake_pynvml import fake_host

    host = fake_host(fixtures, "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01")
    clock = host.clock
    backend = NvmlBackend(host.module, clock=clock)
    collector = Collector(backend, interval_s=1.0, clock=clock, sleep=clock.advance)
    try:
        first = collector.poll().samples[0]
        clock.advance(10.0)
        second = collector.poll().samples[0]
    finally:
        backend.close()
    assert first.power_average_watts is None
    assert second.energy_consumed_joules > first.energy_consumed_joules
    assert second.power_average_watts == pytest.approx(second.power_draw_watts, rel=1e-3)
    if second.power_violation_ns_total is not None:
        assert second.power_throttled_ratio == 0.0


_counter = st.one_of(st.none(), st.integers(min_value=0, max_value=2**62))


@settings(max_examples=200, deadline=None)
@given(
    a=st.tuples(_counter, _counter, _counter),
    b=st.tuples(_counter, _counter, _counter),
    dt=st.floats(min_value=-5, max_value=1e6, allow_nan=False),
)
def test_derived_rates_are_never_negative_and_shares_never_exceed_one(
    a: tuple[int | None, ...], b: tuple[int | None, ...], dt: float
) -> None:
    info = DeviceInfo(index=0, uuid="GPU-h", name="h")

    def sample(t: float, values: tuple[int | None, ...]) -> DeviceSample:
        energy, power_ns, thermal_ns = values
        return DeviceSample(
            info=info,
            timestamp_s=t,
            energy_consumed_joules=None if energy is None else energy / 1000,
            power_violation_ns_total=power_ns,
            thermal_violation_ns_total=thermal_ns,
            nvlinks=(NvLinkSample(link=0, active=True, tx_bytes_total=energy),),
        )

    derived = derive_rates(sample(T0, a), sample(T0 + dt, b))
    for rate in (derived.power_average_watts, derived.nvlink_tx_bytes_per_second):
        assert rate is None or rate >= 0
    for share in (derived.power_throttled_ratio, derived.thermal_throttled_ratio):
        assert share is None or 0 <= share <= 1
    if dt <= 0:
        assert derived.power_average_watts is None


class _Relayout:
    """The real A100 MIG dcgm-exporter scrape, whose MIG instance series vanish after the first
    read (the GPU was re-partitioned) while the GPU's own series stays."""

    name = "dcgm"
    simulated = False

    def __init__(self, path: Path) -> None:
        from gpuwarden.telemetry.dcgm import open_dcgm

        self.inner = open_dcgm(str(path))
        self.reads = 0

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self.inner.devices()

    def read(self) -> Snapshot:
        self.reads += 1
        snap = self.inner.read()
        if self.reads > 1:
            kept = tuple(s for s in snap.samples if s.info.mig_parent_uuid is None)
            snap = dataclasses.replace(snap, samples=kept)
        return snap

    def close(self) -> None:
        return None


def test_a_mig_instance_that_disappears_is_forgotten_not_lost(fixtures: Path) -> None:
    path = (
        fixtures / "dcgm" / "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
    )
    backend = _Relayout(path)
    collector = Collector(backend, interval_s=1.0)
    first = collector.poll()
    assert any(s.info.mig_parent_uuid for s in first.samples)  # the capture has MIG instances
    later = [collector.poll() for _ in range(3)]
    for snap in later:
        assert all(s.state is DeviceState.OK for s in snap.samples)
        assert not any(e.kind is EventKind.GPU_LOST for e in snap.events)
