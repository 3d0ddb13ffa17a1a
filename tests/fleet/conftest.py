"""One Prometheus and one VictoriaMetrics for all fleet tests, holding the generated fleets.

Clusters (label ``cluster``): ``lab`` (the planted facts), ``healthy`` (nothing to report),
``mig`` (an A100 in MIG mode) and ``renamed`` (pod labels renamed exported_* by the scrape).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwarden.fleet.analyze import analyze
from gpuwarden.fleet.collect import collect
from gpuwarden.fleet.model import FleetData, FleetReport, Window
from gpuwarden.fleet.pricing import flat
from gpuwarden.fleet.prometheus import PrometheusClient
from tests.fleet import synth
from tests.fleet.servers import have, prometheus_with, victoria_metrics_with

WINDOW = Window(synth.WINDOW[0], synth.WINDOW[1], 3600)
FLAT_PRICE = 2.0


@pytest.fixture(scope="session")
def lab() -> synth.Fleet:
    return synth.lab_fleet()


# real scrapes (../shared/fixtures/dcgm, see its SOURCES.md), replayed for three hours
REAL_SCRAPES = (
    "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom",
    "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom",
    "datadog-integrations-core__tesla-t4__metrics.prom",
)
REAL_HOSTS = 'Hostname=~"gsrh100-074|ub20-a100-k8s|424773df46e0"'
# gpuwarden's own exporter over a real nvidia-smi capture, served as cluster "exporter"
EXPORTER_CAPTURE = "nvidia-smi/captures/linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.txt"


def exporter_scrape(fixtures: Path) -> str:
    """What `gpuwarden export` serves for a real capture (its exporter-level series, such as
    collections_total and collection_errors_total, share one label set)."""
    args = ["export", "--backend", "smi", "--from", str(fixtures / EXPORTER_CAPTURE), "--once"]
    done = subprocess.run(
        [sys.executable, "-m", "gpuwarden", *args, "--hostname", "gw-node"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


@pytest.fixture(scope="session")
def all_series(lab: synth.Fleet, fixtures: Path) -> list[synth.Series]:
    replay_times = synth.sample_times(synth.BASE - 3600, synth.BASE + 2 * 3600 + 600)
    real = [
        s
        for name in REAL_SCRAPES
        for s in synth.replayed_scrape((fixtures / "dcgm" / name).read_text(), replay_times)
    ]
    exporter = synth.replayed_scrape(exporter_scrape(fixtures), replay_times)
    for series in exporter:
        series.labels["cluster"] = "exporter"
    return [
        *lab.series,
        *synth.healthy_fleet().series,
        *synth.mig_fleet().series,
        *synth.renamed_fleet().series,
        *real,
        *exporter,
    ]


@pytest.fixture(scope="session")
def prometheus_url(
    all_series: list[synth.Series], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if not (have("prometheus") and have("promtool")):
        pytest.skip("Debian's prometheus package is not installed (scripts/install installs it)")
    with prometheus_with(all_series, tmp_path_factory.mktemp("prometheus")) as url:
        yield url


@pytest.fixture(scope="session")
def victoria_url(
    all_series: list[synth.Series], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if not have("victoria-metrics"):
        pytest.skip("Debian's victoria-metrics package is not installed")
    probe = synth.WINDOW[0] + 12 * 3600
    with victoria_metrics_with(all_series, tmp_path_factory.mktemp("vm"), probe) as url:
        yield url


def collect_cluster(url: str, cluster: str, idle_below: float = 5.0) -> FleetData:
    return collect(
        PrometheusClient(url),
        WINDOW,
        selector=f'cluster="{cluster}"',
        idle_below_percent=idle_below,
    )


@pytest.fixture(scope="session")
def lab_data(prometheus_url: str) -> FleetData:
    return collect_cluster(prometheus_url, "lab")


@pytest.fixture(scope="session")
def lab_report(lab_data: FleetData) -> FleetReport:
    return analyze(lab_data, flat(FLAT_PRICE))
