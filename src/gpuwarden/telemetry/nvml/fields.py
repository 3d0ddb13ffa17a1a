"""Batched NVML field values: one ``nvmlDeviceGetFieldValues`` call per device per reading.

DCGM reads its counters the same way (telemetry.md §2.2, column "NVML field id DCGM uses"). The
request array is built once per device and refilled by the driver on every reading; each entry
carries its own nvmlReturn, so one unsupported field never costs the others.
"""

from __future__ import annotations

import struct
from typing import Any

from gpuwarden.telemetry.nvml._lib import Nvml
from gpuwarden.types.telemetry import NvLinkSample

# nvmlFieldValue ids (nvml.h NVML_FI_DEV_*)
FI_ECC_SBE_VOL_TOTAL = 3  # corrected, volatile
FI_ECC_DBE_VOL_TOTAL = 4  # uncorrected, volatile
FI_ECC_SBE_AGG_TOTAL = 5
FI_ECC_DBE_AGG_TOTAL = 6
FI_RETIRED_SBE = 29
FI_RETIRED_DBE = 30
FI_RETIRED_PENDING = 31
FI_PERF_POLICY_POWER = 74  # ns throttled by power (DCGM_FI_DEV_POWER_VIOLATION)
FI_PERF_POLICY_THERMAL = 75  # ns throttled by temperature (DCGM_FI_DEV_THERMAL_VIOLATION)
FI_MEMORY_TEMP = 82
FI_TOTAL_ENERGY = 83  # mJ since driver load
FI_NVLINK_LINK_COUNT = 91
FI_PCIE_REPLAY = 94
FI_NVLINK_TX_KIB = 138  # NVLink TX data, KiB (counter)
FI_NVLINK_RX_KIB = 139
FI_REMAPPED_COR = 142
FI_REMAPPED_UNC = 143
FI_REMAPPED_PENDING = 144
FI_REMAPPED_FAILURE = 145
FI_NVLINK_ERROR_DL_REPLAY = 161
FI_NVLINK_ERROR_DL_RECOVERY = 162
FI_NVLINK_ERROR_DL_CRC = 163
FI_NVLINK_GET_SPEED = 164  # MBps
FI_NVLINK_GET_STATE = 165

DEVICE_FIELDS = (
    FI_ECC_SBE_VOL_TOTAL,
    FI_ECC_DBE_VOL_TOTAL,
    FI_ECC_SBE_AGG_TOTAL,
    FI_ECC_DBE_AGG_TOTAL,
    FI_RETIRED_SBE,
    FI_RETIRED_DBE,
    FI_RETIRED_PENDING,
    FI_PERF_POLICY_POWER,
    FI_PERF_POLICY_THERMAL,
    FI_MEMORY_TEMP,
    FI_TOTAL_ENERGY,
    FI_PCIE_REPLAY,
    FI_REMAPPED_COR,
    FI_REMAPPED_UNC,
    FI_REMAPPED_PENDING,
    FI_REMAPPED_FAILURE,
)
PER_LINK_FIELDS = (
    FI_NVLINK_GET_STATE,
    FI_NVLINK_GET_SPEED,
    FI_NVLINK_TX_KIB,
    FI_NVLINK_RX_KIB,
    FI_NVLINK_ERROR_DL_CRC,
    FI_NVLINK_ERROR_DL_REPLAY,
    FI_NVLINK_ERROR_DL_RECOVERY,
)

# nvmlFieldValue_t (nvml.h): fieldId u32, scopeId u32, timestamp i64, latencyUsec i64,
# valueType u32, nvmlReturn u32, value union (8 bytes) = 40 bytes. Unpacking the whole buffer
# skips nvidia-ml-py's per-attribute str/bytes conversion (the hot spot with 18 NVLinks).
_ENTRY = struct.Struct("<IIqqIIQ")
_UNSIGNED_MASK = {1: 0xFFFFFFFF, 2: (1 << 64) - 1, 3: (1 << 64) - 1, 6: 0xFFFF}  # nvmlValueType_t


