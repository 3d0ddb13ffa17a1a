"""A window of readings: each GPU's samples in time order, and the arithmetic windowed rules share
(how much evidence there is, the trailing stretch where a condition holds, counter increases).

A window comes from watch's live ring, a recorded run, or an nvidia-smi ``-l`` / dmon series. A GPU
is followed by its UUID (its index when the backend gives no UUID); MIG instances reported as
devices of their own stay out of the per-GPU series (their parent carries the GPU's readings).
Only GPUs that answer in the newest reading have a series: a lost GPU's last readings are stale,
and the point rules report it.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gpuwarden.types.telemetry import DeviceSample, DeviceState, Snapshot, placeholder_uuid


def device_key(sample: DeviceSample) -> str:
    """What follows one GPU across readings: its UUID, else its PCI bus id, else its index."""
    info = sample.info
    return info.uuid or info.pci_bus_id or placeholder_uuid(info.index)


@dataclass(frozen=True, slots=True)
class Series:
    """One GPU's readings in the window, oldest first, only those the GPU answered (state OK)."""

    key: str
    samples: tuple[DeviceSample, ...]

    @property
    def newest(self) -> DeviceSample:
        return self.samples[-1]

    @property
    def span_s(self) -> float:
        return self.samples[-1].timestamp_s - self.samples[0].timestamp_s

    @property
    def index(self) -> int:
        return self.newest.info.index

    @property
    def median_interval_s(self) -> float | None:
        """The middle spacing of consecutive readings; None with fewer than two."""
        gaps = sorted(b.timestamp_s - a.timestamp_s for a, b in itertools.pairwise(self.samples))
        return gaps[len(gaps) // 2] if gaps else None


@dataclass(frozen=True, slots=True)
class Window:
    snapshots: tuple[Snapshot, ...]  # oldest first
    series: tuple[Series, ...]  # per physical GPU, in index order

    @property
    def newest(self) -> Snapshot:
        return self.snapshots[-1]

    @property
    def span_s(self) -> float:
        return self.snapshots[-1].timestamp_s - self.snapshots[0].timestamp_s if self else 0.0

    def __len__(self) -> int:
        return len(self.snapshots)


def build_window(snapshots: Sequence[Snapshot]) -> Window:
    ordered = tuple(sorted(snapshots, key=lambda s: s.timestamp_s))
    by_key: dict[str, list[DeviceSample]] = {}
    present = {
        device_key(s)
        for s in (ordered[-1].samples if ordered else ())
        if s.info.mig_parent_uuid is None and s.state is DeviceState.OK
    }
    for snapshot in ordered:
        for sample in snapshot.samples:
            if sample.info.mig_parent_uuid is None and sample.state is DeviceState.OK:
                by_key.setdefault(device_key(sample), []).append(sample)
    series = [
        Series(key, tuple(sorted(samples, key=lambda s: s.timestamp_s)))
        for key, samples in by_key.items()
        if key in present
    ]
    return Window(ordered, tuple(sorted(series, key=lambda s: (s.index, s.key))))


def shortfall(count: int, span_s: float, min_count: int, min_span_s: float) -> str | None:
    """Why ``count`` readings over ``span_s`` are too little to judge, or None if enough."""
    if count >= min_count and span_s >= min_span_s:
        return None
    return (
        f"not enough data ({count} reading{'s' if count != 1 else ''} over {span_s:.0f} s; "
        f"needs ≥ {min_count} over ≥ {min_span_s:g} s)"
    )


def trailing(
    samples: Sequence[DeviceSample], holds: Callable[[DeviceSample], bool | None]
) -> tuple[DeviceSample, ...]:
    """The newest readings, oldest first, for which ``holds`` is true without a break. ``holds``
    returns None when a reading cannot tell (a field not reported): that ends the stretch too."""
    run: list[DeviceSample] = []
    for sample in reversed(samples):
        if holds(sample) is not True:
            break
        run.append(sample)
    run.reverse()
    return tuple(run)


def span_of(samples: Sequence[DeviceSample]) -> float:
    return samples[-1].timestamp_s - samples[0].timestamp_s if samples else 0.0


def coverage(samples: Sequence[DeviceSample], read: Callable[[DeviceSample], object]) -> float:
    """Share of the readings that report a field (``read`` returns None where not reported)."""
    if not samples:
        return 0.0
    return sum(read(s) is not None for s in samples) / len(samples)


@dataclass(frozen=True, slots=True)
class Increase:
    """How much a counter grew over a stretch of readings, resets (a decrease) skipped."""

    amount: float
    span_s: float
    first_s: float
    last_s: float

    def per_second(self) -> float | None:
        return self.amount / self.span_s if self.span_s > 0 else None


def increase_of(points: Iterable[tuple[float, float | int | None]]) -> Increase | None:
    """Growth of a monotonic counter from (time, value) readings in time order, None values
    skipped; a value lower than the one before is a reset (driver reload, GPU reset), so that step
    adds nothing. None without two readings of it."""
    amount = 0.0
    previous: float | None = None
    first_s = last_s = 0.0
    readings = 0
    for when, value in points:
        if value is None:
            continue
        if previous is None:
            first_s = when
        elif value >= previous:
            amount += value - previous
        previous, last_s, readings = float(value), when, readings + 1
    if readings < 2:
        return None
    return Increase(amount, last_s - first_s, first_s, last_s)


def counter_increase(
    samples: Iterable[DeviceSample], read: Callable[[DeviceSample], float | int | None]
) -> Increase | None:
    """``increase_of`` one field of the readings."""
    return increase_of((sample.timestamp_s, read(sample)) for sample in samples)


def mean(values: Iterable[float]) -> float | None:
    total = count = 0.0
    for value in values:
        total, count = total + value, count + 1
    return total / count if count else None


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[rank]


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None when either series is constant or shorter than 3."""
    if len(xs) < 3 or len(xs) != len(ys):
        return None
    try:
        return statistics.correlation(xs, ys)
    except (statistics.StatisticsError, ValueError):  # a constant series; inf - inf
        return None
