"""What the exporter knows between two readings, and the immutable view a scrape reads.

The collection thread is the only writer: each reading goes through ``ExporterState.record``,
which judges the window with the health rules, counts Xids, and then publishes a new ``View``
by replacing one attribute (atomic in CPython). A scrape takes ``state.view`` once and renders
from it: it never waits for a collection and never calls a backend.

Memory is bounded however long the exporter runs: the window keeps at most ``window_s`` of
readings and ``health.recent.MAX_WINDOW_SNAPSHOTS`` of them; Xid counters are per (GPU, Xid)
with at most MAX_XID_SERIES of them (more go to the GPU's "other" counter); a GPU that no reading
has mentioned for ``expire_after_s`` loses its counters. Device series themselves are rendered from
the newest reading only, so a GPU that is gone (or a MIG layout that changed) leaves nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from gpuwarden.export.pod_resources import PodMap
from gpuwarden.health.evaluate import evaluate_window
from gpuwarden.health.recent import RecentSnapshots
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, Thresholds
from gpuwarden.types.health import Finding
from gpuwarden.types.telemetry import DeviceInfo, EventKind, Snapshot

MAX_XID_SERIES = 256  # (GPU, Xid) counters kept; past it a GPU's new codes count as "other"
OTHER_XID = -1  # the counter of Xids past MAX_XID_SERIES ("other")

Judge = Callable[[Sequence[Snapshot]], Sequence[Finding]]


@dataclass(frozen=True, slots=True)
class ExportSettings:
    backend: str  # "nvml", "smi", "dcgm", "replay", "sim"
    simulated: bool
    hostname: str | None  # the node's name for Hostname; None = each reading's own host
    window_s: float = 60.0  # history the windowed health rules judge
    stale_after_s: float = 10.0  # a reading that arrived longer ago than this is not served
    expire_after_s: float = 600.0  # a GPU absent from the readings this long loses its counters
    # The health rules run on the reading that arrives this long after the last run, or on one
    # that carries events (an Xid, a lost GPU): over a 60 s window of 8 GPUs they cost ~15 ms,
    # ten times the reading itself at 1 Hz, while a verdict a few seconds late is still early
    # for a Prometheus that scrapes every 15-60 s (benchmarks/exporter.py measures both).
    judge_every_s: float = 5.0


@dataclass(frozen=True, slots=True)
class XidCount:
    """Xid ``xid`` on one GPU since the exporter started (``OTHER_XID``: codes past the bound)."""

    device: DeviceInfo
    xid: int
    count: int


@dataclass(frozen=True, slots=True)
class Counters:
    polls: int = 0
    collection_errors: int = 0  # readings that failed (the backend raised or answered nothing)
    health_errors: int = 0  # health evaluations that raised (the previous verdict is kept)
    pod_errors: int = 0  # kubelet pod-resources calls that failed


@dataclass(frozen=True, slots=True)
class View:
    """Everything one scrape renders, as of one moment."""

    version: int
    settings: ExportSettings
    snapshot: Snapshot | None = None  # the newest reading that answered
    received_s: float | None = None  # monotonic clock when it arrived (or was read again)
    findings: tuple[Finding, ...] = ()
    xids: tuple[XidCount, ...] = ()
    pods: PodMap | None = None  # None: no pod attribution (without --kubernetes)
    counters: Counters = field(default_factory=Counters)
    final: bool = False  # the source has no more readings (a finished replay): the last stays

    def fresh(self, now_s: float) -> bool:
        """Whether the newest reading is recent enough to serve its values."""
        if self.received_s is None:
            return False
        return self.final or now_s - self.received_s <= self.settings.stale_after_s

    def host(self) -> str | None:
        if self.settings.hostname:
            return self.settings.hostname
        return self.snapshot.host or None if self.snapshot is not None else None


def _failed(snapshot: Snapshot) -> bool:
    """The collector's answer to a read that raised: no samples and a backend-error event."""
    return not snapshot.samples and any(e.kind is EventKind.BACKEND_ERROR for e in snapshot.events)


def _physical(snapshot: Snapshot) -> dict[str, DeviceInfo]:
    return {s.info.uuid: s.info for s in snapshot.samples if s.info.mig_parent_uuid is None}


