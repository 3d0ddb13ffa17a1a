"""Health state a device changes rarely: temperature limits, SRAM threshold, remap banks, fabric,
vGPU licence, the repair flags.

Read with the settings (every ``settings_every_s``, and on the first reading): the SRAM
threshold flag and the remap-bank histogram move when the memory degrades, the fabric state when
the NVSwitch fabric (re)registers, a vGPU guest's licence when it is granted or lost, the repair
flags when the driver marks memory or a TPC for repair (they hold until the reset), the limits
never. The per-reading health values (the T.Limit margin, the recovery action) are in
readings.py. Every call answers None where the device or driver does not report it
(NotSupported on consumer GPUs, FunctionNotFound on old drivers, NoPermission for the SRAM
status as a non-root user).
"""

from __future__ import annotations

import ctypes
from typing import Any

from gpuwarden.catalog.nvml_enums import FABRIC_SUCCESS, fabric_health, fabric_state_name
from gpuwarden.telemetry.health_readings import TLimitThresholds
from gpuwarden.telemetry.nvml import fields as fi
from gpuwarden.telemetry.nvml._lib import Nvml
from gpuwarden.telemetry.nvml.vgpu import license_status

# nvmlTemperatureThresholds_t (nvml.h)
_THRESHOLD_MEM_MAX, _THRESHOLD_GPU_MAX = 2, 3
# NVML_FI_DEV_TEMPERATURE_{SHUTDOWN,SLOWDOWN}_TLIMIT: on Ada and newer the thresholds as T.Limit
# margins (nvml.h: nvmlDeviceGetTemperatureThreshold is not the preferred interface there)
FI_SHUTDOWN_TLIMIT, FI_SLOWDOWN_TLIMIT = 193, 194
_COMPLETED = 3  # NVML_GPU_FABRIC_STATE_COMPLETED: only then is the status valid (nvml.h)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def limit_fields(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """Max operating temperatures, in degrees, where the device reports them (pre-Ada)."""
    call = nvml.call
    return {
        "temperature_gpu_max_celsius": _float(
            call("nvmlDeviceGetTemperatureThreshold", handle, _THRESHOLD_GPU_MAX)
        ),  # (XML gpu_temp_max_gpu_threshold)
        "temperature_memory_max_celsius": _float(
            call("nvmlDeviceGetTemperatureThreshold", handle, _THRESHOLD_MEM_MAX)
        ),  # (XML gpu_temp_max_mem_threshold)
    }


def tlimit_thresholds(nvml: Nvml, handle: Any) -> TLimitThresholds:
    """Slowdown and shutdown as T.Limit margins ("GPU Slowdown T.Limit Temp : -2 C")."""
    values = nvml.call("nvmlDeviceGetFieldValues", handle, [FI_SHUTDOWN_TLIMIT, FI_SLOWDOWN_TLIMIT])
    if values is None:
        return TLimitThresholds()
    shutdown, slowdown = (fi.entry_value(entry) for entry in values)
    return TLimitThresholds(slowdown_celsius=_float(slowdown), shutdown_celsius=_float(shutdown))


def _struct(nvml: Nvml, name: str) -> Any:
    """A fresh nvidia-ml-py versioned struct (its __init__ sets the version), or None when this
    nvidia-ml-py predates it."""
    cls = getattr(nvml.module, name, None)
    return None if cls is None else cls()


def sram_threshold_exceeded(nvml: Nvml, handle: Any) -> bool | None:
    """nvmlEccSramErrorStatus_v1_t.bThresholdExceeded ("SRAM Threshold Exceeded")."""
    status = _struct(nvml, "c_nvmlEccSramErrorStatus_v1_t")
    if status is None:
        return None
    if nvml.call("nvmlDeviceGetSramEccErrorStatus", handle, ctypes.byref(status)) is None:
        return None
    return bool(status.bThresholdExceeded)


