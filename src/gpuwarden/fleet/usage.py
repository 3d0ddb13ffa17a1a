"""GPU-hours, idle GPU-hours, energy and dollars: the fleet, each namespace, node, model and pod,
and the ``low-utilization`` pods ranked by the dollars their idle GPUs cost.

Pure: ``FleetData`` and each model's price in, rows and findings out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpuwarden.fleet.model import (
    GRID_S,
    Breakdown,
    BucketUsage,
    FleetData,
    FleetFinding,
    GpuId,
    GpuUsage,
    Holder,
    SeriesKey,
    TimelinePoint,
    Usage,
)
from gpuwarden.fleet.thresholds import FleetThresholds
from gpuwarden.types.health import Confidence, Evidence, Finding, Severity

_MINUTES_PER_HOUR = 3600 // GRID_S
LOW_UTILIZATION_REMEDY = (
    "ask the team whether the pod still needs its GPUs (a notebook or a finished job that did not "
    "exit holds them idle); scale it down or give it fewer GPUs; if it is a real job, look at its "
    "bottleneck (`gpuwarden watch` on the node, or a profiler trace: `gpuwarden trace analyze`)"
)


@dataclass(slots=True)
class _Tally:
    """Sums over series keys, turned into a ``Usage`` at the end."""

    uuids: set[str] = field(default_factory=set)
    gpu_minutes: float = 0.0
    idle_minutes: float = 0.0
    held_minutes: float = 0.0
    unallocated_minutes: float = 0.0
    level_minutes: float = 0.0
    energy_wh: float = 0.0
    dollars: float = 0.0
    idle_dollars: float = 0.0
    unallocated_dollars: float = 0.0
    priced_minutes: float = 0.0
    unpriced_minutes: float = 0.0

    def add(
        self,
        key: SeriesKey,
        whole: BucketUsage,
        level_minutes: float,
        energy_wh: float,
        price: float | None,
    ) -> None:
        self.uuids.add(key.uuid)
        held = key.holder.held
        unallocated = 0.0 if held else whole.idle_minutes
        self.gpu_minutes += whole.gpu_minutes
        self.idle_minutes += whole.idle_minutes
        self.held_minutes += whole.gpu_minutes if held else 0.0
        self.unallocated_minutes += unallocated
        self.level_minutes += level_minutes
        self.energy_wh += energy_wh
        if price is None:
            self.unpriced_minutes += whole.gpu_minutes
            return
        per_minute = price / _MINUTES_PER_HOUR
        self.priced_minutes += whole.gpu_minutes
        self.dollars += whole.gpu_minutes * per_minute
        self.idle_dollars += whole.idle_minutes * per_minute
        self.unallocated_dollars += unallocated * per_minute

    def usage(self, usd_per_kwh: float | None, *, pods_known: bool) -> Usage:
        """``pods_known`` False: no series carries pod labels, so "held by no pod" is unknown."""
        priced = self.priced_minutes > 0 or self.gpu_minutes == 0
        energy_kwh = self.energy_wh / 1000
        return Usage(
            gpus=len(self.uuids),
            gpu_hours=self.gpu_minutes / _MINUTES_PER_HOUR,
            idle_gpu_hours=self.idle_minutes / _MINUTES_PER_HOUR,
            held_gpu_hours=self.held_minutes / _MINUTES_PER_HOUR,
            unallocated_gpu_hours=(
                self.unallocated_minutes / _MINUTES_PER_HOUR if pods_known else None
            ),
            mean_utilization_percent=(
                self.level_minutes / self.gpu_minutes if self.gpu_minutes > 0 else None
            ),
            energy_kwh=energy_kwh,
            gpu_dollars=self.dollars if priced else None,
            idle_dollars=self.idle_dollars if priced else None,
            unallocated_dollars=self.unallocated_dollars if priced and pods_known else None,
            energy_dollars=None if usd_per_kwh is None else energy_kwh * usd_per_kwh,
            unpriced_gpu_hours=self.unpriced_minutes / _MINUTES_PER_HOUR,
        )


def whole_window(
    buckets: Mapping[int, BucketUsage], power_watts: Mapping[int, float]
) -> tuple[BucketUsage, float, float]:
    """A key's buckets summed; Σ level × minutes (for its mean); its energy in Wh: the GPU's
    mean power in each bucket for the minutes the key held it (a bucket without a power reading
    adds none)."""
    minutes = sum(b.gpu_minutes for b in buckets.values())
    idle = sum(b.idle_minutes for b in buckets.values())
    level = sum(
        b.mean_level_percent * b.gpu_minutes
        for b in buckets.values()
        if b.mean_level_percent is not None
    )
    energy = sum(
        power_watts[index] * b.gpu_minutes / _MINUTES_PER_HOUR
        for index, b in buckets.items()
        if index in power_watts
    )
    return BucketUsage(minutes, idle, level / minutes if minutes else None), level, energy


GroupOf = Callable[[SeriesKey, GpuId | None], tuple[tuple[str, str | None], ...] | None]


def _group(
    data: FleetData,
    prices: Mapping[str | None, float | None],
    usd_per_kwh: float | None,
    group_of: GroupOf,
) -> tuple[Breakdown, ...]:
    tallies: dict[tuple[tuple[str, str | None], ...], _Tally] = {}
    for key, buckets in data.usage.items():
        gpu = data.gpus.get(key.uuid)
        labels = group_of(key, gpu)
        if labels is None:
            continue
        whole, level, energy = whole_window(buckets, data.power_watts.get(key.uuid, {}))
        price = prices.get(gpu.model if gpu else None)
        tallies.setdefault(labels, _Tally()).add(key, whole, level, energy, price)
    known = data.collection.pod_labels is not None
    rows = [
        Breakdown(labels, tally.usage(usd_per_kwh, pods_known=known))
        for labels, tally in tallies.items()
    ]
    return tuple(sorted(rows, key=lambda r: (-r.usage.gpu_hours, _sort_text(r.labels))))


def _sort_text(labels: tuple[tuple[str, str | None], ...]) -> tuple[str, ...]:
    return tuple(value or "" for _, value in labels)


def totals(
    data: FleetData, prices: Mapping[str | None, float | None], usd_per_kwh: float | None
) -> Usage:
    rows = _group(data, prices, usd_per_kwh, lambda key, gpu: ())
    if rows:
        return rows[0].usage
    return _Tally().usage(usd_per_kwh, pods_known=data.collection.pod_labels is not None)


def by_namespace(
    data: FleetData, prices: Mapping[str | None, float | None], usd_per_kwh: float | None
) -> tuple[Breakdown, ...]:
    return _group(
        data, prices, usd_per_kwh, lambda key, gpu: (("namespace", key.holder.namespace),)
    )


def _node_labels(gpu: GpuId | None) -> tuple[tuple[str, str | None], ...]:
    return (("Hostname", gpu.host if gpu else None),)


def _index_order(gpu: GpuId) -> tuple[bool, int, str, str]:
    """By the ``gpu`` label as a number (10 after 9), a GPU without one last."""
    index = gpu.index or ""
    numbered = index.isdecimal()
    return (not numbered, int(index) if numbered else 0, index, gpu.uuid)


def by_node(
    data: FleetData, prices: Mapping[str | None, float | None], usd_per_kwh: float | None
) -> tuple[Breakdown, ...]:
    """Each node's usage, and the same figures for each of its GPUs: a series key names its GPU
    by UUID, so a GPU's MIG instances, pods and scrape jobs add up to one row of it."""
    nodes = _group(data, prices, usd_per_kwh, lambda key, gpu: _node_labels(gpu))
    gpus_of: dict[tuple[tuple[str, str | None], ...], list[GpuUsage]] = {}
    for row in _group(data, prices, usd_per_kwh, lambda key, gpu: (("UUID", key.uuid),)):
        uuid = str(dict(row.labels)["UUID"])
        gpu = data.gpus.get(uuid, GpuId(uuid, None, None, None))
        gpus_of.setdefault(_node_labels(gpu), []).append(GpuUsage(gpu, row.usage))
    return tuple(
        replace(
            node,
            gpus=tuple(sorted(gpus_of.get(node.labels, ()), key=lambda g: _index_order(g.gpu))),
        )
        for node in nodes
    )


