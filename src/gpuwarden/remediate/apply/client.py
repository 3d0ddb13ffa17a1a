"""The Kubernetes API through the official client: the only module of gpuwarden that imports
``kubernetes`` (and ``urllib3``, its HTTP library). Every request returns an ``Answer``; no HTTP
status raises. A ``403`` names the RBAC permission the credentials lack (``create pods/eviction``).
Every write carries ``?dryRun=All`` in a dry run, so admission and validation still run on the
server and nothing is stored (fleet.md §2.2); reads run as they are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from gpuwarden.errors import MissingExtraError
from gpuwarden.remediate.changes import JSON
from gpuwarden.remediate.model import ApiCall

DEFAULT_REQUEST_TIMEOUT_S = 30.0


def import_kubernetes() -> Any:
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


def api_message(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return ""


def explain(call: ApiCall, body: Any = None) -> str:
    """A failed call in words (the detail of a failed action)."""
    if call.status is None:
        return call.error or "no answer"
    said = api_message(body) or call.error or ""
    if call.status == 403:
        return (
            f"403 Forbidden: the credentials lack the RBAC permission "
            f"'{permission(call.method, call.path)}'" + (f" ({said})" if said else "")
        )
    if call.status == 401:
        return "401 Unauthorized: the API server did not accept the credentials"
    return f"HTTP {call.status}" + (f": {said}" if said else "")


def list_items(answer: Answer) -> list[Any] | None:
    """The ``items`` of a list answer (a NodeList, a PodList; ``null`` is Go's empty list), or
    None when the body is no Kubernetes list (a proxy's login page, a Status): read as "no
    items" it would hide every node, or every pod of a node to drain."""
    body = answer.body
    if not isinstance(body, dict):
        return None
    items = body.get("items")
    if isinstance(items, list):
        return items
    kind = body.get("kind")
    return [] if items is None and isinstance(kind, str) and kind.endswith("List") else None


def shown_answer(answer: Answer) -> str:
    """What came back instead of the expected object, in a few words."""
    body = answer.body
    if isinstance(body, dict) and isinstance(body.get("kind"), str):
        message = api_message(body)
        return f"a {body['kind'][:40]}" + (f" ({message[:200]})" if message else "")
    return f"{api_message(body)[:200]!r}" if api_message(body) else "no JSON object"


def why_failed(call: ApiCall) -> str:
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
    _coordination: Any = None

    @property
    def core(self) -> Any:
        if self._core is None:
            self._core = import_kubernetes().client.CoreV1Api(self.api_client)
        return self._core

    @property
    def coordination(self) -> Any:
        if self._coordination is None:
            self._coordination = import_kubernetes().client.CoordinationV1Api(self.api_client)
        return self._coordination

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
        kubernetes = import_kubernetes()
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
        error = None if 200 <= (status or 0) < 300 else api_message(parsed) or f"HTTP {status}"
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

    def read_lease(self, namespace: str, name: str) -> Answer:
        return self.request(
            "GET",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            self.coordination.read_namespaced_lease,
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

    def create_event(self, namespace: str, body: JSON, dry_run: bool) -> Answer:
        query, kwargs = self._dry(dry_run)
        return self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/events",
            self.core.create_namespaced_event,
            namespace,
            body,
            query=query,
            body=body,
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

    # the run's lock (a Lease): never a dry run, a dry run takes no lock

    def create_lease(self, namespace: str, body: JSON) -> Answer:
        return self.request(
            "POST",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            self.coordination.create_namespaced_lease,
            namespace,
            body,
            body=body,
        )

    def replace_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        """PUT: the body's ``metadata.resourceVersion`` makes it conditional (409 when stale)."""
        return self.request(
            "PUT",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            self.coordination.replace_namespaced_lease,
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


@contextmanager
def closing(cluster: KubeCluster) -> Iterator[KubeCluster]:
    try:
        yield cluster
    finally:
        close = getattr(cluster.api_client, "close", None)
        if callable(close):
            close()
