"""`remediate` against the stand-in API server (tests/fakes/kube_api.py) through the official
`kubernetes` client over real HTTP: dry runs, acting, idempotence, the failure cases a mock hides
(429 from a PodDisruptionBudget, 409 conflicts, a pod vanishing mid-drain, timeouts, a failure
half-way, 403), the circuit breaker, webhooks, and the audit log of all of it."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.remediate.apply.drain import retry_after_s
from gpuwarden.remediate.model import Status
from gpuwarden.report.remediate import remediation_document
from tests.fakes.kube_api import FakeKubeApi, Request
from tests.remediate.conftest import (
    CORDON_DRAIN,
    SECRET_PATH,
    Receiver,
    audit_lines,
    by,
    fleet_document,
    fleet_finding,
    node,
    run,
    write_json,
    write_policy,
)

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def _cluster(api: FakeKubeApi, nodes: int = 4) -> None:
    for i in range(nodes):
        api.add_node(f"gpu-{i}", labels={"kubernetes.io/hostname": f"gpu-{i}"})
    api.add_pod("ml", "trainer-0", "gpu-1")
    api.add_pod("ml", "trainer-1", "gpu-1", owner=("StatefulSet", "trainer"))
    api.add_pod("gpu-operator", "dcgm-exporter-x", "gpu-1", owner=("DaemonSet", "dcgm-exporter"))
    api.add_pod("kube-system", "kube-proxy-x", "gpu-1", owner=None)
    api.add_pod("ml", "done", "gpu-1", phase="Succeeded")
    api.add_pod("ml", "elsewhere", "gpu-2")


def _ecc_on(tmp_path: Path, *hosts: str, nodes: int = 4) -> Path:
    findings = [fleet_finding("ecc-uncorrectable", h, f"GPU-{h}") for h in hosts]
    document = fleet_document(findings, [f"gpu-{i}" for i in range(nodes)])
    return write_json(tmp_path / "fleet.json", document)


def _writes(api: FakeKubeApi) -> list[tuple[str, str, dict[str, list[str]], Any]]:
    return [(r.method, r.path, r.query, r.body) for r in api.writes()]


def _acting(api: FakeKubeApi) -> list[Request]:
    """The writes of the actions: not the run lock's (its Lease is in the audit as run-lock)."""
    return [r for r in api.writes() if "/leases" not in r.path]