def _convert(kind: int, raw: int) -> float | int:
    """The union's 8 bytes (read as u64) as the type nvmlValueType_t says."""
    mask = _UNSIGNED_MASK.get(kind)
    if mask is not None:
        return raw & mask
    if kind == 0:  # double
        return float(struct.unpack("<d", struct.pack("<Q", raw))[0])
    if kind == 4:  # signed long long
        return raw - (1 << 64) if raw >= 1 << 63 else raw
    low = raw & 0xFFFFFFFF  # 5: signed int
    return low - (1 << 32) if low >= 1 << 31 else low


def nvlink_count(nvml: Nvml, handle: Any) -> int:
    """Links the device has (NVML_FI_DEV_NVLINK_LINK_COUNT); 0 when NVLink is not reported."""
    values = nvml.call("nvmlDeviceGetFieldValues", handle, [FI_NVLINK_LINK_COUNT])
    if values is None or values[0].nvmlReturn != 0:
        return 0
    return int(values[0].value.uiVal)


class FieldSet:
    """The fields one device is asked for every reading, and their request array."""

    def __init__(self, nvml: Nvml, links: int) -> None:
        self.links = links
        self.ids: list[tuple[int, int]] = [(fid, 0) for fid in DEVICE_FIELDS]
        self.ids += [(fid, link) for link in range(links) for fid in PER_LINK_FIELDS]
        self.array = nvml.field_array(self.ids)
        self.nvlinks = NvLinkCache()

    def read(self, nvml: Nvml, handle: Any) -> tuple[dict[int, Any], list[list[Any]]]:
        """({device field id: value}, per link [state, speed, tx, rx, crc, replay, recovery]);
        None where the entry's own nvmlReturn failed. May raise DeviceLostError."""
        values = nvml.fill_fields(handle, self.array, self.ids)
        if values is None:
            return {}, []
        raw = bytes(values)
        got: list[Any]
        if len(raw) == _ENTRY.size * len(self.ids):
            got = [
                None
                if ret  # per-entry nvmlReturn
                else value
                if kind == 3
                else value & 0xFFFFFFFF
                if kind == 1
                else _convert(kind, value)
                for _, _, _, _, kind, ret, value in _ENTRY.iter_unpack(raw)
            ]
        else:  # a library with another layout
            got = [
                None
                if item.nvmlReturn
                else item.value.uiVal
                if item.valueType == 1
                else item.value.ullVal
                for item in values
            ]
        n = len(DEVICE_FIELDS)
        width = len(PER_LINK_FIELDS)
        links = [got[n + width * link : n + width * (link + 1)] for link in range(self.links)]
        return dict(zip(DEVICE_FIELDS, got[:n], strict=True)), links


def _nvlink(link: int, row: list[Any]) -> NvLinkSample:
    state, speed, tx, rx, crc, replay, recovery = row
    return NvLinkSample(
        link=link,
        active=None if state is None else bool(state),
        bandwidth_bytes_per_second=None if speed is None else speed * 1e6,  # MBps
        tx_bytes_total=None if tx is None else tx * 1024,  # KiB
        rx_bytes_total=None if rx is None else rx * 1024,
        crc_errors_total=crc,
        replay_errors_total=replay,
        recovery_errors_total=recovery,
    )


class NvLinkCache:
    """NvLinkSamples from FieldSet.read's per-link rows (PER_LINK_FIELDS order). A link whose
    row did not change since the last reading keeps its (immutable) sample object: state, speed
    and error counters rarely move; only busy links' tx/rx counters make a new one."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []
        self.samples: list[NvLinkSample] = []

    def samples_for(self, links: list[list[Any]]) -> tuple[NvLinkSample, ...] | None:
        if not links:
            return None
        if len(links) != len(self.rows):
            self.rows, self.samples = [], []
        for link, row in enumerate(links):
            if link == len(self.rows):
                self.rows.append(row)
                self.samples.append(_nvlink(link, row))
            elif row != self.rows[link]:
                self.rows[link], self.samples[link] = row, _nvlink(link, row)
        return tuple(self.samples)
