"""Acting on the cluster: the only module that imports ``kubernetes`` (the official client) and
the only one that changes anything (Kubernetes writes, the webhook POST through
``gpuwarden.transport``).

* Every write carries ``?dryRun=All`` in a dry run, so admission and validation still run on the
  server and nothing is stored (fleet.md §2.2); reads run as they are.
* Node patches are strategic-merge patches carrying the ``resourceVersion`` read: a node another
  client changed in between answers ``409 Conflict``; the node is read again and the change
  worked out anew (someone else may have done it meanwhile), up to ``conflict_retries`` times.
* A drain lists the node's pods, leaves DaemonSet-owned, mirror, finished pods and the skipped
  namespaces alone, and evicts the rest through the Eviction API (``policy/v1``): a ``429`` from
  a PodDisruptionBudget is tried again with exponential backoff until the drain's per-node
  timeout; a ``404`` (the pod went away meanwhile) counts as done; then it waits, until the same
  deadline, for the evicted pods to be gone. Pods with no controller are left (evicting them
  would lose them for good, as ``kubectl drain`` refuses without ``--force``) unless ``force``.
* A ``403`` names the RBAC permission the credentials lack (``create pods/eviction``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuwarden.errors import EnvironmentProblemError, InputError, MissingExtraError
from gpuwarden.remediate import changes
from gpuwarden.remediate.audit import AuditLog, reason_record
from gpuwarden.remediate.model import (
    ActionResult,
    AddTaint,
    ApiCall,
    BreakerLatch,
    ClusterState,
    Cordon,
    Drain,
    NodeState,
    Plan,
    PlannedAction,
    Policy,
    SetAnnotations,
    SetLabels,
    Status,
    Uncordon,
    Webhook,
)
from gpuwarden.transport import (
    Request,
    RetryPolicy,
    Transport,
    TransportError,
    default_transport,
    send_with_retries,
)

JSON = dict[str, Any]
DEFAULT_REQUEST_TIMEOUT_S = 30.0
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # static pods' mirrors: the kubelet owns them
BREAKER_SCHEMA = "gpuwarden.circuit-breaker/1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuwarden"}
ProgressFn = Callable[[str], None]


def _kubernetes() -> Any:
    try:
        import kubernetes
    except ImportError:
        raise MissingExtraError("gpuwarden remediate", "k8s", "kubernetes") from None
    return kubernetes


# --- answers and their errors


@dataclass(frozen=True, slots=True)
class Answer:
    call: ApiCall
    body: Any = None  # the parsed JSON answer

    @property
    def status(self) -> int | None:
        return self.call.status

    @property
    def ok(self) -> bool:
        return self.call.status is not None and 200 <= self.call.status < 300


_VERBS = {"GET": "get", "POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


def permission(method: str, path: str) -> str:
    """The RBAC verb and resource a request needs: ``create pods/eviction``, ``list nodes``."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest, group = parts[2:], ""
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest, group = parts[3:], parts[1]
    else:
        return f"{_VERBS.get(method, method.lower())} {path}"
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = rest[0] if rest else "?"
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    verb = "list" if method == "GET" and name is None else _VERBS.get(method, method.lower())
    text = f"{verb} {resource}/{sub}" if sub else f"{verb} {resource}"
    return f"{text} (apiGroup {group})" if group else text


