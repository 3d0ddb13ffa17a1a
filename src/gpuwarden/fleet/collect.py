"""Reading a window of a fleet from Prometheus into ``FleetData``: aggregated server-side, in
chunks of time, so memory follows the number of GPUs and buckets, never the raw samples.

1. Probes (instant queries over the whole window, raw and cheap): which utilisation family each
   GPU has and how many series (``level groups``), MIG, pod labels, gpuwarden's exporter, the
   scrape interval, and which event and state families changed at all.
2. Chunks of a few buckets: per level group, the minutes each series reported and was idle
   (``count_over_time`` on the grid), its mean level, and — only for GPUs with several series —
   the minutes where they overlap (to weigh each 1/n); per GPU its mean temperature and power;
   the per-minute Xid/ECC events and state changes of the families that changed. Queries run
   ``parallel`` at a time; answers are folded in a fixed order (the same numbers every run).
3. The states at the window's start and the retired-page counts.
"""

from __future__ import annotations

import bisect
import math
import re
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gpuwarden.catalog.gpus import mig_slices
from gpuwarden.errors import InputError
from gpuwarden.fleet import queries as q
from gpuwarden.fleet.devices import number
from gpuwarden.fleet.model import (
    GRID_S,
    BucketUsage,
    Collection,
    Event,
    FleetData,
    GpuId,
    Holder,
    SeriesKey,
    StateSpan,
    Window,
)
from gpuwarden.fleet.prometheus import PrometheusClient, PrometheusQueryError, Sample, Series
from gpuwarden.fleet.window import span_text
from gpuwarden.types.telemetry import placeholder_names_host, real_uuid

ProgressFn = Callable[[int, int, str], None]  # (queries done, queries in all, what runs now)

CHUNK_BUCKETS = 6  # buckets per range query: 6 h of a 24 h report, progress every few seconds
PARALLEL = 4  # queries in flight (Grafana runs a dashboard's panels about this wide)
# The lookback: 2.5 scrape intervals (one missed scrape is not a gap), within [1 min, 5 min]
# (at least the grid step; at most Prometheus' default lookback delta).
LOOKBACK_INTERVALS = 2.5
LOOKBACK_MIN_S = 60
LOOKBACK_MAX_S = 300
DEFAULT_SCRAPE_INTERVAL_S = 60.0
# A UUID list that only narrows a query (the GPUs with several series, with events, with states)
# holds at most this many: VictoriaMetrics refuses queries over 16 KiB by default
# (-search.maxQueryLen) and a UUID with its separator takes 41 bytes. Longer lists are split
# into batches (GPUs with several series) or left out (the query stays correct, only broader).
MAX_NARROWING_UUIDS = 200
# and at most this many bytes, as the query spells them (escaped): the overlap query holds its
# list twice (the series, and their count per GPU) beside some 3 KiB of its own, and 200 UUIDs
# take 10 KiB (VictoriaMetrics refused 21.5 KiB: HTTP 422), a node's placeholders with long node
# names more. A list over it is left out, its answers narrowed to the keys (LevelGroup.keys).
MAX_NARROWING_BYTES = 6 << 10
_EMPTY_NARROWING_BYTES = len(q.one_of("UUID", ()))
# When most of a group's GPUs have several series, one query over the group costs less than
# batches over nearly all of it.
BATCHES_UP_TO_SHARE = 0.8

StateKey = tuple[str, str, str | None, str | None]  # (UUID, state, code, severity)


@dataclass(frozen=True, slots=True)
class OverlapBatch:
    """GPUs of a group with several series, asked for in one query."""

    where: str  # their matchers
    # the keys the answers are folded for: two batches' matchers both select every node's
    # "index:0", and each answer must take back a GPU's surplus once
    keys: frozenset[str]


@dataclass(frozen=True, slots=True)
class LevelGroup:
    """GPUs read from one utilisation family (whole GPUs, or MIG instances)."""

    source: str  # LEVEL_SOURCES name
    metric: str
    factor: int
    where: str  # matchers selecting the group's series (and maybe more: see ``keys``)
    # its GPUs' keys (gpu_key): the matchers select GPUs by UUID, which selects every node's
    # GPU of a placeholder UUID ("index:0") of which one is the group's; the answers keep these
    keys: frozenset[str]
    # its GPUs with several series, in batches (one query each); () when none has
    overlaps: tuple[OverlapBatch, ...] = ()

    @property
    def gpus(self) -> int:
        return len(self.keys)


