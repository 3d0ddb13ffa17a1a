"""Shared pieces of the remediation tests: findings documents written by the shapes of
diagnosis.md §3 (`gpuwarden.fleet/1`, `gpuwarden.doctor/1`), policies, the fake API server with
a kubeconfig pointing at it, and a run through the whole `remediate` with short backoffs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.remediate.apply import ApplySettings
from gpuwarden.remediate.model import Remediation
from gpuwarden.remediate.run import RemediateOptions, remediate
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.webhook import WebhookReceiver

FAST = ApplySettings(eviction_backoff_s=0.05, max_backoff_s=0.2, poll_s=0.05)


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def fleet_finding(
    code: str,
    host: str | None,
    uuid: str,
    *,
    severity: str = "critical",
    gpu: str = "0",
    first_seen_s: float | None = None,
    model: str = "NVIDIA H100 80GB HBM3",
) -> dict[str, Any]:
    """A finding as `gpuwarden fleet report --json` writes it (report.fleet)."""
    first = time.time() - 3600 if first_seen_s is None else first_seen_s
    return {
        "code": code,
        "severity": severity,
        "Hostname": host,
        "gpu": gpu,
        "UUID": uuid,
        "modelName": model,
        "namespace": None,
        "pod": None,
        "title": f"{code} on {host} GPU {gpu}",
        "cause": "",
        "remedy": "",
        "evidence": [],
        "action": None,
        "confidence": "high",
        "method": None,
        "first_seen": rfc3339(first),
        "last_seen": rfc3339(time.time() - 60),
        "count": 1,
        "idle_dollars": None,
        "references": [],
    }


def fleet_document(
    findings: Sequence[dict[str, Any]], nodes: Sequence[str], end_s: float | None = None
) -> dict[str, Any]:
    end = time.time() - 60 if end_s is None else end_s
    return {
        "schema": "gpuwarden.fleet/1",
        "window": {"start": rfc3339(end - 86400), "end": rfc3339(end), "end_s": end},
        "by_node": [{"Hostname": n, "gpus": 8, "gpu_hours": 192.0} for n in nodes],
        "findings": list(findings),
    }


def write_json(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path


def write_policy(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


CORDON_DRAIN = """
rules:
  - name: fatal
    match: {code: [ecc-uncorrectable, xid, gpu-lost], severity: critical}
    actions:
      - cordon
      - taint: {key: nvidia.com/gpu-error, value: fatal, effect: NoSchedule}
      - drain: {timeout: 5s}
      - label: {gpuwarden.io/fault: gpu}
limits:
  max_unavailable: 50%
"""


def cordon_drain_inputs(
    tmp_path: Path, kube: FakeKubeApi, nodes: int, failing: int
) -> dict[str, Path]:
    """The CLI's three inputs for a cluster of ``nodes`` GPU nodes whose node ``failing`` has an
    uncorrectable ECC error: the cordon-and-drain policy, fleet's findings, a kubeconfig."""
    for i in range(nodes):
        kube.add_node(f"gpu-{i}")
    findings = [fleet_finding("ecc-uncorrectable", f"gpu-{failing}", f"GPU-{failing}")]
    return {
        "policy": write_policy(tmp_path / "policy.yml", CORDON_DRAIN),
        "findings": write_json(tmp_path / "fleet.json", fleet_document(findings, [])),
        "kubeconfig": kube.write_kubeconfig(tmp_path / "kubeconfig"),
    }


@pytest.fixture
def kube() -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as api:
        yield api


@pytest.fixture
def kubeconfig(kube: FakeKubeApi, tmp_path: Path) -> Path:
    return kube.write_kubeconfig(tmp_path / "kubeconfig")


def run(
    policy: Path,
    findings: Path | Sequence[Path],
    kubeconfig: Path,
    *,
    apply: bool = False,
    audit: Path | None = None,
    settings: ApplySettings = FAST,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> Remediation:
    paths = (findings,) if isinstance(findings, Path) else tuple(findings)
    return remediate(
        RemediateOptions(
            policy=str(policy),
            findings=tuple(str(p) for p in paths),
            kubeconfig=str(kubeconfig),
            apply=apply,
            audit_log=None if audit is None else str(audit),
            settings=settings,
            **options,
        ),
        clock=clock,
        sleep=sleep,
        progress=progress,
    )


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def node(api: FakeKubeApi, name: str) -> dict[str, Any]:
    found = api.get("v1", "Node", name)
    assert found is not None
    return found


def by(results: Remediation, name: str, kind: str) -> Any:
    """The result of ``kind`` on node ``name``."""
    found = [r for r in results.results if r.planned.node == name and r.planned.action.kind == kind]
    assert len(found) == 1, [(r.planned.node, r.planned.action.kind) for r in results.results]
    return found[0]


SECRET_PATH = "XXsecretTOKEN"  # Slack's incoming webhooks carry their secret in the path


def Receiver(statuses: Sequence[int] = ()) -> WebhookReceiver:  # noqa: N802 (a test fixture's name)
    """A webhook target whose path carries a secret, as Slack's incoming webhooks do."""
    return WebhookReceiver(f"/services/T0001/B0002/{SECRET_PATH}", statuses)