def _message(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return ""


def explain(call: ApiCall, body: Any = None) -> str:
    """A failed call in words (the detail of a failed action)."""
    if call.status is None:
        return call.error or "no answer"
    said = _message(body) or call.error or ""
    if call.status == 403:
        return (
            f"403 Forbidden: the credentials lack the RBAC permission "
            f"'{permission(call.method, call.path)}'" + (f" ({said})" if said else "")
        )
    if call.status == 401:
        return "401 Unauthorized: the API server did not accept the credentials"
    return f"HTTP {call.status}" + (f": {said}" if said else "")


def _why_failed(call: ApiCall) -> str:
    return {
        None: "unreachable",
        401: "unauthorized",
        403: "forbidden",
        404: "not-found",
        409: "conflict",
        429: "too-many-requests",
    }.get(call.status, "api-error")


# --- the cluster


@dataclass(slots=True)
class KubeCluster:
    """The API server, through the official client. Every request returns an ``Answer``; no
    HTTP status raises."""

    api_client: Any
    server: str
    context: str | None = None
    user: str | None = None
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    clock: Callable[[], float] = time.time
    _core: Any = None

    @property
    def core(self) -> Any:
        if self._core is None:
            self._core = _kubernetes().client.CoreV1Api(self.api_client)
        return self._core

    def _timeout(self, limit_s: float | None = None) -> tuple[float, float]:
        read = (
            self.request_timeout_s
            if limit_s is None
            else max(min(limit_s, self.request_timeout_s), 0.1)
        )
        return (min(read, 10.0), read)

    def request(
        self,
        method: str,
        path: str,
        send: Callable[..., Any],
        *args: Any,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        limit_s: float | None = None,
        **kwargs: Any,
    ) -> Answer:
        """Call ``send`` (a CoreV1Api method) and record it as ``method path?query``."""
        kubernetes = _kubernetes()
        import urllib3

        at = self.clock()
        described = ApiCall(method, path, tuple(query), body, at_s=at)
        try:
            raw = send(
                *args, _preload_content=False, _request_timeout=self._timeout(limit_s), **kwargs
            )
            status, data = raw.status, raw.data
        except kubernetes.client.exceptions.ApiException as exc:
            status, data = exc.status, exc.body
        except urllib3.exceptions.HTTPError as exc:
            return Answer(replace(described, error=_transport_problem(self.server, exc)))
        parsed = _json(data)
        error = None if 200 <= (status or 0) < 300 else _message(parsed) or f"HTTP {status}"
        return Answer(replace(described, status=status, error=error), parsed)

    # --- reads

    def list_nodes(self) -> Answer:
        return self.request("GET", "/api/v1/nodes", self.core.list_node)

    def read_node(self, name: str) -> Answer:
        return self.request("GET", f"/api/v1/nodes/{name}", self.core.read_node, name)

    def pods_on(self, node: str, limit_s: float | None = None) -> Answer:
        selector = f"spec.nodeName={node}"
        return self.request(
            "GET",
            "/api/v1/pods",
            self.core.list_pod_for_all_namespaces,
            query=(("fieldSelector", selector),),
            field_selector=selector,
            limit_s=limit_s,
        )

    def read_pod(self, namespace: str, name: str, limit_s: float | None = None) -> Answer:
        return self.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            self.core.read_namespaced_pod,
            name,
            namespace,
            limit_s=limit_s,
        )

    def read_config_map(self, namespace: str, name: str) -> Answer:
        return self.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
            self.core.read_namespaced_config_map,
            name,
            namespace,
        )

    # --- writes (dry_run: ?dryRun=All)

    @staticmethod
    def _dry(dry_run: bool) -> tuple[tuple[tuple[str, str], ...], dict[str, Any]]:
        return ((("dryRun", "All"),), {"dry_run": "All"}) if dry_run else ((), {})

    def patch_node(self, name: str, body: JSON, dry_run: bool) -> Answer:
        query, kwargs = self._dry(dry_run)
        return self.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            self.core.patch_node,
            name,
            body,
            query=query,
            body=body,
            **kwargs,
        )

    def evict(
        self, namespace: str, name: str, grace_s: int | None, dry_run: bool, limit_s: float | None
    ) -> Answer:
        query, kwargs = self._dry(dry_run)
        body: JSON = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if grace_s is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_s}
        return self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            self.core.create_namespaced_pod_eviction,
            name,
            namespace,
            body,
            query=query,
            body=body,
            limit_s=limit_s,
            **kwargs,
        )

    def create_config_map(self, namespace: str, body: JSON) -> Answer:
        return self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            self.core.create_namespaced_config_map,
            namespace,
            body,
            body=body,
        )

    def patch_config_map(self, namespace: str, name: str, body: JSON) -> Answer:
        return self.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
            self.core.patch_namespaced_config_map,
            name,
            namespace,
            body,
            body=body,
        )


def _json(data: Any) -> Any:
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if not isinstance(data, str) or not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return {"message": data[:500]}


def _transport_problem(server: str, exc: Exception) -> str:
    """urllib3's error in a few words: timed out, connection refused, ..."""
    import urllib3

    reason = getattr(exc, "reason", None) or exc
    # NewConnectionError is a ConnectTimeoutError in urllib3: ask for it first
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        text = str(reason).rpartition("]")[2].strip() or "connection failed"
        return f"cannot connect to {server}: {text.lower()}"
    if isinstance(reason, urllib3.exceptions.TimeoutError):
        return f"no answer from {server} in time (timed out)"
    return f"{server}: {type(reason).__name__}: {reason}"


