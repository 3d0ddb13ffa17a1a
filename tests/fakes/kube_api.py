"""A small fake Kubernetes API server, driven by the real clients (kubectl, the `kubernetes`
Python client) over real HTTP on 127.0.0.1 (fleet.md §1.4: no real API server runs on a CI-like
machine).

It keeps objects of any registered resource in memory and serves what those clients ask for:

* discovery: ``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>`` (with
  ``pods/eviction`` in ``policy/v1`` form, which ``kubectl drain`` checks for);
* ``/openapi/v2``: a JSON OpenAPI document built from the `kubernetes` Python client's models
  (themselves generated from Kubernetes' OpenAPI), so kubectl's client-side validation checks
  field names and types of the built-in kinds; custom resources are left open, as an API server
  with a schemaless CRD does;
* CRUD on collections and objects (GET/LIST with ``fieldSelector`` and ``labelSelector``,
  POST, PUT, PATCH as merge / strategic-merge / JSON patch, DELETE), ``resourceVersion`` bumps and
  ``409 Conflict`` on a stale one, ``?dryRun=All`` (validated and answered, nothing stored);
* ``POST .../pods/<name>/eviction`` (the pod goes away), and the DaemonSet lookups of drain;
* injectable failures: a status (429 from a PodDisruptionBudget, 403 from RBAC, 500, 404 for a
  vanished pod) or a delay for requests matching a method and a path pattern, a number of times;
* hooks: a function run when a request matches (another client deleting a pod between a list
  and an eviction, cordoning a node between a read and a patch), before the request is served;
* optimistic concurrency: a PUT, or a PATCH whose body names ``metadata.resourceVersion``, on a
  stale version answers ``409 Conflict`` (the API server's precondition).

Every request is recorded (method, path, query, body) for the tests to assert on.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


BUILTIN = (
    Resource("", "v1", "namespaces", "Namespace", False),
    Resource("", "v1", "nodes", "Node", False, ("status",)),
    Resource("", "v1", "pods", "Pod", True, ("eviction", "status")),
    Resource("", "v1", "services", "Service", True),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True),
    Resource("", "v1", "configmaps", "ConfigMap", True),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "events", "Event", True),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True, ("status",)),
    Resource("apps", "v1", "deployments", "Deployment", True, ("status",)),
    Resource("apps", "v1", "replicasets", "ReplicaSet", True),
    Resource("batch", "v1", "cronjobs", "CronJob", True, ("status",)),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    Resource("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", True),
    Resource("monitoring.coreos.com", "v1", "podmonitors", "PodMonitor", True),
    Resource("monitoring.coreos.com", "v1", "prometheusrules", "PrometheusRule", True),
)


@dataclass(slots=True)
class Failure:
    """Answer ``status`` (after ``delay_s``) to the next ``times`` requests whose method matches
    and whose path matches ``path`` (a regex, searched); status 0 = only the delay."""

    method: str
    path: str
    status: int
    times: int = 1
    reason: str = ""
    message: str = ""
    delay_s: float = 0.0
    # the wait the server asks for: Status details.retryAfterSeconds, as the API server's
    # NewTooManyRequests sets it (the real server also sends it as Retry-After)
    retry_after_s: int | None = None


@dataclass(slots=True)
class Hook:
    """Run ``action(fake)`` for the next ``times`` requests matching ``method`` and ``path``
    (a regex, searched), before the request is served."""

    method: str
    path: str
    action: Callable[[FakeKubeApi], None]
    times: int = 1


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    content_type: str | None


@dataclass(slots=True)
class _Store:
    objects: dict[tuple[str, str, str, str], JSON] = field(default_factory=dict)
    revision: int = 1


class FakeKubeApi:
    """Start with ``with FakeKubeApi() as api:``; ``api.url``, ``api.write_kubeconfig(path)``."""

    def __init__(self, resources: tuple[Resource, ...] = BUILTIN, git_version: str = "v1.32.4"):
        self.resources = resources
        self.git_version = git_version
        self.requests: list[Request] = []
        self.failures: list[Failure] = []
        self.hooks: list[Hook] = []
        self._store = _Store()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._openapi: JSON | None = None

    # --- lifecycle

    def __enter__(self) -> FakeKubeApi:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        api = self

        class Handler(_Handler):
            fake = api

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        server = self._server
        # stop() waits for the serving loop's next poll: 0.5 s by default, for every test
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.05), daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path

    # --- state

    def fail(self, method: str, path: str, status: int, **kwargs: Any) -> Failure:
        failure = Failure(method.upper(), path, status, **kwargs)
        with self._lock:
            self.failures.append(failure)
        return failure

    def on(
        self, method: str, path: str, action: Callable[[FakeKubeApi], None], times: int = 1
    ) -> Hook:
        hook = Hook(method.upper(), path, action, times)
        with self._lock:
            self.hooks.append(hook)
        return hook

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "") -> bool:
        """Remove an object as another client would; False when it was not there."""
        resource = self.resource_of_kind(api_version, kind)
        key = (resource.group_version, resource.plural, namespace, name)
        with self._lock:
            return self._store.objects.pop(key, None) is not None

    def update(
        self, api_version: str, kind: str, name: str, change: Callable[[JSON], None]
    ) -> JSON:
        """Change a cluster-scoped or default-namespace object in place as another client would
        (a new resourceVersion)."""
        resource = self.resource_of_kind(api_version, kind)
        namespace = "default" if resource.namespaced else ""
        key = (resource.group_version, resource.plural, namespace, name)
        with self._lock:
            obj = self._store.objects[key]
            change(obj)
            self._store.revision += 1
            obj["metadata"]["resourceVersion"] = str(self._store.revision)
            return copy.deepcopy(obj)

    def put(self, obj: JSON) -> JSON:
        """Store ``obj`` as the server would have created it."""
        resource = self.resource_of_kind(obj["apiVersion"], obj["kind"])
        meta = obj.setdefault("metadata", {})
        with self._lock:
            stored = self._created(
                resource, meta.get("namespace", "") if resource.namespaced else "", obj
            )
            self._store.objects[self._key(resource, stored)] = stored
        return copy.deepcopy(stored)

    def add_node(self, name: str, *, labels: dict[str, str] | None = None, **spec: Any) -> JSON:
        return self.put(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": spec,
            }
        )

    def add_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        *,
        owner: tuple[str, str] | None = ("ReplicaSet", "trainer"),
        volumes: list[JSON] | None = None,
        phase: str = "Running",
    ) -> JSON:
        meta: JSON = {"name": name, "namespace": namespace}
        if owner is not None:
            kind, owner_name = owner
            group = "apps/v1" if kind in ("ReplicaSet", "DaemonSet", "StatefulSet") else "v1"
            meta["ownerReferences"] = [
                {
                    "apiVersion": group,
                    "kind": kind,
                    "name": owner_name,
                    "uid": f"uid-{owner_name}",
                    "controller": True,
                }
            ]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "image": "busybox"}],
                "volumes": volumes or [],
            },
            "status": {"phase": phase},
        }
        return self.put(pod)

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> JSON | None:
        resource = self.resource_of_kind(api_version, kind)
        with self._lock:
            found = self._store.objects.get(
                (resource.group_version, resource.plural, namespace, name)
            )
            return copy.deepcopy(found) if found else None

    def objects(self, api_version: str, kind: str) -> list[JSON]:
        resource = self.resource_of_kind(api_version, kind)
        with self._lock:
            return [
                copy.deepcopy(o)
                for (gv, plural, _, _), o in self._store.objects.items()
                if (gv, plural) == (resource.group_version, resource.plural)
            ]

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]

    def resource_of_kind(self, api_version: str, kind: str) -> Resource:
        for r in self.resources:
            if r.group_version == api_version and r.kind == kind:
                return r
        raise KeyError(f"{api_version} {kind} is not served by the fake")

    # --- internals used by the handler

    def _key(self, resource: Resource, obj: JSON) -> tuple[str, str, str, str]:
        meta = obj["metadata"]
        ns = meta.get("namespace", "") if resource.namespaced else ""
        return (resource.group_version, resource.plural, ns, meta["name"])

    def _created(self, resource: Resource, namespace: str, obj: JSON) -> JSON:
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        if resource.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        meta.setdefault("uid", f"uid-{meta.get('name')}-{self._store.revision}")
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self._store.revision += 1
        meta["resourceVersion"] = str(self._store.revision)
        stored.setdefault("apiVersion", resource.group_version)
        stored.setdefault("kind", resource.kind)
        return stored

    def _match_hooks(self, method: str, path: str) -> list[Hook]:
        with self._lock:
            found = [
                h
                for h in self.hooks
                if h.times > 0 and h.method in (method, "*") and re.search(h.path, path)
            ]
            for hook in found:
                hook.times -= 1
        return found

    def _match_failure(self, method: str, path: str) -> Failure | None:
        with self._lock:
            for f in self.failures:
                if f.times > 0 and f.method in (method, "*") and re.search(f.path, path):
                    f.times -= 1
                    return f
        return None

    def openapi_v3_index(self) -> JSON:
        paths = {}
        for gv in dict.fromkeys(r.group_version for r in self.resources):
            prefix = "api/v1" if gv == "v1" else f"apis/{gv}"
            paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash=fake"}
        return {"paths": paths}

    def openapi_v3(self, prefix: str) -> bytes | None:
        gv = "v1" if prefix == "api/v1" else prefix.removeprefix("apis/")
        served = tuple(r for r in self.resources if r.group_version == gv)
        if not served:
            return None
        if self._openapi is None:
            self._openapi = openapi_v3(self.resources)
        return json.dumps({**self._openapi, "paths": _paths(served)}).encode()


# --- the OpenAPI v2 document, from the kubernetes client's generated models


def _model_ref(type_name: str) -> JSON:
    """A `kubernetes` client model's type string → an OpenAPI schema."""
    t = type_name.strip()
    if t[:5].lower() == "list[":
        return {"type": "array", "items": _model_ref(t[5:-1])}
    if t[:5].lower() == "dict(":
        inner = t[5:-1].split(",", 1)[1]
        return {"type": "object", "additionalProperties": _model_ref(inner)}
    simple = {"str": "string", "int": "integer", "bool": "boolean", "float": "number"}
    if t in simple:
        return {"type": simple[t]}
    if t == "datetime":
        return {"type": "string", "format": "date-time"}
    if t == "object":
        return {}
    return {"$ref": f"#/components/schemas/{t}"}


