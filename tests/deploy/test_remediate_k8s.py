"""Remediation's manifests: the RBAC checked against every request a real `remediate` run sends
(a drain driven by `doctor` on a real node's kernel log, a 409 conflict, a circuit-breaker trip),
least privilege (nothing granted goes unused), the CronJob's safety settings, real kubectl
accepting every document against the stand-in API server, and the CLI's errors."""

from __future__ import annotations

import argparse
import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import load_command, main
from gpuwarden.deploy.k8s import K8sOptions
from gpuwarden.deploy.k8s import manifests as k8s_manifests
from gpuwarden.deploy.remediate_k8s import (
    FINDINGS_FILE,
    NAME,
    POLICY_SECRET,
    TOKEN_DIR,
    RemediateK8sOptions,
    manifests,
    schedule_problem,
)
from gpuwarden.deploy.yaml_text import from_yaml_stream, to_yaml_stream
from gpuwarden.remediate.apply.client import permission
from gpuwarden.remediate.model import Status
from tests.deploy.servers import kubectl, needs_kubectl
from tests.fakes.kube_api import FakeKubeApi, Request, unknown_fields
from tests.remediate.conftest import run, write_json, write_policy

XID_LOG = "xid/gpud__dmesg-with-xid-119.log"  # a real node's dmesg: Xid 119 (GSP timeout)
DRAIN_POLICY = """
rules:
  - name: fatal
    match: {code: xid, severity: critical}
    actions:
      - cordon
      - taint: {key: nvidia.com/gpu-error, value: fatal, effect: NoSchedule}
      - drain: {timeout: 5s}
      - label: {gpuwarden.io/fault: gpu}
      - annotate: {example.com/ticket: pending}
max_findings_age: null
limits: {max_unavailable: 1}
"""
BREAKER_POLICY = """
rules: [{match: {code: xid, severity: critical}, actions: [cordon]}]
max_findings_age: null
limits: {max_unavailable: 100%, circuit_breaker: {percentage: 10, window: 5m}}
"""


def _kinds(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


def _options(**kwargs: Any) -> RemediateK8sOptions:
    return RemediateK8sOptions(
        prometheus_url="http://prometheus.monitoring:9090",
        policy_text=DRAIN_POLICY,
        **kwargs,
    )


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = _kinds(docs)["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]
    return dict(spec["spec"])


# --- an RBAC authoriser, as the API server's RBAC authoriser decides


@dataclass(frozen=True, slots=True)
class Asked:
    """What RBAC sees of a request: verb, API group, resource (with its subresource),
    namespace (None: cluster-scoped or all namespaces) and name."""

    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None


_PERMISSION = re.compile(r"^(?P<verb>\S+) (?P<resource>\S+)( \(apiGroup (?P<group>[^)]+)\))?$")


def asked(method: str, path: str) -> Asked:
    """A request as remediate's own `permission` names it, with the namespace and name its
    path carries (what RBAC's resourceNames and namespaces match)."""
    said = _PERMISSION.match(permission(method, path))
    assert said is not None, permission(method, path)
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = rest[1] if rest[:1] == ["namespaces"] and len(rest) > 2 else None
    if namespace is not None:
        rest = rest[2:]
    name = rest[1] if len(rest) > 1 else None
    return Asked(said["verb"], said["group"] or "", said["resource"], namespace, name)


@dataclass(frozen=True, slots=True)
class Grant:
    """One verb on one resource of one rule of one role."""

    role: str  # Kind/namespace/name
    rule: int
    resource: str
    verb: str


def _bound_roles(docs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str | None]]:
    """(role, the namespace it applies in: None = every namespace) bound to the ServiceAccount."""
    account = _kinds(docs)["ServiceAccount"]["metadata"]
    me = {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    bound = []
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if me not in binding["subjects"]:
            continue
        where = binding["metadata"].get("namespace")  # a RoleBinding's namespace
        ref = binding["roleRef"]
        role_namespace = where if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], role_namespace, ref["name"]))
        if role is not None:
            bound.append((role, where))
    return bound