# --- connecting


def _kubeconfig_problem(path: str | None, text: str) -> InputError:
    where = f"the kubeconfig {path!r}" if path else "the kubeconfig"
    return InputError(
        f"{where} cannot be used: {text}",
        reference="kubeconfig-invalid",
        hint="check it with `kubectl config view`; --context names one of its contexts",
    )


def _active_user(
    kubernetes: Any, path: str | None, context: str | None
) -> tuple[str | None, str | None]:
    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=path)
    except Exception:  # the client raises what its YAML reader raises; the load said it all
        return None, context
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    if not isinstance(chosen, dict):
        return None, context
    user = (chosen.get("context") or {}).get("user")
    return (str(user) if user else None), chosen.get("name")


def _kubeconfig_file(kubeconfig: str | None) -> str | None:
    """The kubeconfig to load, as kubectl finds it: --kubeconfig, else $KUBECONFIG (a list,
    merged), else ~/.kube/config; None when there is none (then: in a pod, or no cluster)."""
    if kubeconfig is not None:
        if not Path(kubeconfig).is_file():
            raise InputError(
                f"the kubeconfig {kubeconfig!r} does not exist",
                reference="kubeconfig-missing",
                hint="pass the file kubectl uses (--kubeconfig ~/.kube/config)",
            )
        return kubeconfig
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        if not any(Path(p).is_file() for p in listed.split(os.pathsep) if p):
            raise InputError(
                f"$KUBECONFIG ({listed}) names no file that exists",
                reference="kubeconfig-missing",
                hint="point KUBECONFIG at the file kubectl uses, or pass --kubeconfig",
            )
        return listed
    default = Path("~/.kube/config").expanduser()
    return str(default) if default.is_file() else None


def _load(kubernetes: Any, path: str, context: str | None, configuration: Any) -> None:
    try:
        kubernetes.config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except kubernetes.config.ConfigException as exc:
        raise _kubeconfig_problem(path, str(exc)) from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        # a YAML file that is not a kubeconfig makes the loader fail in many ways
        raise _kubeconfig_problem(path, f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # yaml.YAMLError and friends: the file is not YAML
        if type(exc).__module__.startswith("yaml"):
            raise _kubeconfig_problem(path, f"not YAML ({exc})") from None
        raise


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
) -> KubeCluster:
    """The API server of ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``, or the pod's
    service account when running in a cluster). Nothing is sent yet."""
    kubernetes = _kubernetes()
    path = _kubeconfig_file(kubeconfig)
    configuration = kubernetes.client.Configuration()
    if path is not None:
        _load(kubernetes, path, context, configuration)
        user, context = _active_user(kubernetes, path, context)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        except kubernetes.config.ConfigException as exc:
            raise EnvironmentProblemError(
                f"in a pod, but its service account cannot be used: {exc}",
                reference="kubeconfig-missing",
                hint="mount the service account token (automountServiceAccountToken: true), or "
                "pass --kubeconfig",
            ) from None
        user, context = "serviceaccount", None
    else:
        raise EnvironmentProblemError(
            "no kubeconfig: ~/.kube/config does not exist and this is not a pod",
            reference="kubeconfig-missing",
            hint="pass --kubeconfig FILE, set KUBECONFIG, or run in the cluster",
        )
    configuration.retries = False  # one try per request: the callers decide what to retry
    api_client = kubernetes.client.ApiClient(configuration)
    return KubeCluster(
        api_client, configuration.host, context, user, request_timeout_s=request_timeout_s
    )


def _unreachable(cluster: KubeCluster, answer: Answer, what: str) -> EnvironmentProblemError:
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
            hint="grant the credentials gpuwarden's role (README: remediate, RBAC): get/list/patch "
            "nodes, list pods, create pods/eviction, get/create/patch configmaps",
        )
    return EnvironmentProblemError(
        f"cannot {what}: {explain(call, answer.body)}",
        reference="kubernetes-api-error",
        hint="retry; if it persists, check the API server's health",
    )