def _models() -> Iterator[tuple[str, type]]:
    from kubernetes.client import models  # the generated models: Kubernetes' own schema

    for name in dir(models):
        cls = getattr(models, name)
        if (
            isinstance(cls, type)
            and hasattr(cls, "openapi_types")
            and hasattr(cls, "attribute_map")
        ):
            yield name, cls


def _definition(cls: type) -> JSON:
    types: dict[str, str] = cls.openapi_types  # type: ignore[attr-defined]
    names: dict[str, str] = cls.attribute_map  # type: ignore[attr-defined]
    props = {names[attr]: _model_ref(t) for attr, t in types.items()}
    # IntOrString fields (ports, maxUnavailable) are "object" in the client: leave them open.
    return {"type": "object", "properties": props}


_GVK_MODEL = re.compile(r"^V1([A-Z]\w*)$")


def openapi_v3(resources: tuple[Resource, ...]) -> JSON:
    """One document for every group-version (kubectl finds a kind by its GVK extension)."""
    schemas: JSON = {}
    for name, cls in _models():
        schemas[name] = _definition(cls)
    for r in resources:
        model = f"V1{r.kind}"
        if model in schemas:
            schemas[model]["x-kubernetes-group-version-kind"] = [
                {"group": r.group, "version": r.version, "kind": r.kind}
            ]
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (fake)", "version": "v1.32.4"},
        "paths": {},
        "components": {"schemas": schemas},
    }


