"""What a Kubernetes GPU platform engineer hit first (audit h144), end to end through the CLI
against the stand-in API server: README's policy on a small pool, a quarantine held back by the
limits, a finding that names a pod instead of a node, and uncordon of a node short of a GPU."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.remediate.model import QUARANTINED_GPU, QUARANTINED_GPUS, Status
from tests.deploy.servers import kubectl, needs_kubectl
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.webhook import WebhookReceiver
from tests.remediate.conftest import (
    CORDON_DRAIN,
    fleet_document,
    fleet_finding,
    node,
    run,
    write_json,
    write_policy,
)

# README's example policy, with the webhook pointed at a receiver on 127.0.0.1
README_POLICY = """
rules:
  - name: fatal
    match: {{code: [ecc-uncorrectable, gpu-lost, xid], severity: critical, for: 10m}}
    actions:
      - cordon
      - taint: {{key: nvidia.com/gpu-error, value: fatal, effect: NoSchedule}}
      - drain: {{timeout: 15m}}
      - label: {{gpuwarden.io/fault: gpu}}
      - webhook: {{url: "{url}"}}
limits:
  max_unavailable: {max_unavailable}
  min_interval: 10m
  circuit_breaker: {{percentage: 50, window: 5m}}
uncordon: true
opt_out_label: gpuwarden.io/remediate=false
max_findings_age: 1h
"""


def _remediate(tmp_path: Path, kube: FakeKubeApi, policy: Path, fleet: Path, *extra: str) -> int:
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    args = ["remediate", "--policy", str(policy), "--findings", str(fleet)]
    return main([*args, "--kubeconfig", str(kubeconfig), "--json", *extra])


def _document(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def _rows(document: dict[str, Any]) -> list[tuple[str | None, str, str, str | None]]:
    return [(a["node"], a["action"], a["status"], a["why"]) for a in document["actions"]]


def _policy(tmp_path: Path, receiver: WebhookReceiver, max_unavailable: str) -> Path:
    text = README_POLICY.format(url=receiver.url, max_unavailable=max_unavailable)
    return write_policy(tmp_path / "policy.yml", text)


def test_readme_s_policy_on_four_gpu_nodes_quarantines_the_sick_one(
    tmp_path: Path, kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """20 % of 4 nodes rounded down to 0 and deferred everything, the webhook included, exit 0."""
    for i in range(4):
        kube.add_node(f"gpu-{i}")
    fleet = write_json(
        tmp_path / "fleet.json",
        fleet_document(
            [fleet_finding("gpu-lost", "gpu-1", "GPU-1")], [f"gpu-{i}" for i in range(4)]
        ),
    )
    with WebhookReceiver() as receiver:
        policy = _policy(tmp_path, receiver, "20%")
        assert _remediate(tmp_path, kube, policy, fleet, "--apply") == 0
        document = _document(capsys)
        assert document["limits"]["max_unavailable"] == 1
        assert [status for _, _, status, _ in _rows(document)] == ["applied"] * 5
        assert len(receiver.posts) == 1
    assert node(kube, "gpu-1")["spec"]["unschedulable"] is True


def test_every_quarantine_deferred_is_a_line_an_alert_matches_and_exit_1(
    tmp_path: Path, kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    kube.add_node("gpu-0", unschedulable=True)  # a person's cordon: the one node allowed
    for i in range(1, 4):
        kube.add_node(f"gpu-{i}")
    fleet = write_json(
        tmp_path / "fleet.json",
        fleet_document([fleet_finding("xid", "gpu-2", "GPU-2")], [f"gpu-{i}" for i in range(4)]),
    )
    with WebhookReceiver() as receiver:
        policy = _policy(tmp_path, receiver, "1")
        assert _remediate(tmp_path, kube, policy, fleet, "--apply") == 1
        document = _document(capsys)
        (webhook,) = receiver.posts
    assert webhook[1]["node"] == "gpu-2"  # a person learns of the fault all the same
    assert _rows(document) == [
        ("gpu-2", "cordon", "deferred", "max-unavailable"),
        ("gpu-2", "taint", "deferred", "after-deferred"),
        ("gpu-2", "drain", "deferred", "after-deferred"),
        ("gpu-2", "label", "applied", None),
        ("gpu-2", "webhook", "applied", None),
    ]
    assert any(
        note.startswith("all-deferred: 3 action(s) on 1 node(s)") for note in document["notes"]
    )
    assert node(kube, "gpu-2")["spec"].get("unschedulable") is not True


def test_a_pod_s_name_in_hostname_sends_the_webhook_and_exits_1(
    tmp_path: Path, kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """dcgm-exporter before PR #129 labelled its series with its pod's name."""
    kube.add_node("gpu-0")
    pod = "nvidia-dcgm-exporter-7x2kq"
    fleet = write_json(
        tmp_path / "fleet.json",
        fleet_document([fleet_finding("xid", pod, "GPU-0")], [pod]),
    )
    with WebhookReceiver() as receiver:
        policy = _policy(tmp_path, receiver, "20%")
        assert _remediate(tmp_path, kube, policy, fleet, "--apply") == 1
        document = _document(capsys)
        (webhook,) = receiver.posts
    assert webhook[1]["node"] == pod and webhook[1]["finding"]["UUID"] == "GPU-0"
    rows = _rows(document)
    assert (pod, "webhook", "applied", "unknown-node") in rows
    assert {status for _, kind, status, _ in rows if kind != "webhook"} == {"skipped"}
    assert any(
        note.startswith(f"unknown-node: finding(s) name {pod!r}") for note in document["notes"]
    )


