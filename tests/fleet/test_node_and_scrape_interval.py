"""The node a GPU is on (the scrape's ``node`` first), the empty window's message, and the scrape
interval of series younger than an hour (a fresh Prometheus)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuwarden.errors import InputError
from gpuwarden.fleet.collect import collect, gpu_of
from gpuwarden.fleet.model import Window
from gpuwarden.fleet.prometheus import PrometheusClient
from tests.fleet import synth
from tests.fleet.conftest import WINDOW
from tests.fleet.servers import have, prometheus_with

UUID = "GPU-5ca1ab1e-0000-4000-8000-000000000000"


def test_the_scrapes_node_label_names_the_node() -> None:
    # dcgm-exporter's Hostname is its pod's host name unless NODE_NAME is set (dcgm-exporter
    # issue #188); the ServiceMonitor's node label is the Kubernetes node's name
    labels = {"UUID": UUID, "Hostname": "nvidia-dcgm-exporter-x7k2p", "node": "gpu-node-7"}
    assert (gpu := gpu_of(labels)) is not None and gpu.host == "gpu-node-7"
    assert (gpu := gpu_of({"UUID": UUID, "hostname": "n1", "node": ""})) and gpu.host == "n1"


FRESH_STEP = 5  # a real 5 s scrape interval


def _fresh(cluster: str, age_s: int) -> list[synth.Series]:
    """Two GPUs scraped every 5 s for the last ``age_s`` of the report's window only."""
    end = WINDOW.end_s
    times = range(end - age_s + 1, end + 1, FRESH_STEP)
    return [
        s
        for index in (0, 1)
        for s in synth.gpu_series(
            synth.Gpu(f"fresh-{cluster}", index, cluster=cluster, level=lambda t: 50.0), times
        )
    ]


@pytest.fixture(scope="module")
def fresh_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not (have("prometheus") and have("promtool")):
        pytest.skip("Debian's prometheus package is not installed (scripts/install installs it)")
    series = [*_fresh("twenty-minutes", 20 * 60), *_fresh("sixty-five-seconds", 65)]
    with prometheus_with(series, tmp_path_factory.mktemp("fresh")) as url:
        yield url


@pytest.mark.parametrize("cluster", ["twenty-minutes", "sixty-five-seconds"])
def test_series_younger_than_an_hour_give_the_real_interval(
    fresh_prometheus: str, cluster: str
) -> None:
    data = collect(PrometheusClient(fresh_prometheus), WINDOW, selector=f'cluster="{cluster}"')
    assert data.collection.scrape_interval_s == pytest.approx(FRESH_STEP, rel=0.1)


def test_no_gpu_series_names_the_window(fresh_prometheus: str) -> None:
    early = Window(WINDOW.start_s, WINDOW.start_s + 3600, 3600)
    with pytest.raises(InputError) as raised:
        collect(PrometheusClient(fresh_prometheus), early, selector='cluster="twenty-minutes"')
    message = str(raised.value)
    assert "holds no GPU series" in message
    assert message.endswith("in the window 2024-01-01T00:00:00Z to 2024-01-01T01:00:00Z")
