"""What one execution of a plan carries from action to action: the cluster, the settings, the
audit log, the calls of the action at hand, and the node as the last mark left it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpuwarden.remediate import changes
from gpuwarden.remediate.apply.client import Answer, KubeCluster, explain
from gpuwarden.remediate.audit import AuditLog
from gpuwarden.remediate.changes import JSON
from gpuwarden.remediate.model import ApiCall, NodeState, PlannedAction, Status
from gpuwarden.transport import RetryPolicy, Transport

ProgressFn = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ApplySettings:
    dry_run: bool = True
    conflict_retries: int = 3
    eviction_backoff_s: float = 1.0  # first wait after a 429; doubled up to max_backoff_s
    max_backoff_s: float = 30.0
    poll_s: float = 1.0  # while waiting for evicted pods to go
    webhook_retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(attempts=3))


@dataclass(slots=True)
class Run:
    """One execution: what every action needs, and what the action at hand did."""

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


def done_status(dry_run: bool) -> Status:
    return Status.PLANNED if dry_run else Status.APPLIED


def node_from_answer(answer: Answer, before: NodeState, dry_run: bool) -> NodeState:
    if not isinstance(answer.body, dict) or answer.body.get("kind") != "Node":
        return before
    after = changes.node_state(answer.body)
    # a dry run stored nothing: the next patch must still name the stored version
    return replace(after, resource_version=before.resource_version) if dry_run else after


def write_mark(
    run: Run, planned: PlannedAction, node: NodeState, patch: JSON, dry: bool
) -> str | None:
    """An annotation-only patch (no resourceVersion: maps merge, nothing to lose); the node
    after it becomes the node's state for its next action. The error in words, or None."""
    answer = run.record(planned, run.cluster.patch_node(node.name, patch, dry))
    if not answer.ok:
        return explain(answer.call, answer.body)
    run.node_after = node_from_answer(answer, node, dry)
    return None
