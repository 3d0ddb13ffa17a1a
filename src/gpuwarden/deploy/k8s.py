"""Kubernetes manifests of the exporter: Namespace, ServiceAccount, DaemonSet, Service,
ServiceMonitor.

What the exporter needs, and nothing more:

* the GPUs: NVML opens ``/dev/nvidiactl`` and ``/dev/nvidia<N>`` and loads ``libnvidia-ml.so.1``
  from the host driver. The NVIDIA container runtime injects both when the pod runs under it
  (``runtimeClassName: nvidia``, or nvidia as containerd's default runtime) with
  ``NVIDIA_VISIBLE_DEVICES=all``; ``NVIDIA_DRIVER_CAPABILITIES=utility`` is the capability NVML
  needs (``compute`` is for CUDA). No ``nvidia.com/gpu`` request: the exporter watches every GPU
  and must not hold one. The device nodes are world-readable/writable as the driver creates them
  (NVreg_DeviceFileMode 0666), so NVML runs as a non-root user;
* with ``kubernetes=True``, the kubelet's pod-resources socket (which pod holds which GPU): a
  root-owned unix socket, so the container then runs as root — still with every capability
  dropped, no privilege escalation and a read-only root filesystem. The socket's directory is
  mounted read-only (connecting to a socket is not a write to the filesystem);
* the node's name for the ``Hostname`` label: ``NODE_NAME`` from the downward API (inside a pod
  the host name is the pod's);
* no Kubernetes API access at all: pod-resources is the kubelet's local gRPC socket, so the
  ServiceAccount gets no Role and no token (``automountServiceAccountToken: false``);
* no host PID namespace: NVML reports processes by host PID itself, and nothing the exporter
  serves needs to read another process's ``/proc``.

The Namespace comes first (``kubectl apply`` on a fresh cluster otherwise answers ``namespaces
"gpuwarden" not found``), labelled with the Pod Security level the pod needs: the pod-resources
socket is a hostPath volume, which the "baseline" level forbids, so with ``kubernetes=True`` the
namespace enforces "privileged" (as gpu-operator labels its own namespace); without it the pod
meets "restricted" (a non-root user, no hostPath, every capability dropped, RuntimeDefault
seccomp), and the namespace enforces that.

The pod's priority is ``system-node-critical`` (gpu-operator's choice for its node daemons): a
node under memory pressure evicts workloads before the agent that reports why the node is sick.

Every node with a GPU runs one pod (``nvidia.com/gpu.present=true``, the GPU Operator's / GPU
Feature Discovery's node label), and it tolerates every taint: a node that remediation tainted or
cordoned for a GPU fault is exactly the node to keep watching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwarden import __version__

NAME = "gpuwarden-exporter"
PORT = 9400
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
NOBODY = 65534  # the conventional unprivileged uid/gid
GPU_NODE_LABEL = ("nvidia.com/gpu.present", "true")
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"  # Pod Security admission's label
PRIORITY_CLASS = "system-node-critical"  # built in: every cluster has it


@dataclass(frozen=True, slots=True)
class K8sOptions:
    namespace: str = "gpuwarden"
    image: str = f"gpuwarden:{__version__}"
    backend: str = "nvml"
    kubernetes: bool = True  # namespace/pod/container labels from the kubelet
    runtime_class: str | None = "nvidia"  # None: the nvidia runtime is containerd's default
    scrape_interval: str = "15s"
    service_monitor_labels: tuple[tuple[str, str], ...] = ()  # the Operator's selector
    service_monitor: bool = True  # False: no Prometheus Operator (its CRD is not installed)


def labels(name: str = NAME, component: str = "exporter") -> dict[str, str]:
    """The recommended labels (app.kubernetes.io/*) of gpuwarden's objects."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/part-of": "gpuwarden",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/version": __version__,
    }


def selector(name: str = NAME) -> dict[str, str]:
    return {"app.kubernetes.io/name": name}


def metadata(
    name: str, namespace: str | None, component: str = "exporter", **extra: Any
) -> dict[str, Any]:
    """An object's metadata; ``namespace`` None for a cluster-scoped object."""
    where = {} if namespace is None else {"namespace": namespace}
    return {"name": name, **where, "labels": labels(name, component), **extra}


def namespace(name: str, pod_security: str) -> dict[str, Any]:
    """A Namespace whose Pod Security admission enforces ``pod_security`` (privileged, baseline
    or restricted). Its labels name gpuwarden, not one component: the exporter and remediation
    may share it, and `kubectl apply` of one must not rewrite what the other applied."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                "app.kubernetes.io/part-of": "gpuwarden",
                POD_SECURITY_ENFORCE: pod_security,
            },
        },
    }


def pod_security(o: K8sOptions) -> str:
    """The least Pod Security level the exporter's pod meets: hostPath needs "privileged"."""
    return "privileged" if o.kubernetes else "restricted"


def _metadata(o: K8sOptions, **extra: Any) -> dict[str, Any]:
    return metadata(NAME, o.namespace, **extra)


def service_account(o: K8sOptions) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(o),
        "automountServiceAccountToken": False,
    }


def _command(o: K8sOptions) -> list[str]:
    args = ["gpuwarden", "export", "--listen", f"0.0.0.0:{PORT}", "--backend", o.backend]
    return [*args, "--kubernetes"] if o.kubernetes else args


def _container_security(o: K8sOptions) -> dict[str, Any]:
    return container_security(0 if o.kubernetes else NOBODY)  # the pod-resources socket is root's


def container_security(user: int) -> dict[str, Any]:
    """A container with nothing beyond running as ``user``: a read-only root filesystem, every
    capability dropped, no privilege escalation."""
    security: dict[str, Any] = {
        "runAsUser": user,
        "runAsGroup": user,
        "runAsNonRoot": user != 0,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }
    return security


def _env() -> list[dict[str, Any]]:
    return [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # the root filesystem is read-only
    ]


def _probe(initial_s: int, period_s: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": "/metrics", "port": "metrics"},
        "initialDelaySeconds": initial_s,
        "periodSeconds": period_s,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def _container(o: K8sOptions) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    if o.kubernetes:
        mounts.append({"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True})
    return {
        "name": "exporter",
        "image": o.image,
        "imagePullPolicy": "IfNotPresent",
        "command": _command(o),
        "env": _env(),
        "ports": [{"name": "metrics", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": _probe(5, 15, 3),
        "livenessProbe": _probe(30, 30, 5),
        "resources": {
            "requests": {"cpu": "50m", "memory": "96Mi"},
            "limits": {"memory": "256Mi"},
        },
        "securityContext": _container_security(o),
        "volumeMounts": mounts,
    }


def _volumes(o: K8sOptions) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}]
    if o.kubernetes:
        volumes.append(
            {
                "name": "pod-resources",
                "hostPath": {"path": POD_RESOURCES_DIR, "type": "Directory"},
            }
        )
    return volumes


def daemon_set(o: K8sOptions) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "serviceAccountName": NAME,
        "automountServiceAccountToken": False,
        "priorityClassName": PRIORITY_CLASS,
        "hostPID": False,
        "hostNetwork": False,
        "nodeSelector": dict([GPU_NODE_LABEL]),
        "tolerations": [{"operator": "Exists"}],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_container(o)],
        "volumes": _volumes(o),
    }
    if o.runtime_class:
        pod_spec = {"runtimeClassName": o.runtime_class, **pod_spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _metadata(o),
        "spec": {
            "selector": {"matchLabels": selector()},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": labels()}, "spec": pod_spec},
        },
    }


def service(o: K8sOptions) -> dict[str, Any]:
    """Headless: Prometheus scrapes every pod (one per node), never a load-balanced one."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(o),
        "spec": {
            "clusterIP": "None",
            "selector": selector(),
            "ports": [
                {"name": "metrics", "port": PORT, "targetPort": "metrics", "protocol": "TCP"}
            ],
        },
    }


def service_monitor(o: K8sOptions) -> dict[str, Any]:
    """The Prometheus Operator's scrape of the Service; the job is the Service's name
    (gpuwarden-exporter), which the rules' exporter job regex matches."""
    metadata = _metadata(o)
    metadata["labels"] = {**metadata["labels"], **dict(o.service_monitor_labels)}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": selector()},
            "namespaceSelector": {"matchNames": [o.namespace]},
            "endpoints": [
                {
                    "port": "metrics",
                    "path": "/metrics",
                    "interval": o.scrape_interval,
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                            "targetLabel": "node",
                        },
                        # the Operator labels each target with the exporter pod's namespace /
                        # pod / container; the series carry the GPU's workload under the same
                        # names (dcgm-exporter's pod attribution), which Prometheus would rename
                        # exported_* on the clash — and an idle GPU would be the exporter's
                        {"action": "labeldrop", "regex": "namespace|pod|container"},
                    ],
                }
            ],
        },
    }


def manifests(o: K8sOptions) -> list[dict[str, Any]]:
    """In apply order: the Namespace before what lives in it, the ServiceAccount before the
    DaemonSet that names it; the ServiceMonitor only with the Prometheus Operator."""
    namespaced = [service_account(o), daemon_set(o), service(o)]
    monitor = [service_monitor(o)] if o.service_monitor else []
    return [namespace(o.namespace, pod_security(o)), *namespaced, *monitor]