@dataclass(slots=True)
class _Sums:
    gpu_minutes: float = 0.0
    idle_minutes: float = 0.0
    level_sum: float = 0.0  # Σ (mean level × its series' weight) for the key's mean
    level_weight: float = 0.0


@dataclass(slots=True)
class _Accumulator:
    """What the answers add up to, folded as they arrive."""

    window: Window
    pod_labels: tuple[str, str] | None
    idle_below_percent: float
    bucket_at: dict[int, int] = field(default_factory=dict)  # bucket end → index
    ends: list[int] = field(default_factory=list)
    gpus: dict[str, GpuId] = field(default_factory=dict)
    usage: dict[SeriesKey, dict[int, _Sums]] = field(default_factory=dict)
    temperature: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    power: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    events: dict[tuple[str, str, int | None, int], float] = field(default_factory=dict)
    edges: dict[StateKey, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self) -> None:
        buckets = self.window.buckets()
        self.bucket_at = {end: i for i, (_, end) in enumerate(buckets)}
        self.ends = [end for _, end in buckets]

    def bucket_of_minute(self, stamp: float) -> int:
        return min(bisect.bisect_left(self.ends, round(stamp)), len(self.ends) - 1)

    def sums(self, key: SeriesKey, index: int) -> _Sums:
        return self.usage.setdefault(key, {}).setdefault(index, _Sums())


def _value(labels: Mapping[str, str], name: str) -> str | None:
    return labels.get(name) or None


def gpu_of(labels: Mapping[str, str]) -> GpuId | None:
    """The GPU a series is about, or None for a series without a UUID."""
    uuid = _value(labels, "UUID")
    if uuid is None:
        return None
    host = next((v for name in q.NODE_LABELS if (v := _value(labels, name))), None)
    if host is None and (instance := _value(labels, "instance")):
        host = _instance_host(instance)
    return GpuId(uuid, host, _value(labels, "gpu"), _value(labels, "modelName"))


_BRACKETED_INSTANCE = re.compile(q.BRACKETED_INSTANCE)


def _instance_host(instance: str) -> str | None:
    """A scrape target's host: "10.0.0.4:9400" → "10.0.0.4", "[fd00::4]:9400" → "[fd00::4]" (two
    ports of one node are one node); an instance that is only a port names no node. As
    queries.gpu_keyed reads it."""
    bracketed = _BRACKETED_INSTANCE.fullmatch(instance)
    if bracketed is not None:
        return bracketed[1]
    return (instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance) or None


def gpu_key(gpu: GpuId) -> str:
    """What tells a GPU from every other of the fleet, the key of its figures: its UUID when it
    is one (a GPU two scrape jobs serve is one GPU); a placeholder UUID with the node it is on,
    as the dcgm reader spells one ("HOST/index:0"), since every node has an "index:0". One that
    names its node is that GPU's whatever node label the series carries (an exporter that
    relays another node's page serves it under its own Hostname)."""
    if real_uuid(gpu.uuid) or gpu.host is None or placeholder_names_host(gpu.uuid):
        return gpu.uuid
    return f"{gpu.host}/{gpu.uuid}"


def series_key(labels: Mapping[str, str], pod_labels: tuple[str, str] | None) -> SeriesKey | None:
    gpu = gpu_of(labels)
    if gpu is None:
        return None
    holder = Holder()
    if pod_labels is not None:
        namespace, pod = (_value(labels, name) for name in pod_labels)
        holder = Holder(namespace, pod) if pod else Holder()
    return SeriesKey(
        gpu_key(gpu), holder, _value(labels, "GPU_I_ID"), _value(labels, "GPU_I_PROFILE")
    )


def _remember(acc: _Accumulator, labels: Mapping[str, str]) -> GpuId | None:
    gpu = gpu_of(labels)
    if gpu is None:
        return None
    key = gpu_key(gpu)
    known = acc.gpus.get(key)
    if known is None or (known.host is None and gpu.host is not None):
        acc.gpus[key] = gpu
    return gpu


