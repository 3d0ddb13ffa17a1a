"""Kubernetes manifests of remediation: `gpuwarden remediate` as one CronJob, with exactly the
RBAC its API calls need.

Every ``concurrencyPolicy: Forbid`` schedule runs one Job of one pod: an init container writes
`gpuwarden fleet report --json` for the last ``window`` into an emptyDir, then the main container
runs `gpuwarden remediate` on it under the policy mounted from a Secret: a policy's webhooks carry
their receivers' credentials (a Slack or Teams incoming-webhook URL is one, an Authorization
header another), which is why the Prometheus Operator keeps Alertmanager's configuration in a
Secret too. A dry run (every write sent with ``dryRun=All``) until the user opts in with ``apply``.

What the pod may do, derived from ``gpuwarden.remediate.apply`` (client.py's requests) and checked
by the tests against every request a real drain sends:

* cluster-wide (a ClusterRole): ``nodes`` get/list/patch, ``pods`` get/list, ``pods/eviction``
  create — see ``CLUSTER_RULES``;
* in the circuit breaker's namespace only (a Role): its ConfigMap get/patch, and configmaps
  create; the run lock's Lease (the same name) get/update, and leases create — see
  ``state_rules``;
* in ``default`` only (a Role; the breaker's Role when the breaker lives there): events create,
  the Event on each node it acts on (where Kubernetes records a node's events) — see
  ``EVENT_RULE``;
* nothing else: no delete, no update but the Lease's, no watch, no Secrets. A dry run needs the
  same verbs (the API server authorises a ``dryRun=All`` write as the write itself).

Only the main container holds the ServiceAccount's token (a projected volume, the one the API
server would inject): the init container talks to Prometheus alone, and a token it cannot read
cannot drain the fleet. The pod runs as an unprivileged user with a read-only root filesystem,
every capability dropped, no privilege escalation and the RuntimeDefault seccomp profile.

The stream starts with the Namespaces it uses (its own and the breaker's), so that `kubectl
apply` works on a fresh cluster. The pod meets Pod Security's "restricted" level (a non-root
user, only emptyDir / Secret / projected / PVC volumes, every capability dropped, RuntimeDefault
seccomp), so a namespace of its own enforces "restricted". The exporter's default namespace is
the exception: remediation shares it by default, and there its Namespace is the exporter's, label
for label ("privileged"), because `kubectl apply` of a Namespace rewrites the labels the last
apply set — a "restricted" one would make the exporter's next pod be refused.

A failed run is not retried (``backoffLimit: 0``): the next schedule reads the fleet again and
decides anew, which a blind retry of a stale decision would not.
"""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass
from typing import Any

from gpuwarden import __version__
from gpuwarden.deploy.k8s import (
    NOBODY,
    K8sOptions,
    container_security,
    labels,
    metadata,
    namespace,
    pod_security,
)
from gpuwarden.errors import InputError
from gpuwarden.types.kubernetes import NODE_EVENTS_NAMESPACE
from gpuwarden.units import whole_number

NAME = "gpuwarden-remediate"
COMPONENT = "remediate"
POD_SECURITY = "restricted"  # the level the CronJob's pod meets
EXPORTER = K8sOptions()  # the exporter's defaults: its namespace and that namespace's level
POLICY_SECRET = "gpuwarden-remediate-policy"
POLICY_DIR = "/etc/gpuwarden"
POLICY_KEY = "policy.yaml"
WORK_DIR = "/var/run/gpuwarden"  # the emptyDir the init container writes the findings into
FINDINGS_FILE = f"{WORK_DIR}/fleet.json"
AUDIT_DIR = "/var/log/gpuwarden"  # the persistentVolumeClaim's mount, with an audit claim
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # where the client's in-cluster
# config reads token and ca.crt (kubernetes.config.incluster_config)

