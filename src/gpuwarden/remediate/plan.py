"""Policy + findings + cluster state + now → the actions to take, in order, inside the limits.
Pure: no clock, no network, no files.

How a run decides (fleet.md §2.2's takeaways):

1. Each finding is matched against each rule (code, least severity, the finding's labels). A
   match acts only if the finding names a node of the cluster inside the policy's scope, is not
   from a simulated document (unless allowed), comes from a document younger than
   ``max_findings_age``, and has been seen for the rule's ``for`` (its first_seen); otherwise its
   actions are listed as ``skipped`` with why.
2. A node's actions are the union of its matching rules' actions in the policy's order (a drain
   cordons first, as kubectl drain does); nodes are taken worst first (severity, then the
   earliest first_seen, then the name), so the limits spend themselves on the worst nodes.
3. An action already in effect is ``skipped`` (idempotence). A node whose opt-out label is set
   is never touched.
4. Two brakes on quarantines (an action that takes an available node out of scheduling: cordon,
   drain, a NoSchedule/NoExecute taint): ``max_unavailable`` counts every unavailable node of
   the scope (cordoned by anyone, NotReady, or tainted by gpuwarden) before and after; the
   circuit breaker allows at most ``percentage`` % of the scope's nodes quarantined by gpuwarden
   within ``window`` (NVSentinel's sliding window). When the breaker would be exceeded it trips:
   the quarantine is ``deferred``, the trip is stored in the cluster and every later run defers
   new quarantines until a person resets it — never a catch-up.
5. A rate brake: two spaced actions (drains by default: draino's ``--drain-buffer``) start at
   least ``min_interval`` apart; a drain that continues a node already drained is not a new one.
6. A deferred action defers the node's later actions (actions run in order), except those that
   take no capacity (label, annotate, webhook): the brakes guard capacity, and the webhook is how
   a person learns that a fault waits behind them. A percentage limit rounds up (Kubernetes'
   rule for maxUnavailable); a limit that still comes to 0 for the scope is said in a note, and
   a plan whose every quarantine is deferred says so in a note starting ``all-deferred:``.
7. ``uncordon`` (opt-in): a node gpuwarden quarantined that a document judged and that carries no
   finding matching a rule gets its quarantine undone — only once the document shows the GPU
   that triggered it (when the document lists GPUs) and at least as many GPUs as the node had
   when quarantined (NVSentinel lifts a quarantine only when the same check passes: a GPU that
   fell off the bus leaves no finding, only a node with fewer GPUs). Nodes cordoned by others
   are left alone.
8. A finding whose node the cluster does not have (dcgm-exporter before PR #129 put its pod's
   name in ``Hostname``) acts on nothing, but its webhooks are still sent: a person must learn
   of the fault, and of the name that could not be placed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpuwarden.remediate import changes
from gpuwarden.remediate.model import (
    CAPACITY_FREE,
    UNKNOWN_NODE,
    Action,
    BreakerLatch,
    Budget,
    ClusterState,
    Cordon,
    Drain,
    FindingsInput,
    Match,
    NodeFinding,
    NodeGpus,
    NodeState,
    Plan,
    PlannedAction,
    Policy,
    Reason,
    Rule,
    Status,
    Uncordon,
    Webhook,
)
from gpuwarden.units import iso_utc

HOSTNAME_LABEL = "kubernetes.io/hostname"


# --- matching


def matches(match: Match, finding: NodeFinding) -> bool:
    """The finding's own terms: code, least severity, labels (node labels and time aside)."""
    if match.codes is not None and finding.code not in match.codes:
        return False
    if match.min_severity is not None and finding.severity.rank < match.min_severity.rank:
        return False
    labels = dict(finding.labels)
    return all(labels.get(k) == v for k, v in match.labels)


def _labels_match(node: NodeState, pairs: Iterable[tuple[str, str]]) -> bool:
    return all(node.labels.get(k) == v for k, v in pairs)


def _minutes(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True, slots=True)
class _Gate:
    """Why a matching finding cannot act (yet)."""

    why: str
    detail: str