def grants_for(docs: list[dict[str, Any]], request: Asked) -> list[Grant]:
    found = []
    for role, where in _bound_roles(docs):
        if where is not None and request.namespace != where:
            continue  # a RoleBinding grants in its namespace only
        meta = role["metadata"]
        label = f"{role['kind']}/{meta.get('namespace') or ''}/{meta['name']}"
        for index, rule in enumerate(role["rules"]):
            names = rule.get("resourceNames")
            if names is not None and request.name not in names:
                continue  # a list, or a create, names no object: resourceNames never match
            if (
                request.group in rule["apiGroups"]
                and request.resource in rule["resources"]
                and request.verb in rule["verbs"]
            ):
                found.append(Grant(label, index, request.resource, request.verb))
    return found


def every_grant(docs: list[dict[str, Any]]) -> set[Grant]:
    out = set()
    for role, _ in _bound_roles(docs):
        meta = role["metadata"]
        label = f"{role['kind']}/{meta.get('namespace') or ''}/{meta['name']}"
        for index, rule in enumerate(role["rules"]):
            for resource in rule["resources"]:
                out.update(Grant(label, index, resource, verb) for verb in rule["verbs"])
    return out


def test_the_authoriser_refuses_what_it_should() -> None:
    """The matcher below must be able to say no, or the coverage test proves nothing."""
    docs = manifests(_options())
    for method, path in [
        ("DELETE", "/api/v1/namespaces/ml/pods/trainer-0"),  # a drain never deletes
        ("PUT", "/api/v1/nodes/gpu-1"),  # remediate patches, never updates
        ("GET", "/api/v1/namespaces/gpuwarden/secrets/x"),
        ("GET", "/api/v1/namespaces/gpuwarden/configmaps/someone-elses"),  # resourceNames
        ("GET", "/api/v1/namespaces/ml/configmaps/gpuwarden-remediate"),  # another namespace
        ("PATCH", "/apis/apps/v1/namespaces/ml/deployments/x"),
    ]:
        assert grants_for(docs, asked(method, path)) == [], (method, path)
    assert grants_for(docs, asked("POST", "/api/v1/namespaces/ml/pods/p/eviction")) != []


# --- the requests a real run sends


def _api_requests(api: FakeKubeApi) -> list[Request]:
    return [r for r in api.requests if r.path.startswith(("/api/", "/apis/"))]


def _cluster(api: FakeKubeApi) -> None:
    for i in range(4):
        api.add_node(f"gpu-{i}", labels={"kubernetes.io/hostname": f"gpu-{i}"})
    api.add_pod("ml", "trainer-0", "gpu-3", owner=("StatefulSet", "trainer"))
    api.add_pod("ml", "trainer-1", "gpu-3", owner=("ReplicaSet", "trainer-abc"))
    api.add_pod("gpu-operator", "dcgm-exporter-x", "gpu-3", owner=("DaemonSet", "dcgm-exporter"))


@pytest.fixture(scope="module")
def doctor_findings(fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`gpuwarden doctor --json` of a real node's kernel log (Xid 119), as remediate reads it."""
    from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
    from gpuwarden.report.doctor_document import doctor_document

    report = diagnose_captures([str(fixtures / XID_LOG)], DoctorOptions())
    return write_json(tmp_path_factory.mktemp("doctor") / "doctor.json", doctor_document(report))


@pytest.fixture(scope="module")
def sent(doctor_findings: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Request]:
    """Every request of: a dry run and an applied run that drain gpu-3 (a 409 on its first
    patch: the node read again), and a run that trips the circuit breaker over a ConfigMap a
    person reset by hand (create answers 409, then a patch)."""
    tmp = tmp_path_factory.mktemp("runs")
    drain = write_policy(tmp / "drain.yml", DRAIN_POLICY)
    requests: list[Request] = []
    with FakeKubeApi() as api:
        _cluster(api)
        config = api.write_kubeconfig(tmp / "kubeconfig")
        dry = run(drain, doctor_findings, config, node="gpu-3")
        assert {r.status for r in dry.results} == {Status.PLANNED}
        api.fail("PATCH", r"^/api/v1/nodes/gpu-3$", 409, reason="Conflict")
        done = run(drain, doctor_findings, config, node="gpu-3", apply=True)
        assert [r.status for r in done.results] == [Status.APPLIED] * 5
        assert {p["metadata"]["name"] for p in api.objects("v1", "Pod")} == {"dcgm-exporter-x"}
        requests += _api_requests(api)
    breaker = write_policy(tmp / "breaker.yml", BREAKER_POLICY)
    with FakeKubeApi() as api:
        _cluster(api)
        api.put(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "gpuwarden-remediate", "namespace": "gpuwarden"},
                "data": {"state": "reset by a person"},
            }
        )
        config = api.write_kubeconfig(tmp / "kubeconfig")
        tripped = run(breaker, doctor_findings, config, node="gpu-3", apply=True)
        assert tripped.breaker_written
        requests += _api_requests(api)
    return requests


