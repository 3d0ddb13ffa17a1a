"""Per-device readings: NVML calls -> DeviceSample fields in gpuwarden units.

The comment after each field names its ``nvidia-smi --query-gpu=`` equivalent. NVML units
(nvml.h): power mW, energy mJ, memory bytes, clocks MHz, violation time ns, PCIe throughput KB/s.
Settings that change only by an administrator's command (limits, thresholds, modes, maxima) are
``setting_fields``; the backend re-reads them every ``settings_every_s`` instead of every read,
with the slowly changing health state (health.py). The T.Limit margin and the recovery action
are read every time: they move with the temperature and with Xid 154.
"""

from __future__ import annotations

from typing import Any

from gpuwarden.catalog.nvml_enums import recovery_action_name
from gpuwarden.telemetry.clock_events import decode_clock_events
from gpuwarden.telemetry.health_readings import TLimitThresholds
from gpuwarden.telemetry.nvml import fields as fi
from gpuwarden.telemetry.nvml._lib import Nvml
from gpuwarden.telemetry.nvml.scalars import MarginReader, MemoryReader, ScalarReader

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
    margin_reader: MarginReader,
    field_set: fi.FieldSet,
    settings: dict[str, Any],
    tlimits: TLimitThresholds,
) -> dict[str, Any]:
    """Every per-device field but MIG, processes, GPM and events; ``settings`` (setting_fields
    and health.health_fields) and ``tlimits`` as last read. May raise DeviceUnusableError.
    (Conversions are written out rather than called: this runs for every GPU every reading.)"""
    out = memory.read()
    out.update(settings)
    margin = margin_reader.read()  # temperature.gpu.tlimit
    (
        temperature,
        power_mw,
        clock_graphics,
        clock_sm,
        clock_memory,
        clock_video,
        pstate,
        fan,
        reasons,
        pcie_gen,
        pcie_width,
        pcie_tx_kbs,
        pcie_rx_kbs,
        encoder,
        decoder,
        util_gpu,
        util_memory,
    ) = scalars.read()  # scalars.KEYS order
    got, nvlinks = field_set.read(nvml, handle)
    field = got.get
    mem_temp = field(fi.FI_MEMORY_TEMP)
    energy_mj = field(fi.FI_TOTAL_ENERGY)
    power_ns, thermal_ns = field(fi.FI_PERF_POLICY_POWER), field(fi.FI_PERF_POLICY_THERMAL)
    retired_sbe, retired_dbe = field(fi.FI_RETIRED_SBE), field(fi.FI_RETIRED_DBE)
    retired_pending = field(fi.FI_RETIRED_PENDING)
    remapped_cor, remapped_unc = field(fi.FI_REMAPPED_COR), field(fi.FI_REMAPPED_UNC)
    remapped_pending, remapped_failure = (
        field(fi.FI_REMAPPED_PENDING),
        field(fi.FI_REMAPPED_FAILURE),
    )
    replay = field(fi.FI_PCIE_REPLAY)
    recovery = field(fi.FI_GPU_RECOVERY_ACTION)
    # ECC counters are meaningless with ECC off
    ecc = [field(f) for f in _ECC_FIELDS] if settings.get("ecc_mode_enabled") else [None] * 4
    sbe_vol, dbe_vol, sbe_agg, dbe_agg = (None if v is None else int(v) for v in ecc)

    out.update(
        gpu_utilization_percent=None if util_gpu is None else float(util_gpu),  # utilization.gpu
        memory_utilization_percent=None if util_memory is None else float(util_memory),
        encoder_utilization_percent=None if encoder is None else float(encoder),
        decoder_utilization_percent=None if decoder is None else float(decoder),
        temperature_gpu_celsius=None if temperature is None else float(temperature),
        # temperature.memory (NVML_FI_DEV_MEMORY_TEMP; DCGM treats > 200 as invalid)
        temperature_memory_celsius=None if mem_temp is None or mem_temp > 200 else float(mem_temp),
        power_draw_watts=None if power_mw is None else float(power_mw) * 1e-3,  # power.draw
        # total_energy_consumption
        energy_consumed_joules=None if energy_mj is None else float(energy_mj) * 1e-3,
        clock_graphics_mhz=None if clock_graphics is None else float(clock_graphics),  # clocks.gr
        clock_sm_mhz=None if clock_sm is None else float(clock_sm),  # clocks.sm
        clock_memory_mhz=None if clock_memory is None else float(clock_memory),  # clocks.mem
        clock_video_mhz=None if clock_video is None else float(clock_video),  # clocks.video
        pstate=None if pstate is None or int(pstate) == _PSTATE_UNKNOWN else f"P{int(pstate)}",
        fan_speed_percent=None if fan is None else float(fan),  # fan.speed
        clock_event_reasons=None if reasons is None else decode_clock_events(int(reasons)),
        power_violation_ns_total=None if power_ns is None else int(power_ns),
        thermal_violation_ns_total=None if thermal_ns is None else int(thermal_ns),
        ecc_errors_corrected_volatile=sbe_vol,  # ecc.errors.corrected.volatile.total
        ecc_errors_uncorrected_volatile=dbe_vol,
        ecc_errors_corrected_aggregate=sbe_agg,
        ecc_errors_uncorrected_aggregate=dbe_agg,
        retired_pages_single_bit=None if retired_sbe is None else int(retired_sbe),
        retired_pages_double_bit=None if retired_dbe is None else int(retired_dbe),
        retired_pages_pending=None if retired_pending is None else bool(retired_pending),
        remapped_rows_correctable=None if remapped_cor is None else int(remapped_cor),
        remapped_rows_uncorrectable=None if remapped_unc is None else int(remapped_unc),
        remapped_rows_pending=None if remapped_pending is None else bool(remapped_pending),
        remapped_rows_failure=None if remapped_failure is None else bool(remapped_failure),
        pcie_link_gen_current=None if pcie_gen is None else int(pcie_gen),
        pcie_link_width_current=None if pcie_width is None else int(pcie_width),
        # PCIe throughput KB/s (XML pci/tx_util, pci/rx_util)
        pcie_tx_bytes_per_second=None if pcie_tx_kbs is None else float(pcie_tx_kbs) * 1000.0,
        pcie_rx_bytes_per_second=None if pcie_rx_kbs is None else float(pcie_rx_kbs) * 1000.0,
        pcie_replay_total=None if replay is None else int(replay),  # (XML pci/replay_counter)
        nvlinks=nvlinks,
        temperature_margin_celsius=None if margin is None else float(margin),
        # gpu_recovery_action (Xid 154 announces a change of it)
        recovery_action=None if recovery is None else recovery_action_name(int(recovery)),
    )
    # limits only reported relative to T.Limit, in degrees (those reported in degrees win)
    return out if margin is None else tlimits.filled(out)


# corrected volatile, uncorrected volatile, corrected aggregate, uncorrected aggregate
_ECC_FIELDS = (
    fi.FI_ECC_SBE_VOL_TOTAL,
    fi.FI_ECC_DBE_VOL_TOTAL,
    fi.FI_ECC_SBE_AGG_TOTAL,
    fi.FI_ECC_DBE_AGG_TOTAL,
)