class _XidCounters:
    """Xid occurrences per (GPU UUID, Xid), bounded in series and forgotten with their GPU."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int], int] = {}
        self.devices: dict[str, DeviceInfo] = {}
        self.last_seen: dict[str, float] = {}

    def count(self, snapshot: Snapshot, now_s: float) -> None:
        gpus = _physical(snapshot)
        by_index = {info.index: info for info in gpus.values()}
        for uuid, gpu in gpus.items():
            if uuid in self.devices:
                self.devices[uuid], self.last_seen[uuid] = gpu, now_s
        for event in snapshot.events:
            if event.kind is not EventKind.XID:
                continue
            info = gpus.get(event.uuid or "") or by_index.get(
                event.index if event.index is not None else -1
            )
            if info is None:
                continue  # an Xid of no GPU this reading lists cannot be labelled
            xid = event.code if event.code is not None and event.code > 0 else OTHER_XID
            key = (info.uuid, xid)
            if key not in self.counts and len(self.counts) >= MAX_XID_SERIES:
                key = (info.uuid, OTHER_XID)
            self.counts[key] = self.counts.get(key, 0) + 1
            self.devices[info.uuid], self.last_seen[info.uuid] = info, now_s

    def expire(self, now_s: float, after_s: float) -> None:
        gone = [uuid for uuid, seen in self.last_seen.items() if now_s - seen > after_s]
        for uuid in gone:
            del self.devices[uuid], self.last_seen[uuid]
        if gone:
            dropped = set(gone)
            self.counts = {k: v for k, v in self.counts.items() if k[0] not in dropped}

    def frozen(self) -> tuple[XidCount, ...]:
        return tuple(
            XidCount(self.devices[uuid], xid, count)
            for (uuid, xid), count in sorted(
                self.counts.items(), key=lambda item: (self.devices[item[0][0]].index, item[0][1])
            )
        )


class ExporterState:
    """The single writer of the exporter's view (the collection thread)."""

    def __init__(
        self,
        settings: ExportSettings,
        *,
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        judge: Judge | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._judge: Judge = judge or (
            lambda snapshots: evaluate_window(snapshots, thresholds=thresholds).findings
        )
        self._clock = clock
        self._window = RecentSnapshots(settings.window_s)
        self._judged_at: float | None = None
        self._xids = _XidCounters()
        self.view = View(version=0, settings=settings)

    def _publish(self, **changes: object) -> None:
        view = self.view
        self.view = replace(view, version=view.version + 1, **changes)  # type: ignore[arg-type]

    def _counted(self, **increments: int) -> Counters:
        counters = self.view.counters
        return replace(
            counters, **{name: getattr(counters, name) + n for name, n in increments.items()}
        )

    def record(self, snapshot: Snapshot) -> None:
        """One reading from the collector (a failed read included)."""
        now = self._clock()
        if _failed(snapshot):
            self._publish(counters=self._counted(polls=1, collection_errors=1))
            return
        last = self.view.snapshot
        if last is not None and (last.timestamp_s, last.source) == (
            snapshot.timestamp_s,
            snapshot.source,
        ):
            # A saved capture read again: the same moment, no new evidence, no new events.
            self._publish(received_s=now, counters=self._counted(polls=1))
            return
        self._window.add(snapshot)
        self._xids.count(snapshot, now)
        self._xids.expire(now, self.settings.expire_after_s)
        findings, health_errors = self.view.findings, 0
        if self._due(snapshot, now):
            self._judged_at = now
            try:
                findings = tuple(self._judge(self._window.snapshots()))
            except Exception:  # a rule's bug must not stop the exporter: the last verdict stands
                health_errors = 1
        self._publish(
            snapshot=snapshot,
            received_s=now,
            findings=findings,
            xids=self._xids.frozen(),
            counters=self._counted(polls=1, health_errors=health_errors),
        )

    def _due(self, snapshot: Snapshot, now: float) -> bool:
        """Whether the health rules run on this reading (see ExportSettings.judge_every_s)."""
        if self._judged_at is None or snapshot.events:
            return True
        return now - self._judged_at >= self.settings.judge_every_s

    def record_failure(self) -> None:
        """A collection cycle that raised before it produced a reading."""
        self._publish(counters=self._counted(polls=1, collection_errors=1))

    def finish(self) -> None:
        """The source has no more readings: its last one stays served."""
        self._publish(final=True)

    def record_pods(self, pods: PodMap | None) -> None:
        """The kubelet's newest answer; None when the call failed (the last answer stands)."""
        if pods is None:
            self._publish(counters=self._counted(pod_errors=1))
        else:
            self._publish(pods=pods)