def _paths(resources: tuple[Resource, ...]) -> JSON:
    """An object path per resource whose PATCH takes ``fieldValidation``: kubectl reads it as
    "this server validates fields itself" and sends ``fieldValidation=Strict``."""
    paths: JSON = {}
    for r in resources:
        base = "/api/v1" if not r.group else f"/apis/{r.group_version}"
        ns = "/namespaces/{namespace}" if r.namespaced else ""
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        operation = {
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
            ],
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"{base}{ns}/{r.plural}/{{name}}"] = {"patch": operation, "put": operation}
        paths[f"{base}{ns}/{r.plural}"] = {"post": operation}
    return paths


def unknown_fields(obj: Any, model: str, where: str = "") -> list[str]:
    """The fields of ``obj`` that Kubernetes' schema of ``model`` (a `kubernetes` client model
    name, V1DaemonSet) does not have, as the API server's strict decoding names them."""
    from kubernetes.client import models

    cls = getattr(models, model, None)
    if cls is None or not isinstance(obj, dict):
        return []
    by_json = {cls.attribute_map[a]: t for a, t in cls.openapi_types.items()}
    found: list[str] = []
    for key, value in obj.items():
        if key not in by_json:
            found.append(f'unknown field "{where}{key}"')
            continue
        found += _unknown_in(value, by_json[key].strip(), f"{where}{key}")
    return found