def test_the_rbac_grants_every_request_remediate_sends(sent: list[Request]) -> None:
    docs = manifests(_options())
    refused = {
        permission(r.method, r.path) for r in sent if not grants_for(docs, asked(r.method, r.path))
    }
    assert refused == set()
    seen = {permission(r.method, r.path) for r in sent}
    # the runs did reach every kind of call the code makes
    assert {"create pods/eviction", "get nodes", "patch configmaps", "create configmaps"} <= seen
    assert any(r.query.get("dryRun") == ["All"] for r in sent)


def test_nothing_granted_goes_unused(sent: list[Request]) -> None:
    """Least privilege: every verb on every resource of every rule was needed by a request.
    (remediate_k8s.py justifies no exception.)"""
    docs = manifests(_options())
    used = {g for r in sent for g in grants_for(docs, asked(r.method, r.path))}
    unused = [f"{g.role} rules[{g.rule}]: {g.verb} {g.resource}" for g in every_grant(docs) - used]
    assert sorted(unused) == []


_NAMESPACED = ("Role", "RoleBinding")


def test_the_breaker_role_follows_the_policys_state() -> None:
    docs = manifests(_options(state_namespace="ops", state_config_map="gpu-breaker"))
    where = [(d["kind"], d["metadata"]["namespace"]) for d in docs if d["kind"] in _NAMESPACED]
    assert where == [
        ("Role", "ops"),
        ("RoleBinding", "ops"),
        ("Role", "default"),
        ("RoleBinding", "default"),
    ]
    get = asked("GET", "/api/v1/namespaces/ops/configmaps/gpu-breaker")
    assert [g.verb for g in grants_for(docs, get)] == ["get"]
    assert (
        grants_for(docs, asked("GET", "/api/v1/namespaces/gpuwarden/configmaps/gpu-breaker")) == []
    )


# --- the CronJob


def test_the_cron_job_runs_one_at_a_time_and_never_retries_blindly() -> None:
    docs = manifests(_options())
    assert [d["kind"] for d in docs] == [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Role",
        "RoleBinding",
        "Secret",
        "CronJob",
    ]
    spec = _kinds(docs)["CronJob"]["spec"]
    assert spec["concurrencyPolicy"] == "Forbid" and spec["schedule"] == "*/10 * * * *"
    assert spec["startingDeadlineSeconds"] > 0
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0 and 0 < job["activeDeadlineSeconds"] <= 86400
    assert _pod(docs)["restartPolicy"] == "Never"
    # a Secret: a policy's webhooks carry their receivers' credentials
    policy = _kinds(docs)["Secret"]
    assert policy["metadata"]["name"] == POLICY_SECRET and policy["type"] == "Opaque"
    assert base64.b64decode(policy["data"]["policy.yaml"]).decode() == DRAIN_POLICY
    volumes = {v["name"]: v for v in _pod(docs)["volumes"]}
    assert volumes["policy"] == {"name": "policy", "secret": {"secretName": POLICY_SECRET}}


def _parsed(command: list[str]) -> argparse.Namespace:
    assert command[0] == "gpuwarden"
    parser = argparse.ArgumentParser(prog=f"gpuwarden {command[1]}")
    load_command(command[1]).register(parser)
    return parser.parse_args(command[2:])


