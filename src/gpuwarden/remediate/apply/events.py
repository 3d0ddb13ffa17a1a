"""A Kubernetes Event on the node for each action done, so that `kubectl describe node` says
why gpuwarden cordoned, tainted, drained or uncordoned it, as Kubernetes' own controllers do.

Events of a cluster-scoped object live in the ``default`` namespace (client-go's event recorder
puts them there), and `kubectl describe node` finds them by ``involvedObject`` kind and name,
with the node's name as its UID — the kubelet's convention, which it searches besides the node's
real UID — so the node need not be read for its UID. An Event that cannot be written never fails
its action: the action is done, and the audit log keeps the refused call.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from gpuwarden.remediate.apply.context import Run
from gpuwarden.remediate.changes import JSON, reason_text
from gpuwarden.remediate.model import PlannedAction
from gpuwarden.types.kubernetes import NODE_EVENTS_NAMESPACE

COMPONENT = "gpuwarden-remediate"
MAX_MESSAGE = 1024  # events.k8s.io/v1 refuses a longer note; core/v1 stores it, kubectl folds it
# Event reasons are UpperCamelCase (the API conventions): one per action kind.
REASONS = {
    "cordon": "GpuwardenCordoned",
    "taint": "GpuwardenTainted",
    "drain": "GpuwardenDrained",
    "label": "GpuwardenLabelled",
    "annotate": "GpuwardenAnnotated",
    "webhook": "GpuwardenNotified",
    "uncordon": "GpuwardenUncordoned",
}


def node_event(planned: PlannedAction, detail: str, now_s: float) -> JSON:
    node = planned.node or ""
    why = reason_text(planned.reason)
    message = f"{detail}: {why}" if why else detail
    # RFC 3339 with +00:00: the form the kubernetes client sends a time in whatever it is given,
    # so the audit log shows the body exactly as sent
    when = datetime.fromtimestamp(now_s, UTC).isoformat(timespec="seconds")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # the recorder's "<object>.<unique suffix>"; two runs in one instant must not collide
        "metadata": {"name": f"{node}.{secrets.token_hex(8)}", "namespace": NODE_EVENTS_NAMESPACE},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
        "reason": REASONS.get(planned.action.kind, "Gpuwarden"),
        "message": message[:MAX_MESSAGE],
        "type": "Normal" if planned.action.kind == "uncordon" else "Warning",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
    }


def record_event(run: Run, planned: PlannedAction, detail: str) -> None:
    """POST the Event (with dryRun=All in a dry run, like every write)."""
    body = node_event(planned, detail, run.now)
    run.record(planned, run.cluster.create_event(NODE_EVENTS_NAMESPACE, body, run.settings.dry_run))
