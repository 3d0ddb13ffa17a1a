# ruff: noqa: N802  (the C function names of nvml.h)
"""Fake C functions: NVLink, field values, MIG, processes, events (Xid), GPM."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from .clib_base import (
    ARGUMENT_VERSION_MISMATCH,
    INSUFFICIENT_SIZE,
    INVALID_ARGUMENT,
    NOT_FOUND,
    NOT_SUPPORTED,
    OK,
    TIMEOUT,
    LibBase,
    _address,
    _driver_tuple,
    _EventSet,
    _GpmSample,
    _out,
    _point,
)
from .device import MIB, FakeGpu

_FIELD_MEMORY_TEMP = 82
_FIELD_TOTAL_ENERGY = 83
_FIELD_NVLINK_LINK_COUNT = 91
_FIELD_PCIE_REPLAY = 94
_FIELD_PERF_POLICY_POWER = 74
_FIELD_PERF_POLICY_THERMAL = 75
_FIELD_NVLINK_TX_KIB = 138
_FIELD_NVLINK_RX_KIB = 139
_FIELD_NVLINK_GET_SPEED = 164
_FIELD_NVLINK_GET_STATE = 165
# NVML_FI_DEV_NVLINK_ERROR_DL_{REPLAY,RECOVERY,CRC} -> NVML_NVLINK_ERROR_DL_* counter index
_FIELD_NVLINK_ERRORS = {161: 0, 162: 1, 163: 2}
_ALL_LINKS = 0xFFFFFFFF
# NVML_FI_DEV_ECC_{SBE,DBE}_{VOL,AGG}_TOTAL, RETIRED_{SBE,DBE,PENDING}, REMAPPED_{COR,UNC,...}
_FIELD_ECC = {
    3: "ecc_corrected_volatile",
    4: "ecc_uncorrected_volatile",
    5: "ecc_corrected_aggregate",
    6: "ecc_uncorrected_aggregate",
}
_FIELD_RETIRED = {29: "retired_sbe", 30: "retired_dbe", 31: "retired_pending"}
_FIELD_REMAPPED = {142: 0, 143: 1, 144: 2, 145: 3}
_FIELD_RECOVERY_ACTION = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
# NVML_FI_DEV_TEMPERATURE_{SHUTDOWN,SLOWDOWN,MEM_MAX,GPU_MAX}_TLIMIT (signed margins)
_FIELD_TLIMIT = {
    193: "tlimit_shutdown",
    194: "tlimit_slowdown",
    195: "tlimit_memory_max",
    196: "tlimit_gpu_max",
}
# Field ids a driver older than this answers NotSupported for (approximate first branches, as
# for INTRODUCED: the recovery action came with Xid 154's drivers, the T.Limit thresholds with
# the drivers that print them)
_FIELD_INTRODUCED = {_FIELD_RECOVERY_ACTION: (550,)} | dict.fromkeys(_FIELD_TLIMIT, (550,))
_FIELD_HEAD = struct.Struct("<II")  # fieldId, scopeId
_FIELD_TAIL = struct.Struct("<qqIIQ")  # timestamp, latencyUsec, valueType, nvmlReturn, value


def _link_kib(gpu: FakeGpu, total_kib: float) -> int:
    """One link's share of the device's NVLink traffic, whole KiB (the traffic is even)."""
    return int(total_kib / len(gpu.capture.nvlink_speeds_gbs))


class ExtraQueries(LibBase):
    """NVLink, field values, MIG, processes, events, GPM."""

    # ---- NVLink ----------------------------------------------------------------------------------
    def _link(self, handle: Any, link: Any, name: str) -> tuple[int, FakeGpu | None]:
        code, gpu, _ = self._target(handle, name)
        if code or gpu is None:
            return code, None
        if not gpu.capture.nvlink_speeds_gbs:
            return NOT_SUPPORTED, None
        index = link.value if hasattr(link, "value") else int(link)
        if not 0 <= index < len(gpu.capture.nvlink_speeds_gbs):
            return INVALID_ARGUMENT, None
        return OK, gpu

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: Any, out: Any) -> int:
        code, gpu = self._link(handle, link, "nvmlDeviceGetNvLinkState")
        if code or gpu is None:
            return code
        _out(out).value = 1  # nvidia-smi nvlink -s lists a speed only for active links
        return OK

    def nvmlDeviceGetNvLinkErrorCounter(
        self, handle: Any, link: Any, counter: Any, out: Any
    ) -> int:
        code, gpu = self._link(handle, link, "nvmlDeviceGetNvLinkErrorCounter")
        if code or gpu is None:
            return code
        key = (int(getattr(link, "value", link)), int(getattr(counter, "value", counter)))
        _out(out).value = gpu.nvlink_errors.get(key, 0)
        return OK

    def nvmlDeviceGetNvLinkUtilizationControl(
        self, handle: Any, link: Any, counter: Any, control: Any
    ) -> int:
        # The driver's counter 0 counts bytes of all packets (nvidia-smi nvlink -sc 0bz), what
        # the fake's NVLink traffic is; counter 1 is not set up (cycles).
        code, gpu = self._link(handle, link, "nvmlDeviceGetNvLinkUtilizationControl")
        if code or gpu is None:
            return code
        out = _out(control)
        out.units, out.pktfilter = (
            (2, 0xFF) if int(getattr(counter, "value", counter)) == 0 else (0, 0)
        )
        return OK

    def nvmlDeviceGetNvLinkUtilizationCounter(
        self, handle: Any, link: Any, counter: Any, rx: Any, tx: Any
    ) -> int:
        code, gpu = self._link(handle, link, "nvmlDeviceGetNvLinkUtilizationCounter")
        if code or gpu is None:
            return code
        gpu.advance()
        # per link, in bytes; the same traffic the NVLINK_THROUGHPUT_DATA fields count in KiB
        _out(tx).value = _link_kib(gpu, gpu.nvlink_kib[0]) * 1024
        _out(rx).value = _link_kib(gpu, gpu.nvlink_kib[1]) * 1024
        return OK

    # ---- field values --------------------------------------------------------------------------
    def nvmlDeviceGetFieldValues(self, handle: Any, count: Any, values: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetFieldValues")
        if code or gpu is None:
            return code
        now_us = int(gpu.advance() * 1e6)
        # Read and write the C array directly, as the driver does (40-byte nvmlFieldValue_t).
        array = _out(values)
        view = memoryview(array).cast("B")
        for i in range(count.value):
            fid, scope = _FIELD_HEAD.unpack_from(view, i * 40)
            ret, kind, value = self._field(gpu, fid, scope)
            _FIELD_TAIL.pack_into(view, i * 40 + 8, now_us, 0, kind, ret, value)
        return OK

    def _field(self, gpu: FakeGpu, fid: int, scope: int) -> tuple[int, int, int]:
        """(nvmlReturn, valueType, value as u64) of one field."""
        if fid in gpu.field_fail:
            return gpu.field_fail[fid], 0, 0
        if fid in _FIELD_INTRODUCED and _driver_tuple(self.driver_version) < _FIELD_INTRODUCED[fid]:
            return NOT_SUPPORTED, 0, 0
        c = gpu.capture
        speeds = c.nvlink_speeds_gbs
        value: float | int | None = None
        kind = 3  # NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        if fid in _FIELD_ECC:
            value = getattr(c, _FIELD_ECC[fid]) if c.ecc_current else None
        elif fid in _FIELD_RETIRED:
            value = getattr(c, _FIELD_RETIRED[fid])
            value = None if value is None else int(value)
        elif fid in _FIELD_REMAPPED:
            value = None if c.remapped is None else int(c.remapped[_FIELD_REMAPPED[fid]])
        elif fid == _FIELD_MEMORY_TEMP:
            value, kind = c.temp_memory, 1
        elif fid == _FIELD_RECOVERY_ACTION:
            value, kind = c.recovery_action, 1
        elif fid in _FIELD_TLIMIT:
            value = getattr(c, _FIELD_TLIMIT[fid])
            kind = 5  # NVML_VALUE_TYPE_SIGNED_INT
            value = None if value is None else value & 0xFFFFFFFF  # as the union's low 4 bytes
        elif fid == _FIELD_TOTAL_ENERGY:
            value = None if gpu.power_w is None else int(gpu.energy_mj)
        elif fid == _FIELD_PCIE_REPLAY:
            value = None if c.pcie_replay is None else int(gpu.replay)
        elif fid == _FIELD_PERF_POLICY_POWER:
            value = None if c.sw_power_cap_us is None else int(gpu.power_violation_ns)
        elif fid == _FIELD_PERF_POLICY_THERMAL:
            value = None if c.sw_thermal_us is None else int(gpu.thermal_violation_ns)
        elif fid == _FIELD_NVLINK_LINK_COUNT and speeds:
            value, kind = len(speeds), 1
        elif fid in (_FIELD_NVLINK_TX_KIB, _FIELD_NVLINK_RX_KIB) and speeds:
            total = gpu.nvlink_kib[0 if fid == _FIELD_NVLINK_TX_KIB else 1]
            value = int(total) if scope == _ALL_LINKS else _link_kib(gpu, total)
        elif fid == _FIELD_NVLINK_GET_SPEED and speeds and scope < len(speeds):
            value, kind = round(speeds[scope] * 1000), 1  # MBps, as nvidia-smi divides by 1000
        elif fid == _FIELD_NVLINK_GET_STATE and speeds and scope < len(speeds):
            value, kind = 1, 1  # nvidia-smi nvlink -s lists a speed only for active links
        elif fid in _FIELD_NVLINK_ERRORS and speeds and scope < len(speeds):
            value = gpu.nvlink_errors.get((scope, _FIELD_NVLINK_ERRORS[fid]), 0)
        if value is None:
            return NOT_SUPPORTED, 0, 0
        return OK, kind, int(value)

    # ---- MIG -------------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle: Any, cur: Any, pend: Any) -> int:
        code, gpu, mig = self._target(handle, "nvmlDeviceGetMigMode")
        if code or gpu is None:
            return code
        if mig is not None or gpu.capture.mig_current is None:
            return NOT_SUPPORTED
        _out(cur).value = int(gpu.capture.mig_current)
        _out(pend).value = int(bool(gpu.capture.mig_pending))
        return OK

    def nvmlDeviceGetAttributes_v2(self, handle: Any, out: Any) -> int:
        # nvml.h: "currently only supports MIG device handles"; values from the capture's MIG row
        code, gpu, mig = self._target(handle, "nvmlDeviceGetAttributes_v2")
        if code or gpu is None:
            return code
        if mig is None:
            return NOT_SUPPORTED
        attrs, captured = _out(out), mig.captured
        if captured.sm_count is None:
            return NOT_SUPPORTED
        attrs.multiprocessorCount = captured.sm_count
        attrs.sharedCopyEngineCount = captured.copy_engines or 0
        attrs.memorySizeMB = captured.memory_total_mib
        return OK

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any, out: Any) -> int:
        # A100/H100 have 7 slices (go-nvml facts: InstanceCount of the 1-slice profile).
        return self._one(
            handle,
            out,
            "nvmlDeviceGetMaxMigDeviceCount",
            lambda g: None if g.capture.mig_current is None else 7,
        )

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: Any, out: Any) -> int:
        code, gpu, mig = self._target(handle, "nvmlDeviceGetMigDeviceHandleByIndex")
        if code or gpu is None:
            return code
        if mig is not None or not gpu.capture.mig_current:
            return NOT_SUPPORTED if mig is None else INVALID_ARGUMENT
        if not 0 <= index.value < len(gpu.migs):
            return NOT_FOUND
        _point(_out(out), self._mig_addr[id(gpu.migs[index.value])])
        return OK

    def nvmlDeviceIsMigDeviceHandle(self, handle: Any, out: Any) -> int:
        _out(out).value = int(_address(handle) in self._mig_at)
        return OK

    def nvmlDeviceGetGpuInstanceId(self, handle: Any, out: Any) -> int:
        mig = self._mig_at.get(_address(handle))
        if mig is None:
            return NOT_SUPPORTED if _address(handle) in self._gpu_at else INVALID_ARGUMENT
        _out(out).value = mig.captured.gpu_instance_id
        return OK

    def nvmlDeviceGetComputeInstanceId(self, handle: Any, out: Any) -> int:
        mig = self._mig_at.get(_address(handle))
        if mig is None:
            return NOT_SUPPORTED if _address(handle) in self._gpu_at else INVALID_ARGUMENT
        _out(out).value = mig.captured.compute_instance_id
        return OK

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: Any, out: Any) -> int:
        mig = self._mig_at.get(_address(handle))
        if mig is None:
            return INVALID_ARGUMENT
        _point(_out(out), self._addr_of[id(mig.parent)])
        return OK

    # ---- processes ------------------------------------------------------------------------------
    def _processes(self, handle: Any, count: Any, infos: Any, name: str, kind: str) -> int:
        code, gpu, mig = self._target(handle, name)
        if code or gpu is None:
            return code
        procs = gpu.processes(kind, mig)
        c_count = _out(count)
        if infos is None or c_count.value < len(procs):
            c_count.value = len(procs)
            return INSUFFICIENT_SIZE if procs else OK
        for i, proc in enumerate(procs):
            info = infos[i]
            info.pid = proc.pid
            # NVML_VALUE_NOT_AVAILABLE (ull -1) where the driver cannot tell (WDDM)
            info.usedGpuMemory = (
                (1 << 64) - 1 if proc.used_mib is None or gpu.capture.wddm else proc.used_mib * MIB
            )
            info.gpuInstanceId = (
                0xFFFFFFFF if proc.gpu_instance_id is None else proc.gpu_instance_id
            )
            info.computeInstanceId = (
                0xFFFFFFFF if proc.compute_instance_id is None else proc.compute_instance_id
            )
        c_count.value = len(procs)
        return OK

    def nvmlDeviceGetComputeRunningProcesses_v3(self, h: Any, count: Any, infos: Any) -> int:
        return self._processes(h, count, infos, "nvmlDeviceGetComputeRunningProcesses_v3", "C")

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, h: Any, count: Any, infos: Any) -> int:
        return self._processes(h, count, infos, "nvmlDeviceGetGraphicsRunningProcesses_v3", "G")

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h: Any, count: Any, infos: Any) -> int:
        return self._processes(h, count, infos, "nvmlDeviceGetComputeRunningProcesses_v2", "C")

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, h: Any, count: Any, infos: Any) -> int:
        return self._processes(h, count, infos, "nvmlDeviceGetGraphicsRunningProcesses_v2", "G")

    def nvmlDeviceGetProcessUtilization(
        self, handle: Any, samples: Any, count: Any, last_seen: Any
    ) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetProcessUtilization")
        if code or gpu is None:
            return code
        util = gpu.process_utilization
        if not util:
            return NOT_FOUND  # no samples since last_seen
        c_count = _out(count)
        if samples is None or c_count.value < len(util):
            c_count.value = len(util)
            return INSUFFICIENT_SIZE
        now_us = int(gpu.clock() * 1e6)
        for i, (pid, (sm, mem)) in enumerate(util.items()):
            s = samples[i]
            s.pid, s.timeStamp, s.smUtil, s.memUtil, s.encUtil, s.decUtil = (
                pid,
                now_us,
                sm,
                mem,
                0,
                0,
            )
        c_count.value = len(util)
        return OK

    # ---- events ----------------------------------------------------------------------------------
    def nvmlEventSetCreate(self, out: Any) -> int:
        address = next(self._ids)
        self._sets[address] = _EventSet()
        _point(_out(out), address)
        return OK

    def nvmlEventSetFree(self, event_set: Any) -> int:
        return OK if self._sets.pop(_address(event_set), None) is not None else INVALID_ARGUMENT

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any, out: Any) -> int:
        # single/double-bit ECC only where ECC is reported; Xid, P-state, clock events always
        return self._one(
            handle,
            out,
            "nvmlDeviceGetSupportedEventTypes",
            lambda g: 0x8 | 0x10 | 0x20 | (0x1 | 0x2 if g.capture.ecc_current else 0),
        )

    def nvmlDeviceRegisterEvents(self, handle: Any, mask: Any, event_set: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceRegisterEvents")
        if code or gpu is None:
            return code
        target = self._sets.get(_address(event_set))
        if target is None:
            return INVALID_ARGUMENT
        index = self.gpus.index(gpu)
        target.devices[index] = target.devices.get(index, 0) | mask.value
        return OK

    def nvmlEventSetWait_v2(self, event_set: Any, data: Any, timeout_ms: Any) -> int:
        target = self._sets.get(_address(event_set))
        if target is None:
            return INVALID_ARGUMENT
        now = self.clock()
        for index, mask in target.devices.items():
            gpu = self.gpus[index]
            if not mask & 0x8:  # nvmlEventTypeXidCriticalError
                continue
            due = [x for x in gpu.xids if x[0] <= now]
            if due:
                gpu.xids.remove(due[0])
                event = _out(data)
                event.device = ctypes.cast(
                    ctypes.c_void_p(self._addr_of[id(gpu)]), type(event.device)
                )
                event.eventType, event.eventData = 0x8, due[0][1]
                event.gpuInstanceId = event.computeInstanceId = 0xFFFFFFFF
                return OK
        return TIMEOUT

    # ---- GPM -------------------------------------------------------------------------------------
    def nvmlGpmQueryDeviceSupport(self, handle: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlGpmQueryDeviceSupport")
        if code or gpu is None:
            return code
        support = _out(out)
        if support.version != 1:  # NVML_GPM_SUPPORT_VERSION
            return ARGUMENT_VERSION_MISMATCH
        support.isSupportedDevice = int(gpu.gpm_supported)
        return OK

    def nvmlGpmSampleAlloc(self, out: Any) -> int:
        address = next(self._ids)
        self._samples[address] = _GpmSample()
        _point(_out(out), address)
        return OK

    def nvmlGpmSampleFree(self, sample: Any) -> int:
        return OK if self._samples.pop(_address(sample), None) is not None else INVALID_ARGUMENT

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> int:
        code, gpu, mig = self._target(handle, "nvmlGpmSampleGet")
        if code or gpu is None:
            return code
        target = self._samples.get(_address(sample))
        if target is None:
            return INVALID_ARGUMENT
        if not gpu.gpm_supported or mig is not None:
            return NOT_SUPPORTED
        target.time_s = gpu.advance()
        target.integrals = dict(gpu.gpm_integrals)
        target.taken, target.gpu = True, gpu
        return OK

    def nvmlGpmMigSampleGet(self, handle: Any, gpu_instance_id: Any, sample: Any) -> int:
        # nvml.h: the parent GPU's handle and a GPU instance id; Hopper+ in MIG mode only
        code, gpu, mig = self._target(handle, "nvmlGpmMigSampleGet")
        if code or gpu is None:
            return code
        target = self._samples.get(_address(sample))
        if target is None or mig is not None:
            return INVALID_ARGUMENT
        if not gpu.gpm_supported or not gpu.capture.mig_current:
            return NOT_SUPPORTED
        gi = int(getattr(gpu_instance_id, "value", gpu_instance_id))
        if not any(m.captured.gpu_instance_id == gi for m in gpu.migs):
            return NOT_FOUND
        target.time_s = gpu.advance()
        target.integrals = dict(gpu.mig_gpm_integrals.get(gi, {}))
        target.taken, target.gpu = True, gpu
        return OK

    def nvmlGpmMetricsGet(self, out: Any) -> int:
        request = _out(out)
        if request.version != 1:  # NVML_GPM_METRICS_GET_VERSION
            return ARGUMENT_VERSION_MISMATCH
        first = self._samples.get(_address(request.sample1))
        second = self._samples.get(_address(request.sample2))
        if first is None or second is None or not (first.taken and second.taken):
            return INVALID_ARGUMENT
        dt = second.time_s - first.time_s
        for i in range(request.numMetrics):
            metric = request.metrics[i]
            mid = metric.metricId
            if mid not in second.integrals or dt <= 0:
                metric.nvmlReturn = NOT_SUPPORTED if dt > 0 else INVALID_ARGUMENT
                metric.value = 0.0
                continue
            metric.nvmlReturn = OK
            metric.value = (second.integrals[mid] - first.integrals.get(mid, 0.0)) / dt
        return OK