def test_the_node_label_names_the_node_when_hostname_does_not(
    tmp_path: Path, kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpuwarden's ServiceMonitor labels every series with the scraped pod's node."""
    for i in range(4):
        kube.add_node(f"gpu-{i}")
    finding = {**fleet_finding("xid", "nvidia-dcgm-exporter-7x2kq", "GPU-3"), "node": "gpu-3"}
    fleet = write_json(tmp_path / "fleet.json", fleet_document([finding], []))
    with WebhookReceiver() as receiver:
        assert _remediate(tmp_path, kube, _policy(tmp_path, receiver, "20%"), fleet) == 0
    assert {row[0] for row in _rows(_document(capsys))} == {"gpu-3"}


def test_uncordon_waits_until_the_node_has_all_its_gpus_again(
    tmp_path: Path, kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a gpu-lost cordon, the next report lists the node with 7 of its 8 GPUs and no
    finding: the dead GPU left no series to find a fault in."""
    for i in range(4):
        kube.add_node(f"gpu-{i}")
    names = [f"gpu-{i}" for i in range(4)]
    lost = fleet_document([fleet_finding("gpu-lost", "gpu-1", "GPU-1")], names)
    with WebhookReceiver() as receiver:
        policy = _policy(tmp_path, receiver, "20%")
        assert (
            _remediate(tmp_path, kube, policy, write_json(tmp_path / "a.json", lost), "--apply")
            == 0
        )
        capsys.readouterr()
        marks = node(kube, "gpu-1")["metadata"]["annotations"]
        assert (marks[QUARANTINED_GPU], marks[QUARANTINED_GPUS]) == ("GPU-1", "8")

        short = fleet_document([], names)
        short["by_node"][1]["gpus"] = 7
        assert (
            _remediate(tmp_path, kube, policy, write_json(tmp_path / "b.json", short), "--apply")
            == 0
        )
        assert _rows(_document(capsys)) == [("gpu-1", "uncordon", "skipped", "gpus-missing")]
        assert node(kube, "gpu-1")["spec"]["unschedulable"] is True

        whole = fleet_document([], names)
        assert (
            _remediate(tmp_path, kube, policy, write_json(tmp_path / "c.json", whole), "--apply")
            == 0
        )
        assert _rows(_document(capsys)) == [("gpu-1", "uncordon", "applied", None)]
    assert not node(kube, "gpu-1")["spec"].get("unschedulable")


@needs_kubectl
def test_kubectl_describe_node_says_why_gpuwarden_cordoned_it(
    tmp_path: Path, kube: FakeKubeApi
) -> None:
    for i in range(4):
        kube.add_node(f"gpu-{i}")
    findings = [fleet_finding("xid", "gpu-1", "GPU-1")]
    fleet = write_json(tmp_path / "fleet.json", fleet_document(findings, []))
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    dry = run(policy, fleet, kubeconfig)
    assert {r.status for r in dry.results} == {Status.PLANNED}
    assert kube.objects("v1", "Event") == []  # sent with dryRun=All: none stored
    run(policy, fleet, kubeconfig, apply=True)
    events = kube.objects("v1", "Event")
    assert {e["metadata"]["namespace"] for e in events} == {"default"}
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events} == {
        ("Node", "gpu-1")
    }
    described = kubectl(kube, tmp_path, "describe", "node", "gpu-1")
    assert described.returncode == 0, described.stderr
    lines = [" ".join(line.split()) for line in described.stdout.splitlines()]
    # The age column is the event's age when kubectl ran (0s, 1s, ... under load): any age.
    aged = [re.sub(r"^(Warning GpuwardenCordoned) \d+s ", r"\1 <age> ", line) for line in lines]
    assert (
        "Warning GpuwardenCordoned <age> gpuwarden-remediate cordon (spec.unschedulable: true): "
        "xid GPU-1 (rule fatal)"
    ) in aged
