"""A drain through the Eviction API (``policy/v1``).

It lists the node's pods, leaves DaemonSet-owned, mirror, finished pods and the skipped
namespaces alone, and evicts the rest: a ``429`` from a PodDisruptionBudget is tried again with
exponential backoff (or after the wait the server asks for, when longer) until the drain's
per-node timeout; a ``404`` (the pod went away meanwhile)
counts as done; then it waits, until the same deadline, for the evicted pods to be gone. Pods with
no controller are left (evicting them would lose them for good, as ``kubectl drain`` refuses
without ``--force``) unless ``force``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuwarden.remediate import changes
from gpuwarden.remediate.apply.client import (
    api_message,
    explain,
    list_items,
    shown_answer,
    why_failed,
)
from gpuwarden.remediate.apply.context import Run, done_status, write_mark
from gpuwarden.remediate.model import Drain, NodeState, PlannedAction, Status

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # static pods' mirrors: the kubelet owns them
NO_CONTROLLER = "no controller"  # a reason a pod is left (force: true evicts it)


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
            why = NO_CONTROLLER
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
    forbidden: bool = False  # an eviction answered 403: the RBAC permission is missing
    lingering: list[str] = field(default_factory=list)  # evicted, not gone by the deadline


def _evict_all(
    run: Run, planned: PlannedAction, pods: list[_Pod], drain: Drain, deadline: float
) -> _Eviction:
    """Evict each pod; 429 → again after a backoff (a PDB allows it later), until the deadline."""
    out = _Eviction()
    pending = pods
    wait = run.settings.eviction_backoff_s
    while pending:
        retry: list[_Pod] = []
        asked_s = 0.0
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
                out.blocked[pod.ref] = api_message(answer.body) or "429 Too Many Requests"
                asked_s = max(asked_s, retry_after_s(answer.body))
                retry.append(pod)
            else:
                out.failed[pod.ref] = explain(answer.call, answer.body)
                out.forbidden = out.forbidden or answer.status == 403
        pending = retry
        pause = max(wait, asked_s)
        if not pending or run.now + pause > deadline:
            for pod in pending:
                out.blocked.setdefault(pod.ref, "the drain's timeout came first")
            break
        run.sleep(pause)
        wait = min(wait * 2, run.settings.max_backoff_s)
    return out


def retry_after_s(body: Any) -> float:
    """The wait a 429's Status asks for (``details.retryAfterSeconds``, which the API server also
    sends as ``Retry-After``); 0 when it names none."""
    details = body.get("details") if isinstance(body, dict) else None
    asked = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    if isinstance(asked, bool) or not isinstance(asked, int) or asked <= 0:
        return 0.0
    return float(asked)


def _wait_gone(run: Run, planned: PlannedAction, out: _Eviction, deadline: float) -> None:
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


def drain_node(
    run: Run, planned: PlannedAction, drain: Drain, node: NodeState
) -> tuple[Status, str, str | None]:
    """Drain ``node`` (see the module's docstring): (status, detail, why)."""
    deadline = run.now + drain.timeout_s
    listed = run.record(planned, run.cluster.pods_on(node.name, drain.timeout_s))
    if not listed.ok:
        return (
            Status.FAILED,
            f"cannot list the node's pods: {explain(listed.call, listed.body)}",
            why_failed(listed.call),
        )
    items = list_items(listed)
    if items is None:  # read as "no pods" the node would count as drained with its pods on
        return (
            Status.FAILED,
            f"cannot list the node's pods: the answer is {shown_answer(listed)}, not a PodList",
            "api-error",
        )
    pods, left = _sort_pods(items, drain)
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
        error = write_mark(run, planned, node, marks, run.settings.dry_run)
        if error is not None:
            text += f"; the drained-at mark was not written ({error})"
    if problems:
        why = "pdb-blocked" if out.blocked and not out.failed else _failed_why(out)
        return Status.FAILED, f"{text}; " + "; ".join(problems), why
    return done_status(run.settings.dry_run), text, None


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
    if NO_CONTROLLER in left:
        problems.append(
            "pods with no controller are not evicted (they would be lost for good): delete "
            "them yourself, or set drain: {force: true}"
        )
    return problems


def _failed_why(out: _Eviction) -> str:
    if out.forbidden:
        return "forbidden"
    return "eviction-failed" if out.failed else "drain-timeout"
