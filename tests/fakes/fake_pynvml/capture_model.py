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


def _flag(raw: str | None) -> bool | None:
    text = _clean(raw)
    if text is None:
        return None
    return text.lower() in {"enabled", "yes", "active", "on"}


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