def _gate(
    finding: NodeFinding,
    rule: Rule,
    node: NodeState | None,
    policy: Policy,
    now_s: float,
    allow_simulated: bool,
) -> _Gate | None:
    if finding.simulated and not allow_simulated:
        return _Gate(
            "simulated",
            f"a simulated finding ({finding.source}): not acted on without --allow-simulated",
        )
    if finding.node is None:
        return _Gate("no-node", "the finding names no node (no Hostname / host)")
    if node is None:
        return _Gate(UNKNOWN_NODE, f"no node named {finding.node!r} in the cluster")
    age = None if finding.observed_s is None else now_s - finding.observed_s
    limit = policy.max_findings_age_s
    if age is not None and limit is not None and age > limit:
        return _Gate(
            "findings-too-old",
            f"the findings are {_minutes(age)} old (max_findings_age {_minutes(limit)})",
        )
    if not _labels_match(node, policy.scope):
        return _Gate("out-of-scope", "the node is outside the policy's scope (node_selector)")
    if not _labels_match(node, rule.match.node_labels):
        return _Gate("node-labels", "the node's labels do not match the rule's node_labels")
    wanted = rule.match.sustained_s
    if wanted:
        if finding.first_seen_s is None:
            return _Gate(
                "not-sustained",
                f"the rule needs the finding for {_minutes(wanted)}; the document does not say "
                "when it was first seen",
            )
        seen = now_s - finding.first_seen_s
        if seen < wanted:
            return _Gate(
                "not-sustained",
                f"first seen {_minutes(max(seen, 0.0))} ago; the rule needs {_minutes(wanted)}",
            )
    return None


def _rank(finding: NodeFinding) -> tuple[int, float, str]:
    first = finding.first_seen_s if finding.first_seen_s is not None else math.inf
    return (-finding.severity.rank, first, finding.uuid or "")


def _reason(rule: Rule, chosen: NodeFinding, count: int) -> Reason:
    return Reason(chosen.code, chosen.uuid, chosen.severity, rule.name, count, chosen.node_gpus)


# --- per node


@dataclass(slots=True)
class _NodeWork:
    """A node's matched rules, in the policy's order."""

    name: str
    rules: list[tuple[int, Rule, NodeFinding, int]] = field(default_factory=list)

    def worst(self) -> tuple[int, float, str]:
        ranks = [_rank(f) for _, _, f, _ in self.rules]
        return (min(r[0] for r in ranks), min(r[1] for r in ranks), self.name)


def _sequence(work: _NodeWork) -> list[tuple[Action, Reason, NodeFinding]]:
    """The node's actions in order, each once (the first rule that asks for it is its reason);
    a drain without a cordon before it gets one."""
    out: list[tuple[Action, Reason, NodeFinding]] = []
    kinds: set[str] = set()
    for _, rule, finding, count in sorted(work.rules, key=lambda r: r[0]):
        reason = _reason(rule, finding, count)
        for action in rule.actions:
            if isinstance(action, Drain) and "cordon" not in kinds:
                out.append((Cordon(), reason, finding))
                kinds.add("cordon")
            once = action.kind in ("cordon", "drain")
            if (once and action.kind in kinds) or any(a == action for a, _, _ in out):
                continue
            out.append((action, reason, finding))
            kinds.add(action.kind)
    return out


@dataclass(slots=True)
class _Brakes:
    """The limits as the plan spends them."""

    policy: Policy
    now_s: float
    unavailable: set[str]
    max_unavailable: int | None
    recent: set[str]
    breaker_limit: int | None
    latch: BreakerLatch | None
    last_spaced_s: float | None
    trips: str | None = None
    quarantined: int = 0
    started: int = 0  # spaced actions started by the plan

    def quarantine_stop(self) -> tuple[str, str] | None:
        """None if one more node may be quarantined now, else (why, detail)."""
        if self.latch is not None:
            when = (
                "" if self.latch.tripped_at_s is None else f" at {iso_utc(self.latch.tripped_at_s)}"
            )
            return "circuit-breaker", (
                f"the circuit breaker tripped{when} ({self.latch.reason}); it stays open until a "
                f"person resets it ({reset_hint(self.policy)})"
            )
        if self.trips is not None:
            return "circuit-breaker", f"the circuit breaker tripped in this run ({self.trips})"
        if self.max_unavailable is not None and len(self.unavailable) + 1 > self.max_unavailable:
            return "max-unavailable", (
                f"{len(self.unavailable)} of the scope's nodes are unavailable already; "
                f"max_unavailable {self.policy.limits.max_unavailable} allows "
                f"{self.max_unavailable}"
            )
        if self.breaker_limit is not None and len(self.recent) + 1 > self.breaker_limit:
            limits = self.policy.limits
            self.trips = (
                f"{len(self.recent)} node(s) quarantined by gpuwarden within "
                f"{_minutes(limits.breaker_window_s)}; {limits.breaker_percent:g}% of the scope "
                f"allows {self.breaker_limit}"
            )
            return "circuit-breaker", f"this quarantine trips the circuit breaker: {self.trips}"
        return None

    def spaced(self, action: Action, follow_up: bool) -> bool:
        limits = self.policy.limits
        return action.kind in limits.spaced_actions and not follow_up and limits.min_interval_s > 0

    def space_stop(self, action: Action) -> tuple[str, str] | None:
        """None if a spaced action may start now, else (why, detail)."""
        limits = self.policy.limits
        last = self.last_spaced_s
        if last is not None and self.now_s - last < limits.min_interval_s:
            return "min-interval", (
                f"min_interval {_minutes(limits.min_interval_s)}: the last {action.kind} "
                f"started at {iso_utc(last)}; the next from "
                f"{iso_utc(last + limits.min_interval_s)}"
            )
        return None

    def stop(self, node: NodeState, action: Action, follow_up: bool) -> tuple[str, str] | None:
        """Why ``action`` must wait, or None — then the action is counted against the limits
        (only once both brakes allow it, so a deferred action spends nothing)."""
        quarantine = changes.quarantines(node, action)
        spaced = self.spaced(action, follow_up)
        stop = self.quarantine_stop() if quarantine else None
        if stop is None and spaced:
            stop = self.space_stop(action)
        if stop is not None:
            return stop
        if quarantine:
            self.unavailable.add(node.name)
            self.recent.add(node.name)
            self.quarantined += 1
        if spaced:
            self.last_spaced_s = self.now_s
            self.started += 1
        return None