def _keyed_points(
    acc: _Accumulator, rows: Iterable[Series], keys: frozenset[str]
) -> Iterable[tuple[SeriesKey, int, float]]:
    """Each point of the rows of the GPUs ``keys`` names, with its series' key and bucket."""
    for row in rows:
        key = series_key(row.labels, acc.pod_labels)
        if key is None or key.uuid not in keys:
            continue
        _remember(acc, row.labels)
        for stamp, value in row.points:
            index = acc.bucket_at.get(round(stamp))
            if index is not None and math.isfinite(value):
                yield key, index, value


def fold_present(acc: _Accumulator, keys: frozenset[str], rows: Iterable[Series]) -> None:
    for key, index, value in _keyed_points(acc, rows, keys):
        acc.sums(key, index).gpu_minutes += value


def fold_idle(acc: _Accumulator, keys: frozenset[str], rows: Iterable[Series]) -> None:
    for key, index, value in _keyed_points(acc, rows, keys):
        acc.sums(key, index).idle_minutes += value


def fold_mean(acc: _Accumulator, keys: frozenset[str], rows: Iterable[Series]) -> None:
    for key, index, value in _keyed_points(acc, rows, keys):
        sums = acc.sums(key, index)
        sums.level_sum += value
        sums.level_weight += 1


def minute_shares(keys: Sequence[SeriesKey]) -> list[float]:
    """Each series' share of a GPU's minute, the shares summing to 1. MIG instances share the GPU
    by their compute slices (a 3g.40gb instance holds 3 of the slices in use, a 1g.10gb one);
    series of one instance (pods taking turns, a GPU scraped twice), or of a GPU whose instances'
    profiles are not all known, share it equally."""
    slices = [mig_slices(k.mig_profile) if k.mig_instance else None for k in keys]
    if any(n is None for n in slices):
        return [1 / len(keys)] * len(keys)
    per_instance = Counter(k.mig_instance for k in keys)
    instance_slices = {k.mig_instance: n for k, n in zip(keys, slices, strict=True)}
    total = sum(n for n in instance_slices.values() if n is not None)
    return [
        (n or 0) / total / per_instance[k.mig_instance] for k, n in zip(keys, slices, strict=True)
    ]


def fold_overlaps(acc: _Accumulator, keys: frozenset[str], rows: Iterable[Series]) -> None:
    """At a minute where a GPU (of ``keys``) has several series, each was counted a whole
    minute: take back all but its share (``minute_shares``)."""
    at_minute: dict[tuple[str, int], list[tuple[SeriesKey, float]]] = defaultdict(list)
    for row in rows:
        key = series_key(row.labels, acc.pod_labels)
        if key is None or key.uuid not in keys:
            continue
        for stamp, level in row.points:
            at_minute[(key.uuid, round(stamp))].append((key, level))
    for (_, stamp), members in at_minute.items():
        index = acc.bucket_of_minute(stamp)
        shares = minute_shares([key for key, _ in members])
        for (key, level), share in zip(members, shares, strict=True):
            surplus = 1 - share
            sums = acc.sums(key, index)
            sums.gpu_minutes -= surplus
            if level < acc.idle_below_percent:
                sums.idle_minutes -= surplus


def fold_means(
    acc: _Accumulator, rows: Iterable[Series], into: dict[str, dict[int, list[float]]]
) -> None:
    for row in rows:
        gpu = _remember(acc, row.labels)
        if gpu is None:
            continue
        per_bucket = into.setdefault(gpu_key(gpu), {})
        for stamp, value in row.points:
            index = acc.bucket_at.get(round(stamp))
            if index is not None and math.isfinite(value):
                per_bucket.setdefault(index, []).append(value)


# NVML's error counters and Xid codes and DCGM's counter fields are 64-bit integers: a step or a
# code beyond their range is no reading (and a sum of such steps would overflow to infinity).
COUNTER_MAX = float(2**64)


def _event_reading(value: float) -> bool:
    return 0 < value <= COUNTER_MAX  # NaN fails both


