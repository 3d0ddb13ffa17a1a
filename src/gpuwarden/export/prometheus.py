"""The exporter's Prometheus side: a scrape-time custom Collector over the exporter's view, the
exporter's own histograms and process metrics, and the text exposition. The only module that
imports prometheus_client.

A scrape renders from ``ExporterState.view`` (never a backend call): the device and verdict
families change only with a new reading, so their text is rendered once per view and kept
(with its gzip member), and each scrape adds only what changes per scrape — the reading's age,
the duration histograms and the process metrics. A gzip body is the cached member followed by
a member for the rest (RFC 1952 allows several members; Go's and Python's readers join them).

The text format is Prometheus' 0.0.4, written here rather than by
``prometheus_client.generate_latest``: that renderer names a counter's TYPE line ``<name>_total``
(OpenMetrics naming), which would declare dcgm-exporter's counters (``DCGM_FI_DEV_TOTAL_ENERGY_
CONSUMPTION``, ``DCGM_FI_DEV_PCIE_REPLAY_COUNTER``, ...) under another name than their samples.
OpenMetrics is not offered for the same reason: it requires ``_total`` on every counter sample,
which dcgm-exporter's names do not have (dcgm-exporter itself serves the 0.0.4 text format).
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import cast

from gpuwarden.errors import MissingExtraError
from gpuwarden.export.families import Family, build_families, reading_age
from gpuwarden.export.fields import Kind
from gpuwarden.export.state import ExporterState

try:
    from prometheus_client import CollectorRegistry, Histogram, ProcessCollector
    from prometheus_client.core import Metric
    from prometheus_client.utils import floatToGoString
except ImportError:  # pragma: no cover - exercised by tests/cli/test_no_extras.py
    raise MissingExtraError("gpuwarden export", "exporter", "prometheus_client") from None

_go_float = cast(Callable[[float], str], floatToGoString)  # Go's float formatting, as Prometheus'
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Scrapes take about a millisecond from the cache; collections from ~1 ms (sim) to seconds (a
# hung nvidia-smi hits its timeout).
SCRAPE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
COLLECTION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
_TYPES = {Kind.GAUGE: "gauge", Kind.COUNTER: "counter", Kind.UNTYPED: "unknown"}


def to_metric(family: Family) -> Metric:
    metric = Metric(family.name, family.help, _TYPES[family.kind])
    for labels, value in family.samples:
        metric.add_sample(family.name, dict(labels), value)
    return metric


class ViewCollector:
    """prometheus_client Collector: the device, verdict and exporter families of the view."""

    def __init__(
        self,
        state: ExporterState,
        *,
        version: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = state
        self.version = version
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        view = self.state.view
        for family in build_families(view, now_s=self._clock(), version=self.version):
            yield to_metric(family)


class ReadingAgeCollector:
    """prometheus_client Collector: ``gpuwarden_reading_age_seconds`` at scrape time."""

    def __init__(self, state: ExporterState, *, wall_clock: Callable[[], float] = time.time):
        self.state = state
        self._wall_clock = wall_clock

    def collect(self) -> Iterator[Metric]:
        family = reading_age(self.state.view, wall_s=self._wall_clock())
        if family is not None:
            yield to_metric(family)


# --- the 0.0.4 text format ------------------------------------------------------------------------


# The format escapes backslash, line feed and (in label values) the double quote; a carriage
# return has no escape and ends a line for some readers (a CRLF capture's leftovers): dropped.
def _escape_label(value: str) -> str:
    return value.replace("\r", "").replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _escape_help(text: str) -> str:
    return text.replace("\r", "").replace("\\", r"\\").replace("\n", r"\n")


def _header_name(metric: Metric) -> str:
    """The name HELP/TYPE declare: the samples' own (prometheus_client's counters, whose family
    name lacks the ``_total`` their samples carry, are declared under the sample name)."""
    if metric.type == "counter" and metric.samples:
        total = metric.name + "_total"
        if all(s.name == total for s in metric.samples):
            return total
    return metric.name


def render_text(metrics: Iterable[Metric]) -> str:
    """Prometheus text exposition 0.0.4 of ``metrics`` (``_created`` samples left out)."""
    lines: list[str] = []
    for metric in metrics:
        name = _header_name(metric)
        kind = "untyped" if metric.type == "unknown" else metric.type
        lines.append(f"# HELP {name} {_escape_help(metric.documentation)}\n")
        lines.append(f"# TYPE {name} {kind}\n")
        created = metric.name + "_created"
        for sample in metric.samples:
            if sample.name == created:
                continue
            if sample.labels:
                pairs = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sample.labels.items())
                lines.append(f"{sample.name}{{{pairs}}} {_go_float(sample.value)}\n")
            else:
                lines.append(f"{sample.name} {_go_float(sample.value)}\n")
    return "".join(lines)


# --- the scrape ---------------------------------------------------------------------------------


class Exposition:
    """What ``/metrics`` serves, from ``state``; safe to call from many scrape threads."""

    def __init__(
        self,
        state: ExporterState,
        *,
        version: str,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        process_metrics: bool = True,
    ) -> None:
        self.state = state
        self.content_type = CONTENT_TYPE
        self._clock = clock
        # families that change with the view: rendered once per (view version, freshness)
        self.view_registry = CollectorRegistry(auto_describe=False)
        self.view_registry.register(ViewCollector(state, version=version, clock=clock))
        # families that change per scrape
        self.runtime_registry = CollectorRegistry(auto_describe=False)
        self.runtime_registry.register(ReadingAgeCollector(state, wall_clock=wall_clock))
        self._scrapes = Histogram(
            "gpuwarden_scrape_duration_seconds",
            "Time to answer a /metrics scrape (render and send)",
            buckets=SCRAPE_BUCKETS,
            registry=self.runtime_registry,
        )
        self._collections = Histogram(
            "gpuwarden_collection_duration_seconds",
            "Time of one collection: the backend's reading, rates, health rules",
            buckets=COLLECTION_BUCKETS,
            registry=self.runtime_registry,
        )
        if process_metrics:  # RSS, CPU seconds, open fds of the exporter itself
            ProcessCollector(registry=self.runtime_registry)
        self._lock = threading.Lock()
        self._cached_key: tuple[int, bool] | None = None
        self._cached: tuple[bytes, bytes] = (b"", b"")

    def observe_scrape(self, seconds: float) -> None:
        self._scrapes.observe(seconds)

    def observe_collection(self, seconds: float) -> None:
        self._collections.observe(seconds)

    def _view_part(self) -> tuple[bytes, bytes]:
        """(text, gzip member) of the view's families, rendered at most once per view."""
        view = self.state.view
        key = (view.version, view.fresh(self._clock()))
        with self._lock:
            if key != self._cached_key:
                text = render_text(self.view_registry.collect()).encode()
                self._cached_key, self._cached = key, (text, gzip.compress(text, 6, mtime=0))
            return self._cached

    def body(self, *, gzipped: bool) -> bytes:
        """The whole exposition; ``gzipped``: as gzip members (Content-Encoding: gzip)."""
        text, member = self._view_part()
        rest = render_text(self.runtime_registry.collect()).encode()
        if gzipped:
            return member + gzip.compress(rest, 1, mtime=0)
        return text + rest

    def text(self) -> str:
        """The exposition as text (``--once``)."""
        return self.body(gzipped=False).decode()
