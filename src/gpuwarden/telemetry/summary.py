"""Per-GPU summary of a recording (pure: readings and events in, ``RecordSummary`` out).

A reading that is not a finite number (a backend passing on an exporter's ``+Inf``, a NaN) is
left out like a missing one: one of them must not turn a mean, a peak or an energy into inf.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from gpuwarden.types.telemetry import DeviceEvent, DeviceSample, DeviceState, EventKind
from gpuwarden.types.telemetry_summary import RecordSummary

# Clock-event reasons that slow a busy GPU (NVML nvmlClocksEventReason*); the others (gpu_idle,
# applications/display clock settings) are not throttling.
THROTTLE_REASONS = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "sync_boost",
    }
)
_ECC_KINDS = (EventKind.ECC_UNCORRECTED, EventKind.ECC_CORRECTED)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default method); None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


class _Counter:
    """Sum of a counter's increases between consecutive readings; a drop (reset) adds nothing."""

    __slots__ = ("last", "readings", "total")

    def __init__(self) -> None:
        self.total, self.last, self.readings = 0.0, None, 0

    total: float
    last: float | None
    readings: int

    def add(self, value: float | None) -> None:
        value = _finite(value)
        if value is None:
            return
        if self.last is not None and value >= self.last:
            self.total += value - self.last
        self.last, self.readings = value, self.readings + 1

    @property
    def increase(self) -> float | None:
        return self.total if self.readings >= 2 else None


class Distribution:
    """Mean and percentiles in bounded memory: values are counted on a grid of ``resolution``
    (NVML utilization is whole percent, DCGM ratios have 4 decimals: exact for both), so a
    week-long recording keeps at most 1/resolution counts, not every reading."""

    __slots__ = ("_counts", "_n", "_resolution", "_sum")

    def __init__(self, resolution: float) -> None:
        self._resolution = resolution
        self._counts: Counter[int] = Counter()
        self._sum = 0.0
        self._n = 0

    def add(self, value: float) -> None:
        """A reading (finite: the caller checks); one too large for the grid (1e308, no real
        reading) is left out like a non-finite one."""
        on_grid = value / self._resolution
        if not math.isfinite(on_grid):
            return
        self._counts[round(on_grid)] += 1
        self._sum += value
        self._n += 1

    @property
    def mean(self) -> float | None:
        return self._sum / self._n if self._n else None

    def percentile(self, q: float) -> float | None:
        """As ``percentile`` over the values on the grid."""
        if not self._n:
            return None
        pos = (self._n - 1) * q
        low_rank = math.floor(pos)
        low = high = None
        seen = 0
        for key in sorted(self._counts):
            seen += self._counts[key]
            if low is None and seen > low_rank:
                low = key
            if seen > low_rank + 1 or seen == self._n:
                high = key
                break
        assert low is not None
        assert high is not None
        a, b = low * self._resolution, high * self._resolution
        return a + (b - a) * (pos - low_rank)


