"""The remediation's data: the policy, the findings it reads, the cluster it acts on, the plan and
what applying it did. Plain frozen data; times are Unix seconds, durations ``_s``.

The node markers are how gpuwarden finds its own work again on the next run (idempotence, the
circuit breaker's window, uncordon of only the nodes it cordoned), like NVSentinel's
``cordon-by``/``-reason``/``-timestamp`` node labels (fleet.md §2.1). They are visible to
``kubectl get nodes -L gpuwarden.io/cordoned-by``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gpuwarden.types.health import Severity

# --- the marks gpuwarden leaves on the nodes it acts on
CORDONED_BY_LABEL = "gpuwarden.io/cordoned-by"  # label: selectable with kubectl -l
CORDONED_BY_VALUE = "gpuwarden"
QUARANTINED_AT = "gpuwarden.io/quarantined-at"  # RFC 3339: the circuit breaker's window
REASON = "gpuwarden.io/reason"  # "<code> <UUID> (rule <name>)"
OUR_TAINTS = "gpuwarden.io/taints"  # JSON list of "key:effect" gpuwarden added
DRAINED_AT = "gpuwarden.io/drained-at"  # RFC 3339: the first drain (min_interval's clock)
NOTIFIED = "gpuwarden.io/notified"  # JSON {fingerprint: RFC 3339}: webhooks already sent
# What uncordon needs to see healthy again (NVSentinel lifts a quarantine only when the check that
# set it passes): the GPU that triggered it, and how many GPUs the node had then.
QUARANTINED_GPU = "gpuwarden.io/quarantined-gpu"  # the triggering GPU's UUID
QUARANTINED_GPUS = "gpuwarden.io/quarantined-gpus"  # the node's GPU count in that document
MAX_NOTIFIED = 32  # fingerprints kept on a node (the newest)
DEFAULT_OPT_OUT = ("gpuwarden.io/remediate", "false")  # NVSentinel: ManagedByNVSentinel=false
# gpuwarden's annotations on a node it acted on, in the order an uncordon removes them; with
# its label, every mark a policy may not name as its own
OUR_ANNOTATIONS = (
    QUARANTINED_AT,
    REASON,
    OUR_TAINTS,
    DRAINED_AT,
    NOTIFIED,
    QUARANTINED_GPU,
    QUARANTINED_GPUS,
)
MARKS = frozenset({CORDONED_BY_LABEL, *OUR_ANNOTATIONS})

# Taint effects that keep new pods off a node: a node carrying one of ours is unavailable.
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)(.*)$", re.DOTALL)


# --- actions


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute

    @property
    def blocking(self) -> bool:
        return self.effect in BLOCKING_EFFECTS

    def record(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass(frozen=True, slots=True)
class Cordon:
    kind = "cordon"


@dataclass(frozen=True, slots=True)
class Uncordon:
    """Undo gpuwarden's quarantine: schedulable again, its taints and its marks removed."""

    kind = "uncordon"


@dataclass(frozen=True, slots=True)
class Drain:
    kind = "drain"
    timeout_s: float = 600.0  # per node: evictions blocked longer than this fail the drain
    skip_namespaces: tuple[str, ...] = ("kube-system",)
    grace_period_s: int | None = None  # None: each pod's own terminationGracePeriodSeconds
    force: bool = False  # also evict pods no controller recreates (kubectl drain --force)


@dataclass(frozen=True, slots=True)
class AddTaint:
    kind = "taint"
    taint: Taint


@dataclass(frozen=True, slots=True)
class SetLabels:
    kind = "label"
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class SetAnnotations:
    kind = "annotate"
    annotations: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Webhook:
    kind = "webhook"
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 10.0

    @property
    def shown_url(self) -> str:
        """The URL as outputs and the audit log show it: Slack's and Teams' incoming-webhook URLs
        carry their secret in the path, so a path or query becomes a digest (the same URL, the
        same digest) and user:password@ goes."""
        found = _URL.match(self.url)
        scheme, netloc, tail = found.groups() if found else ("", self.url, "")
        host = netloc.rpartition("@")[2]
        if tail in ("", "/"):
            return f"{scheme}{host}{tail}"
        return f"{scheme}{host}/…{hashlib.sha256(self.url.encode()).hexdigest()[:8]}"