def _unknown_in(value: Any, type_name: str, where: str) -> list[str]:
    lowered = type_name[:5].lower()  # newer clients write List[...] / Dict(...)
    if lowered == "list[" and isinstance(value, list):
        inner = type_name[5:-1]
        return [e for i, v in enumerate(value) for e in _unknown_in(v, inner, f"{where}[{i}]")]
    if lowered == "dict(" and isinstance(value, dict):
        inner = type_name[5:-1].split(",", 1)[1].strip()
        return [e for k, v in value.items() for e in _unknown_in(v, inner, f"{where}.{k}")]
    if type_name.startswith("V1"):
        return unknown_fields(value, type_name, f"{where}.")
    return []


# --- HTTP


def _status(code: int, reason: str, message: str, details: JSON | None = None) -> JSON:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }


_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeKubeApi
    protocol_version = "HTTP/1.1"
    # headers and body leave in two writes: without TCP_NODELAY the body waits for the client's
    # delayed ACK (40 ms a request on Linux)
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    # -- plumbing

    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(
        self, code: int, message: str, reason: str | None = None, details: JSON | None = None
    ) -> None:
        self._send(code, _status(code, reason or _REASONS.get(code, "Unknown"), message, details))

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
        self.fake.requests.append(
            Request(method, parts.path, query, body, self.headers.get("Content-Type"))
        )
        for hook in self.fake._match_hooks(method, parts.path):
            hook.action(self.fake)
        failure = self.fake._match_failure(method, parts.path)
        if failure is not None:
            if failure.delay_s:
                time.sleep(failure.delay_s)
            if failure.status:
                wait = failure.retry_after_s
                self._error(
                    failure.status,
                    failure.message or f"injected {failure.status}",
                    failure.reason or None,
                    None if wait is None else {"retryAfterSeconds": wait},
                )
                return
        try:
            self._route(method, parts.path.rstrip("/") or "/", query, body)
        except _HttpError as exc:
            self._error(exc.code, exc.message, exc.reason, exc.details)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- routing

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        fake = self.fake
        if method == "GET" and path == "/version":
            self._send(
                200,
                {
                    "major": "1",
                    "minor": "32",
                    "gitVersion": fake.git_version,
                    "platform": "linux/amd64",
                },
            )
            return
        if method == "GET" and path == "/openapi/v2":
            # kubectl asks for the protobuf form only; v3 (JSON) is what it validates with
            raise _HttpError(404, "the fake serves OpenAPI v3 only")
        if method == "GET" and path == "/openapi/v3":
            self._send(200, fake.openapi_v3_index())
            return
        if method == "GET" and path.startswith("/openapi/v3/"):
            doc = fake.openapi_v3(path.removeprefix("/openapi/v3/"))
            if doc is None:
                raise _HttpError(404, f"no OpenAPI document for {path}")
            self._send(200, doc)
            return
        if method == "GET" and path == "/api":
            self._send(
                200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
            )
            return
        if method == "GET" and path == "/apis":
            self._send(200, self._group_list())
            return
        if method == "GET" and (path == "/api/v1" or re.fullmatch(r"/apis/[^/]+/[^/]+", path)):
            gv = "v1" if path == "/api/v1" else path.removeprefix("/apis/")
            listing = self._resource_list(gv)
            if listing is None:
                raise _HttpError(404, f"the server could not find the requested resource ({path})")
            self._send(200, listing)
            return
        target = self._parse(path)
        if target is None:
            raise _HttpError(404, f"the server could not find the requested resource ({path})")
        self._serve(method, target, query, body)

    def _group_list(self) -> JSON:
        groups: dict[str, list[str]] = {}
        for r in self.fake.resources:
            if r.group:
                groups.setdefault(r.group, [])
                if r.version not in groups[r.group]:
                    groups[r.group].append(r.version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in versions],
                    "preferredVersion": {
                        "groupVersion": f"{g}/{versions[0]}",
                        "version": versions[0],
                    },
                }
                for g, versions in groups.items()
            ],
        }

    def _resource_list(self, group_version: str) -> JSON | None:
        served = [r for r in self.fake.resources if r.group_version == group_version]
        if not served:
            return None
        items: list[JSON] = []
        for r in served:
            items.append(
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                }
            )
            for sub in r.subresources:
                if sub == "eviction":
                    items.append(
                        {
                            "name": f"{r.plural}/eviction",
                            "namespaced": True,
                            "group": "policy",
                            "version": "v1",
                            "kind": "Eviction",
                            "verbs": ["create"],
                        }
                    )
                else:
                    items.append(
                        {
                            "name": f"{r.plural}/{sub}",
                            "namespaced": r.namespaced,
                            "kind": r.kind,
                            "verbs": ["get", "patch", "update"],
                        }
                    )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": items,
        }

    def _parse(self, path: str) -> tuple[Resource, str, str | None, str | None] | None:
        """path → (resource, namespace, name, subresource)."""
        m = re.fullmatch(r"/api/v1/(.*)", path) or re.fullmatch(r"/apis/([^/]+/[^/]+)/(.*)", path)
        if m is None:
            return None
        if path.startswith("/api/v1/"):
            gv, rest = "v1", m.group(1)
        else:
            gv, rest = m.group(1), m.group(2)
        segments = rest.split("/")
        namespace = ""
        if segments[0] == "namespaces" and len(segments) >= 3:
            namespace, segments = segments[1], segments[2:]
        plural = segments[0]
        name = segments[1] if len(segments) > 1 else None
        sub = segments[2] if len(segments) > 2 else None
        for r in self.fake.resources:
            if r.group_version == gv and r.plural == plural:
                return r, namespace, name, sub
        return None

    def _serve(
        self,
        method: str,
        target: tuple[Resource, str, str | None, str | None],
        query: dict[str, list[str]],
        body: Any,
    ) -> None:
        resource, namespace, name, sub = target
        dry_run = "All" in query.get("dryRun", [])
        fake = self.fake
        with fake._lock:
            store = fake._store
            if name is None:
                if method == "GET":
                    self._send(200, self._list(resource, namespace, query))
                    return
                if method == "POST":
                    self._create(resource, namespace, body, dry_run)
                    return
                raise _HttpError(405, f"{method} on a collection")
            key = (
                resource.group_version,
                resource.plural,
                namespace if resource.namespaced else "",
                name,
            )
            current = store.objects.get(key)
            if sub == "eviction" and method == "POST":
                if current is None:
                    raise _HttpError(
                        404, f'pods "{name}" not found', {"name": name, "kind": "pods"}
                    )
                if not dry_run:
                    del store.objects[key]
                self._send(
                    201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
                )
                return
            if current is None and method != "PUT":
                raise _HttpError(
                    404,
                    f'{resource.plural} "{name}" not found',
                    {"name": name, "kind": resource.plural},
                )
            if method == "GET":
                self._send(200, current)
                return
            if method == "DELETE":
                if not dry_run:
                    del store.objects[key]
                self._send(200, current)
                return
            if method in ("PUT", "PATCH"):
                self._update(resource, key, current, method, body, dry_run)
                return
        raise _HttpError(405, f"{method} not supported")

    def _list(self, resource: Resource, namespace: str, query: dict[str, list[str]]) -> JSON:
        fields = _selector(query.get("fieldSelector", [""])[0])
        labels = _selector(query.get("labelSelector", [""])[0])
        items = []
        for (gv, plural, ns, _), obj in sorted(self.fake._store.objects.items()):
            if (gv, plural) != (resource.group_version, resource.plural):
                continue
            if namespace and ns != namespace:
                continue
            if not all(_field(obj, k) == v for k, v in fields.items()):
                continue
            obj_labels = obj.get("metadata", {}).get("labels") or {}
            if not all(obj_labels.get(k) == v for k, v in labels.items()):
                continue
            items.append(obj)
        return {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.group_version,
            "metadata": {"resourceVersion": str(self.fake._store.revision)},
            "items": items,
        }

    def _create(self, resource: Resource, namespace: str, body: Any, dry_run: bool) -> None:
        if not isinstance(body, dict) or "metadata" not in body or not body["metadata"].get("name"):
            raise _HttpError(422, f"{resource.kind} is invalid: metadata.name: Required value")
        if body.get("kind") not in (None, resource.kind):
            raise _HttpError(400, f"kind {body.get('kind')!r} posted to {resource.plural}")
        self._validate(resource, body)
        obj = self.fake._created(resource, namespace, body)
        key = self.fake._key(resource, obj)
        if key in self.fake._store.objects:
            raise _HttpError(
                409,
                f'{resource.plural} "{obj["metadata"]["name"]}" already exists',
                None,
                "AlreadyExists",
            )
        if not dry_run:
            self.fake._store.objects[key] = obj
        self._send(201, obj)

    def _validate(self, resource: Resource, obj: JSON) -> None:
        """``fieldValidation=Strict`` (what kubectl sends): unknown fields are an error, as the
        API server's strict decoding makes them; custom resources have no schema here."""
        query = parse_qs(urlsplit(self.path).query)
        if query.get("fieldValidation", ["Strict"])[0] != "Strict":
            return
        problems = unknown_fields(
            {k: v for k, v in obj.items() if k != "status"}, f"V1{resource.kind}"
        )
        if problems:
            raise _HttpError(
                400,
                f"{resource.kind} in version {resource.version!r} cannot be handled: "
                f"strict decoding error: {', '.join(problems)}",
                reason="BadRequest",
            )

    def _update(
        self,
        resource: Resource,
        key: tuple[str, str, str, str],
        current: JSON | None,
        method: str,
        body: Any,
        dry_run: bool,
    ) -> None:
        if method == "PUT":
            if not isinstance(body, dict):
                raise _HttpError(400, "a PUT needs a JSON object")
            updated = copy.deepcopy(body)
        else:
            assert current is not None
            updated = _patched(current, body, self.headers.get("Content-Type") or "")
        self._validate(resource, updated)
        sent_version = (updated.get("metadata") or {}).get("resourceVersion")
        if (
            current is not None
            and sent_version
            and sent_version != current["metadata"]["resourceVersion"]
        ):
            raise _HttpError(
                409,
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
                None,
                "Conflict",
            )
        if current is None:
            updated = self.fake._created(resource, key[2], updated)
        else:
            self.fake._store.revision += 1
            updated.setdefault("metadata", {})["resourceVersion"] = str(self.fake._store.revision)
            for keep in ("uid", "creationTimestamp", "name", "namespace"):
                if keep in current["metadata"]:
                    updated["metadata"][keep] = current["metadata"][keep]
        if not dry_run:
            self.fake._store.objects[key] = updated
        self._send(200 if current is not None else 201, updated)


