"""Small physics of one simulated GPU.

* power = idle + (full - idle) x load x f², load from SM/tensor/DRAM activity, f = clock / max
  clock (dynamic power goes with frequency and voltage; f² is the middle of that range);
* temperature: first-order lag toward ambient + R x power (R from the idle and load captures);
* above the max operating temperature the driver lowers f (SW thermal slowdown); at the slowdown
  threshold hardware halves it (HW thermal slowdown); under a power cap f is set so that power
  sits exactly on the cap (SW power cap);
* counters integrate: energy (J), violation times (ns), NVLink bytes and errors, training steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuwarden.telemetry.sim.hardware import SimGpuModel
from gpuwarden.telemetry.sim.timeline import Conditions

THERMAL_TIME_CONSTANT_S = 15.0  # heat-sink lag; assumed (tens of seconds on air-cooled boards)
MAX_SUBSTEP_S = 0.25
_SW_THERMAL_GAIN = 0.04  # clock factor removed per second per °C above max operating
_RECOVERY_PER_S = 0.01
_HYSTERESIS_C = 1.0  # clocks recover only once the GPU is this far under the threshold
_HW_SLOWDOWN_FACTOR = 0.5
_REPLAY_ERRORS_PER_S = 40.0
_CRC_ERRORS_PER_S = 12.0


def load_of(c: Conditions) -> float:
    """Share of full-load dynamic power the workload draws at full clocks."""
    w = c.workload
    raw = 0.5 * w.sm_active_ratio + 0.35 * w.tensor_active_ratio + 0.15 * w.dram_active_ratio
    return min(1.0, raw * c.activity)


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    power_watts: float
    clock_factor: float
    reasons: tuple[str, ...]


@dataclass(slots=True)
class SimDeviceState:
    temperature_celsius: float
    energy_joules: float
    thermal_clock_factor: float = 1.0
    power_violation_ns: float = 0.0
    thermal_violation_ns: float = 0.0
    steps: float = 0.0
    link_tx_bytes: list[float] = field(default_factory=list)
    link_rx_bytes: list[float] = field(default_factory=list)
    link_replay_errors: list[float] = field(default_factory=list)
    link_crc_errors: list[float] = field(default_factory=list)
    link_recovery_errors: list[int] = field(default_factory=list)

    @classmethod
    def steady(cls, model: SimGpuModel, c: Conditions, energy_joules: float) -> SimDeviceState:
        """A device that has been running ``c`` long enough to sit at its steady temperature."""
        state = cls(temperature_celsius=0.0, energy_joules=energy_joules)
        power = operating_point(model, c, state).power_watts
        state.temperature_celsius = model.ambient_celsius + model.thermal_resistance_c_per_watt * (
            power
        )
        n = model.nvlink_count
        state.link_tx_bytes = [0.0] * n
        state.link_rx_bytes = [0.0] * n
        state.link_replay_errors = [0.0] * n
        state.link_crc_errors = [0.0] * n
        state.link_recovery_errors = [0] * n
        return state


def operating_point(model: SimGpuModel, c: Conditions, state: SimDeviceState) -> OperatingPoint:
    dynamic = (model.power_full_watts - model.power_idle_watts) * load_of(c)
    factor = state.thermal_clock_factor
    reasons: list[str] = []
    if c.utilization_percent < 5.0:
        reasons.append("gpu_idle")
    if state.temperature_celsius >= model.temp_slowdown_celsius:
        factor = min(factor, _HW_SLOWDOWN_FACTOR)
        reasons += ["hw_slowdown", "hw_thermal_slowdown"]
    if factor < 1.0 or state.temperature_celsius > model.temp_max_operating_celsius:
        reasons.append("sw_thermal_slowdown")  # the driver holds clocks down until it recovers
    limit = model.power_limit_watts if c.power_cap_watts is None else c.power_cap_watts
    if dynamic > 0 and model.power_idle_watts + dynamic * factor**2 > limit:
        factor = math.sqrt(max(0.0, limit - model.power_idle_watts) / dynamic)
        reasons.append("sw_power_cap")
    power = model.power_idle_watts + dynamic * factor**2
    return OperatingPoint(power, factor, tuple(sorted(set(reasons))))


def advance(
    model: SimGpuModel,
    c: Conditions,
    state: SimDeviceState,
    dt: float,
    *,
    counter_scale: float = 1.0,
) -> None:
    """Move ``state`` forward by ``dt`` scenario seconds under constant conditions ``c``, in one
    step (callers keep ``dt`` ≤ ``MAX_SUBSTEP_S`` for accuracy; longer steps stay stable).

    Counters grow by ``counter_scale`` x their physical increase: a simulation run faster than
    the clock (speed x) scales them by 1/speed, so rates per clock second stay physical."""
    _substep(model, c, state, dt, dt * counter_scale)


def _substep(model: SimGpuModel, c: Conditions, state: SimDeviceState, h: float, hc: float) -> None:
    """``h``: scenario seconds for temperature and clocks; ``hc``: seconds for counters."""
    point = operating_point(model, c, state)
    state.energy_joules += point.power_watts * hc
    if "sw_power_cap" in point.reasons:
        state.power_violation_ns += hc * 1e9
    if {"sw_thermal_slowdown", "hw_thermal_slowdown"} & set(point.reasons):
        state.thermal_violation_ns += hc * 1e9
    resistance = model.thermal_resistance_c_per_watt * c.cooling_multiplier
    target = model.ambient_celsius + resistance * point.power_watts
    state.temperature_celsius += (target - state.temperature_celsius) * (
        1.0 - math.exp(-h / THERMAL_TIME_CONSTANT_S)
    )
    over = state.temperature_celsius - model.temp_max_operating_celsius
    if over > 0:
        state.thermal_clock_factor = max(
            0.3, state.thermal_clock_factor - _SW_THERMAL_GAIN * over * h
        )
    elif over < -_HYSTERESIS_C:
        state.thermal_clock_factor = min(1.0, state.thermal_clock_factor + _RECOVERY_PER_S * h)
    state.steps += (
        c.workload.steps_per_second
        * c.speed
        * point.clock_factor
        * h
        * (c.workload.busy_fraction if c.workload.period_s else 1.0)
    )
    per_link = c.workload.nvlink_gb_per_s_per_link * 1e9 * c.activity * point.clock_factor * hc
    for link in range(model.nvlink_count):
        if link == c.link_down:
            continue
        state.link_tx_bytes[link] += per_link
        state.link_rx_bytes[link] += per_link
        if link == c.link_erroring:
            state.link_replay_errors[link] += _REPLAY_ERRORS_PER_S * hc
            state.link_crc_errors[link] += _CRC_ERRORS_PER_S * hc