def read_breaker(cluster: KubeCluster, policy: Policy) -> BreakerLatch | None:
    """The stored circuit breaker: None when closed (no ConfigMap, or its state not tripped).
    A breaker that cannot be read stops the run: acting without it is acting without a brake."""
    answer = cluster.read_config_map(policy.state_namespace, policy.state_configmap)
    if answer.status == 404:
        return None
    if not answer.ok:
        raise _unreachable(cluster, answer, "read the circuit breaker's ConfigMap")
    data = answer.body.get("data") if isinstance(answer.body, dict) else None
    data = data if isinstance(data, dict) else {}
    if str(data.get("state", "")).lower() != "tripped":
        return None
    return BreakerLatch(changes.parse_iso(data.get("tripped-at")), str(data.get("reason", "")))


def read_cluster(cluster: KubeCluster, policy: Policy) -> ClusterState:
    answer = cluster.list_nodes()
    if not answer.ok:
        raise _unreachable(cluster, answer, "list the nodes")
    items = answer.body.get("items") if isinstance(answer.body, dict) else None
    nodes = tuple(changes.node_state(i) for i in items or () if isinstance(i, dict))
    return ClusterState(nodes, read_breaker(cluster, policy))


# --- executing the plan


@dataclass(frozen=True, slots=True)
class ApplySettings:
    dry_run: bool = True
    conflict_retries: int = 3
    eviction_backoff_s: float = 1.0  # first wait after a 429; doubled up to max_backoff_s
    max_backoff_s: float = 30.0
    poll_s: float = 1.0  # while waiting for evicted pods to go
    webhook_retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(attempts=3))


@dataclass(slots=True)
class _Run:
    cluster: KubeCluster
    settings: ApplySettings
    audit: AuditLog
    transport: Transport
    sleep: Callable[[float], None]
    progress: ProgressFn | None
    calls: list[ApiCall] = field(default_factory=list)
    node_after: NodeState | None = None  # the node after an action's mark

    @property
    def now(self) -> float:
        return self.cluster.clock()

    def record(self, planned: PlannedAction, answer: Answer) -> Answer:
        self.calls.append(answer.call)
        if answer.call.method != "GET":
            self.audit.call(planned, answer.call)
        return answer


def _done_status(dry_run: bool) -> Status:
    return Status.PLANNED if dry_run else Status.APPLIED


def _node_after(answer: Answer, before: NodeState, dry_run: bool) -> NodeState:
    if not isinstance(answer.body, dict) or answer.body.get("kind") != "Node":
        return before
    after = changes.node_state(answer.body)
    # a dry run stored nothing: the next patch must still name the stored version
    return replace(after, resource_version=before.resource_version) if dry_run else after


def _with_version(patch: JSON, version: str | None) -> JSON:
    if version is None:
        return patch
    meta = {**patch.get("metadata", {}), "resourceVersion": version}
    return {**patch, "metadata": meta}


def _patch(
    run: _Run, planned: PlannedAction, node: NodeState, now_s: float
) -> tuple[Status, str, str | None, NodeState]:
    """A node patch with optimistic concurrency: (status, detail, why, the node after)."""
    current = node
    dry = run.settings.dry_run
    for attempt in range(run.settings.conflict_retries + 1):
        change = changes.change_for(current, planned.action, planned.reason, now_s)
        if change.patch is None:
            meanwhile = " (done meanwhile by another client)" if attempt else ""
            return Status.SKIPPED, change.detail + meanwhile, change.why_not, current
        answer = run.record(
            planned,
            run.cluster.patch_node(
                current.name, _with_version(change.patch, current.resource_version), dry
            ),
        )
        if answer.ok:
            suffix = " (server dry run)" if dry else ""
            return (
                _done_status(dry),
                change.detail + suffix,
                None,
                _node_after(answer, current, dry),
            )
        if answer.status != 409:
            return (
                Status.FAILED,
                explain(answer.call, answer.body),
                _why_failed(answer.call),
                current,
            )
        fresh = run.record(planned, run.cluster.read_node(current.name))
        if not fresh.ok or not isinstance(fresh.body, dict):
            return (
                Status.FAILED,
                f"409 Conflict, then {explain(fresh.call, fresh.body)}",
                "conflict",
                current,
            )
        current = changes.node_state(fresh.body)
    return (
        Status.FAILED,
        f"409 Conflict {run.settings.conflict_retries + 1} times: the node keeps changing",
        "conflict",
        current,
    )