def fold_events(acc: _Accumulator, rows: Iterable[Series]) -> None:
    for row in rows:
        gpu = _remember(acc, row.labels)
        source = row.labels.get("gw_source", "")
        if gpu is None or not source:
            continue
        known = q.EVENT_SOURCE.get(source)
        last_value = known is not None and known.last_value
        for stamp, value in row.points:
            if not _event_reading(value):
                continue
            xid = round(value) if last_value else number(row.labels.get("xid"))
            key = (gpu_key(gpu), source, xid, round(stamp))
            amount = 1.0 if last_value else value
            acc.events[key] = max(acc.events.get(key, 0.0), amount)  # a GPU scraped twice


def _state_key(uuid: str, labels: Mapping[str, str], state: str) -> StateKey:
    return (uuid, state, _value(labels, "code"), _value(labels, "severity"))


def fold_edges(acc: _Accumulator, rows: Iterable[Series]) -> None:
    for row in rows:
        gpu = _remember(acc, row.labels)
        state, edge = row.labels.get("gw_state"), row.labels.get("gw_edge")
        if gpu is None or state is None or edge not in {"on", "off"}:
            continue
        key = _state_key(gpu_key(gpu), row.labels, state)
        acc.edges[key].extend((round(stamp), edge) for stamp, _ in row.points)


def spans(
    edges: list[tuple[int, str]], on_at_start: bool, window: Window
) -> tuple[tuple[int, int], ...]:
    """On-intervals (first minute on, last minute on) from the edges seen minute by minute."""
    out, since = [], window.start_s + GRID_S if on_at_start else None
    for stamp, edge in sorted(set(edges)):
        if edge == "on" and since is None:
            since = stamp
        elif edge == "off" and since is not None:
            out.append((since, stamp - GRID_S))
            since = None
    if since is not None:
        out.append((since, window.end_s))
    return tuple((a, b) for a, b in out if b >= a)


def chunks(window: Window, per_chunk: int) -> list[tuple[list[int], int]]:
    """Runs of consecutive buckets of one length, at most ``per_chunk`` each: (indices, length)."""
    out: list[tuple[list[int], int]] = []
    for index, (start, end) in enumerate(window.buckets()):
        length = end - start
        if out and out[-1][1] == length and len(out[-1][0]) < per_chunk:
            out[-1][0].append(index)
        else:
            out.append(([index], length))
    return out


def _duration(seconds: int) -> str:
    return f"{seconds}s"


def _bucket_range(length_s: int) -> str:
    """The subquery range of a bucket: its length less 1 ms (see queries: the grid)."""
    return f"{length_s * 1000 - 1}ms"


def _lookback(interval_s: float | None) -> int:
    interval = interval_s or DEFAULT_SCRAPE_INTERVAL_S
    wanted = math.ceil(LOOKBACK_INTERVALS * interval)
    return min(max(wanted, LOOKBACK_MIN_S), LOOKBACK_MAX_S)


def _uuid_filter(
    chosen: Iterable[str], candidates: Iterable[str], uuid_of: Callable[[str], str]
) -> str:
    """Matchers keeping the GPUs ``chosen`` (keys) among the series of ``candidates``: none when
    they are all, else the shorter of ``UUID=~chosen`` and ``UUID!~the others``. A placeholder
    UUID one of the chosen has is kept whole (every node's "index:0"): a selector cannot pair a
    UUID with a node, the answers are narrowed to the keys instead (``LevelGroup.keys``)."""
    wanted = {uuid_of(key) for key in chosen}
    others = {uuid_of(key) for key in candidates} - wanted
    if not others:
        return ""
    if len(wanted) <= len(others):
        narrowing = q.one_of("UUID", wanted)
    else:
        narrowing = q.one_of("UUID", others, negate=True)
    return narrowing if len(narrowing.encode()) <= MAX_NARROWING_BYTES else ""


