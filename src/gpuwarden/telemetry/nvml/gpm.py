"""GPM (Hopper and newer): DCGM's profiling pillars from two NVML samples across reads.

DCGM 4.6 computes its DCGM_FI_PROF_* fields on Hopper+ the same way (telemetry.md §2.4):
percent metrics / 100 = ratio 0..1; PCIe/NVLink rates are MiB/s per nvml.h (x 1048576 = B/s).
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import struct
from typing import Any

from gpuwarden.telemetry.nvml._lib import Nvml
from gpuwarden.types.telemetry import MIG_PILLARS, MigDeviceSample

MIB = 1 << 20
# NVML_GPM_METRIC_* id -> (DeviceSample field, scale to gpuwarden units)
METRICS: dict[int, tuple[str, float]] = {
    1: ("graphics_engine_active_ratio", 0.01),  # GRAPHICS_UTIL -> DCGM_FI_PROF_GR_ENGINE_ACTIVE
    2: ("sm_active_ratio", 0.01),  # SM_UTIL -> DCGM_FI_PROF_SM_ACTIVE
    3: ("sm_occupancy_ratio", 0.01),  # SM_OCCUPANCY -> DCGM_FI_PROF_SM_OCCUPANCY
    5: ("tensor_active_ratio", 0.01),  # ANY_TENSOR_UTIL -> DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
    10: ("dram_active_ratio", 0.01),  # DRAM_BW_UTIL -> DCGM_FI_PROF_DRAM_ACTIVE
    11: ("fp64_active_ratio", 0.01),  # FP64_UTIL
    12: ("fp32_active_ratio", 0.01),  # FP32_UTIL
    13: ("fp16_active_ratio", 0.01),  # FP16_UTIL
    20: ("gpm_pcie_tx_bytes_per_second", MIB),  # PCIE_TX_PER_SEC (MiB/s)
    21: ("gpm_pcie_rx_bytes_per_second", MIB),  # PCIE_RX_PER_SEC
    60: ("nvlink_rx_bytes_per_second", MIB),  # NVLINK_TOTAL_RX_PER_SEC
    61: ("nvlink_tx_bytes_per_second", MIB),  # NVLINK_TOTAL_TX_PER_SEC
}
_METRIC = struct.Struct("<IId24x")  # metricId, nvmlReturn, value, metricInfo (3 pointers)
EXTRA = {"gpm_pcie_tx_bytes_per_second", "gpm_pcie_rx_bytes_per_second"}  # -> DeviceSample.extra


class GpmReader:
    """Keeps the previous sample of one device, or of one MIG GPU instance of it
    (``gpu_instance_id``: nvmlGpmMigSampleGet(parent handle, GI id, sample), as DCGM's
    DcgmGpmManager samples MIG instances); each read returns metrics since then."""

    def __init__(
        self,
        nvml: Nvml,
        handle: Any,
        *,
        gpu_instance_id: int | None = None,
        supported: bool | None = None,
    ) -> None:
        self.nvml = nvml
        self.handle = handle
        self.gpu_instance_id = gpu_instance_id
        self.previous: Any = None
        self.current: Any = None
        # c_nvmlGpmMetricsGet_t requests, one per sample order, built once (477 slots each)
        self.requests: list[Any] = []
        if supported is None:  # the parent's answer holds for its instances: asked once
            support = nvml.call("nvmlGpmQueryDeviceSupport", handle)
            supported = bool(support is not None and support.isSupportedDevice)
        self.supported = supported

    def _take(self, sample: Any) -> Any:
        if self.gpu_instance_id is None:
            return self.nvml.call("nvmlGpmSampleGet", self.handle, sample)
        return self.nvml.call("nvmlGpmMigSampleGet", self.handle, self.gpu_instance_id, sample)

    def read(self) -> dict[str, float]:
        """May raise DeviceUnusableError. Empty on the first read (one sample is not a rate)."""
        if not self.supported:
            return {}
        nvml = self.nvml
        if self.current is None:
            self.previous = nvml.call("nvmlGpmSampleAlloc")
            self.current = nvml.call("nvmlGpmSampleAlloc")
            if self.previous is None or self.current is None:
                self.supported = False
                return {}
            if self._take(self.previous) is None:
                self.supported = False
            return {}
        if self._take(self.current) is None:
            return {}
        if not self.requests:
            self.requests = [self._request(self.previous, self.current)]
            self.requests.append(self._request(self.current, self.previous))
        request = self.requests[0]
        got = nvml.call("nvmlGpmMetricsGet", request)
        self.previous, self.current = self.current, self.previous  # newest becomes the base
        self.requests.reverse()
        if got is None:
            return {}
        return self._values(request)

    def _request(self, first: Any, second: Any) -> Any:
        request = self.nvml.module.c_nvmlGpmMetricsGet_t()
        request.version = self.nvml.const("NVML_GPM_METRICS_GET_VERSION", 1)
        request.numMetrics = len(METRICS)
        request.sample1, request.sample2 = first, second
        for i, metric in enumerate(METRICS):
            request.metrics[i].metricId = metric  # the library writes results in place
        return request

    def _values(self, request: Any) -> dict[str, float]:
        out: dict[str, float] = {}
        entry_type = type(request).metrics.size // len(request.metrics)
        offset = type(request).metrics.offset
        raw = ctypes.string_at(ctypes.addressof(request) + offset, entry_type * len(METRICS))
        if entry_type == _METRIC.size:  # nvmlGpmMetric_t: id u32, return u32, value double, ...
            rows = ((ret, value) for _, ret, value in _METRIC.iter_unpack(raw))
        else:  # another layout: go through the struct fields
            rows = ((m.nvmlReturn, m.value) for m in request.metrics[: len(METRICS)])
        for (field, scale), (ret, value) in zip(METRICS.values(), rows, strict=False):
            if ret == 0 and not math.isnan(value):
                out[field] = float(value) * scale
        return out

    def close(self) -> None:
        for sample in (self.previous, self.current):
            if sample is not None:
                self.nvml.call("nvmlGpmSampleFree", sample)
        self.previous = self.current = None


class MigGpmReaders:
    """One GpmReader per MIG GPU instance of a device, made as instances appear and freed when
    they go (MIG reconfigured). Compute instances of one GPU instance share its metrics."""

    def __init__(self, nvml: Nvml, handle: Any, *, supported: bool) -> None:
        self.nvml = nvml
        self.handle = handle
        self.supported = supported
        self.readers: dict[int, GpmReader] = {}

    def read(self, migs: tuple[MigDeviceSample, ...]) -> tuple[MigDeviceSample, ...]:
        """``migs`` with their profiling pillars since the previous read (none the first time).
        May raise DeviceUnusableError."""
        if not self.supported:
            return migs
        present = {m.gpu_instance_id for m in migs}
        for gone in set(self.readers) - present:
            self.readers.pop(gone).close()
        pillars: dict[int, dict[str, Any]] = {}
        for gi in sorted(present):
            reader = self.readers.get(gi)
            if reader is None:
                reader = self.readers[gi] = GpmReader(
                    self.nvml, self.handle, gpu_instance_id=gi, supported=True
                )
            got = reader.read()
            pillars[gi] = {name: got[name] for name in MIG_PILLARS if name in got}
        return tuple(
            dataclasses.replace(m, **pillars[m.gpu_instance_id])
            if pillars[m.gpu_instance_id]
            else m
            for m in migs
        )

    def close(self) -> None:
        for reader in self.readers.values():
            reader.close()
        self.readers.clear()
