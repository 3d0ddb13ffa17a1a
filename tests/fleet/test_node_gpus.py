"""Each ``by_node`` row names its GPUs (UUID, ``gpu`` index, model) with each one's figures, so
that "node X wastes 60 %" says which GPUs: against the real Prometheus of the fleet tests, and one
more holding a GPU that two scrape jobs serve."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwarden.fleet.analyze import analyze
from gpuwarden.fleet.collect import collect
from gpuwarden.fleet.model import Breakdown, FleetReport, Window
from gpuwarden.fleet.pricing import flat
from gpuwarden.fleet.prometheus import PrometheusClient
from gpuwarden.report.fleet import fleet_document
from tests.fleet import synth
from tests.fleet.conftest import FLAT_PRICE, collect_cluster
from tests.fleet.servers import have, prometheus_with

TWO_HOURS = Window(synth.BASE, synth.BASE + 2 * synth.HOUR, synth.HOUR)


def _nodes(report: FleetReport) -> dict[str | None, Breakdown]:
    return {dict(row.labels)["Hostname"]: row for row in report.by_node}


def test_every_node_row_lists_its_gpus_once_with_their_figures(
    lab: synth.Fleet, lab_report: FleetReport
) -> None:
    planted: dict[str, list[tuple[str, str, str]]] = {}
    for gpu in lab.gpus:
        planted.setdefault(gpu.host, []).append((gpu.uuid, str(gpu.index), gpu.model))
    nodes = _nodes(lab_report)
    assert set(nodes) == set(planted)
    for host, row in nodes.items():
        listed = [(g.gpu.uuid, g.gpu.index, g.gpu.model) for g in row.gpus]
        assert listed == planted[str(host)], host  # in index order, each GPU once
        assert all(g.gpu.host == host and g.usage.gpus == 1 for g in row.gpus)
        assert sum(g.usage.gpu_hours for g in row.gpus) == pytest.approx(row.usage.gpu_hours)
        assert sum(g.usage.idle_gpu_hours for g in row.gpus) == pytest.approx(
            row.usage.idle_gpu_hours
        )
        assert sum(g.usage.gpu_dollars or 0 for g in row.gpus) == pytest.approx(
            row.usage.gpu_dollars or 0
        )
    # node-d: GPU 2 below the idle line all day, GPU 3 for the last 18 h, GPUs 0 and 1 busy
    idle = {g.gpu.index: g.usage.idle_gpu_hours for g in nodes["node-d"].gpus}
    assert idle == {"0": 0, "1": 0, "2": pytest.approx(24), "3": pytest.approx(18)}


def test_a_mig_gpu_is_one_gpu_of_its_node(prometheus_url: str) -> None:
    report = analyze(collect_cluster(prometheus_url, "mig"), flat(FLAT_PRICE))
    [gpu] = _nodes(report)["node-m"].gpus  # its whole-GPU series and two instances: one GPU
    assert (gpu.gpu.index, gpu.gpu.model) == ("0", synth.A100)
    assert gpu.usage.gpu_hours == pytest.approx(24)
    assert gpu.usage.idle_gpu_hours == pytest.approx(24 * 3 / 7)  # the idle 3g instance's share


@pytest.fixture(scope="module")
def twice_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """node-t: GPU 0 busy and served by two scrape jobs (dcgm-exporter and gpuwarden's exporter
    side by side), GPU 1 idle."""
    if not (have("prometheus") and have("promtool")):
        pytest.skip("Debian's prometheus package is not installed (scripts/install installs it)")
    times = synth.sample_times(synth.BASE - 600, synth.BASE + 2 * synth.HOUR + 600)
    busy = synth.Gpu("node-t", 0, cluster="twice", level=lambda t: 80.0)
    idle = synth.Gpu("node-t", 1, cluster="twice", level=lambda t: 0.0)
    series = synth.gpu_series(idle, times)
    for address, job in enumerate(("dcgm-exporter", "gpuwarden"), start=1):
        for s in synth.gpu_series(busy, times):
            s.labels.update(job=job, instance=f"10.0.0.{address}:9400")
            series.append(s)
    workdir: Path = tmp_path_factory.mktemp("prometheus-twice")
    with prometheus_with(series, workdir) as url:
        yield url


def test_a_gpu_two_jobs_scrape_is_listed_once(twice_url: str) -> None:
    data = collect(PrometheusClient(twice_url), TWO_HOURS, selector='cluster="twice"')
    node = _nodes(analyze(data, flat(FLAT_PRICE)))["node-t"]
    figures = {g.gpu.index: (g.usage.gpu_hours, g.usage.idle_gpu_hours) for g in node.gpus}
    assert figures == {"0": (pytest.approx(2), 0), "1": (pytest.approx(2), pytest.approx(2))}
    assert (node.usage.gpus, node.usage.idle_gpu_hours) == (2, pytest.approx(2))


def test_the_json_node_rows_carry_their_gpus(lab_report: FleetReport) -> None:
    [node_d] = [r for r in fleet_document(lab_report)["by_node"] if r["Hostname"] == "node-d"]
    rows = {g["gpu"]: g for g in node_d["per_gpu"]}
    assert set(rows) == {"0", "1", "2", "3"} and rows["3"]["idle_gpu_hours"] == pytest.approx(18)
    assert {g["modelName"] for g in rows.values()} == {synth.A100}
    assert sum(g["cost"]["gpu_dollars"] for g in rows.values()) == pytest.approx(
        node_d["cost"]["gpu_dollars"]
    )