def _batches(keys: Sequence[str], uuid_of: Callable[[str], str]) -> list[list[str]]:
    """``keys`` in batches whose UUID lists each fit a query: at most MAX_NARROWING_UUIDS, and
    MAX_NARROWING_BYTES as one_of spells them (a UUID longer alone is a batch of its own)."""
    batches: list[list[str]] = [[]]
    size = _EMPTY_NARROWING_BYTES
    for key in keys:
        cost = len(q.one_of("UUID", (uuid_of(key),)).encode()) - _EMPTY_NARROWING_BYTES + 1
        batch = batches[-1]
        if batch and (len(batch) >= MAX_NARROWING_UUIDS or size + cost > MAX_NARROWING_BYTES):
            batch, size = [], _EMPTY_NARROWING_BYTES
            batches.append(batch)
        batch.append(key)
        size += cost
    return [batch for batch in batches if batch]


def level_groups(
    rows: Mapping[str, Mapping[tuple[str, str | None], float]],
    sel: str,
    uuids: Mapping[str, str] | None = None,
) -> list[LevelGroup]:
    """From each family's (GPU key, GPU_I_ID) → series count: the groups, each GPU in the first
    family it has; MIG GPUs read from their instances. ``uuids``: each key's UUID label where it
    is not the key itself (a placeholder's key names its node)."""
    known = uuids or {}

    def uuid_of(key: str) -> str:
        return known.get(key, key)

    best: dict[str, str] = {}
    for source, _, _ in q.LEVEL_SOURCES:
        for key, _ in rows.get(source, {}):
            best.setdefault(key, source)
    groups = []
    for source, metric, factor in q.LEVEL_SOURCES:
        family = rows.get(source, {})
        holders = {key for key, _ in family}
        instance_holders = {key for key, gi in family if gi}
        mine = {key for key in holders if best[key] == source}
        mig = mine & instance_holders
        series: dict[str, float] = defaultdict(float)
        for (key, gi), count in family.items():
            if (key in mig) == bool(gi):
                series[key] += count
        for keys, instances in ((mine - mig, False), (mig, True)):
            if not keys:
                continue
            gi = 'GPU_I_ID!=""' if instances else ('GPU_I_ID=""' if instance_holders else "")
            pool = instance_holders if instances else holders
            where = q.matchers(sel, gi, _uuid_filter(keys, pool, uuid_of))
            several = sorted(key for key in keys if series[key] > 1)
            overlaps: tuple[OverlapBatch, ...] = ()
            if len(several) > BATCHES_UP_TO_SHARE * len(keys):
                overlaps = (OverlapBatch(where, frozenset(keys)),)
            elif several:
                overlaps = tuple(
                    OverlapBatch(q.matchers(sel, gi, _uuid_filter(b, pool, uuid_of)), frozenset(b))
                    for b in _batches(several, uuid_of)
                )
            groups.append(LevelGroup(source, metric, factor, where, frozenset(keys), overlaps))
    return groups


@dataclass(frozen=True, slots=True)
class _Task:
    name: str
    run: Callable[[], Any]
    fold: Callable[[Any], None]