def test_the_fleet_report_feeds_remediate_and_apply_is_opt_in() -> None:
    dry, applied = _pod(manifests(_options())), _pod(manifests(_options(apply=True)))
    report = _parsed(dry["initContainers"][0]["command"])  # as gpuwarden's own CLI reads it
    assert (report.action, report.prometheus, report.range) == (
        "report",
        "http://prometheus.monitoring:9090",
        "1h",
    )
    assert report.output == Path(FINDINGS_FILE)  # written whole: no shell, no redirect
    remediate = _parsed(dry["containers"][0]["command"])
    assert remediate.findings == [FINDINGS_FILE] and not remediate.apply
    assert _parsed(applied["containers"][0]["command"]).apply
    command = dry["containers"][0]["command"]
    assert command[:2] == ["gpuwarden", "remediate"] and "--apply" not in command
    assert command[command.index("--findings") + 1] == FINDINGS_FILE
    assert command[command.index("--audit-log") + 1] == "/dev/stderr" and "--json" in command
    assert "--apply" in applied["containers"][0]["command"]
    claimed = _pod(manifests(_options(audit_claim="audit")))
    audit = claimed["containers"][0]["command"]
    assert audit[audit.index("--audit-log") + 1].startswith("/var/log/gpuwarden/")
    assert {"name": "audit", "persistentVolumeClaim": {"claimName": "audit"}} in claimed["volumes"]


def test_only_the_main_container_holds_the_token_and_nothing_is_privileged() -> None:
    pod = _pod(manifests(_options()))
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    init, main_container = pod["initContainers"][0], pod["containers"][0]
    assert all(m["mountPath"] != TOKEN_DIR for m in init["volumeMounts"])
    assert any(m["mountPath"] == TOKEN_DIR for m in main_container["volumeMounts"])
    token = next(v for v in pod["volumes"] if v["name"] == "token")
    assert {"path": "token", "expirationSeconds": 3607} in [
        s.get("serviceAccountToken") for s in token["projected"]["sources"]
    ]
    for container in (init, main_container):
        security = container["securityContext"]
        assert security["runAsNonRoot"] and security["runAsUser"] != 0
        assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["limits"]["memory"]


def test_the_schema_knows_every_field() -> None:
    for doc in manifests(_options(audit_claim="audit")):
        assert unknown_fields(doc, f"V1{doc['kind']}") == [], doc["kind"]


# --- real kubectl against the stand-in API server


