"""`gpuwarden deploy alertmanager`: the real amtool accepts the configuration and routes by
severity; a real Alertmanager running it, sent alerts labelled as the rules label them, mutes a
lost GPU's own warnings and its node peers' performance warnings, the warnings of a frozen
exporter's GPUs, and nothing else (Alertmanager's inhibit_rule semantics:
https://prometheus.io/docs/alerting/latest/configuration/#inhibit_rule)."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.deploy.alertmanager import (
    MERGE_NOTE,
    WEBHOOK_URL_FILE_SINCE,
    inhibit_rules,
    out_of_service,
    out_of_service_xids,
    receiver_name,
)
from gpuwarden.deploy.alerts import AlertSpec
from gpuwarden.deploy.rules import rule_set, static_labels
from gpuwarden.deploy.yaml_text import from_yaml
from gpuwarden.types.health import Severity
from tests.deploy.servers import (
    alertmanager_serving,
    amtool,
    get_json,
    needs_alertmanager,
    needs_amtool,
    wait_until,
)
from tests.fakes.webhook import WebhookReceiver

SPECS = {s.name: s for s in rule_set().alerts}


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("am") / "alertmanager.yml"
    webhook = "http://127.0.0.1:9/gpu"  # replaced by the running test's receiver where it runs
    assert main(["deploy", "alertmanager", "--webhook-url", webhook, "-o", str(path)]) == 0
    return path


def test_the_inhibit_rules_follow_the_alert_definitions() -> None:
    specs = tuple(SPECS.values())
    failed = {s.name for s in specs if out_of_service(s)}
    # critical, and the code's NVIDIA bucket resets the GPU or restarts its node; a pending
    # reset (warning) or an RMA criterion (CONTACT_SUPPORT) leaves the GPU working
    assert failed == {"GpuLost", "GpuEccUncorrectable", "GpuNvlinkDown"}
    assert {s.name for s in specs if s.fails_job} == {"GpuLost", "GpuEccUncorrectable"}
    assert 79 not in out_of_service_xids() and 119 in out_of_service_xids()
    assert 56 not in out_of_service_xids()  # CONTACT_SUPPORT: critical, still in service
    rules = inhibit_rules(specs)
    peers = [
        r["equal"]
        for r in rules
        if 'alertname=~"GpuEccUncorrectable|GpuLost"' in r["source_matchers"]
    ]
    assert peers == [["node"], ["Hostname"], ["hostname"]]  # as the fleet report names a node
    for rule in rules:
        (equal,) = rule["equal"]
        for side in ("source_matchers", "target_matchers"):
            assert f'{equal}=~".+"' in rule[side]  # never "missing on both sides = equal"
        assert 'severity=~"info|warning"' in rule["target_matchers"]  # criticals stay loud
        names = [m for m in rule["target_matchers"] + rule["source_matchers"] if "alertname" in m]
        for matcher in names:
            listed = matcher.split("=", 1)[1].strip('~"').split("|")
            assert set(listed) <= set(SPECS), matcher


def test_a_webhook_url_that_is_no_http_url_is_an_argument_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["deploy", "alertmanager", "--webhook-url", "slack-channel"]) == 2
    assert "http://" in capsys.readouterr().err


@needs_amtool
def test_amtool_accepts_the_config_and_routes_by_severity(config_file: Path) -> None:
    checked = amtool("check-config", str(config_file))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "6 inhibit rules" in checked.stdout and "3 receivers" in checked.stdout
    route = ("config", "routes", "test", f"--config.file={config_file}")
    for severity in Severity:
        labels = ("failure_mode=health", "code=gpu-lost", f"severity={severity.value}")
        routed = amtool(*route, *labels)
        assert routed.stdout.strip() == receiver_name(severity), routed.stderr
    other = amtool(*route, "alertname=Watchdog")
    assert other.stdout.strip() == receiver_name(Severity.WARNING)  # the stub root: yours


# --- a real Alertmanager, alerts labelled as the rules label them

N1, N2, N3 = "gpu-node-1", "gpu-node-2", "gpu-node-3"
# gpuwarden's ServiceMonitor adds the pod's node as ``node``
GPUWARDEN_ON_N1 = {"instance": "10.0.0.2:9400", "job": "gpuwarden-exporter", "node": N1}
DCGM_ON_N1 = {"instance": "10.0.0.1:9400", "job": "nvidia-dcgm-exporter"}
DCGM_ON_N2 = {"instance": "10.0.1.1:9400", "job": "nvidia-dcgm-exporter"}
FROZEN_ON_N3 = {"instance": "10.0.3.1:9400", "job": "nvidia-dcgm-exporter"}
OTHER_ON_N3 = {"instance": "10.0.3.2:9400", "job": "nvidia-dcgm-exporter"}


def _gpu(
    uuid: str, index: int, node_labels: Mapping[str, str], target: Mapping[str, str]
) -> dict[str, str]:
    return {"UUID": uuid, "gpu": str(index), **node_labels, **target}


# gpuwarden's exporter names the node twice; dcgm-exporter once, Hostname or (newest) hostname
A = _gpu("GPU-a", 0, {"Hostname": N1, "hostname": N1}, GPUWARDEN_ON_N1)
B = _gpu("GPU-b", 1, {"Hostname": N1}, DCGM_ON_N1)
C = _gpu("GPU-c", 0, {"hostname": N2}, DCGM_ON_N2)
D = _gpu("GPU-d", 1, {"hostname": N2}, DCGM_ON_N2)
E = _gpu("GPU-e", 2, {"hostname": N2}, DCGM_ON_N2)
F = _gpu("GPU-f", 0, {"Hostname": N3}, FROZEN_ON_N3)
G = _gpu("GPU-g", 1, {"Hostname": N3}, FROZEN_ON_N3)
H = _gpu("GPU-h", 2, {"Hostname": N3}, OTHER_ON_N3)


def _alert(name: str, where: Mapping[str, str], **extra: str) -> dict[str, Any]:
    spec: AlertSpec = SPECS[name]
    labels = {"alertname": name, **static_labels(spec), "severity": spec.severity.value}
    return {"labels": {**labels, **where, **extra}, "annotations": {"summary": name}}


def _key(alert: Mapping[str, Any]) -> tuple[str, str]:
    labels = alert["labels"]
    return labels["alertname"], labels.get("UUID", "")


ALERTS = (
    _alert("GpuLost", A),
    _alert("GpuTemperatureHigh", A),  # muted: the same GPU
    _alert("GpuRetiredPagesLimit", A),  # critical: never muted
    _alert("GpuFakeLoad", B),  # muted: a peer on the node, though another exporter's
    _alert("GpuTemperatureHigh", B),  # a peer's health: not a consequence
    _alert("GpuFakeLoad", C),  # another node
    _alert("GpuXidCritical", D, xid="119"),  # GSP timeout: RESET_GPU
    _alert("GpuLowUtilization", D),  # muted: the GPU is out of service
    _alert("GpuXidCritical", E, xid="56"),  # CONTACT_SUPPORT: the GPU still runs
    _alert("GpuLowUtilization", E),
    _alert("GpuTelemetryStale", F),  # dcgm-exporter frozen: every GPU's energy counter
    _alert("GpuLowUtilization", G),  # muted: read from the frozen exporter
    _alert("GpuLowUtilization", H),  # another exporter
    _alert("GpuTelemetryAbsent", {}),  # fleet-wide, no target: mutes nothing
)
MUTED = {
    ("GpuTemperatureHigh", "GPU-a"),
    ("GpuFakeLoad", "GPU-b"),
    ("GpuLowUtilization", "GPU-d"),
    ("GpuLowUtilization", "GPU-g"),
}


def _post(url: str, alerts: tuple[dict[str, Any], ...]) -> None:
    request = urllib.request.Request(
        f"{url}/api/v2/alerts",
        data=json.dumps(list(alerts)).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 200


@needs_alertmanager
def test_alertmanager_mutes_the_consequences_and_nothing_else(
    config_file: Path, tmp_path: Path
) -> None:
    with WebhookReceiver() as hook:
        text = config_file.read_text().replace("http://127.0.0.1:9/gpu", hook.url)
        config = tmp_path / "alertmanager.yml"
        config.write_text(text)
        with alertmanager_serving(tmp_path, config) as url:
            _post(url, ALERTS)
            everything = wait_until(lambda: _all_received(url), 10, "every alert received")

            def muted() -> set[tuple[str, str]]:
                shown = get_json(f"{url}/api/v2/alerts?inhibited=false")
                return {_key(a) for a in everything} - {_key(a) for a in shown}

            wait_until(lambda: muted() == MUTED, 10, "the inhibitions")
            states = {_key(a): a["status"] for a in get_json(f"{url}/api/v2/alerts")}
    assert muted_by_a_source(states) == MUTED
    assert from_yaml(text)["receivers"][0]["webhook_configs"][0]["url"] == hook.url


def _all_received(url: str) -> list[dict[str, Any]] | None:
    received: list[dict[str, Any]] = get_json(f"{url}/api/v2/alerts")
    return received if len(received) == len(ALERTS) else None


def muted_by_a_source(states: Mapping[tuple[str, str], Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {key for key, status in states.items() if status["inhibitedBy"]}


# --- the receivers' credentials


def test_the_output_says_the_webhook_url_makes_the_file_a_secret(config_file: Path) -> None:
    """Alertmanager 0.25 cannot read the URL from a file: it stays in the file, which says so."""
    text = config_file.read_text()
    assert text.startswith(MERGE_NOTE)
    assert "this file is a secret: keep it in a\n# Secret, never a ConfigMap" in text
    hooks = [h for r in from_yaml(text)["receivers"] for h in r["webhook_configs"]]
    assert [h["url"] for h in hooks] == ["http://127.0.0.1:9/gpu"] * 3
    assert all("url_file" not in h and "http_config" not in h for h in hooks)


def _release(tool_version: str) -> tuple[int, int]:
    found = re.search(r"version (\d+)\.(\d+)", tool_version)
    assert found, tool_version
    return int(found[1]), int(found[2])


@needs_amtool
def test_the_installed_amtool_reads_a_webhook_url_from_a_file_from_the_release_said(
    config_file: Path, tmp_path: Path
) -> None:
    """Why the URL is written in the file: ``url_file`` is refused before 0.26 (#3223)."""
    version = amtool("--version")
    release = _release(version.stdout + version.stderr)
    url_file = tmp_path / "webhook-url"
    url_file.write_text("http://127.0.0.1:9/gpu")
    config = from_yaml(config_file.read_text())
    for receiver in config["receivers"]:
        receiver["webhook_configs"] = [{"url_file": str(url_file)}]
    path = tmp_path / "url-file.yml"
    path.write_text(json.dumps(config))
    checked = amtool("check-config", str(path))
    assert (checked.returncode == 0) is (release >= WEBHOOK_URL_FILE_SINCE), checked.stdout
    if release < WEBHOOK_URL_FILE_SINCE:
        assert "field url_file not found" in checked.stdout + checked.stderr


def _at_once(config: dict[str, Any]) -> dict[str, Any]:
    """Every route's group_wait at 0 s: the test waits for a notification, not a timer."""
    for route in (
        config["route"],
        *config["route"]["routes"],
        *config["route"]["routes"][0]["routes"],
    ):
        route["group_wait"] = "0s"
    return config


@needs_amtool
@needs_alertmanager
def test_a_bearer_token_is_read_from_its_file_and_never_written(tmp_path: Path) -> None:
    """A receiver's bearer token by the path of its file (http_config.authorization, which
    Alertmanager 0.25 reads): the real Alertmanager sends it, the configuration never holds it."""
    token = "XXbearerTOKEN"
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    path = tmp_path / "alertmanager.yml"
    with WebhookReceiver() as hook:
        argv = ["deploy", "alertmanager", "--webhook-url", hook.url, "-o", str(path)]
        assert main([*argv, "--webhook-credentials-file", str(token_file)]) == 0
        text = path.read_text()
        assert token not in text
        checked = amtool("check-config", str(path))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        path.write_text(json.dumps(_at_once(from_yaml(text))))
        with alertmanager_serving(tmp_path, path) as url:
            _post(url, (_alert("GpuLost", A),))
            wait_until(lambda: hook.posts, 10, "the critical receiver's notification")
            shown = json.dumps(get_json(f"{url}/api/v2/status"))
    headers, body = hook.posts[0]
    assert headers["Authorization"] == f"Bearer {token}"  # the file's line, its newline trimmed
    assert body["receiver"] == receiver_name(Severity.CRITICAL)
    assert token not in shown and str(token_file) in shown
