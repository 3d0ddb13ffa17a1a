"""The plan, pure: which finding acts on which node, in what order, and the limits — checked by
hand on small clusters and by hypothesis on any cluster (the limits are never exceeded, whatever
the nodes, their state, the findings and the policy)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.remediate import changes
from gpuwarden.remediate.model import (
    CAPACITY_FREE,
    CORDONED_BY_LABEL,
    DRAINED_AT,
    OUR_TAINTS,
    QUARANTINED_AT,
    QUARANTINED_GPU,
    QUARANTINED_GPUS,
    AddTaint,
    BreakerLatch,
    ClusterState,
    Cordon,
    Drain,
    FindingsInput,
    Limits,
    Match,
    NodeFinding,
    NodeGpus,
    NodeState,
    Plan,
    Policy,
    Quota,
    Reason,
    Rule,
    SetLabels,
    Share,
    Status,
    Taint,
    Uncordon,
    Webhook,
)
from gpuwarden.remediate.plan import make_plan
from gpuwarden.types.health import Severity
from gpuwarden.units import iso_utc

NOW = 1_800_000_000.0
FATAL = Taint("nvidia.com/gpu-error", "fatal", "NoSchedule")


def _node(name: str, **kw: Any) -> NodeState:
    fields: dict[str, Any] = {
        "labels": {},
        "annotations": {},
        "unschedulable": False,
        "taints": (),
        "ready": True,
        "resource_version": "1",
    }
    fields.update(kw)
    return NodeState(name=name, **fields)


def _finding(
    node: str | None,
    code: str = "ecc-uncorrectable",
    severity: Severity = Severity.CRITICAL,
    *,
    uuid: str | None = None,
    first_seen_s: float | None = NOW - 3600,
    observed_s: float | None = NOW - 60,
    labels: tuple[tuple[str, str], ...] = (),
    simulated: bool = False,
) -> NodeFinding:
    gpu = uuid or f"GPU-{node}-{code}"
    return NodeFinding(
        code,
        severity,
        node,
        gpu,
        (("Hostname", node or ""), ("UUID", gpu), *labels),
        first_seen_s,
        observed_s,
        "test.json",
        simulated=simulated,
    )


def _policy(*actions: Any, limits: Limits | None = None, **kw: Any) -> Policy:
    rule = Rule("fatal", Match(codes=frozenset({"ecc-uncorrectable", "xid"})), tuple(actions))
    return Policy((rule,), limits or Limits(max_unavailable=None, breaker_percent=None), **kw)


def _plan(
    policy: Policy,
    findings: list[NodeFinding],
    nodes: list[NodeState],
    *,
    judged: dict[str, float | None] | None = None,
    breaker: BreakerLatch | None = None,
    allow_simulated: bool = False,
) -> Plan:
    return make_plan(
        policy,
        FindingsInput(tuple(findings), judged or {}),
        ClusterState(tuple(nodes), breaker),
        NOW,
        allow_simulated=allow_simulated,
    )


def _statuses(plan: Plan) -> list[tuple[str | None, str, str, str | None]]:
    return [(a.node, a.action.kind, a.status.value, a.why) for a in plan.actions]


def test_a_drain_cordons_first_and_actions_keep_the_policys_order() -> None:
    plan = _plan(
        _policy(AddTaint(FATAL), Drain(), SetLabels((("fault", "gpu"),))),
        [_finding("n1")],
        [_node("n1"), _node("n2")],
    )
    assert _statuses(plan) == [
        ("n1", "taint", "planned", None),
        ("n1", "cordon", "planned", None),
        ("n1", "drain", "planned", None),
        ("n1", "label", "planned", None),
    ]
    reason = plan.actions[0].reason
    assert reason is not None and (reason.code, reason.uuid, reason.rule) == (
        "ecc-uncorrectable",
        "GPU-n1-ecc-uncorrectable",
        "fatal",
    )


def test_what_is_already_so_is_skipped_with_why() -> None:
    ours = {CORDONED_BY_LABEL: "gpuwarden"}
    nodes = [
        _node("ours", unschedulable=True, labels=ours, taints=(FATAL,)),
        _node("theirs", unschedulable=True),
    ]
    plan = _plan(
        _policy(Cordon(), AddTaint(FATAL)),
        [_finding("ours"), _finding("theirs")],
        nodes,
    )
    assert _statuses(plan) == [
        ("ours", "cordon", "skipped", "already-cordoned"),
        ("ours", "taint", "skipped", "already-tainted"),
        ("theirs", "cordon", "skipped", "already-cordoned"),
        ("theirs", "taint", "planned", None),
    ]
    assert "someone else" in plan.actions[2].detail


def test_findings_that_cannot_act_say_why() -> None:
    nodes = [
        _node("n1"),
        _node("n2", labels={"gpuwarden.io/remediate": "false"}),
        _node("n3"),
        _node("n4"),
        _node("ip-10-0-0-3.ec2.internal", labels={"kubernetes.io/hostname": "ip-10-0-0-3"}),
    ]
    findings = [
        _finding(None, uuid="GPU-none"),
        _finding("ghost"),
        _finding("n1", first_seen_s=NOW - 100, uuid="GPU-young"),
        _finding("n2"),
        _finding("n3", code="xid", observed_s=NOW - 7200, uuid="GPU-old"),
        _finding("n4", uuid="GPU-sim", simulated=True),
        _finding("ip-10-0-0-3", uuid="GPU-short-name"),
    ]
    rule = Rule(
        "sustained",
        Match(codes=frozenset({"ecc-uncorrectable", "xid"}), sustained_s=600),
        (Cordon(),),
    )
    plan = _plan(
        Policy((rule,), Limits(max_unavailable=None, breaker_percent=None)), findings, nodes
    )
    by_uuid = {a.reason.uuid: (a.status.value, a.why) for a in plan.actions if a.reason}
    assert by_uuid == {
        "GPU-none": ("skipped", "no-node"),
        "GPU-ghost-ecc-uncorrectable": ("skipped", "unknown-node"),
        "GPU-young": ("skipped", "not-sustained"),
        "GPU-n2-ecc-uncorrectable": ("skipped", "opt-out"),
        "GPU-old": ("skipped", "findings-too-old"),
        "GPU-sim": ("skipped", "simulated"),
        "GPU-short-name": ("planned", None),  # found by its kubernetes.io/hostname label
    }
    young = next(a for a in plan.actions if a.reason and a.reason.uuid == "GPU-young")
    assert "first seen 100 s ago; the rule needs 10 min" in young.detail
    # several findings that cannot act on one node: one entry, the worst of them named
    crowded = _plan(
        Policy((rule,), Limits(max_unavailable=None, breaker_percent=None)),
        [
            _finding("n1", first_seen_s=NOW - 60, uuid="GPU-1"),
            _finding("n1", uuid="GPU-2", first_seen_s=NOW - 300, severity=Severity.WARNING),
        ],
        nodes,
    )
    assert [
        (a.node, a.reason.uuid if a.reason else None, a.reason.findings if a.reason else 0)
        for a in crowded.actions
    ] == [("n1", "GPU-1", 2)]


def test_severity_is_a_floor_and_labels_must_all_match() -> None:
    rule = Rule(
        "hot",
        Match(min_severity=Severity.WARNING, labels=(("modelName", "H100"),)),
        (SetLabels((("hot", "yes"),)),),
    )
    policy = Policy((rule,), Limits(max_unavailable=None, breaker_percent=None))
    findings = [
        _finding("n1", "thermal-outlier", Severity.WARNING, labels=(("modelName", "H100"),)),
        _finding("n2", "gpu-lost", Severity.CRITICAL, labels=(("modelName", "H100"),)),
        _finding("n3", "persistence-off", Severity.INFO, labels=(("modelName", "H100"),)),
        _finding("n4", "gpu-lost", Severity.CRITICAL, labels=(("modelName", "A100"),)),
    ]
    plan = _plan(policy, findings, [_node(n) for n in ("n1", "n2", "n3", "n4")])
    assert sorted(a.node or "" for a in plan.actions) == ["n1", "n2"]


def test_the_worst_nodes_spend_the_budget_first() -> None:
    limits = Limits(max_unavailable=Share(1, Quota.COUNT), breaker_percent=None)
    findings = [
        _finding("b", "xid", Severity.WARNING, first_seen_s=NOW - 9000),
        _finding("c", first_seen_s=NOW - 600),
        _finding("a", first_seen_s=NOW - 600),
    ]
    rule = Rule("any", Match(min_severity=Severity.WARNING), (Cordon(),))
    plan = _plan(Policy((rule,), limits), findings, [_node(n) for n in "abcd"])
    assert _statuses(plan) == [
        ("a", "cordon", "planned", None),  # critical, first seen at the same time as c: by name
        ("c", "cordon", "deferred", "max-unavailable"),
        ("b", "cordon", "deferred", "max-unavailable"),
    ]


def test_max_unavailable_counts_nodes_already_cordoned_by_anyone() -> None:
    nodes = [_node(f"n{i}") for i in range(10)]
    nodes[8] = replace(nodes[8], unschedulable=True)  # a person's kubectl cordon
    nodes[9] = replace(nodes[9], ready=False)  # NotReady
    limits = Limits(max_unavailable=Share(30, Quota.PERCENT), breaker_percent=None)
    plan = _plan(_policy(Cordon(), limits=limits), [_finding(f"n{i}") for i in range(4)], nodes)
    assert [a.status for a in plan.actions].count(Status.PLANNED) == 1  # 3 allowed, 2 taken
    assert plan.budget.unavailable_before == 2 and plan.budget.unavailable_after == 3
    deferred = [a for a in plan.actions if a.status is Status.DEFERRED]
    assert len(deferred) == 3
    assert "3 of the scope's nodes are unavailable already; max_unavailable 30% allows 3" in (
        deferred[0].detail
    )


def test_the_breaker_trips_past_its_share_and_stays_open() -> None:
    nodes = [_node(f"n{i}") for i in range(10)]
    recent = {QUARANTINED_AT: iso_utc(NOW - 120), CORDONED_BY_LABEL: "gpuwarden"}
    nodes[0] = replace(nodes[0], unschedulable=True, labels=recent, annotations=recent)
    limits = Limits(max_unavailable=None, breaker_percent=50, breaker_window_s=300)
    findings = [_finding(f"n{i}") for i in range(1, 9)]
    plan = _plan(_policy(Cordon(), limits=limits), findings, nodes)
    planned = [a.node for a in plan.actions if a.status is Status.PLANNED]
    assert len(planned) == 4  # 5 per window, 1 already in it
    assert plan.budget.breaker_trips == (
        "5 node(s) quarantined by gpuwarden within 5 min; 50% of the scope allows 5"
    )
    assert [a.why for a in plan.actions if a.status is Status.DEFERRED] == ["circuit-breaker"] * 4
    assert plan.notes and "delete configmap gpuwarden-remediate" in plan.notes[0]
    # later, with the window long past: a tripped breaker defers every new quarantine
    latched = _plan(
        _policy(Cordon(), AddTaint(FATAL), limits=limits),
        [*findings, _finding("n0")],
        nodes,
        breaker=BreakerLatch(NOW - 3600, "5 node(s) quarantined"),
    )
    assert {a.status for a in latched.actions if a.node != "n0"} == {Status.DEFERRED}
    # a node quarantined before goes on (NVSentinel: remediation in progress continues)
    assert [(a.action.kind, a.status) for a in latched.actions if a.node == "n0"] == [
        ("cordon", Status.SKIPPED),
        ("taint", Status.PLANNED),
    ]


def test_min_interval_spaces_drains_not_cordons() -> None:
    limits = Limits(max_unavailable=None, breaker_percent=None, min_interval_s=600)
    nodes = [_node("a"), _node("b")]
    plan = _plan(_policy(Cordon(), Drain(), limits=limits), [_finding("a"), _finding("b")], nodes)
    assert _statuses(plan) == [
        ("a", "cordon", "planned", None),
        ("a", "drain", "planned", None),
        ("b", "cordon", "planned", None),
        ("b", "drain", "deferred", "min-interval"),
    ]
    # the next run, 5 minutes after a's drain started: a's drain goes on, b still waits
    drained = {DRAINED_AT: iso_utc(NOW - 300), CORDONED_BY_LABEL: "gpuwarden"}
    after = [
        _node("a", unschedulable=True, labels=drained, annotations=drained),
        _node("b", unschedulable=True, labels=drained),
    ]
    again = _plan(_policy(Cordon(), Drain(), limits=limits), [_finding("a"), _finding("b")], after)
    assert [(a.node, a.action.kind, a.status.value) for a in again.actions] == [
        ("a", "cordon", "skipped"),
        ("a", "drain", "planned"),
        ("b", "cordon", "skipped"),
        ("b", "drain", "deferred"),
    ]


def test_uncordon_only_what_gpuwarden_cordoned_and_only_when_judged_healthy() -> None:
    ours = {CORDONED_BY_LABEL: "gpuwarden"}
    marks = {
        QUARANTINED_AT: iso_utc(NOW - 9000),
        OUR_TAINTS: '["nvidia.com/gpu-error:NoSchedule"]',
    }
    other = Taint("dedicated", "gpu", "NoSchedule")
    nodes = [
        _node("ours", unschedulable=True, labels=ours, annotations=marks, taints=(FATAL, other)),
        _node("theirs", unschedulable=True),
        _node("still-bad", unschedulable=True, labels=ours, annotations=marks),
        _node("not-judged", unschedulable=True, labels=ours, annotations=marks),
    ]
    policy = _policy(Cordon(), uncordon=True)
    judged = {"ours": NOW - 60, "theirs": NOW - 60, "still-bad": NOW - 60}
    plan = _plan(policy, [_finding("still-bad")], nodes, judged=judged)
    uncordons = [a for a in plan.actions if isinstance(a.action, Uncordon)]
    assert [(a.node, a.status) for a in uncordons] == [("ours", Status.PLANNED)]
    patch = changes.change_for(nodes[0], Uncordon(), None, NOW).patch
    assert patch is not None
    assert patch["spec"] == {"unschedulable": None, "taints": [other.record()]}
    assert patch["metadata"]["labels"] == {CORDONED_BY_LABEL: None}
    assert set(patch["metadata"]["annotations"]) == {QUARANTINED_AT, OUR_TAINTS}


# --- the limits hold whatever the inputs


_NAMES = [f"n{i}" for i in range(12)]


@st.composite
def _clusters(draw: st.DrawFn) -> list[NodeState]:
    nodes = []
    for name in draw(st.lists(st.sampled_from(_NAMES), unique=True, min_size=1, max_size=12)):
        labels: dict[str, str] = {}
        annotations: dict[str, str] = {}
        if draw(st.booleans()):
            labels["pool"] = "gpu"
        if draw(st.integers(0, 5)) == 0:
            labels["gpuwarden.io/remediate"] = "false"
        ours = draw(st.booleans())
        if ours:
            labels[CORDONED_BY_LABEL] = "gpuwarden"
            when = NOW - draw(st.sampled_from([10, 200, 400, 5000]))
            annotations[QUARANTINED_AT] = iso_utc(when)
        if draw(st.booleans()):
            annotations[DRAINED_AT] = iso_utc(NOW - draw(st.sampled_from([30, 900, 7200])))
        taints = (FATAL,) if draw(st.integers(0, 3)) == 0 else ()
        if taints and draw(st.booleans()):
            annotations[OUR_TAINTS] = '["nvidia.com/gpu-error:NoSchedule"]'
        nodes.append(
            _node(
                name,
                labels=labels,
                annotations=annotations,
                unschedulable=draw(st.booleans()) if ours else draw(st.integers(0, 4)) == 0,
                taints=taints,
                ready=draw(st.sampled_from([True, True, True, False, None])),
            )
        )
    return nodes


_ACTIONS = st.lists(
    st.sampled_from(
        [
            Cordon(),
            Drain(),
            AddTaint(FATAL),
            AddTaint(Taint("soft", "", "PreferNoSchedule")),
            SetLabels((("fault", "gpu"),)),
        ]
    ),
    min_size=1,
    max_size=4,
)


@st.composite
def _limits(draw: st.DrawFn) -> Limits:
    share = draw(
        st.one_of(
            st.none(),
            st.builds(Share, st.integers(0, 12), st.just(Quota.COUNT)),
            st.builds(Share, st.sampled_from([0, 10, 20, 33.3, 50, 100]), st.just(Quota.PERCENT)),
        )
    )
    return Limits(
        max_unavailable=share,
        min_interval_s=draw(st.sampled_from([0.0, 60.0, 600.0])),
        breaker_percent=draw(st.sampled_from([None, 0.0, 25.0, 50.0, 100.0])),
        breaker_window_s=draw(st.sampled_from([60.0, 300.0, 3600.0])),
    )


def _available_before(nodes: list[NodeState]) -> dict[str, bool]:
    return {n.name: not changes.unavailable(n) for n in nodes}


@st.composite
def _findings_on(draw: st.DrawFn, nodes: list[NodeState]) -> list[tuple[str, str]]:
    names = [n.name for n in nodes] + ["ghost"]
    codes = st.sampled_from(["xid", "ecc-uncorrectable", "thermal-outlier"])
    return draw(st.lists(st.tuples(st.sampled_from(names), codes), min_size=1, max_size=20))


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[list[NodeState], list[tuple[str, str]]]:
    nodes = draw(_clusters())
    return nodes, draw(_findings_on(nodes))


@settings(max_examples=300, deadline=None)
@given(_scenarios(), _ACTIONS, _limits(), st.booleans(), st.booleans())
def test_the_limits_are_never_exceeded(
    scenario: tuple[list[NodeState], list[tuple[str, str]]],
    actions: list[Any],
    limits: Limits,
    scoped: bool,
    tripped: bool,
) -> None:
    nodes, where = scenario
    policy = Policy(
        (Rule("r", Match(codes=frozenset({"xid", "ecc-uncorrectable"})), tuple(actions)),),
        limits,
        uncordon=True,
        scope=(("pool", "gpu"),) if scoped else (),
    )
    findings = [_finding(n, code, uuid=f"GPU-{i}") for i, (n, code) in enumerate(where)]
    latch = BreakerLatch(NOW - 10, "earlier") if tripped else None
    plan = _plan(policy, findings, nodes, judged={n.name: NOW for n in nodes}, breaker=latch)

    scope = [n for n in nodes if not scoped or n.labels.get("pool") == "gpu"]
    in_scope = {n.name for n in scope}
    by_name = {n.name: n for n in nodes}
    available = _available_before(nodes)
    unavailable_before = sum(1 for n in scope if not available[n.name])

    # the nodes the plan takes out of scheduling: an available node with a planned cordon,
    # drain or blocking taint
    taken = {
        a.node
        for a in plan.actions
        if a.status is Status.PLANNED
        and a.node is not None
        and available[a.node]
        and (
            isinstance(a.action, Cordon | Drain)
            or (isinstance(a.action, AddTaint) and a.action.taint.blocking)
        )
    }
    assert taken <= in_scope
    assert plan.budget.quarantined_by_plan == len(taken)  # deferred actions spend nothing
    if limits.max_unavailable is not None:
        cap = limits.max_unavailable.of(len(scope))
        assert unavailable_before + len(taken) <= max(cap, unavailable_before)
    if limits.breaker_percent is not None:
        window = {
            n.name
            for n in scope
            if (t := changes.quarantined_at(n)) is not None
            and NOW - limits.breaker_window_s < t <= NOW
        }
        allowed = math.floor(len(scope) * limits.breaker_percent / 100)
        # NVSentinel counts nodes, once each: a node back in quarantine within the window
        # (uncordoned by a person meanwhile) is the same node
        assert len(window | taken) <= max(allowed, len(window))
    if tripped:
        assert not taken
    # a drain that starts a node's draining is spaced by min_interval
    starts = [
        a
        for a in plan.actions
        if a.status is Status.PLANNED
        and isinstance(a.action, Drain)
        and not (
            changes.drained_at(by_name[a.node or ""]) is not None and not available[a.node or ""]
        )
    ]
    if limits.min_interval_s > 0:
        assert len(starts) <= 1
        last = [changes.drained_at(n) for n in nodes if changes.drained_at(n) is not None]
        if starts and last:
            assert NOW - max(t for t in last if t is not None) >= limits.min_interval_s
    # never on an opted-out node; after a deferred action of the same node, only actions that
    # take no capacity (label, annotate, webhook)
    for action in plan.actions:
        node = by_name.get(action.node or "")
        if action.status is Status.PLANNED and node is not None:
            assert node.labels.get("gpuwarden.io/remediate") != "false"
    for name in in_scope:
        statuses = [
            (a.status, a.action.kind)
            for a in plan.actions
            if a.node == name and not isinstance(a.action, Uncordon)
        ]
        held = [i for i, (status, _) in enumerate(statuses) if status is Status.DEFERRED]
        if held:
            later = statuses[held[0] :]
            assert all(kind in CAPACITY_FREE for status, kind in later if status is Status.PLANNED)
    # uncordon only nodes gpuwarden marked, never a node with a matching finding
    flagged = {n for n, code in where if code != "thermal-outlier"}
    for action in plan.actions:
        if isinstance(action.action, Uncordon) and action.status is Status.PLANNED:
            node = by_name[action.node or ""]
            assert action.node not in flagged
            assert (
                node.labels.get(CORDONED_BY_LABEL) == "gpuwarden"
                or changes.our_taints(node)
                or any(k.startswith("gpuwarden.io/") for k in node.annotations)
            )
            if node.unschedulable and node.labels.get(CORDONED_BY_LABEL) != "gpuwarden":
                patch = changes.change_for(node, Uncordon(), None, NOW).patch or {}
                assert "unschedulable" not in patch.get("spec", {})


# --- the audit's findings (h144): brakes that defer everything, uncordon too early, names that
# are no node


def _readme_actions() -> tuple[Any, ...]:
    return (
        Cordon(),
        AddTaint(FATAL),
        Drain(timeout_s=900),
        SetLabels((("gpuwarden.io/fault", "gpu"),)),
        Webhook("https://hooks.example.com/gpu"),
    )


def test_readme_s_twenty_percent_of_four_nodes_lets_one_node_be_quarantined() -> None:
    limits = Limits(max_unavailable=Share(20, Quota.PERCENT), breaker_percent=50)
    nodes = [_node(f"n{i}") for i in range(4)]
    plan = _plan(_policy(*_readme_actions(), limits=limits), [_finding("n0")], nodes)
    assert plan.budget.max_unavailable == 1
    assert {a.status for a in plan.actions} == {Status.PLANNED}
    assert not plan.all_deferred and not plan.notes


def test_the_brakes_hold_quarantines_but_never_the_webhook_or_the_label() -> None:
    limits = Limits(max_unavailable=Share(1, Quota.COUNT), breaker_percent=None)
    nodes = [_node("n0", unschedulable=True), _node("n1"), _node("n2")]
    plan = _plan(_policy(*_readme_actions(), limits=limits), [_finding("n1")], nodes)
    kinds = [(a.action.kind, a.status, a.why) for a in plan.actions]
    assert kinds == [
        ("cordon", Status.DEFERRED, "max-unavailable"),
        ("taint", Status.DEFERRED, "after-deferred"),
        ("drain", Status.DEFERRED, "after-deferred"),
        ("label", Status.PLANNED, None),
        ("webhook", Status.PLANNED, None),
    ]
    assert plan.all_deferred
    (line,) = [n for n in plan.notes if n.startswith("all-deferred:")]
    assert line == (
        "all-deferred: 3 action(s) on 1 node(s) deferred (after-deferred, max-unavailable); "
        "nothing that takes capacity was done"
    )


def test_a_limit_that_comes_to_zero_for_the_scope_is_said() -> None:
    limits = Limits(max_unavailable=Share(0, Quota.PERCENT), breaker_percent=50)
    plan = _plan(_policy(Cordon(), limits=limits), [], [_node("only")])
    assert plan.notes == (
        "max_unavailable 0% of 1 node(s) in scope is 0: every cordon, drain and blocking taint "
        "will be deferred",
        "circuit_breaker 50% of 1 node(s) in scope is 0: the first quarantine trips it",
    )
    assert not plan.all_deferred  # nothing was to be done
    healthy = _plan(_policy(Cordon(), limits=Limits()), [], [_node(f"n{i}") for i in range(4)])
    assert healthy.notes == ()


def test_a_finding_about_no_node_of_the_cluster_still_sends_its_webhook() -> None:
    """dcgm-exporter before PR #129 put its pod's name in Hostname."""
    nodes = [_node("gpu-node-1")]
    finding = _finding("nvidia-dcgm-exporter-7x2kq")
    plan = _plan(_policy(Cordon(), Webhook("https://hooks.example.com/gpu")), [finding], nodes)
    assert [(a.action.kind, a.status, a.why) for a in plan.actions] == [
        ("cordon", Status.SKIPPED, "unknown-node"),
        ("webhook", Status.PLANNED, "unknown-node"),
    ]
    assert plan.unknown_nodes == ("nvidia-dcgm-exporter-7x2kq",)
    assert any(n.startswith("unknown-node: finding(s) name 'nvidia-dcgm") for n in plan.notes)


