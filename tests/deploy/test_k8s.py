"""The exporter's manifests: what they grant, and real kubectl accepting them against the fake
API server (client and server dry runs, server-side strict field validation against Kubernetes'
schema, `kubectl create --dry-run=client -o yaml` round trips)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuwarden.deploy.k8s import K8sOptions, manifests
from gpuwarden.deploy.yaml_text import from_yaml_stream, to_yaml_stream
from tests.deploy.servers import kubectl, needs_kubectl
from tests.fakes.kube_api import FakeKubeApi, unknown_fields


def _kinds(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = _kinds(docs)["DaemonSet"]["spec"]["template"]["spec"]
    return spec


def test_the_exporter_gets_no_api_access_and_no_host_pid() -> None:
    docs = manifests(K8sOptions())
    kinds = _kinds(docs)
    assert set(kinds) == {"Namespace", "ServiceAccount", "DaemonSet", "Service", "ServiceMonitor"}
    assert not {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"} & set(kinds)
    assert kinds["ServiceAccount"]["automountServiceAccountToken"] is False
    pod = _pod(docs)
    assert pod["automountServiceAccountToken"] is False and pod["hostPID"] is False
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["tolerations"] == [{"operator": "Exists"}]  # a tainted faulty node stays watched
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    assert "resources" not in container or "nvidia.com/gpu" not in str(container["resources"])
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"] == {"drop": ["ALL"]}


def test_pod_labels_need_root_for_the_kubelet_socket_and_only_then() -> None:
    with_pods = _pod(manifests(K8sOptions(kubernetes=True)))
    without = _pod(manifests(K8sOptions(kubernetes=False, runtime_class=None)))
    assert "--kubernetes" in with_pods["containers"][0]["command"]
    assert with_pods["containers"][0]["securityContext"]["runAsUser"] == 0
    mount = next(
        m for m in with_pods["containers"][0]["volumeMounts"] if m["name"] == "pod-resources"
    )
    assert mount["readOnly"] is True
    assert "--kubernetes" not in without["containers"][0]["command"]
    assert without["containers"][0]["securityContext"]["runAsNonRoot"] is True
    assert without["containers"][0]["securityContext"]["runAsUser"] == 65534
    assert "runtimeClassName" not in without
    assert all(v["name"] != "pod-resources" for v in without["volumes"])


def test_the_service_monitor_scrapes_the_service_port() -> None:
    docs = _kinds(manifests(K8sOptions(service_monitor_labels=(("release", "kps"),))))
    monitor, service = docs["ServiceMonitor"], docs["Service"]
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert service["spec"]["clusterIP"] == "None"


def test_the_schema_knows_every_field_of_the_built_in_kinds() -> None:
    for doc in manifests(K8sOptions()):
        if doc["apiVersion"] != "monitoring.coreos.com/v1":
            assert unknown_fields(doc, f"V1{doc['kind']}") == [], doc["kind"]
    broken = _kinds(manifests(K8sOptions()))["DaemonSet"]
    broken["spec"]["template"]["spec"]["hostPid"] = False
    assert unknown_fields(broken, "V1DaemonSet") == ['unknown field "spec.template.spec.hostPid"']


@pytest.fixture
def manifest_file(tmp_path: Path) -> Path:
    path = tmp_path / "gpuwarden.yml"
    path.write_text(to_yaml_stream(manifests(K8sOptions())))
    return path


@needs_kubectl
@pytest.mark.parametrize("mode", ["client", "server"])
def test_kubectl_apply_dry_run(tmp_path: Path, manifest_file: Path, mode: str) -> None:
    with FakeKubeApi() as api:
        done = kubectl(api, tmp_path, "apply", f"--dry-run={mode}", "-f", str(manifest_file))
        assert done.returncode == 0, done.stderr
        suffix = "(server dry run)" if mode == "server" else "(dry run)"
        for line in (
            "namespace/gpuwarden created",
            "serviceaccount/gpuwarden-exporter created",
            "daemonset.apps/gpuwarden-exporter created",
            "service/gpuwarden-exporter created",
            "servicemonitor.monitoring.coreos.com/gpuwarden-exporter created",
        ):
            assert f"{line} {suffix}" in done.stdout
        assert api.objects("apps/v1", "DaemonSet") == []  # a dry run stores nothing
        posts = [r for r in api.writes() if r.method == "POST"]
        assert len(posts) == (5 if mode == "server" else 0)
        assert all(r.query.get("dryRun") == ["All"] for r in posts)
        assert all(r.query.get("fieldValidation") == ["Strict"] for r in posts)


@needs_kubectl
def test_server_side_validation_rejects_an_unknown_field(tmp_path: Path) -> None:
    docs = manifests(K8sOptions())
    _pod(docs)["containers"][0]["readOnlyRootFS"] = True  # a typo
    path = tmp_path / "broken.yml"
    path.write_text(to_yaml_stream(docs))
    with FakeKubeApi() as api:
        done = kubectl(api, tmp_path, "apply", "--dry-run=server", "-f", str(path))
    assert done.returncode != 0
    assert 'unknown field "spec.template.spec.containers[0].readOnlyRootFS"' in done.stderr


@needs_kubectl
def test_kubectl_create_round_trips_the_manifests(tmp_path: Path, manifest_file: Path) -> None:
    with FakeKubeApi() as api:
        done = kubectl(
            api, tmp_path, "create", "--dry-run=client", "-o", "yaml", "-f", str(manifest_file)
        )
    assert done.returncode == 0, done.stderr
    assert from_yaml_stream(done.stdout) == manifests(K8sOptions())


@needs_kubectl
def test_apply_then_apply_again_is_unchanged(tmp_path: Path, manifest_file: Path) -> None:
    with FakeKubeApi() as api:
        first = kubectl(api, tmp_path, "apply", "-f", str(manifest_file))
        again = kubectl(api, tmp_path, "apply", "--dry-run=server", "-f", str(manifest_file))
        stored = api.get("apps/v1", "DaemonSet", "gpuwarden-exporter", "gpuwarden")
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert "daemonset.apps/gpuwarden-exporter unchanged (server dry run)" in again.stdout
    assert stored is not None
    assert stored["spec"] == _kinds(manifests(K8sOptions()))["DaemonSet"]["spec"]


@needs_kubectl
def test_the_fake_drains_a_node_like_a_cluster(tmp_path: Path) -> None:
    """The fake serves what `kubectl drain` needs (remediate reuses it): cordon, eviction,
    DaemonSet pods left in place, and a PodDisruptionBudget's 429 retried until it clears."""
    with FakeKubeApi() as api:
        api.add_node("gpu-node-2")
        api.add_pod("ml", "trainer-1", "gpu-node-2")
        api.put(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "gpuwarden-exporter", "namespace": "gpuwarden"},
                "spec": {},
            }
        )
        api.add_pod(
            "gpuwarden", "exporter-x", "gpu-node-2", owner=("DaemonSet", "gpuwarden-exporter")
        )
        api.fail(
            "POST",
            r"/pods/trainer-1/eviction$",
            429,
            reason="TooManyRequests",
            message="Cannot evict pod as it would violate the pod's disruption budget.",
        )
        done = kubectl(api, tmp_path, "drain", "gpu-node-2", "--ignore-daemonsets", "--timeout=20s")
        node = api.get("v1", "Node", "gpu-node-2")
        left = [p["metadata"]["name"] for p in api.objects("v1", "Pod")]
        evictions = [r for r in api.requests if r.path.endswith("/eviction")]
    assert done.returncode == 0, done.stderr
    assert node is not None and node["spec"]["unschedulable"] is True
    assert left == ["exporter-x"]
    assert len(evictions) == 2  # refused once by the budget, then accepted


