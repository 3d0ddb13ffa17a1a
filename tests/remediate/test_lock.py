"""The run lock: one `remediate --apply` at a time, through a Lease on the stand-in API server
(the official client over real HTTP). Taken and given back, refused while another holds it,
taken over once it expired, lost to a racing run by 409, renewed while a drain waits."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.remediate.apply import lock as run_lock
from gpuwarden.remediate.model import Status
from tests.fakes.kube_api import FakeKubeApi
from tests.remediate.conftest import (
    CORDON_DRAIN,
    audit_lines,
    by,
    fleet_document,
    fleet_finding,
    node,
    run,
    write_json,
    write_policy,
)

NAMESPACE, NAME = "gpuwarden", "gpuwarden-remediate"  # the policy's state: the breaker's place
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"


@pytest.fixture
def inputs(kube: FakeKubeApi, tmp_path: Path) -> tuple[Path, Path]:
    for i in range(4):
        kube.add_node(f"gpu-{i}", labels={"kubernetes.io/hostname": f"gpu-{i}"})
    kube.add_pod("ml", "trainer-0", "gpu-1", owner=("StatefulSet", "trainer"))
    findings = fleet_document(
        [fleet_finding("ecc-uncorrectable", "gpu-1", "GPU-gpu-1")], [f"gpu-{i}" for i in range(4)]
    )
    return (
        write_policy(tmp_path / "policy.yml", CORDON_DRAIN),
        write_json(tmp_path / "fleet.json", findings),
    )


def _lease(kube: FakeKubeApi) -> dict[str, Any] | None:
    return kube.get("coordination.k8s.io/v1", "Lease", NAME, NAMESPACE)


def _held_by(kube: FakeKubeApi, holder: str, renewed: str) -> None:
    kube.put(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 300,
                "acquireTime": renewed,
                "renewTime": renewed,
                "leaseTransitions": 3,
            },
        }
    )


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(seconds))


def test_an_applying_run_takes_the_lock_and_gives_it_back(
    kube: FakeKubeApi, kubeconfig: Path, inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    policy, findings = inputs
    audit = tmp_path / "audit.jsonl"
    result = run(policy, findings, kubeconfig, apply=True, audit=audit)
    assert by(result, "gpu-1", "drain").status is Status.APPLIED
    lease = _lease(kube)
    assert lease is not None and "holderIdentity" not in lease["spec"]  # given back
    assert lease["spec"]["leaseTransitions"] == 1 and lease["spec"]["leaseDurationSeconds"] == 300
    locks = [line for line in audit_lines(audit) if line["event"] == "run-lock"]
    assert [line["lock"] for line in locks] == ["acquired", "released"]
    assert locks[0]["holder"].count("/") == 2 and locks[0]["response"]["status"] == 201
    # a dry run stores nothing, so it takes no lock
    before = len(kube.requests)
    run(policy, findings, kubeconfig)
    assert not [r for r in kube.requests[before:] if "/leases" in r.path]


def test_a_run_held_by_another_is_refused_before_it_reads_the_cluster(
    kube: FakeKubeApi, kubeconfig: Path, inputs: tuple[Path, Path]
) -> None:
    policy, findings = inputs
    _held_by(kube, "remediate-29111-abcde/1/0f0f0f0f", _stamp(time.time() - 30))
    before = len(kube.requests)
    with pytest.raises(EnvironmentProblemError) as caught:
        run(policy, findings, kubeconfig, apply=True)
    error = caught.value
    assert error.reference == "remediation-run-in-progress" and error.exit_code == 4
    assert "holder remediate-29111-abcde/1/0f0f0f0f" in error.message
    assert f"kubectl -n {NAMESPACE} delete lease {NAME}" in (error.hint or "")
    sent = [f"{r.method} {r.path}" for r in kube.requests[before:]]
    assert sent == [f"GET {LEASES}/{NAME}"]  # not even the nodes were read
    assert not node(kube, "gpu-1")["spec"].get("unschedulable")
    assert _lease(kube)["spec"]["holderIdentity"] == "remediate-29111-abcde/1/0f0f0f0f"


def test_an_expired_lock_is_taken_over(
    kube: FakeKubeApi, kubeconfig: Path, inputs: tuple[Path, Path]
) -> None:
    policy, findings = inputs
    _held_by(kube, "a-run-that-died/7/deadbeef", _stamp(time.time() - 301))
    result = run(policy, findings, kubeconfig, apply=True)
    assert by(result, "gpu-1", "cordon").status is Status.APPLIED
    spec = _lease(kube)["spec"]
    assert spec["leaseTransitions"] == 4 and "holderIdentity" not in spec


def test_of_two_runs_racing_for_the_lock_one_stops(
    kube: FakeKubeApi, kubeconfig: Path, inputs: tuple[Path, Path]
) -> None:
    policy, findings = inputs

    def other_run_wins(api: FakeKubeApi) -> None:
        _held_by(api, "the-other-run/2/12345678", _stamp(time.time()))

    kube.on("GET", f"{LEASES}/{NAME}$", other_run_wins)  # just after our read: ours gets 409
    with pytest.raises(EnvironmentProblemError) as caught:
        run(policy, findings, kubeconfig, apply=True)
    assert caught.value.reference == "remediation-run-in-progress"
    assert "the-other-run/2/12345678" in caught.value.message
    assert not node(kube, "gpu-1")["spec"].get("unschedulable")


def test_the_lock_is_renewed_while_a_drain_waits(
    kube: FakeKubeApi,
    kubeconfig: Path,
    inputs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy, findings = inputs
    monkeypatch.setattr(run_lock, "RENEW_EVERY_S", 0.0)  # renew at every wait
    kube.fail("POST", "/pods/trainer-0/eviction", 429, times=2, message="PDB")
    result = run(policy, findings, kubeconfig, apply=True)
    assert by(result, "gpu-1", "drain").status is Status.APPLIED
    puts = [r for r in kube.writes() if r.method == "PUT" and "/leases/" in r.path]
    renewals = [r for r in puts if r.body["spec"].get("holderIdentity")]
    assert len(renewals) >= 2 and len(puts) == len(renewals) + 1  # and the release
    times = [r.body["spec"]["renewTime"] for r in renewals]
    assert times == sorted(times)


@pytest.mark.parametrize(
    ("spec", "expires"),
    [
        (
            {
                "holderIdentity": "x",
                "leaseDurationSeconds": 300,
                "renewTime": "2026-11-26T10:00:00.000000Z",
            },
            1795687200.0 + 300,
        ),
        (
            {
                "holderIdentity": "x",
                "leaseDurationSeconds": 300,
                "acquireTime": "2026-11-26T10:00:00Z",
            },
            1795687200.0 + 300,
        ),
        ({"leaseDurationSeconds": 300, "renewTime": "2026-11-26T10:00:00Z"}, None),  # released
        (
            {
                "holderIdentity": "x",
                "leaseDurationSeconds": True,
                "renewTime": "2026-11-26T10:00:00Z",
            },
            None,
        ),
        ({"holderIdentity": "x", "leaseDurationSeconds": 300, "renewTime": "soon"}, None),
        ({"holderIdentity": "x"}, None),
        ({}, None),
    ],
)
def test_when_a_lease_expires(spec: dict[str, Any], expires: float | None) -> None:
    assert run_lock.expires_at_s({"spec": spec}) == expires
    assert run_lock.expires_at_s("not a lease") is None
