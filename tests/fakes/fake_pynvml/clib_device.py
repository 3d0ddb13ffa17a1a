# ruff: noqa: N802  (the C function names of nvml.h)
"""Fake C functions: identity, memory, utilization, thermals, power, clocks, ECC, PCIe, modes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .clib_base import (
    ARGUMENT_VERSION_MISMATCH,
    INSUFFICIENT_SIZE,
    NOT_SUPPORTED,
    OK,
    LibBase,
    _driver_tuple,
    _out,
)
from .device import ARCHITECTURES, MIB, FakeGpu, FakeMig

# NVML_STRUCT_VERSION(GpuFabricInfo, 2) and (…, 3): nvmlGpuFabricInfo_v2 / _v3 (nvml.h)
_FABRIC_INFO_V2, _FABRIC_INFO_V3 = 0x02000024, 0x3000028
_FABRIC_INFO_V3_DRIVER = (570,)
# NVML_STRUCT_VERSION(UnrepairableMemoryStatus, 1) and (RepairStatus, 1) (nvml.h)
_UNREPAIRABLE_MEMORY_V1, _REPAIR_STATUS_V1 = (
    0x1000008,
    0x100000C,
)  # healthSummary, approximately the first branch with it


class DeviceQueries(LibBase):
    """nvmlDeviceGet* for one-device readings."""

    # ---- identity --------------------------------------------------------------------------------
    def _string(
        self, handle: Any, buf: Any, size: Any, name: str, value: Callable[..., Any]
    ) -> int:
        code, gpu, mig = self._target(handle, name)
        if code or gpu is None:
            return code
        text = value(gpu, mig)
        if text is None:
            return NOT_SUPPORTED
        encoded = text.encode()
        if len(encoded) >= size.value:
            return INSUFFICIENT_SIZE
        buf.value = encoded
        return OK

    def nvmlDeviceGetName(self, handle: Any, buf: Any, size: Any) -> int:
        def name(gpu: FakeGpu, mig: FakeMig | None) -> str:
            if mig is None:
                return gpu.capture.name
            return f"{gpu.capture.name} MIG {mig.profile}" if mig.profile else gpu.capture.name

        return self._string(handle, buf, size, "nvmlDeviceGetName", name)

    def nvmlDeviceGetUUID(self, handle: Any, buf: Any, size: Any) -> int:
        return self._string(
            handle,
            buf,
            size,
            "nvmlDeviceGetUUID",
            lambda g, m: g.capture.uuid if m is None else m.uuid,
        )

    def nvmlDeviceGetSerial(self, handle: Any, buf: Any, size: Any) -> int:
        return self._string(handle, buf, size, "nvmlDeviceGetSerial", lambda g, m: g.capture.serial)

    def nvmlDeviceGetVbiosVersion(self, handle: Any, buf: Any, size: Any) -> int:
        return self._string(
            handle, buf, size, "nvmlDeviceGetVbiosVersion", lambda g, m: g.capture.vbios
        )

    def nvmlDeviceGetPciInfo_v3(self, handle: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetPciInfo_v3")
        if code or gpu is None:
            return code
        info, bus_id = _out(out), gpu.capture.pci_bus_id or "00000000:00:00.0"
        domain, bus, rest = bus_id.split(":")
        info.busId = bus_id.encode()
        info.busIdLegacy = bus_id[-12:].encode()
        info.domain, info.bus = int(domain, 16), int(bus, 16)
        info.device = int(rest.split(".")[0], 16)
        info.pciDeviceId = gpu.capture.pci_device_id or 0
        info.pciSubSystemId = gpu.capture.pci_subsystem_id or 0
        return OK

    def nvmlDeviceGetArchitecture(self, handle: Any, out: Any) -> int:
        return self._one(
            handle,
            out,
            "nvmlDeviceGetArchitecture",
            lambda g: ARCHITECTURES.get(g.capture.architecture or "", 0xFFFFFFFF),
        )

    def nvmlDeviceGetIndex(self, handle: Any, out: Any) -> int:
        return self._one(handle, out, "nvmlDeviceGetIndex", self.gpus.index)

    def nvmlDeviceGetMinorNumber(self, handle: Any, out: Any) -> int:
        return self._one(handle, out, "nvmlDeviceGetMinorNumber", lambda g: g.minor)

    # ---- memory, utilization ---------------------------------------------------------------------
    def _memory(self, handle: Any, out: Any, name: str, v2: bool) -> int:
        code, gpu, mig = self._target(handle, name)
        if code or gpu is None:
            return code
        mem = _out(out)
        if v2 and mem.version != 0x02000028:  # nvmlMemory_v2 (nvml.h NVML_STRUCT_VERSION)
            return ARGUMENT_VERSION_MISMATCH
        if mig is not None:
            total, used, reserved = mig.captured.memory_total_mib, mig.captured.memory_used_mib, 0
            free = total - used
        else:
            c = gpu.capture
            if c.memory_total_mib is None or c.memory_used_mib is None:
                return NOT_SUPPORTED
            total, used = c.memory_total_mib, c.memory_used_mib
            reserved = c.memory_reserved_mib or 0
            free = c.memory_free_mib if c.memory_free_mib is not None else total - used - reserved
        mem.total, mem.free = total * MIB, free * MIB
        if v2:
            mem.used, mem.reserved = used * MIB, reserved * MIB
        else:
            mem.used = (total - free) * MIB  # v1 counts reserved as used (510.39+)
        return OK

    def nvmlDeviceGetMemoryInfo(self, handle: Any, out: Any) -> int:
        return self._memory(handle, out, "nvmlDeviceGetMemoryInfo", v2=False)

    def nvmlDeviceGetMemoryInfo_v2(self, handle: Any, out: Any) -> int:
        return self._memory(handle, out, "nvmlDeviceGetMemoryInfo_v2", v2=True)

    def nvmlDeviceGetUtilizationRates(self, handle: Any, out: Any) -> int:
        code, gpu, mig = self._target(handle, "nvmlDeviceGetUtilizationRates")
        if code or gpu is None:
            return code
        c = gpu.capture
        if mig is not None or c.util_gpu is None or c.util_memory is None:
            return NOT_SUPPORTED
        util = _out(out)
        util.gpu, util.memory = c.util_gpu, c.util_memory
        return OK

    def _codec(self, handle: Any, util: Any, period: Any, name: str, attr: str) -> int:
        code, gpu, mig = self._target(handle, name)
        if code or gpu is None:
            return code
        value = getattr(gpu.capture, attr)
        if mig is not None or value is None:
            return NOT_SUPPORTED
        _out(util).value = value
        _out(period).value = 167_000  # µs; a typical NVML sampling period, not from a capture
        return OK

    def nvmlDeviceGetEncoderUtilization(self, handle: Any, util: Any, period: Any) -> int:
        return self._codec(handle, util, period, "nvmlDeviceGetEncoderUtilization", "util_encoder")

    def nvmlDeviceGetDecoderUtilization(self, handle: Any, util: Any, period: Any) -> int:
        return self._codec(handle, util, period, "nvmlDeviceGetDecoderUtilization", "util_decoder")

    # ---- temperature, power, clocks --------------------------------------------------------------
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: Any, out: Any) -> int:
        return self._one(handle, out, "nvmlDeviceGetTemperature", lambda g: g.capture.temp_gpu)

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, kind: Any, out: Any) -> int:
        # NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, _SLOWDOWN, _MEM_MAX, _GPU_MAX: absolute degrees,
        # only where the capture prints them so (Ada+ print T.Limit margins: NotSupported here)
        attrs = {0: "temp_shutdown", 1: "temp_slowdown", 2: "temp_memory_max", 3: "temp_gpu_max"}
        attr = attrs.get(kind.value)
        return self._one(
            handle,
            out,
            "nvmlDeviceGetTemperatureThreshold",
            lambda g: None if attr is None else getattr(g.capture, attr),
        )

    def nvmlDeviceGetMarginTemperature(self, handle: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetMarginTemperature")
        if code or gpu is None:
            return code
        margin = _out(out)
        if margin.version != 0x1000008:  # nvmlMarginTemperature_v1
            return ARGUMENT_VERSION_MISMATCH
        if gpu.capture.temp_margin is None:
            return NOT_SUPPORTED
        margin.marginTemperature = gpu.capture.temp_margin
        return OK

    def nvmlDeviceGetPowerUsage(self, handle: Any, out: Any) -> int:
        return self._one(
            handle,
            out,
            "nvmlDeviceGetPowerUsage",
            lambda g: None if g.power_w is None else round(g.power_w * 1000),
        )

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any, out: Any) -> int:
        return self._one(
            handle,
            out,
            "nvmlDeviceGetPowerManagementLimit",
            lambda g: (
                None if g.capture.power_limit_w is None else round(g.capture.power_limit_w * 1000)
            ),
        )

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any, out: Any) -> int:
        return self._one(
            handle,
            out,
            "nvmlDeviceGetEnforcedPowerLimit",
            lambda g: (
                None
                if g.capture.power_enforced_w is None
                else round(g.capture.power_enforced_w * 1000)
            ),
        )

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any, out: Any) -> int:
        def energy(gpu: FakeGpu) -> int | None:
            gpu.advance()
            return None if gpu.power_w is None else int(gpu.energy_mj)

        return self._one(handle, out, "nvmlDeviceGetTotalEnergyConsumption", energy)

    _CLOCKS: ClassVar[dict[int, str]] = {0: "graphics", 1: "sm", 2: "memory", 3: "video"}

    def nvmlDeviceGetClockInfo(self, handle: Any, kind: Any, out: Any) -> int:
        attr = f"clock_{self._CLOCKS.get(kind.value, '?')}"
        return self._one(
            handle, out, "nvmlDeviceGetClockInfo", lambda g: getattr(g.capture, attr, None)
        )

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, kind: Any, out: Any) -> int:
        attr = f"max_{self._CLOCKS.get(kind.value, '?')}"
        return self._one(
            handle, out, "nvmlDeviceGetMaxClockInfo", lambda g: getattr(g.capture, attr, None)
        )

    def nvmlDeviceGetPerformanceState(self, handle: Any, out: Any) -> int:
        return self._one(handle, out, "nvmlDeviceGetPerformanceState", lambda g: g.capture.pstate)

    def nvmlDeviceGetFanSpeed(self, handle: Any, out: Any) -> int:
        return self._one(handle, out, "nvmlDeviceGetFanSpeed", lambda g: g.capture.fan_percent)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any, out: Any) -> int:
        return self._one(handle, out, "nvmlDeviceGetCurrentClocksEventReasons", lambda g: g.reasons)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any, out: Any) -> int:
        return self._one(
            handle, out, "nvmlDeviceGetCurrentClocksThrottleReasons", lambda g: g.reasons
        )

    def nvmlDeviceGetViolationStatus(self, handle: Any, policy: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetViolationStatus")
        if code or gpu is None:
            return code
        c = gpu.capture
        known = c.sw_power_cap_us if policy.value == 0 else c.sw_thermal_us
        if policy.value not in (0, 1) or known is None:
            return NOT_SUPPORTED
        now = gpu.advance()
        viol = _out(out)
        viol.referenceTime = int(now * 1e6)
        viol.violationTime = int(
            gpu.power_violation_ns if policy.value == 0 else gpu.thermal_violation_ns
        )
        return OK

    # ---- ECC, retired pages, remapped rows ----------------------------------------------------
    def nvmlDeviceGetEccMode(self, handle: Any, cur: Any, pend: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetEccMode")
        if code or gpu is None:
            return code
        if gpu.capture.ecc_current is None:
            return NOT_SUPPORTED
        _out(cur).value = int(gpu.capture.ecc_current)
        _out(pend).value = int(bool(gpu.capture.ecc_pending))
        return OK

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, kind: Any, counter: Any, out: Any) -> int:
        word = "corrected" if kind.value == 0 else "uncorrected"
        scope = "volatile" if counter.value == 0 else "aggregate"
        return self._one(
            handle,
            out,
            "nvmlDeviceGetTotalEccErrors",
            lambda g: (
                None if not g.capture.ecc_current else getattr(g.capture, f"ecc_{word}_{scope}")
            ),
        )

    def nvmlDeviceGetRetiredPages(self, handle: Any, cause: Any, count: Any, pages: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetRetiredPages")
        if code or gpu is None:
            return code
        n = gpu.capture.retired_sbe if cause.value == 0 else gpu.capture.retired_dbe
        if n is None:
            return NOT_SUPPORTED
        c_count = _out(count)
        if pages is None:
            c_count.value = n
            return INSUFFICIENT_SIZE if n else OK
        if c_count.value < n:
            c_count.value = n
            return INSUFFICIENT_SIZE
        for i in range(n):
            pages[i] = 0x1000 * (i + 1)  # addresses are not in any capture; any distinct values
        c_count.value = n
        return OK

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any, out: Any) -> int:
        return self._one(
            handle,
            out,
            "nvmlDeviceGetRetiredPagesPendingStatus",
            lambda g: None if g.capture.retired_pending is None else int(g.capture.retired_pending),
        )

    def nvmlDeviceGetRemappedRows(self, handle: Any, *outs: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetRemappedRows")
        if code or gpu is None:
            return code
        if gpu.capture.remapped is None:
            return NOT_SUPPORTED
        for target, value in zip(outs, gpu.capture.remapped, strict=True):
            _out(target).value = int(value)
        return OK

    def nvmlDeviceGetRowRemapperHistogram(self, handle: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetRowRemapperHistogram")
        if code or gpu is None:
            return code
        if gpu.capture.remap_histogram is None:
            return NOT_SUPPORTED
        values = _out(out)
        values.max, values.high, values.partial, values.low, values.none = (
            gpu.capture.remap_histogram
        )
        return OK

    def nvmlDeviceGetSramEccErrorStatus(self, handle: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetSramEccErrorStatus")
        if code or gpu is None:
            return code
        status = _out(out)
        if status.version != 0x1000068:  # nvmlEccSramErrorStatus_v1
            return ARGUMENT_VERSION_MISMATCH
        if gpu.capture.sram_threshold_exceeded is None:
            return NOT_SUPPORTED
        # only the flag: the captures do not split their SRAM counts like the struct does
        status.bThresholdExceeded = int(gpu.capture.sram_threshold_exceeded)
        return OK

    def nvmlDeviceGetUnrepairableMemoryFlag_v1(self, handle: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetUnrepairableMemoryFlag_v1")
        if code or gpu is None:
            return code
        status = _out(out)
        if status.version != _UNREPAIRABLE_MEMORY_V1:
            return ARGUMENT_VERSION_MISMATCH
        if gpu.capture.unrepairable_memory is None:
            return NOT_SUPPORTED
        # nvml.h's bUnrepairableMemory, as nvidia-ml-py's c_nvmlUnrepairableMemory_v1_t names it
        status.unrepairableMemory = int(gpu.capture.unrepairable_memory)
        return OK

    def nvmlDeviceGetRepairStatus(self, handle: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetRepairStatus")
        if code or gpu is None:
            return code
        status = _out(out)
        if status.version != _REPAIR_STATUS_V1:
            return ARGUMENT_VERSION_MISMATCH
        if gpu.capture.repair_pending is None:
            return NOT_SUPPORTED
        channel, tpc = gpu.capture.repair_pending
        status.bChannelRepairPending, status.bTpcRepairPending = int(channel), int(tpc)
        return OK

    def _fabric(self, handle: Any, out: Any, name: str, versions: tuple[int, ...]) -> int:
        code, gpu, _ = self._target(handle, name)
        if code or gpu is None:
            return code
        info = _out(out)
        if versions and info.version not in versions:
            return ARGUMENT_VERSION_MISMATCH
        if gpu.capture.fabric is None:
            return NOT_SUPPORTED
        info.state, info.status = gpu.capture.fabric
        if versions:  # v2 added healthMask, v3 healthSummary (the v1 struct has neither)
            mask, summary = gpu.capture.fabric_health
            info.healthMask = mask
            if info.version == _FABRIC_INFO_V3:
                info.healthSummary = summary
        return OK

    def nvmlDeviceGetGpuFabricInfoV(self, handle: Any, out: Any) -> int:
        # v3 (the health summary) from R570: an older driver refuses it (version mismatch)
        known = (_FABRIC_INFO_V2, _FABRIC_INFO_V3)
        v3 = _driver_tuple(self.driver_version) >= _FABRIC_INFO_V3_DRIVER
        versions = known if v3 else known[:1]
        return self._fabric(handle, out, "nvmlDeviceGetGpuFabricInfoV", versions)

    def nvmlDeviceGetGpuFabricInfo(self, handle: Any, out: Any) -> int:
        return self._fabric(handle, out, "nvmlDeviceGetGpuFabricInfo", ())

    # ---- PCIe ------------------------------------------------------------------------------------
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any, out: Any) -> int:
        return self._one(
            handle, out, "nvmlDeviceGetCurrPcieLinkGeneration", lambda g: g.capture.pcie_gen
        )

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any, out: Any) -> int:
        return self._one(
            handle, out, "nvmlDeviceGetMaxPcieLinkGeneration", lambda g: g.capture.pcie_gen_max
        )

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any, out: Any) -> int:
        return self._one(
            handle, out, "nvmlDeviceGetCurrPcieLinkWidth", lambda g: g.capture.pcie_width
        )

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any, out: Any) -> int:
        return self._one(
            handle, out, "nvmlDeviceGetMaxPcieLinkWidth", lambda g: g.capture.pcie_width_max
        )

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: Any, out: Any) -> int:
        attr = {0: "pcie_tx_kbs", 1: "pcie_rx_kbs"}.get(counter.value, "?")
        return self._one(
            handle, out, "nvmlDeviceGetPcieThroughput", lambda g: getattr(g.capture, attr, None)
        )

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any, out: Any) -> int:
        def replay(gpu: FakeGpu) -> int | None:
            gpu.advance()
            return None if gpu.capture.pcie_replay is None else int(gpu.replay)

        return self._one(handle, out, "nvmlDeviceGetPcieReplayCounter", replay)

    # ---- modes -----------------------------------------------------------------------------------
    def nvmlDeviceGetPersistenceMode(self, handle: Any, out: Any) -> int:
        return self._one(
            handle,
            out,
            "nvmlDeviceGetPersistenceMode",
            lambda g: None if g.capture.persistence is None else int(g.capture.persistence),
        )

    def nvmlDeviceGetComputeMode(self, handle: Any, out: Any) -> int:
        modes = {"Default": 0, "Prohibited": 2, "Exclusive_Process": 3}
        return self._one(
            handle,
            out,
            "nvmlDeviceGetComputeMode",
            lambda g: modes.get(g.capture.compute_mode or ""),
        )