@needs_kubectl
@pytest.mark.parametrize("mode", ["client", "server"])
def test_kubectl_apply_dry_run(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "remediate.yml"
    path.write_text(to_yaml_stream(manifests(_options(apply=True))))
    with FakeKubeApi() as api:
        done = kubectl(
            api, tmp_path, "apply", f"--dry-run={mode}", "--validate=strict", "-f", str(path)
        )
        posts = [r for r in api.writes() if r.method == "POST"]
        assert api.objects("batch/v1", "CronJob") == []  # a dry run stores nothing
    assert done.returncode == 0, done.stderr
    suffix = "(server dry run)" if mode == "server" else "(dry run)"
    for line in (
        "namespace/gpuwarden",
        f"serviceaccount/{NAME}",
        f"clusterrole.rbac.authorization.k8s.io/{NAME}",
        f"clusterrolebinding.rbac.authorization.k8s.io/{NAME}",
        f"role.rbac.authorization.k8s.io/{NAME}",
        f"rolebinding.rbac.authorization.k8s.io/{NAME}",
        f"secret/{POLICY_SECRET}",
        f"cronjob.batch/{NAME}",
    ):
        assert f"{line} created {suffix}" in done.stdout
    assert len(posts) == (10 if mode == "server" else 0)
    assert all(r.query.get("fieldValidation") == ["Strict"] for r in posts)


def test_events_on_the_nodes_are_granted_in_default_only() -> None:
    """Kubernetes records a node's Events in `default`; a breaker kept there shares the Role."""
    docs = manifests(_options())
    event = asked("POST", "/api/v1/namespaces/default/events")
    assert [g.role for g in grants_for(docs, event)] == ["Role/default/gpuwarden-remediate"]
    assert grants_for(docs, asked("POST", "/api/v1/namespaces/ml/events")) == []
    shared = manifests(_options(state_namespace="default"))
    (role,) = [d for d in shared if d["kind"] == "Role"]
    assert role["rules"][-1] == {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}
    assert [g.verb for g in grants_for(shared, event)] == ["create"]


def test_its_namespaces_come_first_at_the_level_its_pod_needs() -> None:
    """Pod Security "restricted" admits the CronJob's pod; the breaker's namespace is created
    too, and the exporter's default namespace keeps the exporter's own labels."""
    enforce = "pod-security.kubernetes.io/enforce"
    docs = manifests(_options(namespace="gpu-ops", state_namespace="gpu-state"))
    heads = [(d["kind"], d["metadata"]["name"]) for d in docs[:2]]
    assert heads == [("Namespace", "gpu-ops"), ("Namespace", "gpu-state")]
    assert {d["metadata"]["labels"][enforce] for d in docs[:2]} == {"restricted"}
    pod = _pod(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in [*pod["initContainers"], *pod["containers"]]:
        security = container["securityContext"]
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["allowPrivilegeEscalation"] is False
    assert all(set(v) & {"emptyDir", "secret", "projected"} for v in pod["volumes"])
    shared = manifests(_options())
    assert [d["kind"] for d in shared].count("Namespace") == 1
    assert shared[0] == k8s_manifests(K8sOptions())[0]


@needs_kubectl
def test_applying_remediation_keeps_the_exporter_s_namespace_privileged(tmp_path: Path) -> None:
    """`kubectl apply` rewrites a Namespace's labels to the last applied ones: remediation's
    apply after the exporter's must not take the hostPath pod's level away."""
    exporter, remediation = tmp_path / "exporter.yml", tmp_path / "remediate.yml"
    exporter.write_text(to_yaml_stream(k8s_manifests(K8sOptions())))
    remediation.write_text(to_yaml_stream(manifests(_options())))
    with FakeKubeApi() as api:
        first = kubectl(api, tmp_path, "apply", "-f", str(exporter))
        second = kubectl(api, tmp_path, "apply", "-f", str(remediation))
        stored = api.get("v1", "Namespace", "gpuwarden")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "namespace/gpuwarden unchanged" in second.stdout
    assert stored is not None
    assert stored["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


@needs_kubectl
def test_server_validation_would_catch_a_misspelt_cron_job_field(tmp_path: Path) -> None:
    docs = manifests(_options())
    docs[-1]["spec"]["concurrencyPolicyy"] = "Forbid"
    path = tmp_path / "broken.yml"
    path.write_text(to_yaml_stream(docs))
    with FakeKubeApi() as api:
        done = kubectl(api, tmp_path, "apply", "--dry-run=server", "-f", str(path))
    assert done.returncode != 0
    assert 'unknown field "spec.concurrencyPolicyy"' in done.stderr


# --- the schedule


@pytest.mark.parametrize(
    "schedule",
    [
        "*/10 * * * *",
        "0 3 * * 1-5",
        "15,45 */2 1 JAN-MAR mon",
        "0 0 ? * SUN",
        "@hourly",
        "5/15 * * * *",
    ],
)
def test_cron_schedules_the_controller_takes(schedule: str) -> None:
    assert schedule_problem(schedule) is None


@pytest.mark.parametrize(
    ("schedule", "said"),
    [
        ("* * * *", "4 field(s)"),
        ("60 * * * *", "minute '60'"),
        ("* * 0 * *", "day of month '0'"),
        ("* * * * 7", "day of week '7'"),  # robfig/cron: 0-6 (Vixie cron's 7 is refused)
        ("*/0 * * * *", "a step of 0"),
        ("5-1 * * * *", "runs backwards"),
        ("@every 5m", "is not one of"),
        ("CRON_TZ=UTC 0 * * * *", "time zone"),
        ("* * * FOO *", "month 'FOO'"),
        # past int64 (Go's strconv.Atoi) and past int()'s 4300 digits: refused, not a traceback
        ("9" * 5000 + " * * * *", "not a value from 0 to 59"),
        ("1-" + "9" * 19 + " * * * *", "not a value from 0 to 59"),
        ("*/" + "9" * 5000 + " * * * *", "a step that is not a number"),
    ],
)
def test_cron_schedules_the_controller_refuses(schedule: str, said: str) -> None:
    problem = schedule_problem(schedule)
    assert problem is not None and said in problem


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789*/-,?@ JANMONSUhourly", max_size=30))
def test_the_schedule_check_never_crashes(text: str) -> None:
    problem = schedule_problem(text)
    assert problem is None or isinstance(problem, str)


# --- the command line


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    return write_policy(tmp_path / "policy.yml", DRAIN_POLICY)


def _deploy(policy: Path | str, *extra: str) -> list[str]:
    return [
        "deploy",
        "remediate",
        "--policy",
        str(policy),
        "--prometheus",
        "http://prometheus.monitoring:9090",
        *extra,
    ]


def test_the_cli_writes_a_yaml_stream(
    policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_deploy(policy_file, "--namespace", "ops", "--schedule", "@hourly")) == 0
    docs = from_yaml_stream(capsys.readouterr().out)
    assert docs == manifests(
        RemediateK8sOptions(
            prometheus_url="http://prometheus.monitoring:9090",
            policy_text=DRAIN_POLICY,
            namespace="ops",
            schedule="@hourly",
        )
    )
    assert "--apply" not in _pod(docs)["containers"][0]["command"]


def test_the_cli_apply_flag_and_output_file(policy_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "remediate.yml"
    assert main(_deploy(policy_file, "--apply", "--range", "2h", "-o", str(out))) == 0
    pod = _pod(from_yaml_stream(out.read_text()))
    assert "--apply" in pod["containers"][0]["command"]
    assert "2h" in pod["initContainers"][0]["command"]


def test_a_long_drain_lengthens_the_runs_deadline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_policy(
        tmp_path / "p.yml", "rules: [{match: {code: xid}, actions: [{drain: {timeout: 3h}}]}]\n"
    )
    assert main(_deploy(policy)) == 0
    cron = _kinds(from_yaml_stream(capsys.readouterr().out))["CronJob"]
    assert cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 3 * 3600
    # several nodes drained one after another: the operator sets the run's deadline
    assert main(_deploy(policy, "--run-deadline", "36000")) == 0
    cron = _kinds(from_yaml_stream(capsys.readouterr().out))["CronJob"]
    assert cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 36000
    assert main(_deploy(policy, "--run-deadline", "5")) == 2
    assert "--run-deadline" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("setup", "extra", "reference"),
    [
        (
            "rules: [{match: {code: ecc-uncorected}, actions: [cordon]}]\n",
            (),
            "remediation-policy-invalid",
        ),
        ("rules: [\n", (), "remediation-policy-invalid"),
        (None, (), "remediation-policy-unreadable"),
        (DRAIN_POLICY, ("--schedule", "every 10 minutes"), "cron-schedule-invalid"),
        (DRAIN_POLICY, ("--range", "soon"), "fleet-range-invalid"),
    ],
)
def test_bad_input_is_exit_2_with_a_reference_and_a_hint(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    setup: str | None,
    extra: Iterable[str],
    reference: str,
) -> None:
    policy = tmp_path / "policy.yml"
    if setup is not None:
        policy.write_text(setup)
    assert main(_deploy(policy, *extra)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing half-written
    assert f"error: {reference}" in captured.err and "hint:" in captured.err
    assert "Traceback" not in captured.err
    if reference.startswith("remediation-policy"):
        assert str(policy) in captured.err  # the file is named


def test_a_bad_prometheus_url_is_refused_before_any_run(
    policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _deploy(policy_file)
    args[args.index("--prometheus") + 1] = "prometheus:9090"
    assert main(args) == 2
    assert "fleet-prometheus-url" in capsys.readouterr().err
