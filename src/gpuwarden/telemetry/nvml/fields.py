"""Batched NVML field values: one ``nvmlDeviceGetFieldValues`` call per device per reading.

DCGM reads its counters the same way (telemetry.md §2.2, column "NVML field id DCGM uses"). The
request array is built once per device and refilled by the driver on every reading; each entry
carries its own nvmlReturn, so one unsupported field never costs the others.
"""

from __future__ import annotations

import array as array_
import ctypes
import struct
from typing import Any, Protocol

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
FI_GPU_RECOVERY_ACTION = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: nvmlDeviceGpuRecoveryAction_t

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
    FI_GPU_RECOVERY_ACTION,
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
# The union as struct codes per nvmlValueType_t (0 double, 1 uint, 2 ulong, 3 ull, 4 sll,
# 5 int, 6 ushort; anything else as _convert reads it: the low 4 bytes, signed)
_UNION_CODE = {0: "d", 1: "I4x", 2: "Q", 3: "Q", 4: "q", 5: "i4x", 6: "H6x"}


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


class _Decoder:
    """Decodes one request array after each fill. While every entry has the (valueType,
    nvmlReturn) of the previous reading, one ``struct`` unpack reads just the unions, each as
    its type; another layout (the first reading, a field that starts or stops failing) goes
    entry by entry and becomes the layout expected next time. Values are the same either way."""

    def __init__(self, array: Any) -> None:
        self.array = array
        # (valueType, nvmlReturn) of each entry as one u64: a view, so it sees every fill
        self.layout_now = memoryview(array).cast("B").cast("Q")[3::5]
        self.layout = array_.array("Q")  # the layout the typed unpack was built for
        self.failed: tuple[int, ...] = ()  # positions whose nvmlReturn is not Success
        self.typed: struct.Struct | None = None

    def decode(self) -> list[Any]:
        if self.typed is not None and self.layout_now == self.layout:
            got = list(self.typed.unpack_from(self.array))
            for position in self.failed:
                got[position] = None
            return got
        entries = list(_ENTRY.iter_unpack(self.array))
        self.layout = array_.array("Q", self.layout_now)
        self.failed = tuple(i for i, e in enumerate(entries) if e[5])
        codes = (_UNION_CODE.get(e[4], "i4x") for e in entries)
        self.typed = struct.Struct("<" + "".join("32x" + code for code in codes))
        return [None if ret else _convert(kind, raw) for _, _, _, _, kind, ret, raw in entries]


def entry_value(entry: Any) -> float | int | None:
    """One nvmlFieldValue_t of nvidia-ml-py's nvmlDeviceGetFieldValues as its valueType says;
    None where the entry's own nvmlReturn failed."""
    if entry.nvmlReturn:
        return None
    return _convert(int(entry.valueType), int(entry.value.ullVal))


def nvlink_count(nvml: Nvml, handle: Any) -> int | None:
    """Links the device has (NVML_FI_DEV_NVLINK_LINK_COUNT); None when the field cannot say
    (no nvmlDeviceGetFieldValues, or the entry failed): ask the classic calls then."""
    values = nvml.call("nvmlDeviceGetFieldValues", handle, [FI_NVLINK_LINK_COUNT])
    if values is None or values[0].nvmlReturn != 0:
        return None
    return int(values[0].value.uiVal)


class Fallback(Protocol):
    """Fills unanswered entries of a reading (classic.ClassicFields)."""

    def fill(self, ids: list[tuple[int, int]], got: list[Any]) -> list[Any]: ...


class FieldSet:
    """The fields one device is asked for every reading, and their request array; entries the
    batch leaves unanswered (or all of them, without the batch call) go to ``fallback``."""

    def __init__(self, nvml: Nvml, links: int, fallback: Fallback | None = None) -> None:
        self.links = links
        self.fallback = fallback
        self.ids: list[tuple[int, int]] = [(fid, 0) for fid in DEVICE_FIELDS]
        self.ids += [(fid, link) for link in range(links) for fid in PER_LINK_FIELDS]
        self.array = nvml.field_array(self.ids)
        # the driver's layout is nvml.h's (40-byte entries): decode the raw buffer
        self.decoder: _Decoder | None = None
        if self.array is not None and ctypes.sizeof(self.array) == _ENTRY.size * len(self.ids):
            self.decoder = _Decoder(self.array)
        self.nvlinks = NvLinkCache()

    def read(
        self, nvml: Nvml, handle: Any
    ) -> tuple[dict[int, Any], tuple[NvLinkSample, ...] | None]:
        """({device field id: value}, the device's NvLinkSamples or None without links); None
        where the entry's own nvmlReturn failed. May raise DeviceUnusableError."""
        values = nvml.fill_fields(handle, self.array, self.ids)
        got: list[Any]
        if values is None:  # no batch call (FunctionNotFound) or the call failed as a whole
            got = [None] * len(self.ids)
        elif self.decoder is not None:
            got = self.decoder.decode()
        else:  # a library with another layout
            got = [
                None
                if item.nvmlReturn
                else item.value.uiVal
                if item.valueType == 1
                else item.value.ullVal
                for item in values
            ]
        if self.fallback is not None and None in got:
            got = self.fallback.fill(self.ids, got)
        n = len(DEVICE_FIELDS)
        return dict(zip(DEVICE_FIELDS, got[:n], strict=True)), self.nvlinks.samples_for(
            got[n:], self.links
        )


def _nvlink(link: int, row: list[Any]) -> NvLinkSample:
    state, speed, tx, rx, crc, replay, recovery = row
    return NvLinkSample(
        link=link,
        active=None if state is None else bool(state),
        bandwidth_bytes_per_second=None if speed is None else speed * 1e6,  # MBps
        tx_bytes_total=None if tx is None else round(tx * 1024),  # KiB
        rx_bytes_total=None if rx is None else round(rx * 1024),
        crc_errors_total=crc,
        replay_errors_total=replay,
        recovery_errors_total=recovery,
    )


class NvLinkCache:
    """NvLinkSamples from the per-link values (PER_LINK_FIELDS order, link after link). A link
    whose values did not change since the last reading keeps its (immutable) sample object:
    state, speed and error counters rarely move; only busy links' tx/rx counters make a new
    one. Nothing changed at all (idle links): the previous tuple itself."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.samples: tuple[NvLinkSample, ...] = ()

    def samples_for(self, values: list[Any], links: int) -> tuple[NvLinkSample, ...] | None:
        if not links:
            return None
        if values == self.values and len(self.samples) == links:
            return self.samples
        width = len(PER_LINK_FIELDS)
        old, same = self.values, len(self.values) == len(values)
        samples = list(self.samples) if same else []
        for link in range(links):
            row = values[width * link : width * (link + 1)]
            if same and row == old[width * link : width * (link + 1)]:
                continue
            if same:
                samples[link] = _nvlink(link, row)
            else:
                samples.append(_nvlink(link, row))
        self.values, self.samples = values, tuple(samples)
        return self.samples
