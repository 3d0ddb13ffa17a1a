"""Dashboards count each GPU once: real scrapes (dcgm-exporter's, shared/fixtures/dcgm; gpuwarden's
exporter over a real nvidia-smi capture) served as they are, each scraped by two jobs of a real
Prometheus with the deployed rules — every GPU twice, under its UUID, as on a node running two
exporters or two scrape jobs. Every aggregate a panel shows equals its value over one job."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpuwarden.deploy.grafana import dashboards
from gpuwarden.deploy.rules import rule_set, rules_document
from gpuwarden.deploy.yaml_text import to_yaml
from tests.conftest import FIXTURES
from tests.deploy.servers import (
    get_json,
    needs_prometheus,
    prometheus,
    wait_until,
    write_prometheus_config,
)
from tests.deploy.test_grafana import GRAFANA_VARIABLES

# one GPU each: a T4 (idle), an A100 in MIG mode, an H100's MIG instances held by pods
DCGM_SCRAPES = (
    "datadog-integrations-core__tesla-t4__metrics.prom",
    "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom",
    "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom",
)
CAPTURE = "nvidia-smi/captures/linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.txt"
SECOND_JOB = "second-scrape"
# Grafana's "All", and the same restricted to the first scrape of each GPU
ONE_SCRAPE_FILTER = f'gpu=~".*", job!="{SECOND_JOB}"'
# the range panels' $__range: every GPU recorded all along it (the rules evaluate every second)
RANGE_S = 5


def _exporter_text() -> bytes:
    args = ["export", "--backend", "smi", "--from", str(FIXTURES / CAPTURE), "--once"]
    done = subprocess.run(
        [sys.executable, "-m", "gpuwarden", *args, "--hostname", "gw-node"],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout


@contextlib.contextmanager
def _serving(body: bytes) -> Iterator[str]:
    """A /metrics endpoint answering ``body`` to every scrape."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _query(url: str, expr: str, at: float) -> list[dict[str, Any]]:
    """The query's series at ``at``; Prometheus' refusal (a join that finds a GPU's series
    twice: "many-to-many matching not allowed") as an AssertionError naming it."""
    params = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    try:
        body = get_json(f"{url}/api/v1/query?{params}")
    except urllib.error.HTTPError as refused:
        with refused:
            raise AssertionError(f"{expr}: {refused.read().decode()}") from None
    assert body["status"] == "success", (expr, body)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _substituted(expr: str, *, one_scrape: bool) -> str:
    if one_scrape:
        expr = expr.replace('gpu=~"$gpu"', ONE_SCRAPE_FILTER)
    variables = {**GRAFANA_VARIABLES, "$__range_s": str(RANGE_S), "$__range": f"{RANGE_S}s"}
    for name, value in variables.items():
        expr = expr.replace(name, value)
    return expr


def _aggregates(result: list[dict[str, Any]]) -> dict[frozenset[tuple[str, str]], float]:
    """Series that are no single scrape's (no ``job`` label): counts, sums, per-GPU maxima."""
    return {
        frozenset(r["metric"].items()): round(float(r["value"][1]), 9)
        for r in result
        if "job" not in r["metric"]
    }


def _panel_queries() -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for document in dashboards().values()
        for panel in document["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


@pytest.fixture(scope="module")
def twice_scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not FIXTURES.is_dir():
        pytest.skip(f"real-data fixtures not found at {FIXTURES}")
    workdir = tmp_path_factory.mktemp("twice")
    rules = workdir / "rules.yml"
    rules.write_text(to_yaml(rules_document(rule_set())))
    texts = [(FIXTURES / "dcgm" / name).read_bytes() for name in DCGM_SCRAPES]
    with contextlib.ExitStack() as stack:
        dcgm = [stack.enter_context(_serving(text)) for text in texts]
        gpuwarden = stack.enter_context(_serving(_exporter_text()))
        jobs = {
            "nvidia-dcgm-exporter": dcgm,
            "gpuwarden-exporter": [gpuwarden],
            SECOND_JOB: [*dcgm, gpuwarden],
        }
        config = workdir / "prometheus.yml"
        write_prometheus_config(config, jobs, [rules], None)
        url = stack.enter_context(prometheus(workdir, config))
        targets = len(dcgm) + 1

        def scraped_and_recorded() -> bool:
            """Every target up; the second job's GPUs recorded as many as the first's, each at
            every second of the range panels' window."""
            now = time.time()
            up = _query(url, "up == 1", now)
            recorded = f"count_over_time(gpuwarden:gpu_idle:bool[{RANGE_S}s]) >= {RANGE_S - 1}"
            idle = _query(url, f"count by (job) ({recorded})", now)
            by_job = {r["metric"]["job"]: float(r["value"][1]) for r in idle}
            second = by_job.pop(SECOND_JOB, 0)
            return len(up) == 2 * targets and len(by_job) == 2 and second == sum(by_job.values())

        wait_until(scraped_and_recorded, 20, "both scrapes and the recording rules")
        yield url


@needs_prometheus
def test_every_panel_aggregate_counts_each_gpu_once(twice_scraped: str) -> None:
    at = time.time()
    compared, differ = [], []
    for title, expr in _panel_queries():
        try:
            one = _aggregates(_query(twice_scraped, _substituted(expr, one_scrape=True), at))
            both = _aggregates(_query(twice_scraped, _substituted(expr, one_scrape=False), at))
        except AssertionError as refused:
            differ.append((title, {}, str(refused)))
            continue
        if both != one:
            differ.append((title, one, both))
        elif one and "$Hostname" in expr:
            compared.append(title)
    assert differ == []
    # the panels that count, sum or compare GPUs, each with data here
    assert {"GPUs reporting", "Idle GPUs", "Power drawn", "Findings (gpuwarden)"} <= set(compared)
    assert {"Idle GPU-hours (range)", "Idle GPUs by namespace"} <= set(compared)


@needs_prometheus
def test_the_overview_counts_the_gpus_served(twice_scraped: str) -> None:
    """Four GPUs (T4, A100, H100, RTX 4080 SUPER), each scraped twice; the T4 is idle."""
    at = time.time()
    panels = dict(_panel_queries())
    (gpus,) = _query(twice_scraped, _substituted(panels["GPUs reporting"], one_scrape=False), at)
    (power,) = _query(twice_scraped, _substituted(panels["Power drawn"], one_scrape=False), at)
    served = _query(twice_scraped, 'DCGM_FI_DEV_POWER_USAGE{job!="second-scrape"}', at)
    assert float(gpus["value"][1]) == 3  # the H100 excerpt has no temperature series
    assert float(power["value"][1]) == pytest.approx(sum(float(s["value"][1]) for s in served))
