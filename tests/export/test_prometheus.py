"""A real Prometheus (Debian's, on 127.0.0.1, a free port, stopped in teardown) scrapes
`gpuwarden export --backend sim` running a fault scenario: the series are queryable with their
labels, NVIDIA's dashboard 12239 queries return data unchanged, and the verdict series say what
the fault is."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.deploy.servers import PROMETHEUS, prometheus, write_prometheus_config
from tests.export.helpers import Running, serving

# NVIDIA/dcgm-exporter grafana/dcgm-exporter-dashboard.json (grafana.com 12239, fleet.md §5.1):
# every panel's query as the dashboard writes it, with its variables at "All"; the brief adds
# the memory clock, free framebuffer and energy counter that its newer revisions plot.
SELECTOR = '{instance=~".*", gpu=~".*"}'
DASHBOARD_12239 = (
    f"DCGM_FI_DEV_GPU_TEMP{SELECTOR}",
    f"avg(DCGM_FI_DEV_GPU_TEMP{SELECTOR})",
    f"DCGM_FI_DEV_POWER_USAGE{SELECTOR}",
    f"sum(DCGM_FI_DEV_POWER_USAGE{SELECTOR})",
    f"DCGM_FI_DEV_SM_CLOCK{SELECTOR} * 1000000",
    f"DCGM_FI_DEV_MEM_CLOCK{SELECTOR} * 1000000",
    f"DCGM_FI_DEV_GPU_UTIL{SELECTOR}",
    f"DCGM_FI_DEV_FB_USED{SELECTOR}",
    f"DCGM_FI_DEV_FB_FREE{SELECTOR}",
    f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{SELECTOR}",
    f"rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{SELECTOR}[10s])",
)
DEADLINE_S = 40.0


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def wait_for(self, expr: str, *, count: int = 1) -> list[dict[str, Any]]:
        """Poll until ``expr`` has ``count`` series or more (never a fixed sleep)."""
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            result = self.query(expr)
            if len(result) >= count:
                return result
            time.sleep(0.2)
        raise AssertionError(f"{expr}: fewer than {count} series after {DEADLINE_S} s")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, Running]]:
    assert PROMETHEUS, "Debian's prometheus package is installed by scripts/install"
    folder: Path = tmp_path_factory.mktemp("prometheus")
    # gpu-fallen-off-bus at 30x: GPU 3 of 8 is lost 1 s after start (30 s simulated)
    with serving("--backend", "sim", "--scenario", "gpu-fallen-off-bus", "--sim-speed", "30",
                 "--hostname", "gpu-node-7", "--interval", "0.5") as exporter:  # fmt: skip
        config = folder / "prometheus.yml"
        write_prometheus_config(config, {"gpuwarden": [f"127.0.0.1:{exporter.port}"]}, [], None)
        with prometheus(folder, config) as url:
            server = Prometheus(url)
            server.wait_for('up{job="gpuwarden"} == 1')
            yield server, exporter


def test_dcgm_series_are_queryable_with_their_labels(fleet):
    prometheus, exporter = fleet
    result = prometheus.wait_for('DCGM_FI_DEV_GPU_TEMP{job="gpuwarden"}', count=7)
    labels = result[0]["metric"]
    assert labels["Hostname"] == labels["hostname"] == "gpu-node-7"
    assert labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert labels["simulated"] == "true"
    assert labels["UUID"].startswith("GPU-") and labels["device"] == f"nvidia{labels['gpu']}"
    assert labels["instance"] == f"127.0.0.1:{exporter.port}"
    info = prometheus.query('gpuwarden_exporter_info{backend="sim", simulated="true"}')
    assert [float(r["value"][1]) for r in info] == [1.0]


def test_nvidias_dashboard_12239_queries_return_data_unchanged(fleet):
    prometheus, _ = fleet
    for expr in DASHBOARD_12239:
        result = prometheus.wait_for(expr)
        aggregated = expr.startswith(("avg(", "sum("))
        assert all(aggregated or {"instance", "gpu"} <= set(r["metric"]) for r in result), expr
    # the dashboard's variables: label_values(DCGM_FI_DEV_GPU_TEMP, instance / gpu)
    for label in ("instance", "gpu"):
        values = prometheus.get(
            f"/api/v1/label/{label}/values", **{"match[]": "DCGM_FI_DEV_GPU_TEMP"}
        )
        assert values["status"] == "success" and values["data"]


def test_the_fault_shows_as_verdicts_and_counters(fleet):
    prometheus, _ = fleet
    lost = prometheus.wait_for("gpuwarden_gpu_lost == 1")
    assert [r["metric"]["gpu"] for r in lost] == ["3"]
    finding = prometheus.wait_for('gpuwarden_finding{code="gpu-lost"}')
    assert finding[0]["metric"]["severity"] == "critical" and finding[0]["metric"]["gpu"] == "3"
    assert finding[0]["metric"]["UUID"] == lost[0]["metric"]["UUID"]
    xids = prometheus.wait_for('gpuwarden_xid_total{xid="79"}')
    assert [(r["metric"]["gpu"], float(r["value"][1])) for r in xids] == [("3", 1.0)]
    # the lost GPU has no readings: the dashboard shows 7 GPUs, not a GPU stuck at its last value
    temps = prometheus.query('DCGM_FI_DEV_GPU_TEMP{gpu="3"}')
    assert temps == [] or prometheus.wait_for('absent(DCGM_FI_DEV_GPU_TEMP{gpu="3"})')
    assert prometheus.query("gpuwarden_reading_age_seconds < 5")
