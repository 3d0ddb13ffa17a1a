"""What a capture says about one GPU, in nvidia-smi's display units, and cell helpers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

_NA = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]"}


def _clean(raw: str | None) -> str | None:
    if raw is None:
        return None
    text = " ".join(raw.split())
    if text.lower() in _NA or "deprecated" in text.lower():
        return None
    return text


def _num(raw: str | None) -> float | None:
    text = _clean(raw)
    if text is None:
        return None
    match = re.match(r"^-?[0-9]+(\.[0-9]+)?", text)
    return float(match.group(0)) if match else None


def _int(raw: str | None) -> int | None:
    value = _num(raw)
    return None if value is None else int(value)


def repair_status(channel: bool | None, tpc: bool | None) -> tuple[bool, bool] | None:
    """nvmlRepairStatus_v1_t's two flags; None (NOT_SUPPORTED) when the capture prints neither."""
    if channel is None and tpc is None:
        return None
    return bool(channel), bool(tpc)


def _flag(raw: str | None) -> bool | None:
    text = _clean(raw)
    if text is None:
        return None
    return text.lower() in {"enabled", "yes", "active", "on"}


# nvidia-smi's names of NVML enums, back to their values (nvml.h), for the fake only
_RECOVERY_ACTIONS = {"none": 0, "reset": 1, "gpu reset": 1, "reboot": 2, "node reboot": 2}
_RECOVERY_ACTIONS |= {"drain p2p": 3, "drain and reset": 4}
_FABRIC_STATES = {"not supported": 0, "not started": 1, "in progress": 2, "completed": 3}


def _recovery_action(raw: str | None) -> int | None:
    text = _clean(raw)
    return None if text is None else _RECOVERY_ACTIONS[text.lower()]


def _fabric(state_raw: str | None, status_raw: str | None) -> tuple[int, int] | None:
    """(nvmlGpuFabricState_t, status nvmlReturn_t): "Completed", "Success" -> (3, 0)."""
    state = _clean(state_raw)
    if state is None:
        return None
    status = _clean(status_raw)
    # NVML_SUCCESS, or NVML_ERROR_UNKNOWN for a failure text the fake does not map back
    return _FABRIC_STATES[state.lower()], 0 if status in (None, "Success") else 999


@dataclass(frozen=True, slots=True)
class CapturedProcess:
    pid: int
    name: str | None
    used_mib: int | None  # None = N/A (WDDM)
    kind: str = "C"  # "C", "G", "C+G"
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True, slots=True)
class CapturedMig:
    gpu_instance_id: int
    compute_instance_id: int
    sm_count: int | None
    memory_total_mib: int
    memory_used_mib: int
    copy_engines: int | None = None  # = slice count of the profile


@dataclass(frozen=True, slots=True)
class CapturedGpu:
    """What one capture says about one GPU, in nvidia-smi's display units."""

    source: str
    name: str
    uuid: str
    driver_version: str
    cuda_version: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    pci_device_id: int | None = None
    pci_subsystem_id: int | None = None
    vbios: str | None = None
    architecture: str | None = None
    memory_total_mib: int | None = None
    memory_reserved_mib: int | None = None
    memory_used_mib: int | None = None
    memory_free_mib: int | None = None
    util_gpu: int | None = None
    util_memory: int | None = None
    util_encoder: int | None = None
    util_decoder: int | None = None
    temp_gpu: int | None = None
    temp_memory: int | None = None
    temp_slowdown: int | None = None
    temp_shutdown: int | None = None
    temp_gpu_max: int | None = None  # "GPU Max Operating Temp" (absolute, pre-Ada)
    temp_memory_max: int | None = None  # "Memory Max Operating Temp"
    temp_margin: int | None = None  # T.Limit: °C below the max operating temperature
    # thresholds printed relative to T.Limit (Ada+): NVML_FI_DEV_TEMPERATURE_*_TLIMIT 193-196
    tlimit_shutdown: int | None = None
    tlimit_slowdown: int | None = None
    tlimit_memory_max: int | None = None
    tlimit_gpu_max: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_enforced_w: float | None = None
    clock_graphics: int | None = None
    clock_sm: int | None = None
    clock_memory: int | None = None
    clock_video: int | None = None
    max_graphics: int | None = None
    max_sm: int | None = None
    max_memory: int | None = None
    max_video: int | None = None
    pstate: int | None = None  # 0 for "P0"
    fan_percent: int | None = None
    clock_event_reasons: int | None = None  # active bitmask
    sw_power_cap_us: int | None = None
    sw_thermal_us: int | None = None
    hw_thermal_us: int | None = None
    ecc_current: bool | None = None
    ecc_pending: bool | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool | None = None
    remapped: tuple[int, int, bool, bool] | None = None  # corr, unc, pending, failure
    remap_histogram: tuple[int, int, int, int, int] | None = None  # max, high, partial, low, none
    sram_threshold_exceeded: bool | None = None
    # R575+ "Unrepairable Memory" and ("Channel Repair Pending", "TPC Repair Pending");
    # None = N/A, i.e. NOT_SUPPORTED from nvmlDeviceGetUnrepairableMemoryFlag_v1 /
    # nvmlDeviceGetRepairStatus
    unrepairable_memory: bool | None = None
    repair_pending: tuple[bool, bool] | None = None
    recovery_action: int | None = None  # nvmlDeviceGpuRecoveryAction_t
    fabric: tuple[int, int] | None = None  # nvmlGpuFabricState_t, status nvmlReturn_t
    # (healthMask, healthSummary) of nvmlGpuFabricInfo_v2/v3: every capture prints its
    # "Fabric / Health" rows N/A, i.e. NVML's 0 (NOT_SUPPORTED) in both
    fabric_health: tuple[int, int] = (0, 0)
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    pcie_tx_kbs: int | None = None
    pcie_rx_kbs: int | None = None
    pcie_replay: int | None = None
    persistence: bool | None = None
    compute_mode: str | None = None  # "Default", "Exclusive_Process", "Prohibited"
    mig_current: bool | None = None
    mig_pending: bool | None = None
    mig_devices: tuple[CapturedMig, ...] = ()
    processes: tuple[CapturedProcess, ...] = ()
    nvlink_speeds_gbs: tuple[float, ...] = ()
    wddm: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    def with_identity(self, index: int) -> CapturedGpu:
        """A copy with a distinct UUID/bus id/serial, for multi-GPU fakes built from one capture."""
        return replace(
            self,
            uuid=f"{self.uuid[:-12]}{index:012x}",
            pci_bus_id=f"00000000:{0x10 + index:02X}:00.0",
            serial=None if self.serial is None else f"{self.serial[:-3]}{index:03d}",
        )