def reset_hint(policy: Policy) -> str:
    return (
        f"kubectl -n {policy.state_namespace} delete configmap {policy.state_configmap}, after "
        "finding out why so many nodes failed at once"
    )


def _node_actions(
    node: NodeState,
    sequence: list[tuple[Action, Reason, NodeFinding]],
    brakes: _Brakes,
    policy: Policy,
) -> list[PlannedAction]:
    name = node.name
    key, value = policy.opt_out
    if node.labels.get(key) == value:
        return [
            PlannedAction(
                name, a, r, Status.SKIPPED, f"the node opts out ({key}={value})", "opt-out", f
            )
            for a, r, f in sequence
        ]
    out: list[PlannedAction] = []
    held: str | None = None
    follow_up = changes.drained_at(node) is not None and changes.unavailable(node)
    current = node
    for action, reason, finding in sequence:
        if held is not None and action.kind not in CAPACITY_FREE:
            out.append(
                PlannedAction(
                    name, action, reason, Status.DEFERRED, held, "after-deferred", finding
                )
            )
            continue
        done = _already_done(current, action, reason, finding, brakes.now_s)
        if done is not None:
            out.append(
                PlannedAction(name, action, reason, Status.SKIPPED, done[1], done[0], finding)
            )
            continue
        stop = brakes.stop(current, action, follow_up)
        if stop is not None:
            why, detail = stop
            out.append(PlannedAction(name, action, reason, Status.DEFERRED, detail, why, finding))
            held = f"after the deferred {action.kind}: {detail}"
            continue
        out.append(
            PlannedAction(
                name,
                action,
                reason,
                Status.PLANNED,
                _planned_text(current, action, reason, brakes.now_s),
                None,
                finding,
            )
        )
        current = changes.after(current, action, reason, brakes.now_s)
    return out


def _already_done(
    node: NodeState, action: Action, reason: Reason, finding: NodeFinding, now_s: float
) -> tuple[str, str] | None:
    if isinstance(action, Drain):
        return None  # what is left to evict is known only by listing the pods
    if isinstance(action, Webhook):
        key = changes.fingerprint(reason.rule, action, finding)
        sent = changes.notified(node).get(key)
        return None if sent is None else ("already-notified", f"already sent at {sent}")
    change = changes.change_for(node, action, reason, now_s)
    if change.patch is None:
        return change.why_not or "already-done", change.detail
    return None


def _planned_text(node: NodeState, action: Action, reason: Reason, now_s: float) -> str:
    match action:
        case Drain():
            return (
                f"evict the node's pods through the Eviction API (timeout "
                f"{_minutes(action.timeout_s)}; DaemonSet and mirror pods stay"
                + (
                    f"; skipping {', '.join(action.skip_namespaces)})"
                    if action.skip_namespaces
                    else ")"
                )
            )
        case Webhook():
            return f"POST {action.shown_url}"
    return changes.change_for(node, action, reason, now_s).detail


# --- uncordon