def _quarantined(name: str, uuid: str, gpus: int) -> NodeState:
    reason = Reason("gpu-lost", uuid, Severity.CRITICAL, "fatal", 1, gpus)
    return changes.after(_node(name), Cordon(), reason, NOW - 7200)


def test_the_quarantine_records_the_gpu_and_the_node_s_gpu_count() -> None:
    node = _quarantined("n0", "GPU-dead", 8)
    assert node.annotations[QUARANTINED_GPU] == "GPU-dead"
    assert node.annotations[QUARANTINED_GPUS] == "8"
    patch = changes.change_for(node, Uncordon(), None, NOW).patch
    assert patch is not None
    assert {QUARANTINED_GPU, QUARANTINED_GPUS} <= set(patch["metadata"]["annotations"])


def test_uncordon_waits_for_every_gpu_the_node_had_when_quarantined() -> None:
    """After a gpu-lost cordon the lost GPU leaves no finding: a document listing the node with
    7 of its 8 GPUs and no finding is not the node healthy again."""
    policy = _policy(Cordon(), uncordon=True)
    nodes = [_quarantined("n0", "GPU-dead", 8)]

    def uncordon(seen: NodeGpus) -> tuple[Status, str | None]:
        findings = FindingsInput((), {"n0": NOW - 60}, gpus={"n0": seen})
        plan = make_plan(policy, findings, ClusterState(tuple(nodes)), NOW)
        (action,) = plan.actions
        return action.status, action.why

    assert uncordon(NodeGpus(7)) == (Status.SKIPPED, "gpus-missing")
    assert uncordon(NodeGpus(None)) == (Status.SKIPPED, "gpus-unknown")
    others = frozenset(f"GPU-{i}" for i in range(8))
    assert uncordon(NodeGpus(8, others)) == (Status.SKIPPED, "gpu-not-seen")
    assert uncordon(NodeGpus(8)) == (Status.PLANNED, None)
    assert uncordon(NodeGpus(8, others | {"GPU-dead"})) == (Status.PLANNED, None)