# Kubernetes' own defaults for the projected token (the ServiceAccount admission plugin).
TOKEN_EXPIRATION_S = 3607
STARTING_DEADLINE_S = 300  # a start delayed past this waits for the next schedule
DEFAULT_RUN_DEADLINE_S = 3600  # a run: the fleet report, then every action with its drains
# A run's deadline beyond its longest drain: the fleet report (fleet report --timeout's 120 s a
# query, retried) and the node patches around the drain.
RUN_MARGIN_S = 600
SUCCESSFUL_JOBS_KEPT = 3
FAILED_JOBS_KEPT = 5  # a failed run is what a person comes to read
# fleet report over 1,000 GPUs x 24 h: 24 MiB above start (benchmarks/fleet.py); remediate over
# 1,000 nodes holds the node list (tens of MiB of JSON as Python objects).
FLEET_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
REMEDIATE_RESOURCES = {
    "requests": {"cpu": "100m", "memory": "128Mi"},
    "limits": {"memory": "512Mi"},
}

# Each rule names the requests of gpuwarden.remediate.apply.client that need it.
CLUSTER_RULES: tuple[dict[str, Any], ...] = (
    # list_nodes (the plan's view of the cluster); read_node (a 409 Conflict reads it again);
    # patch_node (cordon, taint, label, annotate, uncordon, and the marks of what was done)
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    # pods_on (a node's pods in every namespace); read_pod (waiting for evicted pods to go)
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    # evict: the Eviction API, which honours PodDisruptionBudgets (never a plain delete)
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
)


EVENT_RULE: dict[str, Any] = {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}


def state_rules(config_map: str) -> list[dict[str, Any]]:
    """The circuit breaker's ConfigMap: read_config_map and patch_config_map name it;
    create_config_map cannot (RBAC knows no name before an object exists), so create is granted
    on configmaps of that one namespace. The run lock, a Lease of the same name: read_lease and
    replace_lease (a conditional PUT) name it, create_lease cannot."""
    return [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [config_map],
            "verbs": ["get", "patch"],
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [config_map],
            "verbs": ["get", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]


def run_deadline_s(longest_drain_s: float) -> int:
    """Long enough for the policy's longest drain and the fleet report before it."""
    return max(DEFAULT_RUN_DEADLINE_S, math.ceil(longest_drain_s) + RUN_MARGIN_S)


@dataclass(frozen=True, slots=True)
class RemediateK8sOptions:
    prometheus_url: str
    policy_text: str  # validated by the caller with remediate's own parser
    state_namespace: str = "gpuwarden"  # the policy's state: where the breaker's ConfigMap is
    state_config_map: str = "gpuwarden-remediate"
    namespace: str = "gpuwarden"
    image: str = f"gpuwarden:{__version__}"
    schedule: str = "*/10 * * * *"
    window: str = "1h"  # fleet report --range
    apply: bool = False  # False: every run is a server-side dry run
    audit_claim: str | None = None  # a PersistentVolumeClaim for the audit log; None: stderr
    run_deadline_s: int = DEFAULT_RUN_DEADLINE_S


# --- the schedule

# robfig/cron's standard parser (what the CronJob controller uses): its field bounds and names.
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_Field = tuple[str, int, int, tuple[str, ...]]  # name, lowest, highest, names from lowest
_FIELDS: tuple[_Field, ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _WEEKDAYS),
)
MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_TERM = re.compile(r"^(?P<range>\*|\?|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/(?P<step>[0-9]+))?$")


_MAX_DIGITS = 18  # robfig/cron reads numbers with Go's strconv.Atoi (int64): 19 digits overflow


def _number(text: str) -> int | None:
    """A decimal the controller can read; None past int64 (and int() refuses 4300 digits)."""
    return whole_number(text, max_digits=_MAX_DIGITS)


def _bound(text: str, low: int, high: int, names: tuple[str, ...]) -> int | None:
    if text.upper() in names:
        return names.index(text.upper()) + low
    value = _number(text)
    return value if value is not None and low <= value <= high else None


def _term_problem(term: str, field: _Field) -> str | None:
    what, low, high, names = field
    match = _TERM.match(term)
    if match is None:
        return f"{what} {term!r} is not a value, a range or a step"
    step = match.group("step")
    if step is not None and _number(step) is None:
        return f"{what} {term!r}: a step that is not a number"
    if step is not None and _number(step) == 0:
        return f"{what} {term!r}: a step of 0"
    span = match.group("range")
    if span in ("*", "?"):
        return None
    ends = [_bound(end, low, high, names) for end in span.split("-")]
    bounds = [end for end in ends if end is not None]
    if len(bounds) < len(ends):
        return f"{what} {term!r}: not a value from {low} to {high}"
    if bounds != sorted(bounds):
        return f"{what} {term!r}: a range that runs backwards"
    return None


