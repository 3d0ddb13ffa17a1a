"""What a scenario makes one GPU do at time t: its workload after the faults that hit it so far."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.telemetry.sim.hardware import SimGpuModel
from gpuwarden.telemetry.sim.scenarios import (
    IDLE,
    NVLINK_ERROR_LEAD_S,
    Fault,
    FaultKind,
    Scenario,
    Workload,
)
from gpuwarden.units import GIB

_FATAL = (FaultKind.ECC_DBE, FaultKind.FALLEN_OFF_BUS)
_WAIT_LEVEL = 0.03  # activity left while a starved job waits for its next batch


@dataclass(frozen=True, slots=True)
class Conditions:
    workload: Workload
    activity: float  # 0..1 multiplier on the workload's SM/tensor/DRAM/link levels
    utilization_percent: float
    memory_used_bytes: int
    lost: bool = False
    cooling_multiplier: float = 1.0
    power_cap_watts: float | None = None
    speed: float = 1.0  # straggler factor on progress
    link_erroring: int | None = None
    link_down: int | None = None


def faults_of(scenario: Scenario, gpu: int, gpus: int) -> tuple[Fault, ...]:
    """The faults that hit ``gpu``; a fault aimed past the last GPU lands on the last one."""
    return tuple(f for f in scenario.faults if min(f.gpu, gpus - 1) == gpu)


def oom_time_s(fault: Fault, workload: Workload, model: SimGpuModel) -> float:
    """When a leak from the workload's memory reaches what the device can hand out."""
    available = model.memory_total_bytes - (model.memory_reserved_bytes or 0)
    return fault.at_s + (available - workload.memory_used_gib * GIB) / (fault.value * GIB)


def _duty(workload: Workload, t: float) -> tuple[float, float]:
    """(activity, utilization %) of a bursty job: a sawtooth as prefetched batches drain."""
    if workload.period_s is None:
        return 1.0, workload.gpu_utilization_percent
    phase = (t % workload.period_s) / workload.period_s
    if phase < workload.busy_fraction:
        return 1.0 - 0.5 * phase / workload.busy_fraction, workload.gpu_utilization_percent
    return _WAIT_LEVEL, 100.0 * _WAIT_LEVEL


def conditions_at(
    scenario: Scenario, gpu: int, gpus: int, model: SimGpuModel, t: float
) -> Conditions:
    workload = scenario.workload
    mine = faults_of(scenario, gpu, gpus)
    others_fatal = [
        f
        for f in scenario.faults
        if f.kind in _FATAL and min(f.gpu, gpus - 1) != gpu and f.at_s <= t
    ]
    memory = int(workload.memory_used_gib * GIB)
    if others_fatal and scenario.peers_after_fatal is not None:
        workload = scenario.peers_after_fatal  # same job, same memory, now stuck
    cooling, cap, speed = 1.0, None, 1.0
    erroring: int | None = None
    down: int | None = None
    for fault in mine:
        if fault.kind is FaultKind.NVLINK_DOWN and t >= fault.at_s - NVLINK_ERROR_LEAD_S:
            if t < fault.at_s:
                erroring = int(fault.value)
            else:
                down = int(fault.value)
        if t < fault.at_s:
            continue
        if fault.kind is FaultKind.FALLEN_OFF_BUS:
            return Conditions(IDLE, 0.0, 0.0, 0, lost=True)
        if fault.kind is FaultKind.ECC_DBE:
            workload, memory = IDLE, 0  # the driver kills the context that hit the error
        elif fault.kind is FaultKind.MEMORY_LEAK:
            if t >= oom_time_s(fault, scenario.workload, model):
                workload, memory = IDLE, 0  # out of memory: the process dies, memory is freed
            else:
                memory = int((workload.memory_used_gib + fault.value * (t - fault.at_s)) * GIB)
        elif fault.kind is FaultKind.COOLING_LOSS:
            cooling = fault.value
        elif fault.kind is FaultKind.POWER_CAP:
            cap = fault.value
        elif fault.kind is FaultKind.STRAGGLER:
            speed = fault.value
    activity, utilization = _duty(workload, t)
    return Conditions(
        workload,
        activity * speed,
        utilization,
        memory,
        cooling_multiplier=cooling,
        power_cap_watts=cap,
        speed=speed,
        link_erroring=erroring,
        link_down=down,
    )
