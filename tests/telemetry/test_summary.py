"""Per-GPU summary of a recording, checked against the readings it is made from."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.report.record import summary_record
from gpuwarden.telemetry.collector import Collector
from gpuwarden.telemetry.dcgm import open_dcgm
from gpuwarden.telemetry.sim import open_sim
from gpuwarden.telemetry.summary import Distribution, percentile, summarize
from gpuwarden.types.telemetry import (
    DeviceEvent,
    DeviceInfo,
    DeviceSample,
    DeviceState,
    EventKind,
    Snapshot,
)

T0 = 1_800_000_000.0


def _record(scenario: str, seconds: int, *, step: float = 1.0, **kw: object) -> list[Snapshot]:
    now = [T0]
    backend = open_sim(scenario, seed=5, clock=lambda: now[0], **kw)  # type: ignore[arg-type]
    collector = Collector(backend, interval_s=step, clock=lambda: now[0])
    out = []
    for k in range(int(seconds / step) + 1):
        now[0] = T0 + k * step
        out.append(collector.poll())
    return out


def _flat(snaps: list[Snapshot]) -> tuple[list[DeviceSample], list[DeviceEvent]]:
    return [s for x in snaps for s in x.samples], [e for x in snaps for e in x.events]


def test_percentile_matches_numpy() -> None:
    values = [s.gpu_utilization_percent for s in _flat(_record("data-starvation", 30, step=0.5))[0]]
    for q in (0.0, 0.5, 0.95, 1.0):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)))
    assert percentile([], 0.95) is None


def test_healthy_training_summary_matches_its_readings() -> None:
    samples, events = _flat(_record("healthy-training", 60))
    summaries = summarize(samples, events, price_per_kwh=0.15)
    assert [s.index for s in summaries] == list(range(8))
    for summary in summaries:
        mine = [s for s in samples if s.info.uuid == summary.uuid]
        util = [s.gpu_utilization_percent for s in mine]
        sm = [s.sm_active_ratio for s in mine]
        assert summary.samples == 61 and summary.duration_s == 60.0
        assert summary.gpu_utilization_mean_percent == pytest.approx(np.mean(util))
        assert summary.gpu_utilization_p95_percent == pytest.approx(np.percentile(util, 95))
        assert summary.sm_active_mean_ratio == pytest.approx(np.mean(sm))
        assert summary.sm_active_p95_ratio == pytest.approx(np.percentile(sm, 95))
        assert summary.peak_memory_used_bytes == max(s.memory_used_bytes for s in mine)
        joules = mine[-1].energy_consumed_joules - mine[0].energy_consumed_joules
        assert summary.energy_basis == "energy-counter"
        assert summary.energy_wh == pytest.approx(joules / 3600)
        assert summary.energy_cost == pytest.approx(joules / 3.6e6 * 0.15)
        # 60 s at the mean draw, independently of the counter
        assert summary.energy_wh == pytest.approx(
            np.mean([s.power_draw_watts for s in mine]) * 60 / 3600, rel=0.02
        )
        assert summary.throttled_seconds_by_reason == {}
        assert summary.xid_events == () and not summary.lost


def test_energy_from_power_when_there_is_no_counter() -> None:
    info = DeviceInfo(index=0, uuid="GPU-a", name="no counter")
    watts = [300.0, 300.0, 360.0]
    samples = [
        DeviceSample(info=info, timestamp_s=T0 + 5 * k, power_draw_watts=w)
        for k, w in enumerate(watts)
    ]
    (summary,) = summarize(samples, [], price_per_kwh=0.30)
    trapezoid = (300 + 300) / 2 * 5 + (300 + 360) / 2 * 5
    assert summary.energy_basis == "power-integral"
    assert summary.energy_wh == pytest.approx(trapezoid / 3600)
    assert summary.energy_cost == pytest.approx(trapezoid / 3.6e6 * 0.30)
    assert summary.sm_active_mean_ratio is None and summary.sm_active_p95_ratio is None
    assert summary.gpu_utilization_mean_percent is None


def test_counter_reset_in_the_middle_is_not_negative_energy() -> None:
    info = DeviceInfo(index=0, uuid="GPU-a", name="reset")
    energies = [1000.0, 1600.0, 50.0, 650.0]  # driver reload between the 2nd and 3rd reading
    samples = [
        DeviceSample(info=info, timestamp_s=T0 + k, energy_consumed_joules=e)
        for k, e in enumerate(energies)
    ]
    (summary,) = summarize(samples, [], price_per_kwh=0.15)
    assert summary.energy_wh == pytest.approx((600 + 600) / 3600)


def test_power_cap_time_from_reasons_and_from_the_counter() -> None:
    samples, events = _flat(_record("power-capping", 20))
    (summary,) = summarize(samples, events, price_per_kwh=0.15)
    assert summary.throttled_seconds_by_reason == {"sw_power_cap": pytest.approx(20.0)}
    assert summary.power_violation_seconds == pytest.approx(20.0, rel=1e-6)
    assert summary.thermal_violation_seconds == 0.0


def test_thermal_throttling_time_by_reason() -> None:
    samples, events = _flat(_record("thermal-throttling", 90))
    (summary,) = summarize(samples, events, price_per_kwh=0.15)
    reasons = summary.throttled_seconds_by_reason
    flagged = sum(1 for s in samples[:-1] if "sw_thermal_slowdown" in s.clock_event_reasons)
    assert reasons["sw_thermal_slowdown"] == pytest.approx(float(flagged))
    assert 50 < reasons["sw_thermal_slowdown"] < 70
    assert summary.thermal_violation_seconds == pytest.approx(
        reasons["sw_thermal_slowdown"], abs=1.0
    )
    assert "gpu_idle" not in reasons


def test_xid_ecc_and_lost_gpus() -> None:
    samples, events = _flat(_record("ecc-double-bit", 40, gpus=2))
    first, second = summarize(samples, events, price_per_kwh=0.15)
    assert [e.code for e in first.xid_events] == [48]
    assert [e.kind for e in first.ecc_events] == [EventKind.ECC_UNCORRECTED]
    assert first.ecc_uncorrected_increase == 1 and second.ecc_uncorrected_increase == 0
    assert second.xid_events == ()

    samples, events = _flat(_record("gpu-fallen-off-bus", 40))
    summaries = summarize(samples, events, price_per_kwh=0.15)
    lost = [s for s in summaries if s.lost]
    assert [s.index for s in lost] == [3]
    assert lost[0].lost_at_s == pytest.approx(T0 + 30.0)
    assert [e.code for e in lost[0].xid_events] == [79]
    # energy of the lost GPU stops at its last good reading
    before = [s for s in samples if s.info.index == 3 and s.timestamp_s < T0 + 30]
    joules = before[-1].energy_consumed_joules - before[0].energy_consumed_joules
    assert lost[0].energy_wh == pytest.approx(joules / 3600)
    assert lost[0].samples == 41


def test_order_of_input_does_not_matter() -> None:
    samples, events = _flat(_record("straggler", 10))
    forward = summarize(samples, events, price_per_kwh=0.15)
    backward = summarize(list(reversed(samples)), events, price_per_kwh=0.15)
    assert forward == backward


def test_sm_active_none_when_a_backend_never_reports_it() -> None:
    samples, _ = _flat(_record("healthy-training", 3))
    stripped = [dataclasses.replace(s, sm_active_ratio=None) for s in samples]
    for summary in summarize(stripped, [], price_per_kwh=0.15):
        assert summary.sm_active_mean_ratio is None and summary.sm_active_p95_ratio is None
        assert summary.gpu_utilization_mean_percent is not None


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=1e4, allow_nan=False),  # seconds after T0
            st.one_of(st.none(), st.floats(min_value=0, max_value=1e9, allow_nan=False)),
            st.one_of(st.none(), st.floats(min_value=0, max_value=2000, allow_nan=False)),
            st.sampled_from([(), ("sw_power_cap",), ("gpu_idle",), None]),
            st.booleans(),  # lost
        ),
        min_size=1,
        max_size=30,
    )
)
def test_summary_of_any_readings_is_sane(rows: list[tuple]) -> None:
    info = DeviceInfo(index=0, uuid="GPU-h", name="h")
    samples = [
        DeviceSample(
            info=info,
            timestamp_s=T0 + t,
            state=DeviceState.GPU_LOST if lost else DeviceState.OK,
            energy_consumed_joules=energy,
            power_draw_watts=watts,
            clock_event_reasons=reasons,
        )
        for t, energy, watts, reasons, lost in rows
    ]
    (summary,) = summarize(samples, [], price_per_kwh=0.15)
    span = max(r[0] for r in rows) - min(r[0] for r in rows)
    assert summary.energy_wh is None or summary.energy_wh >= 0
    assert summary.energy_cost is None or summary.energy_cost >= 0
    assert set(summary.throttled_seconds_by_reason) <= {"sw_power_cap"}
    assert all(0 <= s <= span + 1e-6 for s in summary.throttled_seconds_by_reason.values())
    assert summary.lost == any(r[4] for r in rows)
    assert summary.samples == len(rows)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=200),
    st.floats(min_value=0, max_value=1),
)
def test_bounded_distribution_matches_numpy_on_grid_values(ticks: list[int], q: float) -> None:
    ratios = [t / 10_000 for t in ticks]  # DCGM ratios: 4 decimals
    dist = Distribution(0.0001)
    for r in ratios:
        dist.add(r)
    assert dist.percentile(q) == pytest.approx(float(np.percentile(ratios, q * 100)), abs=1e-9)
    assert dist.mean == pytest.approx(float(np.mean(ratios)))


def test_dcgm_mig_instances_are_summarised_as_instances_of_their_gpu() -> None:
    """dcgm-exporter reports a MIG instance as a series of its own: the summary keeps it, tied to
    its parent GPU and profile, after the parent (real A100 MIG scrape)."""
    scrape = next(Path("../shared/fixtures/dcgm").glob("cloud-native-docs__a100-40gb-mig__*.prom"))
    backend = open_dcgm(str(scrape))
    try:
        snapshot = backend.read()
    finally:
        backend.close()
    summaries = summarize(snapshot.samples, snapshot.events, price_per_kwh=0.15)
    parents = [s for s in summaries if s.mig_parent_uuid is None]
    instances = [s for s in summaries if s.mig_parent_uuid is not None]
    assert parents and instances
    parent_uuids = {s.uuid for s in parents}
    for inst in instances:
        sample = next(x for x in snapshot.samples if x.info.uuid == inst.uuid)
        assert inst.mig_parent_uuid in parent_uuids
        assert inst.mig_profile == sample.info.mig_profile
        assert summary_record(inst)["mig_parent_uuid"] == inst.mig_parent_uuid
        # listed after its parent
        order = [s.uuid for s in summaries]
        assert order.index(inst.uuid) > order.index(inst.mig_parent_uuid)