def by_model(
    data: FleetData, prices: Mapping[str | None, float | None], usd_per_kwh: float | None
) -> tuple[Breakdown, ...]:
    return _group(
        data, prices, usd_per_kwh, lambda key, gpu: (("modelName", gpu.model if gpu else None),)
    )


def by_pod(
    data: FleetData, prices: Mapping[str | None, float | None], usd_per_kwh: float | None
) -> tuple[Breakdown, ...]:
    def pod(key: SeriesKey, gpu: GpuId | None) -> tuple[tuple[str, str | None], ...] | None:
        if not key.holder.held:
            return None
        return (("namespace", key.holder.namespace), ("pod", key.holder.pod))

    return _group(data, prices, usd_per_kwh, pod)


def timeline(data: FleetData) -> tuple[TimelinePoint, ...]:
    """The fleet's GPU-hours, idle and unallocated, bucket by bucket."""
    buckets = data.window.buckets()
    minutes = [[0.0, 0.0, 0.0] for _ in buckets]
    for key, per_bucket in data.usage.items():
        for index, usage in per_bucket.items():
            row = minutes[index]
            row[0] += usage.gpu_minutes
            row[1] += usage.idle_minutes
            row[2] += 0.0 if key.holder.held else usage.idle_minutes
    known = data.collection.pod_labels is not None
    return tuple(
        TimelinePoint(
            start,
            end,
            row[0] / _MINUTES_PER_HOUR,
            row[1] / _MINUTES_PER_HOUR,
            row[2] / _MINUTES_PER_HOUR if known else None,
        )
        for (start, end), row in zip(buckets, minutes, strict=True)
    )