# --- drain


@dataclass(frozen=True, slots=True)
class _Pod:
    namespace: str
    name: str
    uid: str | None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def _controller_kind(meta: Mapping[str, Any]) -> str | None:
    for owner in meta.get("ownerReferences") or ():
        if isinstance(owner, dict) and owner.get("controller") is True:
            return str(owner.get("kind"))
    return None


def _sort_pods(items: Sequence[Any], drain: Drain) -> tuple[list[_Pod], dict[str, list[str]]]:
    """(pods to evict, pods left by kind of reason)."""
    evict: list[_Pod] = []
    left: dict[str, list[str]] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") or {}
        pod = _Pod(str(meta.get("namespace", "default")), str(meta.get("name")), meta.get("uid"))
        phase = (item.get("status") or {}).get("phase")
        annotations = meta.get("annotations") or {}
        owner = _controller_kind(meta)
        if owner == "DaemonSet":
            why = "DaemonSet"
        elif MIRROR_ANNOTATION in annotations:
            why = "mirror"
        elif pod.namespace in drain.skip_namespaces:
            why = f"in {pod.namespace}"
        elif phase in ("Succeeded", "Failed"):
            why = "finished"
        elif owner is None and not drain.force:
            why = "no controller"
        else:
            evict.append(pod)
            continue
        left.setdefault(why, []).append(pod.ref)
    return evict, left


@dataclass(slots=True)
class _Eviction:
    evicted: list[_Pod] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)  # still refused by a PDB (429)
    failed: dict[str, str] = field(default_factory=dict)
    lingering: list[str] = field(default_factory=list)  # evicted, not gone by the deadline


def _evict_all(
    run: _Run, planned: PlannedAction, pods: list[_Pod], drain: Drain, deadline: float
) -> _Eviction:
    """Evict each pod; 429 → again after a backoff (a PDB allows it later), until the deadline."""
    out = _Eviction()
    pending = pods
    wait = run.settings.eviction_backoff_s
    while pending:
        retry: list[_Pod] = []
        for pod in pending:
            left = deadline - run.now
            if left <= 0:
                retry.append(pod)
                continue
            answer = run.record(
                planned,
                run.cluster.evict(
                    pod.namespace, pod.name, drain.grace_period_s, run.settings.dry_run, left
                ),
            )
            if answer.ok:
                out.evicted.append(pod)
                out.blocked.pop(pod.ref, None)
            elif answer.status == 404:
                out.vanished.append(pod.ref)
                out.blocked.pop(pod.ref, None)
            elif answer.status == 429:
                out.blocked[pod.ref] = _message(answer.body) or "429 Too Many Requests"
                retry.append(pod)
            else:
                out.failed[pod.ref] = explain(answer.call, answer.body)
        pending = retry
        if not pending or run.now + wait > deadline:
            for pod in pending:
                out.blocked.setdefault(pod.ref, "the drain's timeout came first")
            break
        run.sleep(wait)
        wait = min(wait * 2, run.settings.max_backoff_s)
    return out


def _wait_gone(run: _Run, planned: PlannedAction, out: _Eviction, deadline: float) -> None:
    """Poll each evicted pod until it is gone (404, or a new pod of that name: another uid)."""
    waiting = list(out.evicted)
    while waiting:
        still: list[_Pod] = []
        for pod in waiting:
            answer = run.record(
                planned, run.cluster.read_pod(pod.namespace, pod.name, max(deadline - run.now, 0.1))
            )
            body = answer.body if isinstance(answer.body, dict) else {}
            uid = (body.get("metadata") or {}).get("uid")
            if answer.status == 404 or (answer.ok and pod.uid is not None and uid != pod.uid):
                continue
            still.append(pod)
        waiting = still
        if not waiting:
            return
        if run.now + run.settings.poll_s > deadline:
            out.lingering = [p.ref for p in waiting]
            return
        run.sleep(run.settings.poll_s)