class _HttpError(Exception):
    def __init__(
        self, code: int, message: str, details: JSON | None = None, reason: str | None = None
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.reason = reason


def _selector(text: str) -> dict[str, str]:
    """``a=b,c==d`` → {a: b, c: d} (equality selectors: what kubectl and the clients send)."""
    found: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.replace("==", "=").partition("=")
        found[key.strip()] = value.strip()
    return found


def _field(obj: JSON, dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic merge patches are applied the same way: lists are
    replaced, which is what cordon, taint, label and annotate send)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # strategic-merge directives
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def _json_patch(target: JSON, ops: list[JSON]) -> JSON:
    result = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent: Any = result
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                else:
                    parent.insert(int(last), op["value"]) if op[
                        "op"
                    ] == "add" else parent.__setitem__(int(last), op["value"])
            else:
                parent[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            else:
                parent.pop(last, None)
        elif op["op"] == "test":
            value = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if value != op["value"]:
                raise _HttpError(422, f"test of {op['path']} failed")
    return result


def _patched(current: JSON, body: Any, content_type: str) -> JSON:
    if "json-patch" in content_type:
        if not isinstance(body, list):
            raise _HttpError(400, "a JSON patch is a list of operations")
        return _json_patch(current, body)
    if "merge-patch" in content_type or "apply-patch" in content_type:
        if not isinstance(body, dict):
            raise _HttpError(400, "a merge patch is a JSON object")
        return _merge(current, body)
    raise _HttpError(415, f"unsupported patch type {content_type!r}")
