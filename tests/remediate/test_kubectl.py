"""What `remediate` did is what real kubectl sees, and what a person did with kubectl is what
`remediate` respects: their cordons count against max_unavailable and are never undone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuwarden.remediate.model import Status
from tests.deploy.servers import KUBECTL, needs_kubectl
from tests.fakes.kube_api import FakeKubeApi
from tests.remediate.conftest import (
    by,
    fleet_document,
    fleet_finding,
    node,
    run,
    write_json,
    write_policy,
)

pytestmark = needs_kubectl

COLUMNS = (
    "custom-columns=NAME:.metadata.name,UNSCHEDULABLE:.spec.unschedulable,"
    "TAINTS:.spec.taints[*].key"
)


def kubectl(kubeconfig: Path, *args: str) -> str:
    assert KUBECTL
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    done = subprocess.run(
        [KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rows(text: str) -> dict[str, list[str]]:
    lines = text.strip().splitlines()[1:]
    return {line.split()[0]: line.split()[1:] for line in lines}


@pytest.fixture
def nodes(kube: FakeKubeApi) -> FakeKubeApi:
    for i in range(5):
        kube.add_node(f"gpu-{i}")
    kube.add_pod("ml", "trainer", "gpu-1")
    return kube


POLICY = """
rules:
  - match: {code: xid, severity: critical}
    actions:
      - taint: {key: nvidia.com/gpu-error, value: xid, effect: NoSchedule}
      - drain: {timeout: 5s}
limits: {max_unavailable: 2}
uncordon: true
"""


def test_kubectl_sees_what_remediate_did(
    nodes: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    policy = write_policy(tmp_path / "policy.yml", POLICY)
    findings = write_json(
        tmp_path / "fleet.json",
        fleet_document([fleet_finding("xid", "gpu-1", "GPU-1")], [f"gpu-{i}" for i in range(5)]),
    )
    run(policy, findings, kubeconfig)  # a dry run first: kubectl sees nothing changed
    assert _rows(kubectl(kubeconfig, "get", "nodes", "-o", COLUMNS))["gpu-1"] == [
        "<none>",
        "<none>",
    ]
    result = run(policy, findings, kubeconfig, apply=True)
    assert by(result, "gpu-1", "drain").status is Status.APPLIED
    rows = _rows(kubectl(kubeconfig, "get", "nodes", "-o", COLUMNS))
    assert rows["gpu-1"] == ["true", "nvidia.com/gpu-error"]
    assert rows["gpu-0"] == ["<none>", "<none>"]
    marked = _rows(kubectl(kubeconfig, "get", "nodes", "-L", "gpuwarden.io/cordoned-by"))
    assert marked["gpu-1"][-1] == "gpuwarden" and len(marked["gpu-0"]) == 1  # no label there
    assert "trainer" not in kubectl(kubeconfig, "get", "pods", "-A", "-o", "name")


def test_a_persons_cordons_count_and_are_never_undone(
    nodes: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    assert "cordoned" in kubectl(kubeconfig, "cordon", "gpu-0")
    policy = write_policy(tmp_path / "policy.yml", POLICY)
    sick = [fleet_finding("xid", f"gpu-{i}", f"GPU-{i}") for i in (1, 2, 3)]
    findings = write_json(tmp_path / "fleet.json", fleet_document(sick, []))
    result = run(policy, findings, kubeconfig, apply=True)
    taints = [
        (r.planned.node, r.status, r.why)
        for r in result.results
        if r.planned.action.kind == "taint"
    ]
    # max_unavailable 2: the person's cordon of gpu-0 is one of them
    assert taints == [
        ("gpu-1", Status.APPLIED, None),
        ("gpu-2", Status.DEFERRED, "max-unavailable"),
        ("gpu-3", Status.DEFERRED, "max-unavailable"),
    ]
    assert result.plan.budget.unavailable_before == 1

    # all healthy again: gpuwarden undoes its own quarantine of gpu-1, not the person's cordon
    healthy = write_json(
        tmp_path / "healthy.json", fleet_document([], [f"gpu-{i}" for i in range(5)])
    )
    undone = run(policy, healthy, kubeconfig, apply=True)
    assert [(r.planned.node, r.planned.action.kind, r.status) for r in undone.results] == [
        ("gpu-1", "uncordon", Status.APPLIED)
    ]
    rows = _rows(kubectl(kubeconfig, "get", "nodes", "-o", COLUMNS))
    assert rows["gpu-0"] == ["true", "<none>"]  # the person's cordon stays
    assert rows["gpu-1"] == ["<none>", "<none>"]
    assert not any(
        k.startswith("gpuwarden.io/") for k in node(nodes, "gpu-1")["metadata"]["annotations"]
    )
