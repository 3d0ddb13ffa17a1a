"""``SimBackend``: scenarios read like real GPUs, always marked simulated.

State moves only when ``read()`` is called, by the time the injected clock says has passed, so
the same seed and the same clock values give the same snapshots.
"""

from __future__ import annotations

import difflib
import math
import random
import time
import uuid
from collections.abc import Callable

from gpuwarden.errors import InvalidConfigError, UnknownNameError
from gpuwarden.telemetry.sim.hardware import SimGpuModel, sim_gpu_model
from gpuwarden.telemetry.sim.physics import (
    MAX_SUBSTEP_S,
    SimDeviceState,
    advance,
    operating_point,
)
from gpuwarden.telemetry.sim.scenarios import SCENARIOS, FaultKind, Scenario
from gpuwarden.telemetry.sim.timeline import Conditions, conditions_at, faults_of
from gpuwarden.telemetry.validate import validate_snapshot
from gpuwarden.types.telemetry import (
    DeviceEvent,
    DeviceInfo,
    DeviceSample,
    DeviceState,
    EventKind,
    NvLinkSample,
    ProcessSample,
    Snapshot,
)

_MAX_GPUS = 64
_MAX_STEPS = 20_000  # per device and read


def _check_scenario(name: str) -> Scenario:
    if name in SCENARIOS:
        return SCENARIOS[name]
    close = difflib.get_close_matches(name, list(SCENARIOS), n=3, cutoff=0.4)
    known = ", ".join(SCENARIOS)
    hint = (f"did you mean {', '.join(repr(c) for c in close)}? " if close else "") + (
        f"known scenarios: {known}"
    )
    raise UnknownNameError("scenario", name, close, reference="unknown-scenario", hint=hint)


