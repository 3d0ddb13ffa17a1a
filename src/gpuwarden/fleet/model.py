"""The fleet report's data: what the collector read from Prometheus (``FleetData``) and what the
analysis made of it (``FleetReport``). Plain frozen data; units in the field names.

Time is Unix seconds. A window covers the grid minutes in ``(start_s, end_s]``; its buckets tile
it from the end, so every bucket but the oldest is ``bucket_s`` long.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwarden.types.health import Finding

GRID_S = 60  # the 1-minute grid every usage number is counted on


@dataclass(frozen=True, slots=True)
class Window:
    start_s: int  # exclusive: the first grid minute is start_s + 60
    end_s: int  # inclusive
    bucket_s: int

    @property
    def seconds(self) -> int:
        return self.end_s - self.start_s

    @property
    def hours(self) -> float:
        return self.seconds / 3600

    def buckets(self) -> tuple[tuple[int, int], ...]:
        """(start, end] of each bucket, oldest first; only the oldest may be shorter."""
        out = []
        end = self.end_s
        while end > self.start_s:
            start = max(end - self.bucket_s, self.start_s)
            out.append((start, end))
            end = start
        return tuple(reversed(out))


@dataclass(frozen=True, slots=True)
class GpuId:
    """One physical GPU, as dcgm-exporter labels it."""

    uuid: str
    host: str | None  # node / Hostname / hostname (queries.NODE_LABELS), else the target's host
    index: str | None  # the "gpu" label
    model: str | None  # modelName (nvidia-smi's name)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who held a GPU (or a MIG instance of it): a pod, or nobody (both None)."""

    namespace: str | None = None
    pod: str | None = None

    @property
    def held(self) -> bool:
        return self.pod is not None

    def __str__(self) -> str:
        """``namespace/pod`` as kubectl names it (the pod alone when it has no namespace)."""
        return f"{self.namespace}/{self.pod}" if self.namespace else str(self.pod)


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """A GPU (or MIG instance) under one holder: the unit usage is counted in."""

    # the GPU's key (collect.gpu_key): its UUID, or a placeholder UUID with its node, as the
    # keys of FleetData's mappings and Event.uuid / StateSpan.uuid are
    uuid: str
    holder: Holder
    mig_instance: str | None = None
    mig_profile: str | None = None


@dataclass(frozen=True, slots=True)
class BucketUsage:
    """One series key over one bucket, on the 1-minute grid."""

    gpu_minutes: float  # weighted: a GPU's minute is shared among its series
    idle_minutes: float  # of those, below the idle line
    mean_level_percent: float | None  # mean utilisation of its readings in the bucket


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened in one grid minute (an Xid, ECC errors, remapped rows)."""

    uuid: str
    source: str  # "xid:gpuwarden_xid_total", "ecc-dbe:volatile", ... (queries.EVENT_SOURCES)
    at_s: int  # the grid minute it was seen in
    amount: float  # how many (for the last-Xid gauge: 1)
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class StateSpan:
    """A 0/1 state (row-remap failure, a gpuwarden finding...) and when it was on."""

    uuid: str
    state: str  # queries.STATE_SOURCES name
    spans: tuple[tuple[int, int], ...]  # (first minute on, last minute on)
    on_at_start: bool  # already on when the window began
    code: str | None = None  # gpuwarden_finding's labels
    severity: str | None = None


@dataclass(frozen=True, slots=True)
class Collection:
    """How the numbers were read: the report says it, the benchmark splits the time."""

    server: str
    lookback_s: int
    scrape_interval_s: float | None
    level_sources: Mapping[str, int]  # source → GPUs read with it
    mig: bool
    pod_labels: str | None  # "namespace/pod", "exported_namespace/exported_pod", None
    gpuwarden_exporter: bool
    queries: int
    retries: int
    server_s: float  # wall time with a query waiting for its answer
    total_s: float
    answer_bytes: int
    warnings: tuple[str, ...] = ()
    query_s: float = 0.0  # the queries' waits added up (parallel queries overlap)


@dataclass(frozen=True, slots=True)
class FleetData:
    """Everything the analysis needs, aggregated server-side: per series key and bucket, per
    GPU and bucket, and the events and states of the window. Nothing per raw sample."""

    window: Window
    idle_below_percent: float
    gpus: Mapping[str, GpuId]  # by key: the UUID, a placeholder's with its node (gpu_key)
    usage: Mapping[SeriesKey, Mapping[int, BucketUsage]]  # bucket index → usage
    temperature_celsius: Mapping[str, Mapping[int, float]]  # UUID → bucket → mean
    power_watts: Mapping[str, Mapping[int, float]]  # energy = mean power × a key's minutes
    events: tuple[Event, ...]
    states: tuple[StateSpan, ...]
    retired_pages_dbe: Mapping[str, float]  # UUID → the most seen in the window
    collection: Collection


# ---------------------------------------------------------------- the report


@dataclass(frozen=True, slots=True)
class Usage:
    """GPU time and what it cost, for the fleet or one group of it."""

    gpus: int
    gpu_hours: float
    idle_gpu_hours: float
    held_gpu_hours: float  # held by a pod
    unallocated_gpu_hours: float | None  # idle and held by no pod; None: no pod labels at all
    mean_utilization_percent: float | None
    energy_kwh: float
    gpu_dollars: float | None  # None: no price for any of it
    idle_dollars: float | None
    unallocated_dollars: float | None
    energy_dollars: float | None
    unpriced_gpu_hours: float  # GPU-hours of models without a price (not in the dollars)


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """One GPU's part of a row: which GPU, and its own figures (``usage.gpus`` is 1)."""

    gpu: GpuId
    usage: Usage


