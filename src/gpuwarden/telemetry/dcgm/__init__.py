"""The ``dcgm`` backend: telemetry from a dcgm-exporter scrape (a saved file or its URL).

``open_dcgm("scrape.prom")`` parses a saved ``/metrics`` page once; ``open_dcgm("http://node:
9400/metrics")`` fetches the page on every ``read()``. Kubernetes pod labels are kept on the
sample of the GPU or MIG instance (``DeviceSample.pods``) and in ``DcgmBackend.pods()``.

``parse_scrape`` names its page (``source``) in its errors and Snapshot; ``read_scrape`` raises
``exposition.ScrapeError`` naming only the line, for a caller that names the page itself
(``GpuwardenError.about``).
"""

from __future__ import annotations

import dataclasses
import time

from gpuwarden.errors import CorruptInputError, InputError
from gpuwarden.files import CaptureTooLargeError, decode_text, read_capped
from gpuwarden.telemetry.dcgm.scrape import DcgmScrape, PodAttribution, parse_scrape, read_scrape
from gpuwarden.types.telemetry import DeviceInfo, EventKind, Snapshot

__all__ = [
    "DcgmBackend",
    "DcgmScrape",
    "PodAttribution",
    "open_dcgm",
    "parse_scrape",
    "read_scrape",
]


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


class DcgmBackend:
    """The ``dcgm`` telemetry backend (telemetry.backend.Backend)."""

    name = "dcgm"

    def __init__(self, source: str, *, timeout_s: float = 10.0) -> None:
        self.source = source
        self.timeout_s = timeout_s
        # a scrape of gpuwarden's exporter over a simulated backend says so (simulated="true")
        self.simulated = False
        self._last: DcgmScrape | None = None
        self._events_given = False
        self._notes_given: set[str] = set()
        if not _is_url(source):
            self._last = parse_scrape(*_read_file(source))
            self.simulated = self._last.snapshot.simulated

    def scrape(self) -> DcgmScrape:
        """The snapshot and the pod attribution of one reading."""
        if _is_url(self.source) or self._last is None:
            from gpuwarden.telemetry.dcgm.fetch import fetch_scrape

            text = fetch_scrape(self.source, self.timeout_s)
            # counts of the previous reading (Xids, clock events): only what is new is an event
            seen = None if self._last is None else self._last.counts_seen()
            self._last = parse_scrape(text, self.source, time.time(), previous=seen)
        self.simulated = self._last.snapshot.simulated
        return self._last

    def read(self) -> Snapshot:
        snapshot = self.scrape().snapshot
        if not _is_url(self.source):
            # A saved scrape is one moment: its Xids happen once, however often it is read.
            if self._events_given:
                return dataclasses.replace(snapshot, events=())
            self._events_given = True
            return snapshot
        # What the exporter keeps failing to convert is said once, not on every scrape.
        events = tuple(
            e
            for e in snapshot.events
            if e.kind is not EventKind.BACKEND_ERROR or e.message not in self._notes_given
        )
        self._notes_given.update(e.message for e in events if e.kind is EventKind.BACKEND_ERROR)
        return dataclasses.replace(snapshot, events=events)

    def pods(self) -> tuple[PodAttribution, ...]:
        return (self._last or self.scrape()).pods

    def device_hosts(self) -> dict[str, str]:
        """GPU uuid → the host its series named (Hostname label), for scrapes of many nodes."""
        return dict((self._last or self.scrape()).hosts)

    def devices(self) -> tuple[DeviceInfo, ...]:
        reading = self._last or self.scrape()
        return tuple(s.info for s in reading.snapshot.samples if s.info.mig_parent_uuid is None)

    def close(self) -> None:
        if _is_url(self.source):
            self._last = None


def _read_file(source: str) -> tuple[str, str, float]:
    try:
        raw, written = read_capped(source)
    except OSError as exc:
        raise CorruptInputError(
            f"{source}: cannot be read ({exc.strerror or exc})",
            reference="dcgm-scrape-not-found",
            hint="pass a saved dcgm-exporter scrape (`curl -s http://<node>:9400/metrics > "
            "scrape.prom`) or the http(s):// URL of the exporter",
        ) from None
    except CaptureTooLargeError as exc:
        raise InputError(
            f"{source}: {exc}, too large for a dcgm-exporter scrape",
            reference="dcgm-scrape-too-large",
            hint="one node's scrape is well under 1 MiB: pass one scrape, not a log of many",
        ) from None
    return decode_text(raw), source, written


def open_dcgm(source: str) -> DcgmBackend:
    """A saved scrape file, or the http(s):// URL of a dcgm-exporter ``/metrics`` endpoint."""
    return DcgmBackend(source)
