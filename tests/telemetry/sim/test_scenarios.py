"""Each scenario moves the way the real failure does; device facts come from real captures."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest

from gpuwarden.errors import InvalidConfigError, UnknownNameError
from gpuwarden.telemetry.backend import Backend
from gpuwarden.telemetry.sim import SCENARIOS, open_sim
from gpuwarden.telemetry.sim.scenarios import NVLINK_ERROR_LEAD_S, FaultKind
from gpuwarden.types.telemetry import DeviceSample, DeviceState, EventKind
from gpuwarden.units import MIB

H100 = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"


def _q_value(text: str, label: str, section: str | None = None) -> float:
    """First ``label : <number>`` of an ``nvidia-smi -q`` capture (after ``section`` if given)."""
    if section is not None:
        text = text[text.index(section) :]
    match = re.search(rf"^\s*{re.escape(label)}\s*:\s*([-\d.]+)", text, re.M)
    assert match, label
    return float(match.group(1))


def _fault(scenario: str, kind: FaultKind) -> tuple[int, float, float]:
    fault = next(f for f in SCENARIOS[scenario].faults if f.kind is kind)
    return fault.gpu, fault.at_s, fault.value


def test_every_scenario_opens_reads_and_is_marked_simulated(sim) -> None:
    assert len(SCENARIOS) == 10
    for name, scenario in SCENARIOS.items():
        assert scenario.description and "\n" not in scenario.description
        driven = sim(name)
        assert isinstance(driven.backend, Backend)
        for snap in driven.series([0.0, 1.0, 40.0]):
            assert snap.simulated is True and snap.backend == "sim"
            assert len(snap.samples) == scenario.gpus == len(driven.backend.devices())
            assert all(s.extra["simulated"] == 1.0 for s in snap.samples)


def test_device_facts_come_from_the_h100_capture(sim, fixtures: Path) -> None:
    idle = (fixtures / f"{H100}.idle.q.txt").read_text()
    load = (fixtures / f"{H100}.load.q.txt").read_text()
    sample = sim("healthy-training").at(0.0).samples[0]
    assert sample.info.name == re.search(r"Product Name\s*:\s*(.+)", idle).group(1).strip()
    assert sample.info.memory_total_bytes == _q_value(idle, "Total", "FB Memory Usage") * MIB
    assert sample.memory_reserved_bytes == _q_value(idle, "Reserved", "FB Memory Usage") * MIB
    assert sample.power_limit_watts == _q_value(load, "Current Power Limit")
    assert sample.clock_sm_max_mhz == _q_value(load, "SM", "Max Clocks")
    # T.Limit readings are margins: current + margin = the max operating temperature
    max_operating = _q_value(load, "GPU Current Temp") + _q_value(load, "GPU T.Limit Temp")
    slowdown = max_operating - _q_value(load, "GPU Slowdown T.Limit Temp")
    assert sample.temperature_slowdown_celsius == slowdown == 87.0
    used = sample.memory_used_bytes + sample.memory_free_bytes + sample.memory_reserved_bytes
    assert used == sample.info.memory_total_bytes


def test_fake_load_is_busy_by_utilization_but_idle_by_sm_and_power(sim, fixtures) -> None:
    idle = (fixtures / f"{H100}.idle.q.txt").read_text()
    idle_watts = _q_value(idle, "Instantaneous Power Draw")
    for snap in sim("fake-load").series([float(t) for t in range(0, 60, 5)]):
        s = snap.samples[0]
        assert s.gpu_utilization_percent >= 99
        assert s.sm_active_ratio < 0.05
        # near the captured idle draw, far from the 700 W limit
        assert idle_watts <= s.power_draw_watts < idle_watts + 10
        assert s.processes and s.processes[0].used_memory_bytes == s.memory_used_bytes


def test_thermal_throttling_clocks_drop_only_after_the_threshold(sim) -> None:
    snaps = sim("thermal-throttling").series([float(t) for t in range(0, 121, 2)])
    samples = [s.samples[0] for s in snaps]
    limit = 85.0  # max operating temperature of the H100 capture (see test above)
    crossed = next(i for i, s in enumerate(samples) if s.temperature_gpu_celsius > limit)
    before, after = samples[:crossed], samples[crossed + 1 :]
    assert all(s.clock_sm_mhz == s.clock_sm_max_mhz for s in before)
    assert all("sw_thermal_slowdown" not in s.clock_event_reasons for s in before)
    assert all(s.thermal_violation_ns_total == 0 for s in before)
    assert min(s.clock_sm_mhz for s in after) < 0.85 * samples[0].clock_sm_max_mhz
    assert all("sw_thermal_slowdown" in s.clock_event_reasons for s in after)
    # the controller holds the GPU near the limit instead of letting it run away
    assert max(s.temperature_gpu_celsius for s in after) <= samples[0].temperature_shutdown_celsius
    # the violation counter grows by the throttled time: 2 s per reading once throttled
    grown = after[-1].thermal_violation_ns_total - after[0].thermal_violation_ns_total
    assert grown == pytest.approx(2e9 * (len(after) - 1), rel=0.01)


def test_memory_leak_reaches_the_device_memory_then_the_process_dies(sim) -> None:
    driven = sim("memory-leak")
    _, start, rate_gib = _fault("memory-leak", FaultKind.MEMORY_LEAK)
    samples = [driven.at(float(t)).samples[0] for t in range(0, 80)]
    first = samples[0]
    available = first.info.memory_total_bytes - first.memory_reserved_bytes
    growing = [s for s in samples if s.processes]
    steps = [b.memory_used_bytes - a.memory_used_bytes for a, b in itertools.pairwise(growing)]
    assert all(step == pytest.approx(rate_gib * 2**30, rel=1e-6) for step in steps)
    assert growing[-1].memory_used_bytes > available - rate_gib * 2**30  # within 1 s of full
    # out of memory when the leak, from the first reading's level, has filled what is left
    oom_s = start + (available - first.memory_used_bytes) / (rate_gib * 2**30)
    assert len(growing) == math.ceil(oom_s)
    dead = samples[len(growing)]
    assert dead.processes == () and dead.memory_used_bytes == 0
    assert dead.memory_free_bytes == available
    assert dead.gpu_utilization_percent == 0


def test_fallen_off_the_bus_one_gpu_is_lost_and_seven_keep_reporting(sim) -> None:
    gpu, at, _ = _fault("gpu-fallen-off-bus", FaultKind.FALLEN_OFF_BUS)
    driven = sim("gpu-fallen-off-bus")
    before = driven.at(at - 1)
    assert all(s.state is DeviceState.OK for s in before.samples) and before.events == ()
    after = driven.at(at + 1)
    lost = [s for s in after.samples if s.state is DeviceState.GPU_LOST]
    assert [s.info.index for s in lost] == [gpu]
    assert lost[0].power_draw_watts is None and lost[0].xid_last == 79
    ok = [s for s in after.samples if s.state is DeviceState.OK]
    assert len(ok) == 7 and all(s.power_draw_watts is not None for s in ok)
    kinds = sorted((e.kind.value, e.code, e.index) for e in after.events)
    assert kinds == [("gpu-lost", None, gpu), ("xid", 79, gpu)]
    assert driven.at(at + 5).events == ()  # reported once
    # the surviving ranks wait in NCCL: kernels resident, SMs idle
    assert all(s.gpu_utilization_percent >= 99 and s.sm_active_ratio < 0.05 for s in ok)


def test_ecc_double_bit_error_counts_once_with_xid_48_and_remap_pending(sim) -> None:
    gpu, at, _ = _fault("ecc-double-bit", FaultKind.ECC_DBE)
    driven = sim("ecc-double-bit")
    before, after = driven.at(at - 0.5), driven.at(at + 0.5)
    b, a = before.samples[gpu], after.samples[gpu]
    assert b.ecc_errors_uncorrected_volatile == 0 and not b.remapped_rows_pending
    assert a.ecc_errors_uncorrected_volatile == 1 and a.remapped_rows_pending is True
    assert a.remapped_rows_uncorrectable == b.remapped_rows_uncorrectable + 1
    assert {(e.kind, e.code) for e in after.events} == {
        (EventKind.XID, 48),
        (EventKind.ECC_UNCORRECTED, None),
    }
    assert a.info.name == "NVIDIA A100-SXM4-40GB"
    assert driven.at(at + 10).samples[gpu].ecc_errors_uncorrected_volatile == 1


def test_nvlink_errors_grow_then_the_link_goes_down(sim) -> None:
    gpu, at, value = _fault("nvlink-down", FaultKind.NVLINK_DOWN)
    link = int(value)
    driven = sim("nvlink-down")

    def state(t: float) -> DeviceSample:
        return driven.at(t).samples[gpu]

    quiet = state(at - NVLINK_ERROR_LEAD_S - 1).nvlinks[link]
    erroring = state(at - 1).nvlinks[link]
    down1, down2 = state(at + 1).nvlinks, state(at + 11).nvlinks
    assert quiet.replay_errors_total == quiet.crc_errors_total == 0
    assert erroring.active and erroring.replay_errors_total > 0 and erroring.crc_errors_total > 0
    assert down1[link].active is False and down1[link].recovery_errors_total == 1
    assert [x.link for x in down1 if x.active is False] == [link]
    # a down link carries nothing more; its neighbours keep counting
    assert down2[link].tx_bytes_total == down1[link].tx_bytes_total
    assert down2[link - 1].tx_bytes_total > down1[link - 1].tx_bytes_total
    assert down2[link].replay_errors_total == down1[link].replay_errors_total


def test_straggler_is_slower_and_falls_behind(sim) -> None:
    gpu, _, speed = _fault("straggler", FaultKind.STRAGGLER)
    snap = sim("straggler").at(100.0)
    slow = snap.samples[gpu]
    others = [s for s in snap.samples if s.info.index != gpu]
    assert len(others) == 7
    for s in others:
        assert slow.sm_active_ratio < 0.8 * s.sm_active_ratio
        assert slow.power_draw_watts < s.power_draw_watts - 50
        assert slow.extra["sim_training_step"] < s.extra["sim_training_step"]
    ratio = slow.extra["sim_training_step"] / others[0].extra["sim_training_step"]
    assert ratio == pytest.approx(speed, abs=0.02)


def test_power_capping_holds_power_flat_at_the_cap(sim) -> None:
    _, _, cap = _fault("power-capping", FaultKind.POWER_CAP)
    samples = [s.samples[0] for s in sim("power-capping").series([float(t) for t in range(30)])]
    for s in samples:
        assert s.power_limit_watts == s.power_enforced_limit_watts == cap
        assert cap - 2.0 <= s.power_draw_watts <= cap
        assert "sw_power_cap" in s.clock_event_reasons
        assert s.clock_sm_mhz < s.clock_sm_max_mhz
    grown = samples[-1].power_violation_ns_total - samples[0].power_violation_ns_total
    assert grown == pytest.approx(29e9, rel=1e-6)


def test_data_starvation_sawtooth_power_follows_sm_activity(sim) -> None:
    samples = [s.samples[0] for s in sim("data-starvation").series([t * 0.5 for t in range(48)])]
    sm = [s.sm_active_ratio for s in samples]
    power = [s.power_draw_watts for s in samples]
    assert max(sm) > 0.7 and min(sm) < 0.05
    busy = [p for p, a in zip(power, sm, strict=True) if a > 0.5]
    waiting = [p for p, a in zip(power, sm, strict=True) if a < 0.05]
    assert min(busy) > 2 * max(waiting)
    busy_share = sum(a > 0.05 for a in sm) / len(sm)
    assert busy_share == pytest.approx(SCENARIOS["data-starvation"].workload.busy_fraction, abs=0.1)


def test_energy_counter_integrates_power(sim) -> None:
    driven = sim("healthy-training")
    a, b = driven.at(10.0).samples[0], driven.at(20.0).samples[0]
    average = (b.energy_consumed_joules - a.energy_consumed_joules) / 10.0
    assert average == pytest.approx((a.power_draw_watts + b.power_draw_watts) / 2, rel=0.02)


def test_speed_keeps_counter_rates_physical() -> None:
    clock_value = [0.0]
    fast = open_sim("healthy-training", gpus=1, clock=lambda: clock_value[0], speed=50.0)
    first = fast.read().samples[0]
    clock_value[0] = 1.0  # 50 scenario seconds
    second = fast.read().samples[0]
    rate = second.energy_consumed_joules - first.energy_consumed_joules
    assert rate == pytest.approx(second.power_draw_watts, rel=0.02)


def test_unknown_scenario_suggests_the_close_name() -> None:
    with pytest.raises(UnknownNameError) as err:
        open_sim("fake-lod")
    assert err.value.reference == "unknown-scenario"
    assert "fake-load" in err.value.suggestions and "fake-load" in (err.value.hint or "")


@pytest.mark.parametrize(("scenario", "gpus"), [("straggler", 1), ("healthy-training", 0)])
def test_gpu_count_outside_the_scenario_range_is_refused(scenario: str, gpus: int) -> None:
    with pytest.raises(InvalidConfigError) as err:
        open_sim(scenario, gpus=gpus)
    assert err.value.reference == "sim-gpu-count"


def test_faults_aimed_past_the_last_gpu_land_on_the_last(sim) -> None:
    snap = sim("gpu-fallen-off-bus", gpus=4).at(40.0)
    assert [s.state for s in snap.samples].count(DeviceState.GPU_LOST) == 1
    assert snap.samples[3].state is DeviceState.GPU_LOST