def _uncordons(
    policy: Policy,
    findings: FindingsInput,
    nodes: Mapping[str, NodeState],
    flagged: set[str],
    now_s: float,
) -> list[PlannedAction]:
    out: list[PlannedAction] = []
    key, value = policy.opt_out
    for name in sorted(findings.judged):
        node = nodes.get(name)
        if node is None or name in flagged:
            continue
        change = changes.change_for(node, Uncordon(), None, now_s)
        if change.patch is None:
            continue
        judged = findings.judged[name]
        status, why, detail = Status.PLANNED, None, f"judged healthy; {change.detail}"
        limit = policy.max_findings_age_s
        if node.labels.get(key) == value:
            status, why, detail = Status.SKIPPED, "opt-out", f"the node opts out ({key}={value})"
        elif judged is not None and limit is not None and now_s - judged > limit:
            status, why = Status.SKIPPED, "findings-too-old"
            detail = (
                f"judged healthy {_minutes(now_s - judged)} ago "
                f"(max_findings_age {_minutes(limit)})"
            )
        elif not _labels_match(node, policy.scope):
            status, why, detail = Status.SKIPPED, "out-of-scope", "outside the policy's scope"
        else:
            missing = _gpus_missing(node, findings.gpus.get(name, NodeGpus(None)))
            if missing is not None:
                status, (why, detail) = Status.SKIPPED, missing
        out.append(PlannedAction(name, Uncordon(), None, status, detail, why))
    return out


def _gpus_missing(node: NodeState, seen: NodeGpus) -> tuple[str, str] | None:
    """Why the document does not show the quarantined node whole again (why, detail), or None:
    the GPU that triggered the quarantine must be among those it lists (when it lists them),
    and the node must have at least the GPUs it had then."""
    uuid, had = changes.quarantined_gpu(node), changes.quarantined_gpus(node)
    if uuid is not None and seen.uuids is not None and uuid not in seen.uuids:
        return "gpu-not-seen", (
            f"{uuid}, which the quarantine was for, is not among the GPUs the document saw"
        )
    if had is None:
        return None
    if seen.count is None:
        return "gpus-unknown", (
            f"the document does not count the node's GPUs; it had {had} when quarantined"
        )
    if seen.count < had:
        return "gpus-missing", (
            f"the document saw {seen.count} GPU(s); the node had {had} when quarantined"
        )
    return None


# --- the plan


def _resolve(
    name: str | None, nodes: Mapping[str, NodeState], hostnames: Mapping[str, str]
) -> NodeState | None:
    """The node a finding names: by node name, else by the kubernetes.io/hostname label (node
    names may be FQDNs where the host calls itself by its short name)."""
    if name is None:
        return None
    node = nodes.get(name)
    if node is None and name in hostnames:
        node = nodes.get(hostnames[name])
    return node


def _held(
    key: str | None, action: Action, reason: Reason, gate: _Gate, finding: NodeFinding
) -> PlannedAction:
    """A matching finding's action that cannot act: skipped, except the webhook of a finding
    whose node the cluster does not have (nothing else tells a person)."""
    if isinstance(action, Webhook) and gate.why == UNKNOWN_NODE:
        detail = f"POST {action.shown_url}; nothing else: {gate.detail}"
        return PlannedAction(key, action, reason, Status.PLANNED, detail, gate.why, finding)
    return PlannedAction(key, action, reason, Status.SKIPPED, gate.detail, gate.why, finding)


def _limit_notes(budget: Budget, policy: Policy) -> tuple[str, ...]:
    """A limit that comes to 0 for the scope defers (max_unavailable) or trips on (the
    breaker) the first quarantine: said, since nothing else would say it before a fault."""
    scope = budget.nodes_in_scope
    if scope == 0:
        return ()
    notes = []
    if budget.max_unavailable == 0:
        notes.append(
            f"max_unavailable {policy.limits.max_unavailable} of {scope} node(s) in scope is 0: "
            "every cordon, drain and blocking taint will be deferred"
        )
    if budget.breaker_limit == 0:
        notes.append(
            f"circuit_breaker {policy.limits.breaker_percent:g}% of {scope} node(s) in scope is "
            "0: the first quarantine trips it"
        )
    return tuple(notes)


def _deferred_note(plan: Plan) -> tuple[str, ...]:
    """The line an alert matches when the brakes held back every quarantine."""
    if not plan.all_deferred:
        return ()
    deferred = [a for a in plan.actions if a.status is Status.DEFERRED]
    whys = sorted({a.why for a in deferred if a.why is not None})
    nodes = {a.node for a in deferred}
    return (
        f"all-deferred: {len(deferred)} action(s) on {len(nodes)} node(s) deferred "
        f"({', '.join(whys)}); nothing that takes capacity was done",
    )


