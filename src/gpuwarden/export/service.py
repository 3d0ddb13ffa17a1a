"""Running the exporter: the collection loop (backend → Collector → ExporterState, and the kubelet's
pod attribution), the Site the HTTP server answers from, and the node's name.

The loop is the only writer of the state; it runs on the command's main thread, the HTTP server
on its own threads, so a scrape never waits for a reading and a slow backend never blocks a
scrape.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gpuwarden.export.state import ExporterState
from gpuwarden.telemetry.backend import Backend
from gpuwarden.telemetry.collector import Collector
from gpuwarden.types.telemetry import DeviceInfo, Snapshot

if TYPE_CHECKING:
    from gpuwarden.export.kubelet import PodResourcesClient
    from gpuwarden.export.prometheus import Exposition

# Readings that arrived longer ago than this many intervals (and at least STALE_MIN_S) are not
# served: a backend that hangs shows as a growing gpuwarden_reading_age_seconds and absent device
# series, never as values that silently stopped changing (dcgm-exporter's stale-after-restart
# complaint, gpu-monitoring-tools #188).
STALE_INTERVALS = 3.0
STALE_MIN_S = 10.0
_log = logging.getLogger("gpuwarden.export")


def stale_after(interval_s: float) -> float:
    return max(STALE_INTERVALS * interval_s, STALE_MIN_S)


def node_name(
    explicit: str | None,
    *,
    reads_this_machine: bool,
    environ: Mapping[str, str] = os.environ,
    gethostname: Callable[[], str] = socket.gethostname,
) -> str | None:
    """The ``Hostname`` label: ``--hostname``; else, for a backend reading this machine's GPUs,
    the Kubernetes node (``NODE_NAME`` from the downward API: inside a pod ``gethostname()`` is
    the pod's name, dcgm-exporter's most reported labelling bug) or the host name; else None, and
    each reading's own host is used (a dcgm-exporter scrape's, a recording's, the simulator's)."""
    if explicit:
        return explicit
    if not reads_this_machine:
        return None
    return environ.get("NODE_NAME") or gethostname() or None


@runtime_checkable
class SavedSeries(Protocol):
    """A backend over a saved file of several readings (an nvidia-smi ``-l`` log, dmon)."""

    def snapshots(self) -> tuple[Snapshot, ...]: ...


class _Timed:
    """The backend, with the start time of its latest read (a collection's duration)."""

    def __init__(self, backend: Backend, clock: Callable[[], float]) -> None:
        self.backend = backend
        self.name = backend.name
        self.simulated = backend.simulated
        self.started = clock()
        self._clock = clock

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self.backend.devices()

    def read(self) -> Snapshot:
        self.started = self._clock()
        return self.backend.read()

    def close(self) -> None:
        self.backend.close()


class CollectionLoop:
    """Reads the backend every ``interval_s`` into ``state``."""

    def __init__(
        self,
        backend: Backend,
        state: ExporterState,
        *,
        interval_s: float,
        pods: PodResourcesClient | None = None,
        on_collection: Callable[[float], None] = lambda seconds: None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.backend = backend
        self.state = state
        self.pods = pods
        self._stop = threading.Event()
        self._timed = _Timed(backend, clock)
        self._clock = clock
        self._on_collection = on_collection
        self._pods_failing = False
        # The collector's own history ring is not used here (the state keeps the window).
        self.collector = Collector(
            self._timed, interval_s=interval_s, sleep=self._wait, max_samples=2
        )

    def _wait(self, seconds: float) -> None:
        self._stop.wait(seconds)  # a stop() ends the wait at once

    def poll(self) -> None:
        """One reading into the state (the first one's failure propagates: a backend that
        cannot read at all fails before anything is served)."""
        self._sink(self.collector.poll())

    def read_saved(self) -> None:
        """Every further reading of a saved series (``--once`` judges all of it)."""
        if isinstance(self.backend, SavedSeries):
            for _ in range(len(self.backend.snapshots()) - 1):
                self.poll()

    def _refresh_pods(self) -> None:
        if self.pods is None:
            return
        from gpuwarden.export.kubelet import PodResourcesError

        try:
            self.state.record_pods(self.pods.list_pods())
        except PodResourcesError as exc:
            self.state.record_pods(None)
            if not self._pods_failing:
                _log.warning("pod attribution unavailable, the last answer stays: %s", exc)
            self._pods_failing = True
        else:
            if self._pods_failing:
                _log.warning("pod attribution is back")
            self._pods_failing = False

    def _sink(self, snapshot: Snapshot) -> None:
        try:
            self._refresh_pods()
            self.state.record(snapshot)
        except Exception:  # the loop must outlive any one bad reading
            _log.exception("a collection failed; the exporter goes on")
            self.state.record_failure()
        finally:
            self._on_collection(self._clock() - self._timed.started)

    def _exhausted(self) -> bool:
        """A replay that has read its last stored snapshot."""
        return bool(getattr(self.backend, "exhausted", False))

    def run(self) -> None:
        """Read on the interval until ``stop()``; a finished replay keeps its last reading."""
        self.collector.run(until=lambda: self._stop.is_set() or self._exhausted(), sink=self._sink)
        if self._exhausted() and not self._stop.is_set():
            _log.warning("the replay has no more readings; its last one stays served")
            self.state.finish()

    def stop(self) -> None:
        self._stop.set()


class ExporterSite:
    """The HTTP server's Site: the exposition of the state, and /health."""

    def __init__(
        self,
        state: ExporterState,
        exposition: Exposition,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = state
        self.exposition = exposition
        self._clock = clock

    def metrics(self, *, gzipped: bool) -> tuple[bytes, str]:
        return self.exposition.body(gzipped=gzipped), self.exposition.content_type

    def health(self) -> tuple[bool, str]:
        view, now = self.state.view, self._clock()
        if view.received_s is None:
            return False, "no reading yet"
        age = now - view.received_s
        if not view.fresh(now):
            return False, f"stale: the last reading arrived {age:.0f} s ago"
        return True, f"ok: last reading {age:.1f} s ago"

    def observe_scrape(self, seconds: float) -> None:
        self.exposition.observe_scrape(seconds)