def schedule_problem(schedule: str) -> str | None:
    """Why the CronJob controller would refuse ``schedule``, or None."""
    text = schedule.strip()
    if text.startswith("@"):
        return None if text in MACROS else f"{text!r} is not one of {', '.join(MACROS)}"
    if "TZ=" in text:
        return "a time zone in the schedule (the CronJob's timeZone field is UTC)"
    fields = text.split()
    if len(fields) != len(_FIELDS):
        return f"{len(fields)} field(s), not 5 (minute hour day-of-month month day-of-week)"
    for value, field in zip(fields, _FIELDS, strict=True):
        for term in value.split(","):
            problem = _term_problem(term, field)
            if problem is not None:
                return problem
    return None


def check_schedule(schedule: str) -> str:
    """``schedule`` as given, or an InputError saying why the CronJob would refuse it."""
    problem = schedule_problem(schedule)
    if problem is not None:
        raise InputError(
            f"the schedule {schedule!r} is not a cron schedule: {problem}",
            reference="cron-schedule-invalid",
            hint="five fields, e.g. '*/10 * * * *' (every 10 minutes), or a macro like @hourly",
        )
    return schedule.strip()


# --- the objects


def _meta(o: RemediateK8sOptions, name: str = NAME) -> dict[str, Any]:
    return {**metadata(NAME, o.namespace, COMPONENT), "name": name}  # one app's labels on all


def service_account(o: RemediateK8sOptions) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(o),
        "automountServiceAccountToken": False,  # the main container mounts it itself
    }


_RBAC = "rbac.authorization.k8s.io"


def _rbac(kind: str, namespace: str | None, **body: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{_RBAC}/v1",
        "kind": kind,
        "metadata": metadata(NAME, namespace, COMPONENT),
        **body,
    }


def _binding(o: RemediateK8sOptions, role_kind: str, namespace: str | None) -> dict[str, Any]:
    """The ServiceAccount bound to the role of that kind (a Role in ``namespace``)."""
    return _rbac(
        f"{role_kind}Binding",
        namespace,
        roleRef={"apiGroup": _RBAC, "kind": role_kind, "name": NAME},
        subjects=[{"kind": "ServiceAccount", "name": NAME, "namespace": o.namespace}],
    )


def cluster_role(o: RemediateK8sOptions) -> dict[str, Any]:
    return _rbac("ClusterRole", None, rules=[dict(rule) for rule in CLUSTER_RULES])


def cluster_role_binding(o: RemediateK8sOptions) -> dict[str, Any]:
    return _binding(o, "ClusterRole", None)


def namespace_rules(o: RemediateK8sOptions) -> dict[str, list[dict[str, Any]]]:
    """By namespace, what the ServiceAccount may do there: one Role each."""
    rules: dict[str, list[dict[str, Any]]] = {o.state_namespace: state_rules(o.state_config_map)}
    rules.setdefault(NODE_EVENTS_NAMESPACE, []).append(dict(EVENT_RULE))
    return rules


def roles(o: RemediateK8sOptions) -> list[dict[str, Any]]:
    """Each namespaced Role, then its RoleBinding."""
    out = []
    for where, rules in namespace_rules(o).items():
        out += [_rbac("Role", where, rules=rules), _binding(o, "Role", where)]
    return out