def test_the_exporter_pod_s_labels_do_not_clash_with_the_workload_s() -> None:
    """The Operator gives each target the exporter pod's namespace / pod / container labels; the
    series name the GPU's workload with the same labels (dcgm-exporter's pod attribution), which
    Prometheus would rename exported_* on the clash. Relabeling drops the target's: Prometheus
    anchors a relabel regex to the whole label name (``^(?:regex)$``)."""
    import re

    endpoint = _kinds(manifests(K8sOptions()))["ServiceMonitor"]["spec"]["endpoints"][0]
    (drop,) = [r for r in endpoint["relabelings"] if r.get("action") == "labeldrop"]
    target = {"namespace", "pod", "container", "service", "endpoint", "node", "job", "instance"}
    kept = {name for name in target if not re.fullmatch(drop["regex"], name)}
    assert kept == {"service", "endpoint", "node", "job", "instance"}


def test_the_namespace_comes_first_at_the_pod_security_level_the_pod_needs() -> None:
    """A fresh cluster has no gpuwarden namespace; Pod Security "baseline" forbids hostPath
    volumes (the pod-resources socket), so the namespace enforces "privileged" then, as
    gpu-operator labels its own, and "restricted" (which the non-root pod meets) without it."""
    enforce = "pod-security.kubernetes.io/enforce"
    with_pods = manifests(K8sOptions(namespace="gpu-mon"))
    assert with_pods[0]["kind"] == "Namespace"
    assert with_pods[0]["metadata"]["name"] == "gpu-mon"
    assert with_pods[0]["metadata"]["labels"][enforce] == "privileged"
    assert any("hostPath" in v for v in _pod(with_pods)["volumes"])
    without = manifests(K8sOptions(kubernetes=False))
    assert without[0]["metadata"]["labels"][enforce] == "restricted"
    assert all("hostPath" not in v for v in _pod(without)["volumes"])


def test_the_exporter_is_node_critical_as_gpu_operator_s_daemons_are() -> None:
    assert _pod(manifests(K8sOptions()))["priorityClassName"] == "system-node-critical"


def test_no_service_monitor_without_the_prometheus_operator() -> None:
    kinds = [d["kind"] for d in manifests(K8sOptions(service_monitor=False))]
    assert kinds == ["Namespace", "ServiceAccount", "DaemonSet", "Service"]


@needs_kubectl
def test_kubectl_applies_into_a_namespace_the_stream_creates(tmp_path: Path) -> None:
    path = tmp_path / "gpuwarden.yml"
    path.write_text(to_yaml_stream(manifests(K8sOptions(namespace="fresh"))))
    with FakeKubeApi() as api:
        done = kubectl(api, tmp_path, "apply", "-f", str(path))
        stored = api.get("v1", "Namespace", "fresh")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "namespace/fresh created"
    assert stored is not None
    assert stored["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


@needs_kubectl
def test_the_cli_without_service_monitor_applies_where_no_operator_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the Prometheus Operator's CRD, kubectl refuses kind ServiceMonitor."""
    from gpuwarden.cli.main import main

    path = tmp_path / "gpuwarden.yml"
    assert main(["deploy", "k8s", "--no-service-monitor", "--output", str(path)]) == 0
    docs = from_yaml_stream(path.read_text())
    assert "ServiceMonitor" not in [d["kind"] for d in docs]
    with FakeKubeApi() as api:
        done = kubectl(api, tmp_path, "apply", "--dry-run=client", "-f", str(path))
    assert done.returncode == 0, done.stderr
    assert "servicemonitor" not in done.stdout