class DeviceAccumulator:
    """One GPU's summary built one reading at a time; a long recording is never held in memory."""

    def __init__(self, first: DeviceSample) -> None:
        self.info = first.info
        self.samples = 0
        self.first_s = self.last_s = first.timestamp_s
        self._prev: DeviceSample | None = None
        self._util = Distribution(0.01)  # percent
        self._sm = Distribution(0.0001)  # ratio
        self._power_sum, self._power_n = 0.0, 0
        self._power_peak: float | None = None
        self._temp_peak: float | None = None
        self._memory_peak: int | None = None
        self._energy = _Counter()
        self._integral_j, self._integral_pairs = 0.0, 0
        self._power_ns, self._thermal_ns = _Counter(), _Counter()
        self._ecc_unc, self._ecc_cor = _Counter(), _Counter()
        self._throttled: dict[str, float] = defaultdict(float)
        self._lost_at: float | None = None

    def add(self, s: DeviceSample) -> None:
        """Readings must come in time order."""
        self.samples += 1
        self.last_s = s.timestamp_s
        if s.state is not DeviceState.OK:
            if s.state is DeviceState.GPU_LOST and self._lost_at is None:
                self._lost_at = s.timestamp_s
            self._prev = None
            return
        self.info = s.info
        if (util := _finite(s.gpu_utilization_percent)) is not None:
            self._util.add(util)
        if (sm := _finite(s.sm_active_ratio)) is not None:
            self._sm.add(sm)
        power = _finite(s.power_draw_watts)
        if power is not None:
            self._power_sum += power
            self._power_n += 1
            self._power_peak = power if self._power_peak is None else max(self._power_peak, power)
        if (t := _finite(s.temperature_gpu_celsius)) is not None:
            self._temp_peak = t if self._temp_peak is None else max(self._temp_peak, t)
        if s.memory_used_bytes is not None:
            m = s.memory_used_bytes
            self._memory_peak = m if self._memory_peak is None else max(self._memory_peak, m)
        self._energy.add(s.energy_consumed_joules)
        self._power_ns.add(_float(s.power_violation_ns_total))
        self._thermal_ns.add(_float(s.thermal_violation_ns_total))
        self._ecc_unc.add(_float(s.ecc_errors_uncorrected_volatile))
        self._ecc_cor.add(_float(s.ecc_errors_corrected_volatile))
        prev = self._prev
        if prev is not None and s.timestamp_s > prev.timestamp_s:
            dt = s.timestamp_s - prev.timestamp_s
            # a reason seen at the start of an interval is counted for the whole interval
            for reason in prev.clock_event_reasons or ():
                if reason in THROTTLE_REASONS:
                    self._throttled[reason] += dt
            before = _finite(prev.power_draw_watts)
            if before is not None and power is not None:
                self._integral_j += (before + power) / 2 * dt
                self._integral_pairs += 1
        self._prev = s

    def result(self, events: Sequence[DeviceEvent], *, price_per_kwh: float) -> RecordSummary:
        joules: float | None
        if (counted := self._energy.increase) is not None:
            joules, basis = counted, "energy-counter"
        elif self._integral_pairs:
            joules, basis = self._integral_j, "power-integral"
        else:
            joules, basis = None, None
        wh = None if joules is None else joules / 3600.0
        lost = [e.timestamp_s for e in events if e.kind is EventKind.GPU_LOST]
        if self._lost_at is not None:
            lost.append(self._lost_at)
        power_ns, thermal_ns = self._power_ns.increase, self._thermal_ns.increase
        ecc_unc, ecc_cor = self._ecc_unc.increase, self._ecc_cor.increase
        return RecordSummary(
            index=self.info.index,
            uuid=self.info.uuid,
            name=self.info.name,
            mig_parent_uuid=self.info.mig_parent_uuid,
            mig_profile=self.info.mig_profile,
            samples=self.samples,
            first_timestamp_s=self.first_s,
            last_timestamp_s=self.last_s,
            memory_total_bytes=self.info.memory_total_bytes,
            peak_memory_used_bytes=self._memory_peak,
            gpu_utilization_mean_percent=self._util.mean,
            gpu_utilization_p95_percent=self._util.percentile(0.95),
            sm_active_mean_ratio=self._sm.mean,
            sm_active_p95_ratio=self._sm.percentile(0.95),
            power_mean_watts=self._power_sum / self._power_n if self._power_n else None,
            power_peak_watts=self._power_peak,
            temperature_peak_celsius=self._temp_peak,
            throttled_seconds_by_reason=dict(sorted(self._throttled.items())),
            power_violation_seconds=None if power_ns is None else power_ns / 1e9,
            thermal_violation_seconds=None if thermal_ns is None else thermal_ns / 1e9,
            energy_wh=wh,
            energy_basis=basis,
            price_per_kwh=price_per_kwh,
            energy_cost=None if wh is None else wh / 1000.0 * price_per_kwh,
            xid_events=tuple(e for e in events if e.kind is EventKind.XID),
            ecc_events=tuple(e for e in events if e.kind in _ECC_KINDS),
            ecc_uncorrected_increase=None if ecc_unc is None else int(ecc_unc),
            ecc_corrected_increase=None if ecc_cor is None else int(ecc_cor),
            lost=bool(lost),
            lost_at_s=min(lost) if lost else None,
        )


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


class RecordingSummarizer:
    """Feed snapshots' samples and events as they come; ``summaries()`` at the end."""

    def __init__(self) -> None:
        self._devices: dict[str, DeviceAccumulator] = {}
        self._events: dict[str, list[DeviceEvent]] = defaultdict(list)
        self.unattributed_events: list[DeviceEvent] = []

    def add_sample(self, sample: DeviceSample) -> None:
        uuid = sample.info.uuid
        if uuid not in self._devices:
            self._devices[uuid] = DeviceAccumulator(sample)
        self._devices[uuid].add(sample)

    def add_event(self, event: DeviceEvent) -> None:
        if event.uuid is None:
            self.unattributed_events.append(event)
        else:
            self._events[event.uuid].append(event)

    def summaries(self, *, price_per_kwh: float) -> tuple[RecordSummary, ...]:
        out = [
            acc.result(
                sorted(self._events.get(uuid, []), key=lambda e: e.timestamp_s),
                price_per_kwh=price_per_kwh,
            )
            for uuid, acc in self._devices.items()
        ]
        return tuple(sorted(out, key=lambda s: (s.index is None, s.index or 0, s.uuid)))


def summarize(
    samples: Iterable[DeviceSample], events: Iterable[DeviceEvent], *, price_per_kwh: float
) -> tuple[RecordSummary, ...]:
    """Every GPU in ``samples`` (grouped by UUID, ordered by index), with its events."""
    summarizer = RecordingSummarizer()
    for sample in sorted(samples, key=lambda s: s.timestamp_s):
        summarizer.add_sample(sample)
    for event in events:
        summarizer.add_event(event)
    return summarizer.summaries(price_per_kwh=price_per_kwh)
