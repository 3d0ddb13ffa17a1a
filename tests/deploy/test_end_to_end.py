"""Sim fleet with a fault → `gpuwarden export` → real Prometheus with the deployed rules → real
Alertmanager → a webhook receiver: the alert arrives with its code, GPU and UUID."""

from __future__ import annotations

import time
from pathlib import Path

from gpuwarden.deploy.rules import rule_set, rules_document
from gpuwarden.deploy.yaml_text import to_yaml
from gpuwarden.telemetry.sim import open_sim
from tests.deploy.servers import (
    alertmanager,
    exporter,
    needs_alertmanager,
    needs_prometheus,
    prometheus,
    query,
    wait_until,
    write_prometheus_config,
)
from tests.fakes.webhook import WebhookReceiver

SCENARIO = "gpu-fallen-off-bus"  # GPU 3 falls off at 30 s of scenario time
SIM_SPEED = "20"  # … 1.5 s after the exporter starts
DEADLINE_S = 25.0


@needs_prometheus
@needs_alertmanager
def test_gpu_lost_reaches_the_webhook_once_with_its_gpu(tmp_path: Path) -> None:
    lost = open_sim(SCENARIO).devices()[3]  # the simulator's own GPU 3: its UUID is the truth
    rules = tmp_path / "rules.yml"
    rules.write_text(to_yaml(rules_document(rule_set())))
    config = tmp_path / "prometheus.yml"
    started = time.monotonic()
    with (
        WebhookReceiver() as hook,
        alertmanager(tmp_path, hook.url) as am,
        exporter(
            tmp_path,
            "gpu-node-7",
            "--backend",
            "sim",
            "--scenario",
            SCENARIO,
            "--sim-speed",
            SIM_SPEED,
        ) as target,
    ):
        write_prometheus_config(config, {"gpuwarden-exporter": [target]}, [rules], am)
        with prometheus(tmp_path, config) as prom:
            wait_until(lambda: query(prom, 'up{job="gpuwarden-exporter"} == 1'), 15, "the scrape")
            alert = wait_until(
                lambda: next(
                    (a for a in hook.alerts if a["labels"]["alertname"] == "GpuLost"), None
                ),
                DEADLINE_S,
                "GpuLost at the webhook",
            )
            firing = query(prom, 'ALERTS{alertname="GpuLost", alertstate="firing"}')
    elapsed = time.monotonic() - started
    labels = alert["labels"]
    assert labels["code"] == "gpu-lost"
    assert labels["severity"] == "critical"
    assert labels["failure_mode"] == "health"
    assert labels["gpu"] == "3"
    assert labels["UUID"] == lost.uuid
    assert labels["simulated"] == "true"  # the exporter marks simulated series; the alert keeps it
    assert alert["annotations"]["summary"].endswith(f"GPU 3 ({lost.uuid}) on {labels['Hostname']}")
    assert "Drain the node" in alert["annotations"]["runbook"]
    # one GPU lost, one alert: gpuwarden's verdict, not also dcgm-exporter's reading of it
    assert [a["metric"]["UUID"] for a in firing] == [lost.uuid]
    assert elapsed < 30
