"""The cluster's state the plan reads (the nodes, the stored circuit breaker) and the breaker's
ConfigMap a trip writes. A state that cannot be read stops the run before its first write."""

from __future__ import annotations

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.remediate import changes
from gpuwarden.remediate.apply.client import Answer, KubeCluster, explain, list_items, shown_answer
from gpuwarden.remediate.audit import AuditLog
from gpuwarden.remediate.changes import JSON
from gpuwarden.remediate.model import BreakerLatch, ClusterState, Policy
from gpuwarden.units import iso_utc

BREAKER_SCHEMA = "gpuwarden.circuit-breaker/1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuwarden"}


def unreachable(answer: Answer, what: str) -> EnvironmentProblemError:
    call = answer.call
    if call.status is None:
        return EnvironmentProblemError(
            f"cannot {what}: {call.error}",
            reference="kubernetes-unreachable",
            hint="check that the API server runs and the kubeconfig's server address "
            "(`kubectl cluster-info`)",
        )
    if call.status in (401, 403):
        return EnvironmentProblemError(
            f"cannot {what}: {explain(call, answer.body)}",
            reference="kubernetes-forbidden",
            hint="grant the credentials gpuwarden's role (docs/remediate.md, RBAC; `gpuwarden "
            "deploy remediate` writes it): get/list/patch nodes, list pods, create "
            "pods/eviction, get/create/patch configmaps, get/create/update leases",
        )
    return EnvironmentProblemError(
        f"cannot {what}: {explain(call, answer.body)}",
        reference="kubernetes-api-error",
        hint="retry; if it persists, check the API server's health",
    )


def not_the_api(answer: Answer, what: str, expected: str) -> EnvironmentProblemError:
    """A 2xx answer that is not what the API server sends: something else answered."""
    return EnvironmentProblemError(
        f"cannot {what}: the answer is {shown_answer(answer)}, not {expected}",
        reference="kubernetes-bad-answer",
        hint="the kubeconfig's server must be the API server itself, or a proxy that passes "
        "its answers on (a login page?): try `kubectl get nodes` with the same kubeconfig",
    )


def read_breaker(cluster: KubeCluster, policy: Policy) -> BreakerLatch | None:
    """The stored circuit breaker: None when closed (no ConfigMap, or its state not tripped).
    A breaker that cannot be read stops the run: acting without it is acting without a brake."""
    answer = cluster.read_config_map(policy.state_namespace, policy.state_configmap)
    if answer.status == 404:
        return None
    if not answer.ok:
        raise unreachable(answer, "read the circuit breaker's ConfigMap")
    if not (isinstance(answer.body, dict) and answer.body.get("kind") == "ConfigMap"):
        raise not_the_api(answer, "read the circuit breaker's ConfigMap", "a ConfigMap")
    data = answer.body.get("data")
    data = data if isinstance(data, dict) else {}
    if str(data.get("state", "")).lower() != "tripped":
        return None
    return BreakerLatch(changes.parse_iso(data.get("tripped-at")), str(data.get("reason", "")))


def read_cluster(cluster: KubeCluster, policy: Policy) -> ClusterState:
    answer = cluster.list_nodes()
    if not answer.ok:
        raise unreachable(answer, "list the nodes")
    items = list_items(answer)
    if items is None:
        raise not_the_api(answer, "list the nodes", "a NodeList")
    nodes = tuple(changes.node_state(i) for i in items if isinstance(i, dict))
    return ClusterState(nodes, read_breaker(cluster, policy))


# --- the circuit breaker's ConfigMap


def breaker_config_map(policy: Policy, reason: str, now_s: float) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": policy.state_configmap,
            "namespace": policy.state_namespace,
            "labels": dict(MANAGED_BY),
        },
        "data": {
            "schema": BREAKER_SCHEMA,
            "state": "tripped",
            "tripped-at": iso_utc(now_s),
            "reason": reason,
            "reset": "delete this ConfigMap once you know why so many nodes failed at once",
        },
    }


def trip_breaker(
    cluster: KubeCluster, policy: Policy, reason: str, audit: AuditLog, now_s: float
) -> tuple[bool, str]:
    """Store the trip (create the ConfigMap, or patch it if it exists). (stored, detail)."""
    body = breaker_config_map(policy, reason, now_s)
    answer = cluster.create_config_map(policy.state_namespace, body)
    if answer.status == 409:
        answer = cluster.patch_config_map(
            policy.state_namespace, policy.state_configmap, {"data": body["data"]}
        )
    audit.write(
        "circuit-breaker",
        {
            "state": "tripped",
            "reason": reason,
            "call": {"method": answer.call.method, "path": answer.call.path, "body": body},
            "response": {"status": answer.call.status, "error": answer.call.error},
        },
    )
    if answer.ok:
        return True, f"stored in ConfigMap {policy.state_namespace}/{policy.state_configmap}"
    return (
        False,
        f"not stored ({explain(answer.call, answer.body)}): the next run does not know it tripped",
    )