def _clamp(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


class SimBackend:
    """A simulated node running one scenario (``name`` "sim", ``simulated`` True)."""

    name = "sim"
    simulated = True

    def __init__(
        self,
        scenario: Scenario,
        *,
        gpus: int,
        seed: int,
        clock: Callable[[], float],
        speed: float = 1.0,
    ) -> None:
        self.scenario = scenario
        self.model: SimGpuModel = sim_gpu_model(scenario.gpu_key)
        self.seed = seed
        self._clock = clock
        self._speed = speed  # scenario seconds per clock second (demos and tests run faster)
        self._gpus = gpus
        self._start = clock()
        self._last_t = 0.0
        self._first = True
        self._rngs = [random.Random(f"{seed}:{scenario.name}:{i}") for i in range(gpus)]
        self._infos = tuple(self._info(i) for i in range(gpus))
        self._states = [
            SimDeviceState.steady(
                self.model,
                conditions_at(scenario, i, gpus, self.model, 0.0),
                energy_joules=rng.uniform(2e7, 9e7),  # since driver load: days at tens of watts
            )
            for i, rng in enumerate(self._rngs)
        ]

    def _info(self, index: int) -> DeviceInfo:
        rng = random.Random(f"{self.seed}:uuid:{index}")
        return DeviceInfo(
            index=index,
            uuid=f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}",
            name=self.model.smi_name,
            pci_bus_id=f"00000000:{0x18 + 0x10 * index:02X}:00.0",  # illustrative 8-GPU layout
            serial=f"SIM{self.seed % 10**6:06d}{index:04d}",
            vbios_version=self.model.vbios_version,
            architecture=self.model.architecture,
            driver_version=self.model.driver_version,
            cuda_driver_version=self.model.cuda_driver_version,
            memory_total_bytes=self.model.memory_total_bytes,
        )

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self._infos

    def close(self) -> None:
        return None

    def read(self) -> Snapshot:
        now = self._clock()
        t = max(self._last_t, (now - self._start) * self._speed)
        dt = t - self._last_t
        samples: list[DeviceSample] = []
        events: list[DeviceEvent] = []
        for i in range(self._gpus):
            if dt > 0:
                self._advance(i, self._last_t, t)
            c = conditions_at(self.scenario, i, self._gpus, self.model, t)
            events += self._events(i, t)
            samples.append(self._sample(i, now, t, c))
        self._last_t, self._first = t, False
        return validate_snapshot(
            Snapshot(
                timestamp_s=now,
                host=f"sim-{self.scenario.name}",
                backend=self.name,
                simulated=True,
                samples=tuple(samples),
                events=tuple(sorted(events, key=lambda e: (e.timestamp_s, e.index or 0))),
                source=f"sim:{self.scenario.name}?seed={self.seed}&gpus={self._gpus}",
            )
        )

    def _advance(self, i: int, t0: float, t1: float) -> None:
        """Integrate in steps of at most MAX_SUBSTEP_S, conditions re-read at each step; a huge
        jump (hours) takes at most _MAX_STEPS coarser steps, so a read never runs away."""
        span = t1 - t0
        pieces = max(1, min(_MAX_STEPS, math.ceil(span / MAX_SUBSTEP_S)))
        h = span / pieces
        for k in range(pieces):
            c = conditions_at(self.scenario, i, self._gpus, self.model, t0 + k * h)
            if not c.lost:
                advance(self.model, c, self._states[i], h, counter_scale=1.0 / self._speed)

    def _events(self, i: int, t: float) -> list[DeviceEvent]:
        """Events of the faults that struck since the previous read (all up to t on the first)."""
        info = self._infos[i]
        out: list[DeviceEvent] = []
        for fault in faults_of(self.scenario, i, self._gpus):
            if not (fault.at_s <= t and (self._first or fault.at_s > self._last_t)):
                continue
            at = self._start + fault.at_s / self._speed
            if fault.kind is FaultKind.ECC_DBE:
                msg = "double-bit ECC error (simulated); the process on this GPU was stopped"
                out.append(DeviceEvent(EventKind.XID, at, info.uuid, i, 48, f"Xid 48: {msg}"))
                out.append(DeviceEvent(EventKind.ECC_UNCORRECTED, at, info.uuid, i, None, msg))
            elif fault.kind is FaultKind.FALLEN_OFF_BUS:
                msg = "GPU has fallen off the bus (simulated)"
                out.append(DeviceEvent(EventKind.XID, at, info.uuid, i, 79, f"Xid 79: {msg}"))
                out.append(DeviceEvent(EventKind.GPU_LOST, at, info.uuid, i, None, msg))
            elif fault.kind is FaultKind.NVLINK_DOWN:
                link = int(fault.value)
                self._states[i].link_recovery_errors[link] += 1
                msg = f"NVLink {link} went down after CRC/replay errors (simulated)"
                out.append(DeviceEvent(EventKind.XID, at, info.uuid, i, 74, f"Xid 74: {msg}"))
        return out

    def _sample(self, i: int, now: float, t: float, c: Conditions) -> DeviceSample:
        info, model, state, rng = self._infos[i], self.model, self._states[i], self._rngs[i]
        noise = [rng.gauss(0.0, 1.0) for _ in range(5)]  # fixed draws per read: determinism
        xid = self._last_xid(i, t)
        if c.lost:
            return DeviceSample(
                info=info,
                timestamp_s=now,
                state=DeviceState.GPU_LOST,
                error="GPU is lost (Xid 79, fallen off the bus; simulated)",
                xid_last=xid,
                extra={"simulated": 1.0},
            )
        point = operating_point(model, c, state)
        w = c.workload
        busy = c.utilization_percent >= 5.0
        act = c.activity * point.clock_factor if busy else 0.0

        def ratio(level: float, k: int) -> float:
            return round(_clamp(level * act * (1.0 + 0.02 * noise[k]), 0.0, 1.0), 4)

        limit = model.power_limit_watts if c.power_cap_watts is None else c.power_cap_watts
        power = point.power_watts * (1.0 + 0.004 * noise[3])
        if "sw_power_cap" in point.reasons:  # the cap controller holds power just under the cap
            power = min(point.power_watts, limit) - 0.3 * abs(noise[3])
        reserved = model.memory_reserved_bytes
        ecc_dbe = any(
            f.kind is FaultKind.ECC_DBE and f.at_s <= t
            for f in faults_of(self.scenario, i, self._gpus)
        )
        temp = round(state.temperature_celsius + 0.3 * noise[4])
        fabric = ("completed", "success") if model.fabric_registration else (None, None)
        return DeviceSample(
            info=info,
            timestamp_s=now,
            memory_used_bytes=c.memory_used_bytes,
            memory_free_bytes=model.memory_total_bytes - (reserved or 0) - c.memory_used_bytes,
            memory_reserved_bytes=reserved,
            gpu_utilization_percent=round(
                _clamp(c.utilization_percent + noise[0] * 0.5, 0, 100) if busy else 0.0
            ),
            memory_utilization_percent=round(_clamp(w.memory_utilization_percent * act, 0, 100)),
            encoder_utilization_percent=0.0,
            decoder_utilization_percent=0.0,
            temperature_gpu_celsius=temp,
            temperature_memory_celsius=round(temp - 5.0),
            temperature_slowdown_celsius=model.temp_slowdown_celsius,
            temperature_shutdown_celsius=model.temp_shutdown_celsius,
            power_draw_watts=round(power, 2),
            power_limit_watts=limit,
            power_enforced_limit_watts=limit,
            energy_consumed_joules=round(state.energy_joules, 3),
            clock_sm_mhz=round(model.clock_sm_max_mhz * point.clock_factor)
            if busy
            else model.clock_sm_idle_mhz,
            clock_memory_mhz=model.clock_memory_mhz,
            clock_graphics_mhz=round(model.clock_sm_max_mhz * point.clock_factor)
            if busy
            else model.clock_sm_idle_mhz,
            clock_video_mhz=model.clock_video_mhz,
            clock_sm_max_mhz=model.clock_sm_max_mhz,
            clock_memory_max_mhz=model.clock_memory_mhz,
            pstate="P0",
            clock_event_reasons=point.reasons,
            power_violation_ns_total=int(state.power_violation_ns),
            thermal_violation_ns_total=int(state.thermal_violation_ns),
            ecc_mode_enabled=True,
            ecc_errors_corrected_volatile=0,
            ecc_errors_uncorrected_volatile=int(ecc_dbe),
            ecc_errors_corrected_aggregate=0,
            ecc_errors_uncorrected_aggregate=int(ecc_dbe),
            remapped_rows_correctable=0,
            remapped_rows_uncorrectable=int(ecc_dbe),
            remapped_rows_pending=ecc_dbe,
            remapped_rows_failure=False,
            pcie_link_gen_current=model.pcie_gen,
            pcie_link_gen_max=model.pcie_gen,
            pcie_link_width_current=model.pcie_width,
            pcie_link_width_max=model.pcie_width,
            pcie_tx_bytes_per_second=round(w.pcie_tx_gb_per_s * 1e9 * act),
            pcie_rx_bytes_per_second=round(w.pcie_rx_gb_per_s * 1e9 * act),
            pcie_replay_total=0,
            nvlinks=self._links(state, c),
            persistence_mode=True,
            compute_mode="Default",
            mig_mode=False,
            mig_mode_pending=False,
            processes=self._processes(i, c),
            graphics_engine_active_ratio=ratio(w.sm_active_ratio * 1.08, 1),
            sm_active_ratio=ratio(w.sm_active_ratio, 1),
            sm_occupancy_ratio=ratio(w.sm_occupancy_ratio, 2),
            tensor_active_ratio=ratio(w.tensor_active_ratio, 2),
            dram_active_ratio=ratio(w.dram_active_ratio, 0),
            fp64_active_ratio=0.0,
            fp32_active_ratio=ratio(w.sm_active_ratio * 0.12, 0),
            fp16_active_ratio=ratio(w.tensor_active_ratio * 0.9, 2),
            xid_last=xid,
            extra={"simulated": 1.0, "sim_training_step": float(int(state.steps))},
            # T.Limit: what the driver reports against the same max operating temperature the
            # physics slows the clocks at (negative once the GPU runs past it)
            temperature_margin_celsius=model.temp_max_operating_celsius - temp,
            temperature_gpu_max_celsius=model.temp_max_operating_celsius,
            temperature_memory_max_celsius=model.temp_memory_max_operating_celsius,
            sram_threshold_exceeded=False,  # no SRAM fault in any scenario
            remapped_rows_banks_exhausted=0,  # one DBE remaps one row, no bank runs out
            # a double-bit error leaves the GPU asking for a reset (Xid 48 → RESET_GPU)
            recovery_action="reset" if ecc_dbe else "none",
            fabric_state=fabric[0],
            fabric_status=fabric[1],
        )

    def _last_xid(self, i: int, t: float) -> int | None:
        codes = {FaultKind.ECC_DBE: 48, FaultKind.FALLEN_OFF_BUS: 79, FaultKind.NVLINK_DOWN: 74}
        hits = [
            (f.at_s, codes[f.kind])
            for f in faults_of(self.scenario, i, self._gpus)
            if f.kind in codes and f.at_s <= t
        ]
        return max(hits)[1] if hits else None

    def _links(self, state: SimDeviceState, c: Conditions) -> tuple[NvLinkSample, ...]:
        model = self.model
        return tuple(
            NvLinkSample(
                link=k,
                active=k != c.link_down,
                bandwidth_bytes_per_second=model.nvlink_link_bytes_per_second,
                tx_bytes_total=int(state.link_tx_bytes[k]),
                rx_bytes_total=int(state.link_rx_bytes[k]),
                crc_errors_total=int(state.link_crc_errors[k]),
                replay_errors_total=int(state.link_replay_errors[k]),
                recovery_errors_total=state.link_recovery_errors[k],
            )
            for k in range(model.nvlink_count)
        )

    def _processes(self, i: int, c: Conditions) -> tuple[ProcessSample, ...]:
        name = c.workload.process_name
        if name is None:
            return ()
        pid = 4100 + 17 * i + self.seed % 1000
        return (ProcessSample(pid, c.memory_used_bytes, name=name, kind="C"),)


def open_sim(
    scenario: str,
    *,
    gpus: int | None = None,
    seed: int = 0,
    clock: Callable[[], float] = time.time,
    speed: float = 1.0,
) -> SimBackend:
    """A simulated node running ``scenario`` (see ``SCENARIOS``) with ``gpus`` GPUs; ``speed``
    scenario seconds pass per second of ``clock``."""
    chosen = _check_scenario(scenario)
    count = chosen.gpus if gpus is None else gpus
    if not chosen.min_gpus <= count <= _MAX_GPUS:
        raise InvalidConfigError(
            f"scenario {chosen.name!r} cannot run on {count} GPU(s)",
            reference="sim-gpu-count",
            hint=f"pass --gpus between {chosen.min_gpus} and {_MAX_GPUS} (default {chosen.gpus})",
        )
    if not 0 < speed <= 10_000:
        raise InvalidConfigError(
            f"simulation speed {speed:g} is out of range",
            reference="sim-speed",
            hint="pass a speed between 0 (exclusive) and 10000",
        )
    return SimBackend(chosen, gpus=count, seed=seed, clock=clock, speed=speed)