class Collector:
    """One collection: a client, a window, the user's selector and idle line."""

    def __init__(
        self,
        client: PrometheusClient,
        window: Window,
        *,
        selector: str = "",
        idle_below_percent: float = 5.0,
        progress: ProgressFn | None = None,
        chunk_buckets: int = CHUNK_BUCKETS,
        parallel: int = PARALLEL,
    ) -> None:
        self.client = client
        self.window = window
        self.sel = selector.strip().strip("{}").strip()
        self.idle_below_percent = idle_below_percent
        self.progress = progress
        self.chunk_buckets = chunk_buckets
        self.parallel = max(1, parallel)
        self.whole = _duration(window.seconds)
        self._done = 0
        self._total = 0

    # -- plumbing

    def _ask(self, call: Callable[[], Any]) -> Any:
        """``call()``; a query the server rejects because of ``--selector`` is bad input."""
        try:
            return call()
        except PrometheusQueryError as exc:
            if exc.reference == "prometheus-query-rejected" and self.sel:
                raise InputError(
                    exc.message,
                    reference="fleet-selector-rejected",
                    hint=f"--selector {self.sel!r} must be PromQL label matchers, e.g. "
                    '\'cluster="prod", namespace=~"ml-.*"\'',
                    context=exc.context,
                ) from None
            raise

    def _stepped(self, name: str) -> None:
        self._done += 1
        if self.progress is not None:
            self.progress(self._done, max(self._total, self._done), name)

    def _instant(self, name: str, query: str, at_s: float) -> tuple[Sample, ...]:
        samples: tuple[Sample, ...] = self._ask(lambda: self.client.instant(name, query, at_s))
        self._stepped(name)
        return samples

    def _number(self, name: str, query: str) -> float:
        samples = self._instant(name, query, self.window.end_s)
        return sum(s.value for s in samples if math.isfinite(s.value))

    def _run(self, tasks: list[_Task]) -> None:
        """Run ``parallel`` at a time; fold in the tasks' order, as each one's turn comes."""
        self._total = self._done + len(tasks)
        if self.parallel == 1:
            for task in tasks:
                task.fold(self._ask(task.run))
                self._stepped(task.name)
            return
        pool = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="fleet")
        pending: deque[tuple[_Task, Future[Any]]] = deque()
        try:
            for task in tasks:
                pending.append((task, pool.submit(self._ask, task.run)))
                if len(pending) >= self.parallel:
                    self._fold_next(pending)
            while pending:
                self._fold_next(pending)
        finally:
            # on an error or ^C, do not wait for the queries still in flight
            pool.shutdown(wait=not pending, cancel_futures=True)

    def _fold_next(self, pending: deque[tuple[_Task, Future[Any]]]) -> None:
        task, future = pending.popleft()
        task.fold(future.result())
        self._stepped(task.name)

    # -- probes

    def _family_rows(
        self,
    ) -> tuple[dict[str, dict[tuple[str, str | None], float]], dict[str, str]]:
        """Per family, (GPU key, GPU_I_ID) → series count; and each key's UUID label."""
        rows: dict[str, dict[tuple[str, str | None], float]] = {}
        uuids: dict[str, str] = {}
        for source, metric, _ in q.LEVEL_SOURCES:
            query = q.series_per_gpu(metric, self.sel, self.whole)
            found: dict[tuple[str, str | None], float] = defaultdict(float)
            for sample in self._instant(f"GPUs with {source}", query, self.window.end_s):
                gpu = gpu_of(sample.labels)
                if gpu is not None and math.isfinite(sample.value):
                    key = gpu_key(gpu)
                    uuids[key] = gpu.uuid
                    found[(key, _value(sample.labels, "GPU_I_ID"))] += sample.value
            rows[source] = dict(found)
        return rows, uuids

    def _pod_labels(self) -> tuple[str, str] | None:
        if (
            self._number(
                "exported_pod labels", q.series_with_label("exported_pod", self.sel, self.whole)
            )
            > 0
        ):
            return ("exported_namespace", "exported_pod")
        if self._number("pod labels", q.series_with_label("pod", self.sel, self.whole)) > 0:
            return ("namespace", "pod")
        return None

    def _scrape_interval(self) -> float | None:
        """From the median series' readings per hour, at four points of the window."""
        w = self.window
        first = min(w.start_s + 3600, w.end_s)
        step = max((w.end_s - first) / 3, 60.0)
        query = q.readings_per_hour(self.sel)
        rows: tuple[Series, ...] = self._ask(
            lambda: self.client.range("scrape interval", query, first, w.end_s, step)
        )
        self._stepped("scrape interval")
        counts = [v for row in rows for _, v in row.points if math.isfinite(v) and v > 1]
        return 3600.0 / max(counts) if counts else None

    def _active(self, name: str, query: str, label: str) -> dict[str, set[str]]:
        """Per event source (state), the UUIDs where it changed (was on) in the window."""
        out: dict[str, set[str]] = defaultdict(set)
        for sample in self._instant(name, query, self.window.end_s):
            uuid, what = _value(sample.labels, "UUID"), sample.labels.get(label)
            if uuid is not None and what:
                out[what].add(uuid)
        return out

    def _where_active(self, active: dict[str, set[str]]) -> dict[str, str]:
        return {
            what: q.matchers(self.sel, q.one_of("UUID", uuids)) for what, uuids in active.items()
        }

    # -- the collection

    def run(self) -> FleetData:
        started = time.monotonic()
        window, sel = self.window, self.sel
        self._total = 12
        rows, uuids = self._family_rows()
        groups = level_groups(rows, sel, uuids)
        if not groups:
            raise self._no_gpus()
        pod_labels = self._pod_labels()
        gpuwarden = self._number("gpuwarden's exporter", q.gpuwarden_families(sel, self.whole)) > 0
        interval = self._scrape_interval()
        lookback_s = _lookback(interval)
        lookback = _duration(lookback_s)
        events_where = self._where_active(
            self._active("which events", q.changed(sel, lookback, self.whole), "gw_source")
        )
        states_where = self._where_active(
            self._active("which states", q.states_seen(sel, self.whole), "gw_state")
        )
        acc = _Accumulator(window, pod_labels, self.idle_below_percent)
        tasks: list[_Task] = []
        for indices, length in chunks(window, self.chunk_buckets):
            tasks += self._chunk_tasks(
                acc, groups, indices, length, lookback, events_where, states_where
            )
        self._run(tasks)
        on_at_start = self._states_at_start(states_where, lookback)
        retired = self._retired_dbe(acc)
        stats = self.client.stats
        collection = Collection(
            server=self.client.base_url,
            lookback_s=lookback_s,
            scrape_interval_s=interval,
            level_sources={
                source: sum(g.gpus for g in groups if g.source == source)
                for source, _, _ in q.LEVEL_SOURCES
            },
            mig=any(gi for family in rows.values() for _, gi in family),
            pod_labels=None if pod_labels is None else "/".join(pod_labels),
            gpuwarden_exporter=gpuwarden,
            queries=stats.queries,
            retries=stats.retries,
            server_s=stats.server_s,
            query_s=stats.query_s,
            total_s=time.monotonic() - started,
            answer_bytes=stats.answer_bytes,
            warnings=tuple(dict.fromkeys(stats.warnings)),
        )
        return self._data(acc, on_at_start, retired, collection)

    def _no_gpus(self) -> InputError:
        names = ", ".join(m for _, m, _ in q.LEVEL_SOURCES)
        where = f" matching {{{self.sel}}}" if self.sel else ""
        return InputError(
            f"{self.client.base_url} holds no GPU series ({names}){where} in the window "
            f"{span_text(self.window)}",
            reference="fleet-no-gpu-series",
            hint="check the window (--range, --start/--end), --selector, and that this "
            "Prometheus scrapes dcgm-exporter or `gpuwarden export`",
        )

    def _chunk_tasks(
        self,
        acc: _Accumulator,
        groups: list[LevelGroup],
        indices: list[int],
        length: int,
        lookback: str,
        events_where: dict[str, str],
        states_where: dict[str, str],
    ) -> list[_Task]:
        buckets = self.window.buckets()
        first_end, last_end = buckets[indices[0]][1], buckets[indices[-1]][1]
        minutes_from = buckets[indices[0]][0] + GRID_S
        bucket = _bucket_range(length)
        client = self.client

        def per_bucket(name: str, query: str, fold: Callable[[Any], None]) -> _Task:
            return _Task(name, lambda: client.range(name, query, first_end, last_end, length), fold)

        def per_minute(name: str, query: str, fold: Callable[[Any], None]) -> _Task:
            return _Task(
                name, lambda: client.range(name, query, minutes_from, last_end, GRID_S), fold
            )

        tasks = []
        for g in groups:
            level = q.level(g.metric, g.factor, g.where, lookback)
            tasks += [
                per_bucket(
                    f"minutes ({g.source})",
                    q.present_minutes(level, bucket),
                    partial(fold_present, acc, g.keys),
                ),
                per_bucket(
                    f"idle minutes ({g.source})",
                    q.idle_minutes(level, bucket, self.idle_below_percent),
                    partial(fold_idle, acc, g.keys),
                ),
                per_bucket(
                    f"utilisation ({g.source})",
                    q.mean_level(g.metric, g.factor, g.where, bucket),
                    partial(fold_mean, acc, g.keys),
                ),
            ]
            for batch in g.overlaps:
                shared = q.level(g.metric, g.factor, batch.where, lookback)
                tasks.append(
                    per_minute(
                        f"shared minutes ({g.source})",
                        q.overlaps(shared),
                        partial(fold_overlaps, acc, batch.keys),
                    )
                )
        tasks += [
            per_bucket(
                "temperature",
                q.mean_temperature(self.sel, bucket),
                lambda r: fold_means(acc, r, acc.temperature),
            ),
            per_bucket(
                "power", q.mean_power(self.sel, bucket), lambda r: fold_means(acc, r, acc.power)
            ),
        ]
        if events_where:
            tasks.append(
                per_minute(
                    "Xid and ECC events",
                    q.events(events_where, lookback),
                    lambda r: fold_events(acc, r),
                )
            )
        if states_where:
            tasks.append(
                per_minute(
                    "state changes", q.edges(states_where, lookback), lambda r: fold_edges(acc, r)
                )
            )
        return tasks

    def _states_at_start(self, states_where: dict[str, str], lookback: str) -> set[StateKey]:
        if not states_where:
            return set()
        samples = self._instant(
            "states at the start", q.states_now(states_where, lookback), self.window.start_s
        )
        on = set()
        for sample in samples:
            gpu, state = gpu_of(sample.labels), sample.labels.get("gw_state")
            if gpu is not None and state is not None:
                on.add(_state_key(gpu_key(gpu), sample.labels, state))
        return on

    def _retired_dbe(self, acc: _Accumulator) -> dict[str, float]:
        out: dict[str, float] = {}
        query = q.retired_dbe_max(self.sel, self.whole)
        for sample in self._instant("retired pages", query, self.window.end_s):
            gpu = _remember(acc, sample.labels)
            if gpu is not None and math.isfinite(sample.value):
                key = gpu_key(gpu)
                out[key] = max(out.get(key, 0.0), sample.value)
        return out

    def _data(
        self,
        acc: _Accumulator,
        on_at_start: set[StateKey],
        retired: dict[str, float],
        collection: Collection,
    ) -> FleetData:
        usage = {
            key: {
                index: BucketUsage(
                    max(s.gpu_minutes, 0.0),
                    max(s.idle_minutes, 0.0),
                    s.level_sum / s.level_weight if s.level_weight else None,
                )
                for index, s in sorted(buckets.items())
                if s.gpu_minutes > 0
            }
            for key, buckets in acc.usage.items()
        }
        events = tuple(
            Event(uuid, source, at, amount, xid)
            for (uuid, source, xid, at), amount in sorted(
                acc.events.items(), key=lambda item: (item[0][3], item[0][0], item[0][1])
            )
        )
        keys = set(acc.edges) | on_at_start
        states = []
        for key in sorted(keys, key=lambda k: tuple(x or "" for x in k)):
            uuid, state, code, severity = key
            on = spans(acc.edges.get(key, []), key in on_at_start, self.window)
            if on:
                states.append(StateSpan(uuid, state, on, key in on_at_start, code, severity))
        return FleetData(
            window=self.window,
            idle_below_percent=self.idle_below_percent,
            gpus=dict(sorted(acc.gpus.items())),
            usage={k: v for k, v in usage.items() if v},
            temperature_celsius=_means(acc.temperature),
            power_watts=_means(acc.power),
            events=events,
            states=tuple(states),
            retired_pages_dbe=retired,
            collection=collection,
        )


def _means(values: dict[str, dict[int, list[float]]]) -> dict[str, dict[int, float]]:
    return {
        uuid: {index: sum(v) / len(v) for index, v in sorted(per_bucket.items())}
        for uuid, per_bucket in values.items()
    }


def collect(
    client: PrometheusClient,
    window: Window,
    *,
    selector: str = "",
    idle_below_percent: float = 5.0,
    progress: ProgressFn | None = None,
    chunk_buckets: int = CHUNK_BUCKETS,
    parallel: int = PARALLEL,
) -> FleetData:
    """Read ``window`` of the fleet behind ``client`` (see the module's docstring)."""
    return Collector(
        client,
        window,
        selector=selector,
        idle_below_percent=idle_below_percent,
        progress=progress,
        chunk_buckets=chunk_buckets,
        parallel=parallel,
    ).run()