def _budget(policy: Policy, cluster: ClusterState, now_s: float) -> _Brakes:
    scope = [n for n in cluster.nodes if _labels_match(n, policy.scope)]
    limits = policy.limits
    window_start = now_s - limits.breaker_window_s
    recent = set()
    for node in scope:
        when = changes.quarantined_at(node)
        if when is not None and window_start < when <= now_s:
            recent.add(node.name)
    spaced = [changes.drained_at(n) for n in cluster.nodes]
    known = [s for s in spaced if s is not None and s <= now_s]
    return _Brakes(
        policy=policy,
        now_s=now_s,
        unavailable={n.name for n in scope if changes.unavailable(n)},
        max_unavailable=None
        if limits.max_unavailable is None
        else limits.max_unavailable.of(len(scope)),
        recent=recent,
        breaker_limit=None
        if limits.breaker_percent is None
        else math.floor(len(scope) * limits.breaker_percent / 100),
        latch=cluster.breaker,
        last_spaced_s=max(known) if known else None,
    )


def make_plan(
    policy: Policy,
    findings: FindingsInput,
    cluster: ClusterState,
    now_s: float,
    *,
    allow_simulated: bool = False,
) -> Plan:
    nodes = {n.name: n for n in cluster.nodes}
    hostnames = {
        n.labels[HOSTNAME_LABEL]: n.name for n in cluster.nodes if HOSTNAME_LABEL in n.labels
    }
    brakes = _budget(policy, cluster, now_s)
    before = (len(brakes.unavailable), len(brakes.recent), brakes.last_spaced_s)

    # (rule index, node key) → the findings that match it, and the gate of each
    matched: dict[tuple[int, str | None], list[tuple[NodeFinding, _Gate | None]]] = {}
    flagged: set[str] = set()  # nodes with a finding matching a rule: not healthy
    for finding in findings.findings:
        node = _resolve(finding.node, nodes, hostnames)
        for index, rule in enumerate(policy.rules):
            if not matches(rule.match, finding):
                continue
            key = node.name if node is not None else finding.node
            if key is not None:
                flagged.add(key)
            gate = _gate(finding, rule, node, policy, now_s, allow_simulated)
            matched.setdefault((index, key), []).append((finding, gate))

    work: dict[str, _NodeWork] = {}
    skipped: list[PlannedAction] = []
    for (index, key), entries in matched.items():
        rule = policy.rules[index]
        acting = sorted((f for f, g in entries if g is None), key=_rank)
        if acting and key is not None:
            work.setdefault(key, _NodeWork(key)).rules.append((index, rule, acting[0], len(acting)))
            continue
        finding, gate = min(entries, key=lambda e: _rank(e[0]))
        assert gate is not None
        reason = _reason(rule, finding, len(entries))
        skipped += [_held(key, action, reason, gate, finding) for action in rule.actions]

    actions: list[PlannedAction] = []
    for item in sorted(work.values(), key=_NodeWork.worst):
        actions += _node_actions(nodes[item.name], _sequence(item), brakes, policy)
    if policy.uncordon:
        actions += _uncordons(policy, findings, nodes, flagged, now_s)
    actions += sorted(skipped, key=lambda a: (a.node or "", a.reason.rule if a.reason else ""))

    budget = Budget(
        nodes_in_scope=sum(1 for n in cluster.nodes if _labels_match(n, policy.scope)),
        unavailable_before=before[0],
        max_unavailable=brakes.max_unavailable,
        unavailable_after=len(brakes.unavailable),
        breaker_limit=brakes.breaker_limit,
        quarantined_in_window=before[1],
        quarantined_by_plan=brakes.quarantined,
        breaker_tripped_before=cluster.breaker,
        breaker_trips=brakes.trips,
        last_spaced_s=before[2],
        spaced_by_plan=brakes.started,
    )
    notes = _limit_notes(budget, policy)
    if cluster.breaker is not None or brakes.trips is not None:
        notes += (f"the circuit breaker is open; to reset it: {reset_hint(policy)}",)
    plan = Plan(tuple(actions), budget, now_s, notes)
    unknown = plan.unknown_nodes
    if unknown:
        notes += (
            f"unknown-node: finding(s) name {', '.join(map(repr, unknown))}, no node of the "
            "cluster (a pod's name in Hostname? dcgm-exporter before PR #129); nothing but "
            "webhooks was done for them",
        )
    return replace(plan, notes=notes + _deferred_note(plan))