def banks_exhausted(nvml: Nvml, handle: Any) -> int | None:
    """The "None" bucket of nvmlDeviceGetRowRemapperHistogram: banks with no spare row left."""
    histogram = nvml.call("nvmlDeviceGetRowRemapperHistogram", handle)
    return None if histogram is None else int(histogram.none)


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def repair_fields(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """The R575+ repair readings: nvmlDeviceGetUnrepairableMemoryFlag_v1
    (nvmlUnrepairableMemoryStatus_v1_t.bUnrepairableMemory, "Unrepairable Memory") and
    nvmlDeviceGetRepairStatus (nvmlRepairStatus_v1_t.bChannelRepairPending /
    bTpcRepairPending, "Channel / TPC Repair Pending"); None where the GPU or driver does not
    report them (NotSupported, FunctionNotFound before R575, an nvidia-ml-py without them)."""
    unrepairable = nvml.call("nvmlDeviceGetUnrepairableMemoryFlag_v1", handle)
    status = nvml.call("nvmlDeviceGetRepairStatus", handle)  # [channel, tpc] pending
    channel, tpc = (None, None) if status is None else status
    return {
        "memory_unrepairable": _flag(unrepairable),
        "channel_repair_pending": _flag(channel),
        "tpc_repair_pending": _flag(tpc),
    }


def _fabric_info(nvml: Nvml, handle: Any) -> Any:
    """nvmlDeviceGetGpuFabricInfoV with the v3 struct (health summary), the v2 one (health
    mask) on drivers that refuse v3, else the deprecated v1 call on drivers without the
    versioned one."""
    versioned = "nvmlDeviceGetGpuFabricInfoV"
    for name in ("c_nvmlGpuFabricInfo_v3_t", "c_nvmlGpuFabricInfo_v2_t"):
        info = _struct(nvml, name)
        if info is not None and nvml.call(versioned, handle, ctypes.byref(info)) is not None:
            return info
    if nvml.has(versioned):
        return None  # the versioned call answered "not reported": v1 would say the same
    info = _struct(nvml, "c_nvmlGpuFabricInfo_t")
    if (
        info is not None
        and nvml.call("nvmlDeviceGetGpuFabricInfo", handle, ctypes.byref(info)) is not None
    ):
        return info
    return None


def _error_text(nvml: Nvml, code: int) -> str:
    try:
        return str(nvml.module.NVMLError(code))
    except nvml.error:  # nvmlErrorString itself failed
        return f"NVML error {code}"


def _fabric_health(info: Any) -> dict[str, Any]:
    """fabric_health_summary / _issues of a v2 (mask only) or v3 (mask and summary) struct."""
    summary = int(info.healthSummary) if hasattr(info, "healthSummary") else None
    return fabric_health(summary, int(getattr(info, "healthMask", 0)))


_NO_FABRIC = dict.fromkeys(
    ("fabric_state", "fabric_status", "fabric_health_summary", "fabric_health_issues")
)


def fabric_fields(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """fabric_state and fabric_status (the status only once registration completed), and the
    fabric health where the driver reports it."""
    info = _fabric_info(nvml, handle)
    if info is None:
        return dict(_NO_FABRIC)
    state = int(info.state)
    status = None
    if state == _COMPLETED:
        code = int(info.status)
        status = FABRIC_SUCCESS if code == 0 else _error_text(nvml, code)
    out = {"fabric_state": fabric_state_name(state), "fabric_status": status}
    out.update(_fabric_health(info))
    return out


def health_fields(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """Every slowly changing health field of the device, as DeviceSample fields."""
    out = limit_fields(nvml, handle)
    out["sram_threshold_exceeded"] = sram_threshold_exceeded(nvml, handle)
    out["remapped_rows_banks_exhausted"] = banks_exhausted(nvml, handle)
    out.update(fabric_fields(nvml, handle))
    out["vgpu_license_status"] = license_status(nvml, handle)
    out.update(repair_fields(nvml, handle))
    return out