def policy_secret(o: RemediateK8sOptions) -> dict[str, Any]:
    """Mounted by the kubelet: the ServiceAccount itself may read no Secret."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _meta(o, POLICY_SECRET),
        "data": {POLICY_KEY: base64.b64encode(o.policy_text.encode()).decode("ascii")},
    }


def _audit_log(o: RemediateK8sOptions) -> str:
    # stderr is the container's log: the cluster's log collection keeps it past the pod
    return "/dev/stderr" if o.audit_claim is None else f"{AUDIT_DIR}/remediate.jsonl"


def fleet_report_command(o: RemediateK8sOptions) -> list[str]:
    """The fleet report's document into the emptyDir (--output writes it whole or not at all:
    remediate never reads half a file); no shell, so a distroless image works."""
    return [
        "gpuwarden", "fleet", "report", "--prometheus", o.prometheus_url, "--range", o.window,
        "--output", FINDINGS_FILE,
    ]  # fmt: skip


def remediate_command(o: RemediateK8sOptions) -> list[str]:
    command = ["gpuwarden", "remediate", "--policy", f"{POLICY_DIR}/{POLICY_KEY}"]
    command += ["--findings", FINDINGS_FILE]
    if o.apply:
        command.append("--apply")
    return [*command, "--audit-log", _audit_log(o), "--json"]


def _env() -> list[dict[str, Any]]:
    return [
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # the root filesystem is read-only
        # an empty home: no kubeconfig in the image can win over the in-cluster config
        {"name": "HOME", "value": WORK_DIR},
    ]


def _container(
    name: str,
    o: RemediateK8sOptions,
    command: list[str],
    resources: dict[str, Any],
    mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "name": name,
        "image": o.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": _env(),
        "resources": resources,
        "securityContext": container_security(NOBODY),
        "volumeMounts": mounts,
    }


def _main_mounts(o: RemediateK8sOptions) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": "work", "mountPath": WORK_DIR, "readOnly": True},
        {"name": "policy", "mountPath": POLICY_DIR, "readOnly": True},
        {"name": "token", "mountPath": TOKEN_DIR, "readOnly": True},
    ]
    if o.audit_claim is not None:
        mounts.append({"name": "audit", "mountPath": AUDIT_DIR})
    return mounts


def _token_volume() -> dict[str, Any]:
    """The projected volume the API server injects into pods that automount their token."""
    return {
        "name": "token",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_EXPIRATION_S}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ]
        },
    }


def _volumes(o: RemediateK8sOptions) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [
        {"name": "work", "emptyDir": {"sizeLimit": "64Mi"}},  # a fleet report is well under
        {"name": "policy", "secret": {"secretName": POLICY_SECRET}},
        _token_volume(),
    ]
    if o.audit_claim is not None:
        volumes.append({"name": "audit", "persistentVolumeClaim": {"claimName": o.audit_claim}})
    return volumes


def _pod_spec(o: RemediateK8sOptions) -> dict[str, Any]:
    fleet = _container(
        "fleet-report",
        o,
        fleet_report_command(o),
        FLEET_RESOURCES,
        [{"name": "work", "mountPath": WORK_DIR}],
    )
    remediate = _container(
        "remediate", o, remediate_command(o), REMEDIATE_RESOURCES, _main_mounts(o)
    )
    return {
        "serviceAccountName": NAME,
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": True,
            "fsGroup": NOBODY,  # an audit volume must be writable by the pod's user
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": [fleet],
        "containers": [remediate],
        "volumes": _volumes(o),
    }


def cron_job(o: RemediateK8sOptions) -> dict[str, Any]:
    job_labels = labels(NAME, COMPONENT)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(o),
        "spec": {
            "schedule": o.schedule,
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",  # two runs would each spend the same budget
            "startingDeadlineSeconds": STARTING_DEADLINE_S,
            "successfulJobsHistoryLimit": SUCCESSFUL_JOBS_KEPT,
            "failedJobsHistoryLimit": FAILED_JOBS_KEPT,
            "jobTemplate": {
                "metadata": {"labels": job_labels},
                "spec": {
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": o.run_deadline_s,
                    "template": {"metadata": {"labels": job_labels}, "spec": _pod_spec(o)},
                },
            },
        },
    }


def namespaces(o: RemediateK8sOptions) -> list[dict[str, Any]]:
    """The run's namespace, then the breaker's when it is another; the exporter's default
    namespace as the exporter declares it (see the module's docstring)."""
    names = dict.fromkeys((o.namespace, o.state_namespace))
    return [
        namespace(name, pod_security(EXPORTER) if name == EXPORTER.namespace else POD_SECURITY)
        for name in names
    ]


def manifests(o: RemediateK8sOptions) -> list[dict[str, Any]]:
    """In apply order: the Namespaces, the ServiceAccount and its permissions, the policy, then
    the CronJob."""
    return [
        *namespaces(o),
        service_account(o),
        cluster_role(o),
        cluster_role_binding(o),
        *roles(o),
        policy_secret(o),
        cron_job(o),
    ]
