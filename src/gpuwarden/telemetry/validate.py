"""The physical range of every reading, checked once, where a Snapshot leaves its backend.

Every backend (``nvml``, ``smi``, ``dcgm``, ``sim``) hands its Snapshot to ``validate_snapshot``
before anyone else sees it: a value that is not a finite number, or that no GPU can report
(−8192 MiB of memory, −300 °C, 1000 % utilisation, more memory used than the device has), is
"not reported" (``None``, as DESIGN.md wants for what a device does not tell) and a
``backend-error`` event names the device, the field, the value and the range it broke. The
rest of the reading is kept. Counters that can only be derived (the collector's rates) pass
through the same check.

The ranges come from physics and from the C types NVML returns the values in (an ``unsigned
int`` is never negative); they are generous on purpose: a real reading never loses its value
(the tests read every capture in ../shared/fixtures through them), garbage always does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from gpuwarden.types.telemetry import (
    MIG_PILLARS,
    DeviceEvent,
    DeviceSample,
    EventKind,
    MigDeviceSample,
    NvLinkSample,
    ProcessSample,
    Snapshot,
)
from gpuwarden.units import TIB


@dataclass(frozen=True, slots=True)
class Range:
    """The values a reading can take, inclusive, and where the bounds come from."""

    low: float
    high: float
    unit: str
    source: str

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def __str__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.low:g}..{self.high:g}{unit}"


# Devices in one reading: a node has at most 16 GPUs (HGX-2), each at most 7 MIG instances; a
# scrape merged from a few nodes fits too. More is a fleet's metrics (`gpuwarden fleet`), or no
# capture at all: the parsers refuse it (the dcgm reader as it meets the device too many).
MAX_DEVICES = 1024

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1

MEMORY = Range(
    0, 64 * TIB, "bytes", "nvmlMemory_t is unsigned; 64 TiB is >200x the largest GPU (288 GB)"
)
PERCENT = Range(0, 100, "%", "nvmlUtilization_t: percent of the sample period, 0-100")
RATIO = Range(0, 1, "", "a share of time or of the peak (DCGM_FI_PROF_*, NVML GPM)")
# nvmlDeviceGetFanSpeed: "This value may exceed 100% in certain cases"
FAN = Range(0, 200, "%", "percent of the fan's max noise-tolerance speed; NVML: may pass 100")
# Powered GPUs are never colder than their storage minimum (-40 °C in NVIDIA's data-centre
# product briefs); DCGM itself drops memory temperatures above 200 °C as invalid.
TEMPERATURE = Range(-40, 200, "°C", "storage minimum of NVIDIA boards; DCGM's invalid cut")
MARGIN = Range(-240, 240, "°C", "a difference of two temperatures in -40..200 °C")
POWER = Range(0, 10_000, "W", "nvmlDeviceGetPowerUsage is unsigned mW; boards draw <= ~1.5 kW")
ENERGY = Range(0, U64_MAX / 1000, "J", "nvmlDeviceGetTotalEnergyConsumption: unsigned 64-bit mJ")
CLOCK = Range(0, 100_000, "MHz", "unsigned MHz; no GPU clock is within 5x of 100 GHz")
COUNT_32 = Range(0, U32_MAX, "", "an unsigned 32-bit NVML counter")
COUNT_64 = Range(0, U64_MAX, "", "an unsigned 64-bit NVML counter")
PCIE_GEN = Range(1, 16, "", "PCIe generations 1-7 exist")
PCIE_WIDTH = Range(1, 32, "lanes", "PCIe links are x1..x32")
PCIE_RATE = Range(0, 10**12, "B/s", "PCIe 7.0 x16 moves 128 GB/s each way")
NVLINK_RATE = Range(0, 10**14, "B/s", "NVLink 5 moves 1.8 TB/s per GPU")
XID = Range(1, U32_MAX, "", "Xid codes are positive (0 = none seen)")
LINK = Range(0, 63, "", "NVML_NVLINK_MAX_LINKS is 18")
SM_COUNT = Range(0, 65_535, "", "a GPU has at most a few hundred SMs")
INSTANCE_ID = Range(0, U32_MAX, "", "MIG GPU/compute instance ids are unsigned")
PID = Range(0, U32_MAX, "", "NVML process ids are unsigned int")

# DeviceSample field → its range. Fields not listed (flags, names, enums) are only checked for
# being finite when a backend put a number in them.
SAMPLE_RANGES: Mapping[str, Range] = {
    "memory_used_bytes": MEMORY,
    "memory_free_bytes": MEMORY,
    "memory_reserved_bytes": MEMORY,
    "gpu_utilization_percent": PERCENT,
    "memory_utilization_percent": PERCENT,
    "encoder_utilization_percent": PERCENT,
    "decoder_utilization_percent": PERCENT,
    "temperature_gpu_celsius": TEMPERATURE,
    "temperature_memory_celsius": TEMPERATURE,
    "temperature_slowdown_celsius": TEMPERATURE,
    "temperature_shutdown_celsius": TEMPERATURE,
    "temperature_gpu_max_celsius": TEMPERATURE,
    "temperature_memory_max_celsius": TEMPERATURE,
    "temperature_margin_celsius": MARGIN,
    "power_draw_watts": POWER,
    "power_limit_watts": POWER,
    "power_enforced_limit_watts": POWER,
    "power_average_watts": POWER,
    "energy_consumed_joules": ENERGY,
    "clock_sm_mhz": CLOCK,
    "clock_memory_mhz": CLOCK,
    "clock_graphics_mhz": CLOCK,
    "clock_video_mhz": CLOCK,
    "clock_sm_max_mhz": CLOCK,
    "clock_memory_max_mhz": CLOCK,
    "fan_speed_percent": FAN,
    "power_violation_ns_total": COUNT_64,
    "thermal_violation_ns_total": COUNT_64,
    "ecc_errors_corrected_volatile": COUNT_64,
    "ecc_errors_uncorrected_volatile": COUNT_64,
    "ecc_errors_corrected_aggregate": COUNT_64,
    "ecc_errors_uncorrected_aggregate": COUNT_64,
    "retired_pages_single_bit": COUNT_32,
    "retired_pages_double_bit": COUNT_32,
    "remapped_rows_correctable": COUNT_32,
    "remapped_rows_uncorrectable": COUNT_32,
    "remapped_rows_banks_exhausted": COUNT_32,
    "pcie_link_gen_current": PCIE_GEN,
    "pcie_link_gen_max": PCIE_GEN,
    "pcie_link_width_current": PCIE_WIDTH,
    "pcie_link_width_max": PCIE_WIDTH,
    "pcie_tx_bytes_per_second": PCIE_RATE,
    "pcie_rx_bytes_per_second": PCIE_RATE,
    "pcie_replay_total": COUNT_32,
    "nvlink_tx_bytes_per_second": NVLINK_RATE,
    "nvlink_rx_bytes_per_second": NVLINK_RATE,
    "graphics_engine_active_ratio": RATIO,
    "sm_active_ratio": RATIO,
    "sm_occupancy_ratio": RATIO,
    "tensor_active_ratio": RATIO,
    "dram_active_ratio": RATIO,
    "fp64_active_ratio": RATIO,
    "fp32_active_ratio": RATIO,
    "fp16_active_ratio": RATIO,
    "power_throttled_ratio": RATIO,
    "thermal_throttled_ratio": RATIO,
    "xid_last": XID,
}
INFO_RANGES: Mapping[str, Range] = {"memory_total_bytes": MEMORY}
NVLINK_RANGES: Mapping[str, Range] = {
    "link": LINK,
    "bandwidth_bytes_per_second": NVLINK_RATE,
    "tx_bytes_total": COUNT_64,
    "rx_bytes_total": COUNT_64,
    "crc_errors_total": COUNT_64,
    "replay_errors_total": COUNT_64,
    "recovery_errors_total": COUNT_64,
}
MIG_RANGES: Mapping[str, Range] = {
    "gpu_instance_id": INSTANCE_ID,
    "compute_instance_id": INSTANCE_ID,
    "memory_total_bytes": MEMORY,
    "memory_used_bytes": MEMORY,
    "sm_count": SM_COUNT,
    **dict.fromkeys(MIG_PILLARS, RATIO),
}
PROCESS_RANGES: Mapping[str, Range] = {
    "pid": PID,
    "used_memory_bytes": MEMORY,
    "gpu_instance_id": INSTANCE_ID,
    "compute_instance_id": INSTANCE_ID,
    "sm_utilization_percent": PERCENT,
    "memory_utilization_percent": PERCENT,
}
# Memory readings that cannot exceed the device's total (memory_v2: total = reserved+used+free)
_WITHIN_TOTAL = ("memory_used_bytes", "memory_free_bytes", "memory_reserved_bytes")

_NOT_READINGS = ("info", "timestamp_s", "state", "error", "extra")
_NESTED = ("nvlinks", "mig_devices", "processes", "pods")
_SAMPLE_SCALARS = tuple(
    f.name for f in dataclasses.fields(DeviceSample) if f.name not in (*_NOT_READINGS, *_NESTED)
)
_PSTATES = frozenset(f"P{n}" for n in range(16))  # nvmlPstates_t (32, UNKNOWN, is no state)


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """All of ``names`` of an object in one call (attrgetter returns a bare value for one)."""
    if len(names) == 1:
        return lambda item: (getattr(item, names[0]),)
    return attrgetter(*names)


class _Screen:
    """The quick test that every value of a dataclass is possible (every reading of every
    backend passes it); only a value that fails it is looked at again and put in words."""

    def __init__(self, ranges: Mapping[str, Range], unranged: tuple[str, ...] = ()) -> None:
        self.ranges = ranges
        self._ranged = _getter(tuple(ranges))
        self._bounds = tuple((r.low, r.high) for r in ranges.values())
        self._unranged = _getter(unranged) if unranged else None

    def passes(self, item: Any) -> bool:
        # NaN and ±inf fail the chained comparison too
        for value, (low, high) in zip(self._ranged(item), self._bounds, strict=True):
            if value is not None and not low <= value <= high:
                return False
        if self._unranged is not None:
            for value in self._unranged(item):
                if type(value) is float and not math.isfinite(value):
                    return False
        return True


_SAMPLE_SCREEN = _Screen(SAMPLE_RANGES, tuple(n for n in _SAMPLE_SCALARS if n not in SAMPLE_RANGES))
_INFO_SCREEN = _Screen(INFO_RANGES)


def _shown(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int) and value.bit_length() > 64:  # str() of a huge int is slow
        return f"{'-' if value < 0 else ''}2^{value.bit_length() - 1}+"
    return repr(value)


def _flaw(value: object, limits: Range | None) -> str | None:
    """Why ``value`` cannot be a reading (None when it can, or when it is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if limits is not None and not limits.holds(value):
        return f"is outside {limits} ({limits.source})"
    return None


def rejection(
    timestamp_s: float, uuid: str | None, index: int | None, name: str, value: object, why: str
) -> DeviceEvent:
    """The event for a value that cannot be a reading (``why``): it is not reported (null). A
    parser that meets such a value before the check says it with this too."""
    message = f"{name} = {_shown(value)} {why}; not reported (null)"
    return DeviceEvent(EventKind.BACKEND_ERROR, timestamp_s, uuid, index, None, message)


class _Notes:
    """The values of one sample that were rejected, as events."""

    def __init__(self, sample: DeviceSample) -> None:
        self.sample = sample
        self.events: list[DeviceEvent] = []

    def reject(self, where: str, name: str, value: object, why: str) -> None:
        info = self.sample.info
        self.events.append(
            rejection(self.sample.timestamp_s, info.uuid, info.index, where + name, value, why)
        )

    def cleared(self, item: Any, screen: _Screen, where: str = "") -> dict[str, Any]:
        """The fields of ``item`` (a dataclass) to clear, each noted."""
        out: dict[str, Any] = {}
        if screen.passes(item):
            return out
        for name, limits in screen.ranges.items():
            value = getattr(item, name)
            why = _flaw(value, limits)
            if why is not None:
                self.reject(where, name, value, why)
                out[name] = None
        return out


def _scalars(sample: DeviceSample, notes: _Notes) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if _SAMPLE_SCREEN.passes(sample) and (sample.pstate is None or sample.pstate in _PSTATES):
        return changes
    for name in _SAMPLE_SCALARS:
        value = getattr(sample, name)
        if value is None:
            continue
        why = _flaw(value, SAMPLE_RANGES.get(name))
        if why is None and name == "pstate" and value not in _PSTATES:  # nvmlPstates_t
            why = "is not a performance state P0..P15 (nvmlPstates_t)"
        if why is not None:
            notes.reject("", name, value, why)
            changes[name] = None
    return changes


def _above_total(
    sample: DeviceSample, total: int | None, kept: Mapping[str, Any], notes: _Notes
) -> dict[str, Any]:
    """Memory readings above the device's total. Which of the two is wrong cannot be told; the
    reading is the one dropped (the total is identity, read once)."""
    out: dict[str, Any] = {}
    if total is None:
        return out
    for name in _WITHIN_TOTAL:
        value = kept.get(name, getattr(sample, name))
        if value is not None and value > total:
            notes.reject("", name, value, f"is above the device's memory_total_bytes {total}")
            out[name] = None
    return out


def _where_nvlink(link: NvLinkSample) -> str:
    return f"NVLink {link.link}: "


def _where_mig(mig: MigDeviceSample) -> str:
    return f"MIG GI {mig.gpu_instance_id}: "


def _where_process(process: ProcessSample) -> str:
    return f"process {process.pid}: "


_PARTS: tuple[tuple[str, _Screen, Callable[[Any], str]], ...] = (
    ("nvlinks", _Screen(NVLINK_RANGES), _where_nvlink),
    ("mig_devices", _Screen(MIG_RANGES), _where_mig),
    ("processes", _Screen(PROCESS_RANGES), _where_process),
)


def _part(
    items: tuple[Any, ...], screen: _Screen, where: Callable[[Any], str], notes: _Notes
) -> tuple[Any, ...] | None:
    """``items`` (NVLinks, MIG devices, processes) with their impossible values cleared; None
    when every value was possible."""
    if all(screen.passes(item) for item in items):
        return None
    out, changed = [], False
    for item in items:
        cleared = notes.cleared(item, screen, where(item))
        changed = changed or bool(cleared)
        out.append(dataclasses.replace(item, **cleared) if cleared else item)
    return tuple(out) if changed else None


def _finite_extra(extra: Mapping[str, float], notes: _Notes) -> dict[str, float] | None:
    """The backend-specific numbers without the non-finite ones (None when all are finite)."""
    bad = [key for key, value in extra.items() if not -math.inf < value < math.inf]
    for key in bad:
        notes.reject("", f"extra {key}", extra[key], "is not a finite number")
    return {k: v for k, v in extra.items() if k not in bad} if bad else None


def possible(name: str, value: float | None) -> float | None:
    """``value`` when field ``name`` can hold it, else None: for figures derived from readings
    before the check (a limit from a temperature and its margin), so a garbage reading is
    said once, not again through what was computed from it."""
    limits = SAMPLE_RANGES.get(name)
    if value is None or limits is None:
        return value
    return value if limits.holds(value) else None  # NaN fails holds() too


def validate_sample(sample: DeviceSample) -> tuple[DeviceSample, tuple[DeviceEvent, ...]]:
    """``sample`` with every impossible value cleared, and one event per cleared value (the
    same object and no event when every value is possible)."""
    notes = _Notes(sample)
    changes: dict[str, Any] = {}
    info_cleared = notes.cleared(sample.info, _INFO_SCREEN)
    info = dataclasses.replace(sample.info, **info_cleared) if info_cleared else sample.info
    if info_cleared:
        changes["info"] = info
    changes |= _scalars(sample, notes)
    changes |= _above_total(sample, info.memory_total_bytes, changes, notes)
    for name, screen, where in _PARTS:
        items = getattr(sample, name)
        replaced = _part(items, screen, where, notes) if items else None
        if replaced is not None:
            changes[name] = replaced
    extra = _finite_extra(sample.extra, notes)
    if extra is not None:
        changes["extra"] = extra
    if not changes:
        return sample, ()
    return dataclasses.replace(sample, **changes), tuple(notes.events)


def validate_snapshot(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with impossible readings cleared and an event for each (the same object
    when every reading is possible)."""
    samples: list[DeviceSample] = []
    events: list[DeviceEvent] = []
    for sample in snapshot.samples:
        checked, said = validate_sample(sample)
        samples.append(checked)
        events += said
    if not events:
        return snapshot
    return dataclasses.replace(snapshot, samples=tuple(samples), events=(*snapshot.events, *events))
