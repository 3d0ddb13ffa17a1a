"""Running a plan's actions, node by node, in order.

Node patches are strategic-merge patches carrying the ``resourceVersion`` read: a node another
client changed in between answers ``409 Conflict``; the node is read again and the change worked
out anew (someone else may have done it meanwhile), up to ``conflict_retries`` times. A webhook is
a POST through ``gpuwarden.transport``, recorded on the node so that it is sent once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import overload

from gpuwarden.remediate import changes
from gpuwarden.remediate.apply.client import Answer, KubeCluster, explain, why_failed
from gpuwarden.remediate.apply.context import (
    ApplySettings,
    ProgressFn,
    Run,
    done_status,
    node_from_answer,
    write_mark,
)
from gpuwarden.remediate.apply.drain import drain_node
from gpuwarden.remediate.apply.events import record_event
from gpuwarden.remediate.audit import AuditLog, reason_record
from gpuwarden.remediate.changes import JSON
from gpuwarden.remediate.model import (
    ActionResult,
    ApiCall,
    ClusterState,
    Drain,
    NodeState,
    Plan,
    PlannedAction,
    Status,
    Webhook,
)
from gpuwarden.transport import (
    Request,
    Transport,
    TransportError,
    default_transport,
    send_with_retries,
)
from gpuwarden.units import iso_utc


def _with_version(patch: JSON, version: str | None) -> JSON:
    if version is None:
        return patch
    meta = {**patch.get("metadata", {}), "resourceVersion": version}
    return {**patch, "metadata": meta}


def _patch(
    run: Run, planned: PlannedAction, node: NodeState, now_s: float
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
                done_status(dry),
                change.detail + suffix,
                None,
                node_from_answer(answer, current, dry),
            )
        if answer.status != 409:
            return (
                Status.FAILED,
                explain(answer.call, answer.body),
                why_failed(answer.call),
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


# --- webhook


def webhook_body(planned: PlannedAction, cluster: str, now_s: float) -> JSON:
    finding = planned.finding
    return {
        "schema": "gpuwarden.remediation-event/1",
        "time": iso_utc(now_s),
        "cluster": cluster,
        "node": planned.node,
        "reason": reason_record(planned.reason),
        "finding": None
        if finding is None
        else {"title": finding.title, "source": finding.source, **dict(finding.labels)},
    }


def _webhook(
    run: Run, planned: PlannedAction, hook: Webhook, node: NodeState | None
) -> tuple[Status, str, str | None]:
    """POST the finding; on a node of the cluster, mark it sent (the next run sends it not
    again). A finding whose node the cluster does not have has nowhere to keep that mark."""
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
    if node is None:
        note = "; no node to record it on: the next run sends it again"
        return Status.APPLIED, f"POST {hook.shown_url}: HTTP {answer.status}{note}", planned.why
    assert planned.reason is not None
    key = changes.fingerprint(planned.reason.rule, hook, planned.finding)
    error = write_mark(run, planned, node, changes.notified_patch(node, key, run.now), False)
    note = "" if error is None else f"; not recorded on the node ({error}): the next run sends it"
    return Status.APPLIED, f"POST {hook.shown_url}: HTTP {answer.status}{note}", None


# --- the run


def _act(
    run: Run, planned: PlannedAction, node: NodeState | None, started: float
) -> tuple[Status, str, str | None, NodeState | None]:
    """The action itself: (status, detail, why, the node after). Only a webhook runs without
    a node (its finding names no node of the cluster)."""
    action = planned.action
    if isinstance(action, Webhook):
        return (*_webhook(run, planned, action, node), node)
    assert node is not None, "execute gives a node to every action but a webhook"
    if isinstance(action, Drain):
        return (*drain_node(run, planned, action, node), node)
    return _patch(run, planned, node, started)  # the node patches: cordon, taint, labels, …


@overload
def _one(run: Run, planned: PlannedAction, node: NodeState) -> tuple[ActionResult, NodeState]: ...
@overload
def _one(run: Run, planned: PlannedAction, node: None) -> tuple[ActionResult, None]: ...
def _one(
    run: Run, planned: PlannedAction, node: NodeState | None
) -> tuple[ActionResult, NodeState | None]:
    """One action, audited, with its Event on the node when done. ``node`` None: a webhook
    about no node of the cluster — no progress line, no Event (there is no node to name)."""
    started = run.now
    run.calls = []
    run.node_after = None
    if run.progress is not None and node is not None:
        run.progress(f"{planned.node}: {planned.action.kind}")
    status, detail, why, node = _act(run, planned, node, started)
    if node is not None and status is done_status(run.settings.dry_run):
        record_event(run, planned, detail)
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
    run = Run(cluster, settings, audit, transport or default_transport(), sleep, progress)
    nodes = {n.name: n for n in state.nodes}
    failed: dict[str, str] = {}
    results: list[ActionResult] = []
    for planned in plan.actions:
        unplaced = planned.node is None or planned.node not in nodes
        if planned.status is Status.PLANNED and isinstance(planned.action, Webhook) and unplaced:
            results.append(_one(run, planned, None)[0])
            continue
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
