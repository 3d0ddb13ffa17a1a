"""Placeholder GPUs ("index:0") of several nodes read from different utilisation families: every
probe, group filter and overlap join keys a GPU as ``gpu_key`` does (a real UUID alone; a
placeholder with its node), against a real Prometheus.

Measured before the fix: the probes counted series by UUID alone, so node-f1's "index:0" (GR
engine active, from a newer exporter with profiling) chose the GR-engine family for every
node's "index:0"; node-f2's GPU 0, which serves GPU_UTIL only, was read from the GR-engine
group and dropped: 2 GPUs and 4 GPU-hours of 3 and 6. A state on a placeholder GPU was titled
"… on node-f2 GPU 0 (node-f2/index:0)", its key where a UUID goes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwarden.fleet import queries as q
from gpuwarden.fleet.analyze import analyze
from gpuwarden.fleet.collect import collect, gpu_key, gpu_of
from gpuwarden.fleet.devices import gpu_label
from gpuwarden.fleet.model import FleetReport, GpuId, Window
from gpuwarden.fleet.pricing import flat
from gpuwarden.fleet.prometheus import PrometheusClient
from tests.fleet import synth
from tests.fleet.conftest import FLAT_PRICE
from tests.fleet.servers import have, prometheus_with, victoria_metrics_with

TWO_HOURS = Window(synth.BASE, synth.BASE + 2 * synth.HOUR, synth.HOUR)
# a real dcgm-exporter page (../shared/fixtures/dcgm, see its SOURCES.md): its one Tesla T4 of
# host 424773df46e0, served by three nodes
PAGE = "dcgm/datadog-integrations-core__tesla-t4__metrics.prom"
PAGE_HOST = "424773df46e0"
REAL_UUID = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"
PLACEHOLDER = "index:0"
# node-f1: a newer exporter with profiling on (GR engine active at 0.6; its GPU_UTIL 0 as
# scraped), served by two scrape jobs; node-f2: GPU_UTIL only, busy, a page pending retirement;
# node-f3: the page's real UUID, GPU_UTIL as scraped (idle)
PROFILED, UTIL_ONLY, REAL_NODE = "node-f1", "node-f2", "node-f3"
GR_ENGINE_RATIO = 0.6
BUSY_PERCENT = 80.0


def _gpu_series(page: str, times: range, node: str, uuid: str, instance: str) -> list[synth.Series]:
    served = []
    for series in synth.replayed_scrape(page, times):
        if series.labels.get("Hostname") != PAGE_HOST:
            continue
        series.labels.update(UUID=uuid, Hostname=node, instance=instance, cluster="families")
        served.append(series)
    return served


def _with_value(series: synth.Series, name: str, value: float) -> synth.Series:
    return synth.Series(name, dict(series.labels), [(t, value) for t, _ in series.samples])


def _fleet(page: str, times: range) -> list[synth.Series]:
    served = []
    for instance in ("10.0.0.1:9400", "10.0.0.1:9401"):  # node-f1 scraped by two jobs
        profiled = _gpu_series(page, times, PROFILED, PLACEHOLDER, instance)
        [util] = [s for s in profiled if s.name == "DCGM_FI_DEV_GPU_UTIL"]
        served += [*profiled, _with_value(util, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", GR_ENGINE_RATIO)]
    util_only = _gpu_series(page, times, UTIL_ONLY, PLACEHOLDER, "10.0.0.2:9400")
    for series in util_only:
        if series.name == "DCGM_FI_DEV_GPU_UTIL":
            series.samples = [(t, BUSY_PERCENT) for t, _ in series.samples]
    [util] = [s for s in util_only if s.name == "DCGM_FI_DEV_GPU_UTIL"]
    served += [*util_only, _with_value(util, "DCGM_FI_DEV_RETIRED_PENDING", 1)]
    served += _gpu_series(page, times, REAL_NODE, REAL_UUID, "10.0.0.3:9400")
    return served


# label sets a fleet serves a placeholder or a real UUID under (cluster "keys", not in the report)
KEY_LABELS = (
    {"UUID": "index:1", "instance": "10.0.0.4:9400"},  # no node label: the instance's host
    {"UUID": "index:1", "instance": ":9400"},  # a port only: no node
    {"UUID": "index:1", "instance": "[fd00::4]:9400"},  # IPv6 in brackets: its port cut
    {"UUID": "index:1", "instance": "fd00::5"},  # IPv6 bare: no port to tell, the instance whole
    {"UUID": "index:1", "node": "n-1", "Hostname": "exporter-pod", "instance": "10.0.0.5:9400"},
    {"UUID": "index:1", "hostname": "n-2", "instance": "10.0.0.6:9400"},
    {"UUID": "n-3/index:1", "Hostname": "relay"},  # names its node already
    {"UUID": "index:1"},  # nothing to tell its node by
    {"UUID": "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e", "Hostname": "n-4"},
)
KEY_METRIC = "DCGM_FI_DEV_SM_CLOCK"


def _key_series(times: range) -> list[synth.Series]:
    return [
        synth.Series(KEY_METRIC, {**labels, "cluster": "keys"}, [(t, 1395.0) for t in times])
        for labels in KEY_LABELS
    ]


@contextlib.contextmanager
def _server(kind: str, series: list[synth.Series], workdir: Path) -> Iterator[str]:
    if kind == "prometheus":
        if not (have("prometheus") and have("promtool")):
            pytest.skip("Debian's prometheus package is not installed (scripts/install)")
        with prometheus_with(series, workdir) as url:
            yield url
    else:
        if not have("victoria-metrics"):
            pytest.skip("Debian's victoria-metrics package is not installed")
        with victoria_metrics_with(series, workdir, TWO_HOURS.end_s) as url:
            yield url


@pytest.fixture(scope="module", params=["prometheus", "victoria-metrics"])
def served(
    request: pytest.FixtureRequest, fixtures: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    page = (fixtures / PAGE).read_text()
    assert REAL_UUID in page
    times = synth.sample_times(synth.BASE - 600, synth.BASE + 2 * synth.HOUR + 600)
    series = [*_fleet(page, times), *_key_series(times)]
    with _server(request.param, series, tmp_path_factory.mktemp("families")) as url:
        yield url


@pytest.fixture(scope="module")
def families_report(served: str) -> FleetReport:
    data = collect(PrometheusClient(served), TWO_HOURS, selector='cluster="families"')
    return analyze(data, flat(FLAT_PRICE))


def test_the_servers_key_a_gpu_as_the_collector_does(served: str) -> None:
    """queries.gpu_keyed (the overlap join's key) is collect.gpu_key, label set by label set."""
    query = q.gpu_keyed(f'{KEY_METRIC}{{cluster="keys"}}')
    samples = PrometheusClient(served).instant("keys", query, TWO_HOURS.end_s)
    keys = {}
    for sample in samples:
        gpu = gpu_of(sample.labels)
        assert gpu is not None
        keys[gpu_key(gpu)] = sample.labels[q.GPU_KEY]
    assert len(samples) == len(KEY_LABELS)
    assert keys == {
        "10.0.0.4/index:1": "10.0.0.4/index:1",
        "index:1": "index:1",  # a port only, and no node label at all
        "[fd00::4]/index:1": "[fd00::4]/index:1",  # its port cut, as an IPv4 instance's
        "fd00::5/index:1": "fd00::5/index:1",
        "n-1/index:1": "n-1/index:1",
        "n-2/index:1": "n-2/index:1",
        "n-3/index:1": "n-3/index:1",
        REAL_UUID: REAL_UUID,
    }


def test_each_node_s_gpu_0_is_read_from_its_own_family(families_report: FleetReport) -> None:
    """Failed before: node-f2's GPU 0 was missing (2 GPUs, 4 GPU-hours)."""
    report = families_report
    assert report.totals.gpus == 3
    assert report.totals.gpu_hours == pytest.approx(6)
    assert report.collection.level_sources == {
        "sm_active": 0,
        "gr_engine_active": 1,
        "gpu_util": 2,
    }
    nodes = {dict(row.labels)["Hostname"]: row for row in report.by_node}
    expected = {
        PROFILED: (GR_ENGINE_RATIO * 100, 0.0),
        UTIL_ONLY: (BUSY_PERCENT, 0.0),
        REAL_NODE: (0.0, 2.0),  # as scraped: 0 %
    }
    assert set(nodes) == set(expected)
    for node, (mean_percent, idle_hours) in expected.items():
        [gpu] = nodes[node].gpus
        assert gpu.gpu.host == node
        # node-f1's two scrape jobs are one GPU: 2 GPU-hours, not 4
        assert gpu.usage.gpu_hours == pytest.approx(2)
        assert gpu.usage.idle_gpu_hours == pytest.approx(idle_hours)
        assert gpu.usage.mean_utilization_percent == pytest.approx(mean_percent)


def test_a_placeholder_gpu_s_state_names_its_node_and_index(families_report: FleetReport) -> None:
    """Failed before: "retired-pages-pending on node-f2 GPU 0 (node-f2/index:0)"."""
    [finding] = [
        f.finding for f in families_report.findings if f.finding.code == "retired-pages-pending"
    ]
    assert finding.title == "retired-pages-pending on node-f2 GPU 0"
    assert finding.device is not None
    assert (finding.device.host, finding.device.index) == (UTIL_ONLY, 0)


@pytest.mark.parametrize(
    ("gpu", "key", "label"),
    [
        (GpuId(REAL_UUID, "node-a", "3", None), REAL_UUID, f"node-a GPU 3 ({REAL_UUID})"),
        (GpuId(PLACEHOLDER, "node-a", "0", None), "node-a/index:0", "node-a GPU 0"),
        (GpuId("node-a/index:2", "relay", "2", None), "node-a/index:2", "node-a GPU 2"),
        (None, "node-b/index:1", "node-b GPU 1"),  # only the key: the node and index it names
        (GpuId(PLACEHOLDER, None, "0", None), PLACEHOLDER, "? GPU 0"),
    ],
)
def test_gpu_labels_name_a_placeholder_by_its_node_and_index(
    gpu: GpuId | None, key: str, label: str
) -> None:
    assert gpu_label(gpu, key) == label
