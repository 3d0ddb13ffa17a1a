"""Per-device readings: NVML calls -> DeviceSample fields in gpuwarden units.

The comment after each field names its ``nvidia-smi --query-gpu=`` equivalent. NVML units
(nvml.h): power mW, energy mJ, memory bytes, clocks MHz, violation time ns, PCIe throughput KB/s.
Settings that change only by an administrator's command (limits, thresholds, modes, maxima) are
``setting_fields``; the backend re-reads them every ``settings_every_s`` instead of every read.
"""

from __future__ import annotations

from typing import Any

from gpuwarden.telemetry.clock_events import decode_clock_events
from gpuwarden.telemetry.nvml import fields as fi
from gpuwarden.telemetry.nvml._lib import Nvml
from gpuwarden.telemetry.nvml.scalars import MemoryReader, ScalarReader

COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
_PSTATE_UNKNOWN = 32  # NVML_PSTATE_UNKNOWN


def _float(value: Any, factor: float = 1.0) -> float | None:
    return None if value is None else float(value) * factor


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def setting_fields(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """Fields an administrator changes (nvidia-smi -pl/-e/-pm/-c/-mig), and fixed maxima."""
    call = nvml.call
    ecc = call("nvmlDeviceGetEccMode", handle)
    compute = call("nvmlDeviceGetComputeMode", handle)
    return {
        # temperature thresholds: THRESHOLD_SLOWDOWN = 1, THRESHOLD_SHUTDOWN = 0
        "temperature_slowdown_celsius": _float(
            call("nvmlDeviceGetTemperatureThreshold", handle, 1)
        ),  # (XML gpu_temp_slow_threshold)
        "temperature_shutdown_celsius": _float(
            call("nvmlDeviceGetTemperatureThreshold", handle, 0)
        ),  # (XML gpu_temp_max_threshold)
        "power_limit_watts": _float(call("nvmlDeviceGetPowerManagementLimit", handle), 1e-3),
        "power_enforced_limit_watts": _float(
            call("nvmlDeviceGetEnforcedPowerLimit", handle), 1e-3
        ),  # enforced.power.limit
        "clock_sm_max_mhz": _float(call("nvmlDeviceGetMaxClockInfo", handle, 1)),  # clocks.max.sm
        "clock_memory_max_mhz": _float(call("nvmlDeviceGetMaxClockInfo", handle, 2)),
        "pcie_link_gen_max": _int(call("nvmlDeviceGetMaxPcieLinkGeneration", handle)),
        "pcie_link_width_max": _int(call("nvmlDeviceGetMaxPcieLinkWidth", handle)),
        "ecc_mode_enabled": None if ecc is None else bool(ecc[0]),  # ecc.mode.current
        "persistence_mode": _bool(call("nvmlDeviceGetPersistenceMode", handle)),
        "compute_mode": None if compute is None else COMPUTE_MODES.get(int(compute)),
    }


def device_fields(
    nvml: Nvml,
    handle: Any,
    scalars: ScalarReader,
    memory: MemoryReader,
    field_set: fi.FieldSet,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Every per-device field but MIG, processes, GPM and events. May raise DeviceLostError."""
    out = memory.read()
    out.update(settings)
    one = scalars.read()
    reasons, pstate = one.get("reasons"), one.get("pstate")
    util_gpu, util_memory = one.get("util_gpu"), one.get("util_memory")
    got, links = field_set.read(nvml, handle)
    mem_temp = got.get(fi.FI_MEMORY_TEMP)
    ecc_on = settings.get("ecc_mode_enabled")

    def ecc(field_id: int) -> int | None:  # counters are meaningless with ECC off
        return _int(got.get(field_id)) if ecc_on else None

    field = got.get

    out.update(
        gpu_utilization_percent=_float(util_gpu),  # utilization.gpu
        memory_utilization_percent=_float(util_memory),  # utilization.memory
        encoder_utilization_percent=_float(one.get("encoder")),  # utilization.encoder
        decoder_utilization_percent=_float(one.get("decoder")),  # utilization.decoder
        temperature_gpu_celsius=_float(one.get("temperature_gpu")),  # temperature.gpu
        # temperature.memory (NVML_FI_DEV_MEMORY_TEMP; DCGM treats > 200 as invalid)
        temperature_memory_celsius=None if mem_temp is None or mem_temp > 200 else float(mem_temp),
        power_draw_watts=_float(one.get("power_mw"), 1e-3),  # power.draw
        energy_consumed_joules=_float(field(fi.FI_TOTAL_ENERGY), 1e-3),  # total_energy_consumption
        clock_graphics_mhz=_float(one.get("clock_graphics")),  # clocks.gr
        clock_sm_mhz=_float(one.get("clock_sm")),  # clocks.sm
        clock_memory_mhz=_float(one.get("clock_memory")),  # clocks.mem
        clock_video_mhz=_float(one.get("clock_video")),  # clocks.video
        pstate=None if pstate is None or int(pstate) == _PSTATE_UNKNOWN else f"P{int(pstate)}",
        fan_speed_percent=_float(one.get("fan")),  # fan.speed
        clock_event_reasons=None if reasons is None else decode_clock_events(int(reasons)),
        power_violation_ns_total=_int(field(fi.FI_PERF_POLICY_POWER)),
        thermal_violation_ns_total=_int(field(fi.FI_PERF_POLICY_THERMAL)),
        ecc_errors_corrected_volatile=ecc(fi.FI_ECC_SBE_VOL_TOTAL),  # ecc.errors.corrected...
        ecc_errors_uncorrected_volatile=ecc(fi.FI_ECC_DBE_VOL_TOTAL),
        ecc_errors_corrected_aggregate=ecc(fi.FI_ECC_SBE_AGG_TOTAL),
        ecc_errors_uncorrected_aggregate=ecc(fi.FI_ECC_DBE_AGG_TOTAL),
        retired_pages_single_bit=_int(field(fi.FI_RETIRED_SBE)),  # retired_pages.sbe
        retired_pages_double_bit=_int(field(fi.FI_RETIRED_DBE)),  # retired_pages.dbe
        retired_pages_pending=_bool(field(fi.FI_RETIRED_PENDING)),  # retired_pages.pending
        remapped_rows_correctable=_int(field(fi.FI_REMAPPED_COR)),  # remapped_rows.correctable
        remapped_rows_uncorrectable=_int(field(fi.FI_REMAPPED_UNC)),
        remapped_rows_pending=_bool(field(fi.FI_REMAPPED_PENDING)),  # remapped_rows.pending
        remapped_rows_failure=_bool(field(fi.FI_REMAPPED_FAILURE)),  # remapped_rows.failure
        pcie_link_gen_current=_int(one.get("pcie_gen")),  # pcie.link.gen.gpucurrent
        pcie_link_width_current=_int(one.get("pcie_width")),  # pcie.link.width.current
        # PCIe throughput KB/s (XML pci/tx_util, pci/rx_util)
        pcie_tx_bytes_per_second=_float(one.get("pcie_tx_kbs"), 1000.0),
        pcie_rx_bytes_per_second=_float(one.get("pcie_rx_kbs"), 1000.0),
        pcie_replay_total=_int(field(fi.FI_PCIE_REPLAY)),  # (XML pci/replay_counter)
        nvlinks=field_set.nvlinks.samples_for(links),
    )
    return out