Action = Cordon | Uncordon | Drain | AddTaint | SetLabels | SetAnnotations | Webhook
ACTION_KINDS = ("cordon", "drain", "taint", "label", "annotate", "webhook")
# Actions that take no capacity: the brakes never hold them back (a webhook is how a person
# learns of the fault, a label or annotation how a tool or person finds the node).
CAPACITY_FREE = frozenset({"label", "annotate", "webhook"})


def action_params(action: Action) -> dict[str, Any]:
    """What an action carries besides its kind, as JSON (secrets left out: header names only)."""
    match action:
        case Drain():
            return {
                "timeout_s": action.timeout_s,
                "skip_namespaces": list(action.skip_namespaces),
                "grace_period_s": action.grace_period_s,
                "force": action.force,
            }
        case AddTaint():
            return action.taint.record()
        case SetLabels():
            return dict(action.labels)
        case SetAnnotations():
            return dict(action.annotations)
        case Webhook():
            return {"url": action.shown_url, "headers": [name for name, _ in action.headers]}
        case _:
            return {}


# --- the policy


class Quota(StrEnum):
    COUNT = "count"
    PERCENT = "percent"


@dataclass(frozen=True, slots=True)
class Share:
    """``20%`` or ``3``: of the nodes in scope. A percentage rounds up, as Kubernetes rounds a
    DaemonSet's or a PodDisruptionBudget's percentage maxUnavailable ("Absolute number is
    calculated from percentage by rounding up"): 20 % of 4 nodes is 1, never a silent 0."""

    amount: float
    unit: Quota

    def of(self, total: int) -> int:
        if self.unit is Quota.COUNT:
            return int(self.amount)
        return int(-(-total * self.amount // 100))

    def __str__(self) -> str:
        return f"{self.amount:g}%" if self.unit is Quota.PERCENT else f"{int(self.amount)}"


@dataclass(frozen=True, slots=True)
class Match:
    codes: frozenset[str] | None = None  # None: any code
    min_severity: Severity | None = None  # at least this severity
    sustained_s: float | None = None  # `for`: first seen at least this long ago
    labels: tuple[tuple[str, str], ...] = ()  # the finding's labels (Hostname, modelName, ...)
    node_labels: tuple[tuple[str, str], ...] = ()  # the Kubernetes node's labels


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    match: Match
    actions: tuple[Action, ...]


@dataclass(frozen=True, slots=True)
class Limits:
    # None: no limit. The defaults are the anchors of fleet.md §2: Karpenter's 20 % unhealthy
    # cut-off, NVSentinel's circuit breaker (50 % of the nodes per 5 minutes).
    max_unavailable: Share | None = Share(20, Quota.PERCENT)
    min_interval_s: float = 0.0  # between two spaced actions (draino's --drain-buffer)
    spaced_actions: frozenset[str] = frozenset({"drain"})
    breaker_percent: float | None = 50.0
    breaker_window_s: float = 300.0


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[Rule, ...]
    limits: Limits = Limits()
    uncordon: bool = False  # opt-in: undo our quarantine when the findings say healthy
    opt_out: tuple[str, str] = DEFAULT_OPT_OUT  # a node with this label is never touched
    scope: tuple[tuple[str, str], ...] = ()  # node labels that put a node in scope (all: empty)
    max_findings_age_s: float | None = 3600.0  # older documents are not acted on
    state_namespace: str = "gpuwarden"  # the circuit breaker's ConfigMap
    state_configmap: str = "gpuwarden-remediate"
    source: str = ""  # the file it came from
    sha256: str | None = None  # of the bytes read from it (the audit log names what was used)


# --- the findings


@dataclass(frozen=True, slots=True)
class NodeFinding:
    """One finding of a findings document, with the node it is about."""

    code: str
    severity: Severity
    node: str | None  # Hostname (fleet) or the doctor's host
    uuid: str | None
    labels: tuple[tuple[str, str], ...]  # dcgm-exporter's spelling: Hostname, UUID, gpu, ...
    first_seen_s: float | None
    observed_s: float | None  # when the document was made (its newest reading / window end)
    source: str  # the file
    title: str = ""
    simulated: bool = False  # from `doctor --backend sim`: acted on only with --allow-simulated
    node_gpus: int | None = None  # the node's GPU count in the same document (None: not said)


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """The GPUs a document saw on a node: how many, and which (None when it does not list
    them: a fleet report counts a node's GPUs but names them only in findings)."""

    count: int | None
    uuids: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class FindingsInput:
    findings: tuple[NodeFinding, ...]
    # nodes the documents judged (with or without findings), and when: a node judged healthy
    # may be uncordoned
    judged: Mapping[str, float | None] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    sha256: tuple[str, ...] = ()  # of the bytes read from each source, in the same order
    gpus: Mapping[str, NodeGpus] = field(default_factory=dict)  # by judged node, the newest
    notes: tuple[str, ...] = ()  # what a document could not say of any node


# --- the cluster


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    unschedulable: bool
    taints: tuple[Taint, ...]
    ready: bool | None  # the Ready condition; None when the node reports none
    resource_version: str | None = None


@dataclass(frozen=True, slots=True)
class BreakerLatch:
    """A tripped circuit breaker, as stored in the cluster: it stays tripped until a person
    resets it (NVSentinel ADR-022: no automatic catch-up)."""

    tripped_at_s: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class ClusterState:
    nodes: tuple[NodeState, ...]
    breaker: BreakerLatch | None = None  # None: closed


# --- the plan and its outcome


UNKNOWN_NODE = "unknown-node"  # the why of a finding whose node the cluster does not have


class Status(StrEnum):
    PLANNED = "planned"
    APPLIED = "applied"
    DEFERRED = "deferred"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    uuid: str | None
    severity: Severity | None
    rule: str
    findings: int = 1  # findings on the node that this rule matched
    node_gpus: int | None = None  # the node's GPU count in the finding's document


@dataclass(frozen=True, slots=True)
class PlannedAction:
    node: str | None
    action: Action
    reason: Reason | None
    status: Status  # planned, deferred or skipped
    detail: str = ""
    why: str | None = None  # kebab-case, for scripts: max-unavailable, already-cordoned, ...
    finding: NodeFinding | None = None  # the one the reason names (the webhook's body)


@dataclass(frozen=True, slots=True)
class Budget:
    """The blast radius, before and after the plan."""

    nodes_in_scope: int
    unavailable_before: int
    max_unavailable: int | None
    unavailable_after: int
    breaker_limit: int | None  # quarantines allowed per window
    quarantined_in_window: int  # before the plan
    quarantined_by_plan: int
    breaker_tripped_before: BreakerLatch | None
    breaker_trips: str | None  # the reason, when this plan trips it
    last_spaced_s: float | None
    spaced_by_plan: int


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[PlannedAction, ...]
    budget: Budget
    now_s: float
    notes: tuple[str, ...] = ()

    @property
    def all_deferred(self) -> bool:
        """The brakes held back everything that takes capacity: something was to be done and
        nothing but notifications and labels will be."""
        deferred = any(a.status is Status.DEFERRED for a in self.actions)
        return deferred and not any(
            a.status is Status.PLANNED and a.action.kind not in CAPACITY_FREE for a in self.actions
        )

    @property
    def unknown_nodes(self) -> tuple[str, ...]:
        """The node names findings gave that are no node of the cluster, in order."""
        names = (a.node or "" for a in self.actions if a.why == UNKNOWN_NODE)
        return tuple(dict.fromkeys(names))


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One request gpuwarden made (or, in a dry run, made with ``dryRun=All``)."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: Any = None
    status: int | None = None  # the HTTP status; None when no answer came
    error: str | None = None  # what went wrong, in words
    at_s: float | None = None


@dataclass(frozen=True, slots=True)
class ActionResult:
    planned: PlannedAction
    status: Status
    detail: str
    why: str | None = None
    calls: tuple[ApiCall, ...] = ()
    started_s: float | None = None
    finished_s: float | None = None


@dataclass(frozen=True, slots=True)
class Remediation:
    """Everything one run did."""

    plan: Plan
    results: tuple[ActionResult, ...]
    dry_run: bool
    cluster: str  # the API server
    context: str | None
    policy: str
    findings: tuple[str, ...]
    audit_log: str | None
    breaker_written: bool = False  # the trip was stored in the cluster
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return any(r.status is Status.FAILED for r in self.results)

    @property
    def breaker_open(self) -> bool:
        return self.plan.budget.breaker_tripped_before is not None or bool(
            self.plan.budget.breaker_trips
        )

    @property
    def needs_a_person(self) -> bool:
        """An action failed, the breaker is open, the brakes held back every quarantine, or a
        finding names a node the cluster does not have: the run cannot fix it alone."""
        plan = self.plan
        return self.failed or self.breaker_open or plan.all_deferred or bool(plan.unknown_nodes)