@dataclass(frozen=True, slots=True)
class Breakdown:
    """One row of by_namespace / by_node / by_model / by_pod."""

    labels: tuple[tuple[str, str | None], ...]  # ("namespace", "ml"), ("Hostname", "n1")...
    usage: Usage
    # by_node: the node's GPUs, each once by UUID (its instances, pods and scrape jobs together),
    # in index order; other breakdowns leave it empty
    gpus: tuple[GpuUsage, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelPrice:
    model: str
    usd_per_gpu_hour: float | None
    source: str


@dataclass(frozen=True, slots=True)
class Costs:
    basis: str  # "flat", "catalog", "file"
    price_per_gpu_hour: float | None  # the flat price; None when it varies by model
    usd_per_kwh: float | None
    prices: tuple[ModelPrice, ...]


@dataclass(frozen=True, slots=True)
class Incident:
    """Xid or ECC events of one kind on one GPU, with their timeline."""

    kind: str  # "xid", "ecc-uncorrectable", "ecc-correctable", "remapped-rows-uncorrectable"
    gpu: GpuId
    source: str
    count: float
    first_seen_s: int
    last_seen_s: int
    timeline: tuple[tuple[int, float], ...]  # (bucket start, events in it), non-empty buckets
    xid: int | None = None
    episodes: int = 1  # bursts separated by more than the recurrence gap


@dataclass(frozen=True, slots=True)
class FleetFinding:
    """A finding with the workload it is about (low-utilization pods, stragglers)."""

    finding: Finding
    namespace: str | None = None
    pod: str | None = None
    idle_dollars: float | None = None  # the ranking of low-utilization pods


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    start_s: int
    end_s: int
    gpu_hours: float
    idle_gpu_hours: float
    unallocated_gpu_hours: float | None


@dataclass(frozen=True, slots=True)
class FleetReport:
    window: Window
    idle_below_percent: float
    totals: Usage
    costs: Costs
    by_namespace: tuple[Breakdown, ...]
    by_node: tuple[Breakdown, ...]
    by_model: tuple[Breakdown, ...]
    by_pod: tuple[Breakdown, ...]
    findings: tuple[FleetFinding, ...]
    incidents: tuple[Incident, ...]
    timeline: tuple[TimelinePoint, ...]
    collection: Collection
    notes: tuple[str, ...] = ()
