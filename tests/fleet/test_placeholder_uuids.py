"""A GPU whose UUID label is a placeholder ("index:0": gpuwarden's exporter over a backend without
UUIDs, such as nvidia-smi dmon) is told apart by its node: two nodes' GPU 0 are two GPUs, not one
GPU served twice. A real UUID still names its GPU alone (one GPU that two jobs scrape stays one:
test_node_gpus)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwarden.fleet.analyze import analyze
from gpuwarden.fleet.collect import collect, gpu_key
from gpuwarden.fleet.model import FleetReport, GpuId, Window
from gpuwarden.fleet.pricing import flat
from gpuwarden.fleet.prometheus import PrometheusClient
from gpuwarden.report.fleet import fleet_document
from tests.fleet import synth
from tests.fleet.conftest import FLAT_PRICE
from tests.fleet.servers import have, prometheus_with

TWO_HOURS = Window(synth.BASE, synth.BASE + 2 * synth.HOUR, synth.HOUR)
# a real dcgm-exporter page (../shared/fixtures/dcgm, see its SOURCES.md): one Tesla T4 of host
# 424773df46e0 is taken, its UUID label replaced by the placeholder, served as two nodes' GPU 0
PAGE = "dcgm/datadog-integrations-core__tesla-t4__metrics.prom"
PAGE_HOST = "424773df46e0"
PLACEHOLDER = "index:0"
BUSY_NODE, IDLE_NODE = "node-p1", "node-p2"
BUSY_PERCENT = 80.0


def _two_nodes_gpu_0(page: str, times: range) -> list[synth.Series]:
    """The page's GPU on two nodes under the placeholder UUID: busy on one, as scraped (0 %
    utilisation) on the other."""
    served = []
    for node in (BUSY_NODE, IDLE_NODE):
        for series in synth.replayed_scrape(page, times):
            if series.labels.get("Hostname") != PAGE_HOST:
                continue
            series.labels.update(UUID=PLACEHOLDER, Hostname=node, cluster="placeholders")
            if node == BUSY_NODE and series.name == "DCGM_FI_DEV_GPU_UTIL":
                series.samples = [(t, BUSY_PERCENT) for t, _ in series.samples]
            served.append(series)
    return served


@pytest.fixture(scope="module")
def placeholder_report(
    fixtures: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FleetReport]:
    if not (have("prometheus") and have("promtool")):
        pytest.skip("Debian's prometheus package is not installed (scripts/install installs it)")
    times = synth.sample_times(synth.BASE - 600, synth.BASE + 2 * synth.HOUR + 600)
    series = _two_nodes_gpu_0((fixtures / PAGE).read_text(), times)
    with prometheus_with(series, tmp_path_factory.mktemp("prometheus-placeholders")) as url:
        data = collect(PrometheusClient(url), TWO_HOURS, selector='cluster="placeholders"')
        yield analyze(data, flat(FLAT_PRICE))


def test_two_nodes_placeholder_gpus_are_two_gpus(placeholder_report: FleetReport) -> None:
    assert placeholder_report.totals.gpus == 2
    assert placeholder_report.totals.gpu_hours == pytest.approx(4)
    nodes = {dict(row.labels)["Hostname"]: row for row in placeholder_report.by_node}
    assert set(nodes) == {BUSY_NODE, IDLE_NODE}
    for node, idle_hours in ((BUSY_NODE, 0.0), (IDLE_NODE, 2.0)):
        row = nodes[node]
        [gpu] = row.gpus
        assert (gpu.gpu.uuid, gpu.gpu.host, gpu.gpu.index) == (PLACEHOLDER, node, "0")
        assert (row.usage.gpus, row.usage.gpu_hours) == (1, pytest.approx(2))
        assert gpu.usage.gpu_hours == pytest.approx(2)
        assert gpu.usage.idle_gpu_hours == pytest.approx(idle_hours)


def test_the_json_lists_each_node_s_placeholder_gpu(placeholder_report: FleetReport) -> None:
    document = fleet_document(placeholder_report)
    assert document["gpus"] == 2
    per_gpu = {row["Hostname"]: row["per_gpu"] for row in document["by_node"]}
    assert {node: [(g["Hostname"], g["UUID"]) for g in rows] for node, rows in per_gpu.items()} == {
        BUSY_NODE: [(BUSY_NODE, PLACEHOLDER)],
        IDLE_NODE: [(IDLE_NODE, PLACEHOLDER)],
    }
    assert per_gpu[BUSY_NODE][0]["mean_utilization_percent"] == pytest.approx(BUSY_PERCENT)


def test_a_real_uuid_names_its_gpu_alone_a_placeholder_with_its_node() -> None:
    real = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"
    assert gpu_key(GpuId(real, "node-a", "0", None)) == real
    assert gpu_key(GpuId(real, "node-b", "0", None)) == real  # one GPU, two scrape jobs
    assert gpu_key(GpuId(PLACEHOLDER, "node-a", "0", None)) == "node-a/index:0"
    assert gpu_key(GpuId(PLACEHOLDER, "node-b", "0", None)) == "node-b/index:0"
    # the dcgm reader's and gpuwarden's exporter's own node-qualified placeholder stays as it is
    assert gpu_key(GpuId("node-a/index:0", "node-a", "0", None)) == "node-a/index:0"
    assert gpu_key(GpuId(PLACEHOLDER, None, "0", None)) == PLACEHOLDER  # no node to tell it by