def _money(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:,.0f}"


def low_utilization(
    pods: Iterable[Breakdown], source: str, t: FleetThresholds
) -> tuple[FleetFinding, ...]:
    """Pods that held GPUs for a while at a low mean utilisation, the costliest idle first."""
    found = []
    for row in pods:
        usage, labels = row.usage, dict(row.labels)
        mean = usage.mean_utilization_percent
        if (
            usage.gpu_hours < t.low_utilization_min_gpu_hours
            or mean is None
            or mean >= t.low_utilization_max_percent
        ):
            continue
        namespace, pod = labels.get("namespace"), labels.get("pod")
        name = str(Holder(namespace, pod))
        finding = Finding(
            code="low-utilization",
            severity=Severity.WARNING,
            title=(
                f"pod {name}: {usage.gpus} GPU{'s' if usage.gpus != 1 else ''} at {mean:.0f} % "
                f"mean utilisation; {usage.idle_gpu_hours:.1f} of {usage.gpu_hours:.1f} GPU-hours "
                f"idle ({_money(usage.idle_dollars)})"
            ),
            cause=(
                f"the pod held its GPUs but used them at {mean:.0f} % on average (< "
                f"{t.low_utilization_max_percent:g} %); idle = below {t.idle_below_percent:g} % on "
                "the 1-minute grid"
            ),
            remedy=LOW_UTILIZATION_REMEDY,
            evidence=(
                Evidence("mean_utilization_percent", round(mean, 2), source),
                Evidence("idle_gpu_hours", round(usage.idle_gpu_hours, 4), source),
                Evidence("gpu_hours", round(usage.gpu_hours, 4), source),
                Evidence("idle_dollars", _round(usage.idle_dollars), "prices"),
            ),
            confidence=Confidence.HIGH,
            method=source,
        )
        found.append(FleetFinding(finding, namespace, pod, usage.idle_dollars))
    return tuple(
        sorted(
            found,
            key=lambda f: (
                f.idle_dollars is None,
                -(f.idle_dollars or 0.0),
                -float(f.finding.evidence[1].value or 0.0),
            ),
        )
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