def _drain_text(out: _Eviction, left: Mapping[str, list[str]], tried: int, dry_run: bool) -> str:
    verb = "would evict (server dry run)" if dry_run else "evicted"
    parts = []
    if out.evicted:
        refs = _refs([p.ref for p in out.evicted])
        parts.append(f"{verb} {len(out.evicted)} of {tried} pod(s): {refs}")
    if out.vanished:
        parts.append(f"{len(out.vanished)} went away meanwhile: {_refs(out.vanished)}")
    if not tried:
        parts.append("no pod to evict")
    elif not parts:
        parts.append(f"{verb} none of {tried} pod(s)")
    if left:
        parts.append("left " + "; ".join(f"{len(v)} {k}: {_refs(v)}" for k, v in left.items()))
    return "; ".join(parts)


def _refs(refs: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(refs[:most])
    return shown + (f" and {len(refs) - most} more" if len(refs) > most else "")


def _drain(
    run: _Run, planned: PlannedAction, drain: Drain, node: NodeState
) -> tuple[Status, str, str | None]:
    deadline = run.now + drain.timeout_s
    listed = run.record(planned, run.cluster.pods_on(node.name, drain.timeout_s))
    if not listed.ok:
        return (
            Status.FAILED,
            f"cannot list the node's pods: {explain(listed.call, listed.body)}",
            _why_failed(listed.call),
        )
    items = listed.body.get("items") if isinstance(listed.body, dict) else None
    pods, left = _sort_pods(items or [], drain)
    out = _evict_all(run, planned, pods, drain, deadline)
    if not run.settings.dry_run:
        _wait_gone(run, planned, out, deadline)
    text = _drain_text(out, left, len(pods), run.settings.dry_run)
    problems = _drain_problems(out, left, drain)
    # a drain that moved a pod (or had none to move) leaves the node's first-drain mark:
    # min_interval's clock, and what makes a later drain of the node its continuation
    started = bool(out.evicted or out.vanished) or not problems
    marks = changes.drain_marks(node, run.now) if started else None
    if marks is None and not problems and not pods and not out.vanished:
        return Status.SKIPPED, text, "nothing-to-evict"
    if marks is not None:
        error = _mark(run, planned, node, marks, run.settings.dry_run)
        if error is not None:
            text += f"; the drained-at mark was not written ({error})"
    if problems:
        why = "pdb-blocked" if out.blocked and not out.failed else _failed_why(out)
        return Status.FAILED, f"{text}; " + "; ".join(problems), why
    return _done_status(run.settings.dry_run), text, None


def _mark(run: _Run, planned: PlannedAction, node: NodeState, patch: JSON, dry: bool) -> str | None:
    """An annotation-only patch (no resourceVersion: maps merge, nothing to lose); the node
    after it becomes the node's state for its next action. The error in words, or None."""
    answer = run.record(planned, run.cluster.patch_node(node.name, patch, dry))
    if not answer.ok:
        return explain(answer.call, answer.body)
    run.node_after = _node_after(answer, node, dry)
    return None


def _drain_problems(out: _Eviction, left: Mapping[str, list[str]], drain: Drain) -> list[str]:
    problems = []
    if out.blocked:
        problems.append(
            f"{len(out.blocked)} still refused after {drain.timeout_s:g} s: "
            + "; ".join(f"{k} ({v})" for k, v in list(out.blocked.items())[:5])
        )
    if out.failed:
        problems.append(
            f"{len(out.failed)} failed: "
            + "; ".join(f"{k} ({v})" for k, v in list(out.failed.items())[:5])
        )
    if out.lingering:
        problems.append(
            f"{len(out.lingering)} evicted but still there after {drain.timeout_s:g} s: "
            f"{_refs(out.lingering)}"
        )
    if "no controller" in left:
        problems.append(
            "pods with no controller are not evicted (they would be lost for good): delete "
            "them yourself, or set drain: {force: true}"
        )
    return problems


def _failed_why(out: _Eviction) -> str:
    if any("403" in v for v in out.failed.values()):
        return "forbidden"
    return "eviction-failed" if out.failed else "drain-timeout"


# --- webhook


def webhook_body(planned: PlannedAction, cluster: str, now_s: float) -> JSON:
    finding = planned.finding
    return {
        "schema": "gpuwarden.remediation-event/1",
        "time": changes.iso(now_s),
        "cluster": cluster,
        "node": planned.node,
        "reason": reason_record(planned.reason),
        "finding": None
        if finding is None
        else {"title": finding.title, "source": finding.source, **dict(finding.labels)},
    }


def _webhook(
    run: _Run, planned: PlannedAction, hook: Webhook, node: NodeState
) -> tuple[Status, str, str | None]:
    body = webhook_body(planned, run.cluster.server, run.now)
    call = ApiCall("POST", hook.shown_url, (), body, at_s=run.now)
    if run.settings.dry_run:
        run.calls.append(replace(call, error="not sent: a webhook has no dry run"))
        return Status.PLANNED, f"POST {hook.shown_url} (not sent in a dry run)", None
    headers = {"Content-Type": "application/json", **dict(hook.headers)}
    request = Request(
        "POST",
        hook.url,
        headers,
        json.dumps(body).encode(),
        timeout_s=hook.timeout_s,
        max_bytes=1 << 20,
    )
    try:
        answer = send_with_retries(
            run.transport, request, run.settings.webhook_retry, sleep=run.sleep
        )
    except TransportError as exc:
        sent = run.record(planned, Answer(replace(call, error=exc.problem)))
        return Status.FAILED, f"POST {hook.shown_url}: {sent.call.error}", "webhook-failed"
    run.record(
        planned,
        Answer(
            replace(
                call, status=answer.status, error=None if answer.ok else f"HTTP {answer.status}"
            )
        ),
    )
    if not answer.ok:
        return (
            Status.FAILED,
            f"POST {hook.shown_url}: HTTP {answer.status} {answer.reason}".rstrip(),
            "webhook-failed",
        )
    assert planned.reason is not None
    key = changes.fingerprint(planned.reason.rule, hook, planned.finding)
    error = _mark(run, planned, node, changes.notified_patch(node, key, run.now), False)
    note = "" if error is None else f"; not recorded on the node ({error}): the next run sends it"
    return Status.APPLIED, f"POST {hook.shown_url}: HTTP {answer.status}{note}", None


# --- the run


def _one(run: _Run, planned: PlannedAction, node: NodeState) -> tuple[ActionResult, NodeState]:
    started = run.now
    run.calls = []
    run.node_after = None
    action = planned.action
    if run.progress is not None:
        run.progress(f"{planned.node}: {action.kind}")
    why: str | None
    match action:
        case Drain():
            status, detail, why = _drain(run, planned, action, node)
        case Webhook():
            status, detail, why = _webhook(run, planned, action, node)
        case Cordon() | Uncordon() | AddTaint() | SetLabels() | SetAnnotations():
            status, detail, why, node = _patch(run, planned, node, started)
    result = ActionResult(planned, status, detail, why, tuple(run.calls), started, run.now)
    run.audit.action(result)
    return result, run.node_after or node


def _passed(planned: PlannedAction) -> ActionResult:
    return ActionResult(planned, planned.status, planned.detail, planned.why)


def execute(
    plan: Plan,
    state: ClusterState,
    cluster: KubeCluster,
    audit: AuditLog,
    settings: ApplySettings,
    *,
    transport: Transport | None = None,
    sleep: Callable[[float], None] = time.sleep,
    progress: ProgressFn | None = None,
) -> tuple[ActionResult, ...]:
    """Run the plan's ``planned`` actions node by node, in order; a failed action stops its
    node's later actions (``skipped``); deferred and skipped actions pass through."""
    run = _Run(cluster, settings, audit, transport or default_transport(), sleep, progress)
    nodes = {n.name: n for n in state.nodes}
    failed: dict[str, str] = {}
    results: list[ActionResult] = []
    for planned in plan.actions:
        if planned.status is not Status.PLANNED or planned.node is None:
            results.append(_passed(planned))
            continue
        if planned.node in failed:
            result = ActionResult(
                planned,
                Status.SKIPPED,
                f"not run: the {failed[planned.node]} before it failed",
                "after-failure",
            )
            audit.action(result)
            results.append(result)
            continue
        result, nodes[planned.node] = _one(run, planned, nodes[planned.node])
        if result.status is Status.FAILED:
            failed[planned.node] = planned.action.kind
        results.append(result)
    return tuple(results)


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
            "tripped-at": changes.iso(now_s),
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


@contextmanager
def closing(cluster: KubeCluster) -> Iterator[KubeCluster]:
    try:
        yield cluster
    finally:
        close = getattr(cluster.api_client, "close", None)
        if callable(close):
            close()
