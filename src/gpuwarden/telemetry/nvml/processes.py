"""Processes holding a context on a device, with per-process utilization where NVML has it.

Read through the C functions with per-device arrays made once (nvidia-ml-py's wrappers make a
sizing call, a new array and a Python object per process on every reading); the wrappers stay
the path for a library without the versioned functions.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from gpuwarden.telemetry.nvml._lib import Nvml, text
from gpuwarden.telemetry.nvml.construct import builder
from gpuwarden.types.telemetry import ProcessSample

_NOT_MIG = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId of a process outside MIG
_NOT_AVAILABLE = (1 << 64) - 1  # NVML_VALUE_NOT_AVAILABLE_ulonglong: usedGpuMemory unknown (WDDM)
_INSUFFICIENT_SIZE = 7
_NOT_FOUND = 6
# nvmlProcessInfo_v2_t, which nvidia-ml-py passes to the _v3 functions too: pid u32,
# usedGpuMemory u64, gpuInstanceId u32, computeInstanceId u32
_INFO = struct.Struct("<I4xQII")
# nvmlProcessUtilizationSample_t: pid u32, timeStamp u64, smUtil, memUtil, encUtil, decUtil u32
_UTIL = struct.Struct("<I4xQIIII")


def _instance(value: Any) -> int | None:
    return None if value is None or int(value) == _NOT_MIG else int(value)


class _RawList:
    """One ``fn(handle, count*, array)`` query (``count_first``) or ``fn(handle, array, count*,
    *tail)`` with a growable array of ``entry``; the argument tuple is built once per array."""

    def __init__(
        self,
        nvml: Nvml,
        function: str,
        entry: Any,
        layout: struct.Struct,
        handle: Any,
        count_first: bool,
        tail: tuple[Any, ...] = (),
    ) -> None:
        self.nvml, self.function, self.entry, self.layout = nvml, function, entry, layout
        self.fn = nvml.raw(function) if ctypes.sizeof(entry) == layout.size else None
        self.handle, self.count_first, self.tail = handle, count_first, tail
        self.count = ctypes.c_uint()
        self.count_ref = ctypes.byref(self.count)
        self._sized(16)

    def _sized(self, length: int) -> None:
        self.array: Any = (self.entry * length)()
        self.length = length
        if self.count_first:
            self.args = (self.handle, self.count_ref, self.array, *self.tail)
        else:
            self.args = (self.handle, self.array, self.count_ref, *self.tail)

    def rows(self) -> list[tuple[Any, ...]] | None:
        """Unpacked entries; None when not reported."""
        fn, count = self.fn, self.count
        if fn is None:
            return None
        for _ in range(3):  # grow at most twice: processes appear between calls
            count.value = self.length
            code = fn(*self.args)
            if code == _INSUFFICIENT_SIZE:
                self._sized(count.value * 2 + 8)
                continue
            if code == _NOT_FOUND:
                return []
            if code:
                self.nvml.check(code, self.function)
                return None
            return list(
                self.layout.iter_unpack(
                    memoryview(self.array).cast("B")[: self.layout.size * count.value]
                )
            )
        return None


_process = builder(ProcessSample)


class ProcessReader:
    """Compute + graphics processes of one device and their utilization samples. The samples
    of the previous reading are kept: when NVML returns the same rows (and names are still
    known), the previous tuple is the answer."""

    def __init__(self, nvml: Nvml, handle: Any) -> None:
        self.nvml, self.handle = nvml, handle
        info = getattr(nvml.module, "c_nvmlProcessInfo_v2_t", None)
        sample = getattr(nvml.module, "c_nvmlProcessUtilizationSample_t", None)
        self.lists = (
            [
                ("C", self._list("nvmlDeviceGetComputeRunningProcesses_v3", info)),
                ("G", self._list("nvmlDeviceGetGraphicsRunningProcesses_v3", info)),
            ]
            if info is not None
            else []
        )
        self.since = ctypes.c_ulonglong(0)  # lastSeenTimeStamp, µs
        self.util = (
            _RawList(
                nvml, "nvmlDeviceGetProcessUtilization", sample, _UTIL, handle, False, (self.since,)
            )
            if sample is not None
            else None
        )
        self.last_seen_us = 0
        self.previous: tuple[Any, tuple[ProcessSample, ...] | None] | None = None

    def _list(self, function: str, info: Any) -> _RawList:
        return _RawList(self.nvml, function, info, _INFO, self.handle, True)

    def _running(self, kind: str, raw: _RawList | None) -> list[tuple[int, Any, Any, Any]] | None:
        """(pid, usedGpuMemory, gpuInstanceId, computeInstanceId) rows."""
        if raw is not None and raw.fn is not None:
            return raw.rows()
        name = "Compute" if kind == "C" else "Graphics"
        got = self.nvml.call(f"nvmlDeviceGet{name}RunningProcesses_v2", self.handle)
        if got is None:
            return None
        return [
            (
                int(p.pid),
                _NOT_AVAILABLE if p.usedGpuMemory is None else p.usedGpuMemory,
                getattr(p, "gpuInstanceId", _NOT_MIG),
                getattr(p, "computeInstanceId", _NOT_MIG),
            )
            for p in got
        ]

    def _utilization(self) -> dict[int, tuple[float, float]]:
        raw = self.util
        if raw is None or raw.fn is None:
            return {}
        self.since.value = self.last_seen_us
        rows = raw.rows() or []
        out: dict[int, tuple[float, float]] = {}
        for pid, stamp, sm, mem, _, _ in rows:  # NotFound (no samples since last_seen) -> []
            out[pid] = (float(sm), float(mem))
            self.last_seen_us = max(self.last_seen_us, stamp)
        return out

    def read(self, names: dict[int, str | None]) -> tuple[ProcessSample, ...] | None:
        """Processes, or None when neither list is reported. A pid in both lists is "C+G".
        May raise DeviceUnusableError."""
        if self.lists:
            found = [(kind, self._running(kind, raw)) for kind, raw in self.lists]
        else:
            found = [("C", self._running("C", None)), ("G", self._running("G", None))]
        if all(rows is None for _, rows in found):
            self.previous = None
            return None
        kinds: dict[int, str] = {}
        first: dict[int, tuple[int, Any, Any, Any]] = {}
        for kind, rows in found:
            for row in rows or []:
                pid = row[0]
                kinds[pid] = kinds[pid] + "+" + kind if pid in kinds else kind
                first.setdefault(pid, row)
        util = self._utilization() if first else {}
        key = (found, util)
        previous = self.previous
        if previous is not None and previous[0] == key and all(map(names.__contains__, first)):
            return previous[1]
        out = []
        for pid, (_, used, gi, ci) in first.items():
            sm, mem = util.get(pid, (None, None))
            out.append(
                _process(
                    {
                        "pid": pid,
                        "used_memory_bytes": None if used == _NOT_AVAILABLE else int(used),
                        "name": process_name(self.nvml, pid, names),
                        "kind": kinds[pid],
                        "gpu_instance_id": _instance(gi),
                        "compute_instance_id": _instance(ci),
                        "sm_utilization_percent": sm,
                        "memory_utilization_percent": mem,
                    }
                )
            )
        samples = tuple(out)
        self.previous = (key, samples)
        return samples


def process_name(nvml: Nvml, pid: int, names: dict[int, str | None]) -> str | None:
    """nvmlSystemGetProcessName, once per pid (``names`` is the caller's cache)."""
    if pid not in names:
        names[pid] = text(nvml.call("nvmlSystemGetProcessName", pid))
    return names[pid]