def test_a_dry_run_changes_nothing_and_shows_the_exact_calls(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    before = node(kube, "gpu-1")
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    result = run(policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig)
    assert result.dry_run
    assert [(r.planned.action.kind, r.status) for r in result.results] == [
        ("cordon", Status.PLANNED),
        ("taint", Status.PLANNED),
        ("drain", Status.PLANNED),
        ("label", Status.PLANNED),
    ]
    # every write went with dryRun=All, and the server stored none of them
    writes = _writes(kube)
    assert writes and all(query == {"dryRun": ["All"]} for _, _, query, _ in writes)
    assert node(kube, "gpu-1") == before
    assert kube.get("v1", "Pod", "trainer-0", "ml") is not None
    # what the output shows is what was sent, call for call
    shown = [
        (c.method, c.path, {k: [v] for k, v in c.query}, c.body)
        for r in result.results
        for c in r.calls
        if c.method != "GET"
    ]
    assert shown == writes
    drain = by(result, "gpu-1", "drain")
    evicted = [c.path for c in drain.calls if c.path.endswith("/eviction")]
    assert evicted == [
        "/api/v1/namespaces/ml/pods/trainer-0/eviction",
        "/api/v1/namespaces/ml/pods/trainer-1/eviction",
    ]
    assert "would evict (server dry run) 2 of 2 pod(s)" in drain.detail
    cordon = by(result, "gpu-1", "cordon").calls[0]
    assert cordon.body["spec"] == {"unschedulable": True}
    assert cordon.body["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_apply_acts_and_a_second_run_changes_nothing(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    findings = _ecc_on(tmp_path, "gpu-1")
    audit = tmp_path / "audit.jsonl"
    first = run(policy, findings, kubeconfig, apply=True, audit=audit)
    assert {r.status for r in first.results} == {Status.APPLIED}
    after = node(kube, "gpu-1")
    assert after["spec"]["unschedulable"] is True
    assert after["spec"]["taints"] == [
        {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"}
    ]
    labels, notes = after["metadata"]["labels"], after["metadata"]["annotations"]
    assert labels["gpuwarden.io/cordoned-by"] == "gpuwarden"
    assert labels["gpuwarden.io/fault"] == "gpu"
    assert notes["gpuwarden.io/reason"] == "ecc-uncorrectable GPU-gpu-1 (rule fatal)"
    assert json.loads(notes["gpuwarden.io/taints"]) == ["nvidia.com/gpu-error:NoSchedule"]
    left = {p["metadata"]["name"] for p in kube.objects("v1", "Pod")}
    # the DaemonSet pod, the kube-system pod, the finished one and other nodes' pods stay
    assert left == {"dcgm-exporter-x", "kube-proxy-x", "done", "elsewhere"}
    drain = by(first, "gpu-1", "drain")
    assert "evicted 2 of 2 pod(s): ml/trainer-0, ml/trainer-1" in drain.detail
    assert "1 DaemonSet: gpu-operator/dcgm-exporter-x" in drain.detail
    assert "1 in kube-system: kube-system/kube-proxy-x" in drain.detail
    assert "1 finished: ml/done" in drain.detail

    writes = len(_acting(kube))
    second = run(policy, findings, kubeconfig, apply=True, audit=audit)
    assert len(_acting(kube)) == writes  # nothing changed
    assert [(r.planned.action.kind, r.status, r.why) for r in second.results] == [
        ("cordon", Status.SKIPPED, "already-cordoned"),
        ("taint", Status.SKIPPED, "already-tainted"),
        ("drain", Status.SKIPPED, "nothing-to-evict"),
        ("label", Status.SKIPPED, "already-labelled"),
    ]

    lines = audit_lines(audit)
    runs = {line["run"] for line in lines}
    assert len(runs) == 2
    calls = [line for line in lines if line["event"] == "api-call"]
    assert len(calls) == writes  # one audit line per write, none for the idempotent run
    assert [c["call"]["method"] + " " + c["call"]["path"] for c in calls] == [
        f"{r.method} {r.path}" for r in _acting(kube)
    ]
    assert [c["call"]["body"] for c in calls] == [r.body for r in _acting(kube)]
    first_call = calls[0]
    assert first_call["who"]["kube_user"] == "fake" and first_call["who"]["context"] == "fake"
    assert first_call["who"]["user"] and first_call["who"]["host"]
    assert first_call["dry_run"] is False and first_call["response"]["status"] == 200
    assert first_call["why"] == {
        "code": "ecc-uncorrectable",
        "UUID": "GPU-gpu-1",
        "severity": "critical",
        "rule": "fatal",
    }
    assert [line["event"] for line in lines][:2] == ["run-lock", "run-start"]  # lock, then read
    assert lines[-2]["event"] == "run-end" and lines[-2]["results"] == {"skipped": 4}
    assert (lines[-1]["event"], lines[-1]["lock"]) == ("run-lock", "released")


def test_the_audit_log_names_the_inputs_by_the_digest_of_what_was_read(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    findings = _ecc_on(tmp_path, "gpu-1")
    audit = tmp_path / "audit.jsonl"
    run(policy, findings, kubeconfig, audit=audit)
    start = audit_lines(audit)[0]
    assert start["event"] == "run-start"
    assert start["policy"] == {
        "path": str(policy),
        "sha256": hashlib.sha256(policy.read_bytes()).hexdigest(),
    }
    assert start["findings"] == [
        {"path": str(findings), "sha256": hashlib.sha256(findings.read_bytes()).hexdigest()}
    ]


def test_a_pdb_429_is_retried_with_backoff_then_the_pod_goes(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    kube.fail("POST", "/pods/trainer-0/eviction", 429, times=2, message=PDB_MESSAGE)
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    audit = tmp_path / "audit.jsonl"
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    result = run(
        policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig, apply=True, audit=audit, sleep=sleep
    )
    drain = by(result, "gpu-1", "drain")
    assert drain.status is Status.APPLIED
    tries = [c.status for c in drain.calls if c.path.endswith("trainer-0/eviction")]
    assert tries == [429, 429, 201]
    assert waits[:2] == [0.05, 0.1]  # FAST's backoff, doubled after each 429
    assert kube.get("v1", "Pod", "trainer-0", "ml") is None
    logged = [
        line["response"]["status"]
        for line in audit_lines(audit)
        if line["event"] == "api-call" and line["call"]["path"].endswith("trainer-0/eviction")
    ]
    assert logged == [429, 429, 201]


def test_a_429_that_asks_for_a_longer_wait_gets_it(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    # the API server's NewTooManyRequests(..., 1): details.retryAfterSeconds and Retry-After
    kube.fail("POST", "/pods/trainer-0/eviction", 429, message=PDB_MESSAGE, retry_after_s=1)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    result = run(policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig, apply=True, sleep=sleep)
    drain = by(result, "gpu-1", "drain")
    assert drain.status is Status.APPLIED
    assert [c.status for c in drain.calls if c.path.endswith("trainer-0/eviction")] == [429, 201]
    assert waits[0] == 1.0  # the server's second, not FAST's 0.05 s backoff


def test_a_pdb_that_never_allows_fails_the_drain_at_its_timeout(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    kube.fail("POST", "/pods/trainer-1/eviction", 429, times=1000, message=PDB_MESSAGE)
    policy = write_policy(
        tmp_path / "policy.yml",
        CORDON_DRAIN.replace("drain: {timeout: 5s}", "drain: {timeout: 1s}"),
    )
    started = time.monotonic()
    result = run(policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig, apply=True)
    assert time.monotonic() - started < 4
    drain = by(result, "gpu-1", "drain")
    assert drain.status is Status.FAILED and drain.why == "pdb-blocked"
    assert "evicted 1 of 2 pod(s): ml/trainer-0" in drain.detail
    assert f"1 still refused after 1 s: ml/trainer-1 ({PDB_MESSAGE})" in drain.detail
    tries = [c for c in drain.calls if c.path.endswith("trainer-1/eviction")]
    assert 3 <= len(tries) <= 12  # backoff, not a spin
    label = by(result, "gpu-1", "label")
    assert (label.status, label.why) == (Status.SKIPPED, "after-failure")
    assert "gpuwarden.io/fault" not in node(kube, "gpu-1")["metadata"]["labels"]
    assert result.failed


def test_a_conflict_reads_the_node_again_and_never_claims_anothers_cordon(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)

    def another_controller_cordons(api: FakeKubeApi) -> None:
        api.update("v1", "Node", "gpu-1", lambda n: n["spec"].update(unschedulable=True))

    kube.on("PATCH", r"^/api/v1/nodes/gpu-1$", another_controller_cordons)
    kube.fail("PATCH", r"^/api/v1/nodes/gpu-2$", 409, reason="Conflict")  # a plain 409 once
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    result = run(policy, _ecc_on(tmp_path, "gpu-1", "gpu-2"), kubeconfig, apply=True)
    cordon = by(result, "gpu-1", "cordon")
    assert [(c.method, c.status) for c in cordon.calls] == [("PATCH", 409), ("GET", 200)]
    assert cordon.status is Status.SKIPPED
    assert cordon.detail == (
        "already cordoned, by someone else (not gpuwarden) (done meanwhile by another client)"
    )
    after = node(kube, "gpu-1")
    assert after["spec"]["unschedulable"] is True
    assert "gpuwarden.io/cordoned-by" not in after["metadata"]["labels"]  # not ours to undo
    assert by(result, "gpu-1", "taint").status is Status.APPLIED
    retried = by(result, "gpu-2", "cordon")
    assert [(c.method, c.status) for c in retried.calls] == [
        ("PATCH", 409),
        ("GET", 200),
        ("PATCH", 200),
        ("POST", 201),  # the node's Event: why it was cordoned
    ]
    assert retried.status is Status.APPLIED
    assert node(kube, "gpu-2")["metadata"]["labels"]["gpuwarden.io/cordoned-by"] == "gpuwarden"


def test_a_pod_that_vanishes_mid_drain_is_success(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    kube.on(
        "POST",
        "/pods/trainer-0/eviction",
        lambda api: api.delete("v1", "Pod", "trainer-0", "ml"),  # its Job ended meanwhile
    )
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    result = run(policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig, apply=True)
    drain = by(result, "gpu-1", "drain")
    assert drain.status is Status.APPLIED
    assert (
        "evicted 1 of 2 pod(s): ml/trainer-1; 1 went away meanwhile: ml/trainer-0" in drain.detail
    )
    assert [c.status for c in drain.calls if c.path.endswith("trainer-0/eviction")] == [404]


def test_a_slow_api_times_out_the_action_and_stops_the_node(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    kube.fail("PATCH", r"^/api/v1/nodes/gpu-1$", 0, delay_s=2.5)
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    result = run(policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig, apply=True, request_timeout_s=1)
    cordon = by(result, "gpu-1", "cordon")
    assert cordon.status is Status.FAILED and cordon.why == "unreachable"
    assert "timed out" in cordon.detail
    assert {by(result, "gpu-1", k).why for k in ("taint", "drain", "label")} == {"after-failure"}
    assert kube.get("v1", "Pod", "trainer-0", "ml") is not None  # nothing evicted


def test_a_failure_halfway_is_reported_per_action_and_audited(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    kube.add_pod("ml", "trainer-2", "gpu-1")
    kube.fail("POST", "/pods/trainer-1/eviction", 500, message="etcdserver: request timed out")
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    audit = tmp_path / "audit.jsonl"
    result = run(policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig, apply=True, audit=audit)
    assert [(r.planned.action.kind, r.status) for r in result.results] == [
        ("cordon", Status.APPLIED),
        ("taint", Status.APPLIED),
        ("drain", Status.FAILED),
        ("label", Status.SKIPPED),
    ]
    drain = by(result, "gpu-1", "drain")
    assert "evicted 2 of 3 pod(s): ml/trainer-0, ml/trainer-2" in drain.detail
    assert "1 failed: ml/trainer-1 (HTTP 500: etcdserver: request timed out)" in drain.detail
    remaining = {p["metadata"]["name"] for p in kube.objects("v1", "Pod")}
    assert "trainer-1" in remaining and "trainer-0" not in remaining
    lines = audit_lines(audit)
    evictions = [
        (line["call"]["path"].split("/")[-2], line["response"]["status"])
        for line in lines
        if line["event"] == "api-call" and line["call"]["path"].endswith("/eviction")
    ]
    assert evictions == [("trainer-0", 201), ("trainer-1", 500), ("trainer-2", 201)]
    outcomes = [(line["action"], line["status"]) for line in lines if line["event"] == "action"]
    assert outcomes == [
        ("cordon", "applied"),
        ("taint", "applied"),
        ("drain", "failed"),
        ("label", "skipped"),
    ]


def test_403_names_the_missing_rbac_permission(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    denied = (
        'pods "trainer-0" is forbidden: User "system:serviceaccount:ops:remediate" cannot '
        'create resource "pods/eviction" in API group "" in the namespace "ml"'
    )
    kube.fail("POST", "/eviction$", 403, times=10, message=denied)
    policy = write_policy(tmp_path / "policy.yml", CORDON_DRAIN)
    result = run(policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig, apply=True)
    drain = by(result, "gpu-1", "drain")
    assert drain.status is Status.FAILED and drain.why == "forbidden"
    assert "lack the RBAC permission 'create pods/eviction'" in drain.detail

    kube.fail("GET", "^/api/v1/nodes$", 403, message='nodes is forbidden: cannot list "nodes"')
    with pytest.raises(EnvironmentProblemError) as caught:
        run(policy, _ecc_on(tmp_path, "gpu-1"), kubeconfig)
    assert caught.value.reference == "kubernetes-forbidden" and caught.value.exit_code == 4
    assert "lack the RBAC permission 'list nodes'" in caught.value.message


def test_the_circuit_breaker_trips_stores_and_holds(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    for i in range(10):
        kube.add_node(f"gpu-{i}")
    policy = write_policy(
        tmp_path / "policy.yml",
        """
rules: [{match: {code: xid}, actions: [cordon]}]
limits: {max_unavailable: 100%, circuit_breaker: {percentage: 50, window: 5m}}
""",
    )
    findings = [fleet_finding("xid", f"gpu-{i}", f"GPU-{i}") for i in range(8)]
    path = write_json(tmp_path / "fleet.json", fleet_document(findings, []))
    dry = run(policy, path, kubeconfig)
    assert dry.breaker_open and not dry.breaker_written
    assert kube.objects("v1", "ConfigMap") == []  # a dry run stores no trip
    audit = tmp_path / "audit.jsonl"
    applied = run(policy, path, kubeconfig, apply=True, audit=audit)
    statuses = [r.status for r in applied.results]
    assert statuses.count(Status.APPLIED) == 5 and statuses.count(Status.DEFERRED) == 3
    assert {r.why for r in applied.results if r.status is Status.DEFERRED} == {"circuit-breaker"}
    assert sum(bool(n["spec"].get("unschedulable")) for n in kube.objects("v1", "Node")) == 5
    stored = kube.get("v1", "ConfigMap", "gpuwarden-remediate", "gpuwarden")
    assert stored is not None and stored["data"]["state"] == "tripped"
    assert stored["data"]["reason"].startswith("5 node(s) quarantined by gpuwarden within 5 min")
    assert any(line["event"] == "circuit-breaker" for line in audit_lines(audit))
    # long after the window: still open, nothing new quarantined, until a person resets it
    later = run(policy, path, kubeconfig, apply=True, clock=lambda: time.time() + 600)
    assert {r.status for r in later.results} == {Status.SKIPPED, Status.DEFERRED}
    deferred = [r for r in later.results if r.status is Status.DEFERRED]
    assert len(deferred) == 3 and "until a person resets it" in deferred[0].detail
    assert kube.delete("v1", "ConfigMap", "gpuwarden-remediate", "gpuwarden")
    reset = run(policy, path, kubeconfig, apply=True, clock=lambda: time.time() + 600)
    assert [r.status for r in reset.results].count(Status.APPLIED) == 3


def test_a_webhook_posts_once_and_a_dry_run_sends_nothing(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    _cluster(kube)
    with Receiver(statuses=[503]) as receiver:
        policy = write_policy(
            tmp_path / "policy.yml",
            f"""
rules:
  - name: page
    match: {{code: ecc-uncorrectable}}
    actions: [{{webhook: {{url: "{receiver.url}", headers: {{X-Token: s3cret}}}}}}]
""",
        )
        audit = tmp_path / "audit.jsonl"
        findings = _ecc_on(tmp_path, "gpu-1")
        dry = run(policy, findings, kubeconfig, audit=audit)
        assert receiver.posts == [] and by(dry, "gpu-1", "webhook").status is Status.PLANNED
        sent = run(policy, findings, kubeconfig, apply=True, audit=audit)
        assert by(sent, "gpu-1", "webhook").status is Status.APPLIED
        assert len(receiver.posts) == 2  # a 503, then again after a backoff
        headers, body = receiver.posts[-1]
        assert headers["X-Token"] == "s3cret"
        assert body["node"] == "gpu-1" and body["reason"]["code"] == "ecc-uncorrectable"
        assert body["finding"]["UUID"] == "GPU-gpu-1" and body["finding"]["Hostname"] == "gpu-1"
        again = run(policy, findings, kubeconfig, apply=True, audit=audit)
        assert by(again, "gpu-1", "webhook").why == "already-notified"
        assert len(receiver.posts) == 2
    # header values and the URL's secret path never reach the log nor the output
    assert "s3cret" not in audit.read_text() and SECRET_PATH not in audit.read_text()
    shown = by(again, "gpu-1", "webhook").planned.action.shown_url
    assert shown.startswith("http://127.0.0.1:") and "/…" in shown
    assert SECRET_PATH not in json.dumps(remediation_document(sent))


def test_a_webhook_about_a_node_the_cluster_lacks_is_sent_with_no_mark_nor_event(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path
) -> None:
    """A finding whose node the cluster does not have: its webhook is still sent (nothing else
    tells a person), audited, but no node is patched and no Event written — there is no node."""
    _cluster(kube, nodes=2)
    with Receiver() as receiver:
        policy = write_policy(
            tmp_path / "policy.yml",
            f"""
rules:
  - name: page
    match: {{code: ecc-uncorrectable}}
    actions: [cordon, {{webhook: {{url: "{receiver.url}"}}}}]
""",
        )
        audit = tmp_path / "audit.jsonl"
        findings = _ecc_on(tmp_path, "gpu-9", nodes=2)
        shown: list[str] = []
        sent = run(policy, findings, kubeconfig, apply=True, audit=audit, progress=shown.append)
        hook = by(sent, "gpu-9", "webhook")
        assert (hook.status, hook.why) == (Status.APPLIED, "unknown-node")
        assert hook.detail.endswith(
            ": HTTP 200; no node to record it on: the next run sends it again"
        )
        assert [c.method for c in hook.calls] == ["POST"] and hook.calls[0].status == 200
        assert by(sent, "gpu-9", "cordon").status is Status.SKIPPED
        assert len(receiver.posts) == 1 and receiver.posts[0][1]["node"] == "gpu-9"
    assert _acting(kube) == []  # no node patched, no Event posted
    assert shown == []  # a progress line names a node of the cluster
    actions = [line for line in audit_lines(audit) if line["event"] == "action"]
    assert [(a["node"], a["action"], a["status"], a["calls"]) for a in actions] == [
        ("gpu-9", "webhook", "applied", 1)
    ]


def test_a_real_doctor_document_drives_a_cordon(
    kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path, fixtures: Path
) -> None:
    """`doctor --from` a real node's kernel log (Xid 119, GSP timeout) → that node cordoned."""
    from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
    from gpuwarden.report.doctor_document import doctor_document

    _cluster(kube)
    report = diagnose_captures(
        [str(fixtures / "xid/gpud__dmesg-with-xid-119.log")], DoctorOptions()
    )
    path = write_json(tmp_path / "doctor.json", doctor_document(report))
    policy = write_policy(
        tmp_path / "policy.yml",
        "rules: [{match: {code: xid, severity: critical}, actions: [cordon]}]\n"
        "max_findings_age: null\n"  # a saved log is old; the node named by --node
        "limits: {max_unavailable: 1}\n",
    )
    result = run(policy, path, kubeconfig, apply=True, node="gpu-3")
    cordon = by(result, "gpu-3", "cordon")
    assert cordon.status is Status.APPLIED
    assert cordon.planned.reason is not None
    assert cordon.planned.reason.uuid == "GPU-509665ad-b600-ac93-3616-d754b23d636d"
    assert node(kube, "gpu-3")["spec"]["unschedulable"] is True


@pytest.mark.parametrize(
    ("body", "seconds"),
    [
        ({"details": {"retryAfterSeconds": 10}}, 10.0),
        ({"details": {"retryAfterSeconds": 0}}, 0.0),
        ({"details": {"retryAfterSeconds": -3}}, 0.0),
        ({"details": {"retryAfterSeconds": True}}, 0.0),
        ({"details": {"retryAfterSeconds": "10"}}, 0.0),
        ({"details": None}, 0.0),
        ({}, 0.0),
        ("429 Too Many Requests", 0.0),
        (None, 0.0),
    ],
)
def test_the_wait_a_429_asks_for(body: object, seconds: float) -> None:
    assert retry_after_s(body) == seconds
