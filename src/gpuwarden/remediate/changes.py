"""What an action would change on a node, and the node afterwards — pure, so the plan (is it
already done? does it make the node unavailable?) and the apply (the patch it sends, again after
a 409 Conflict) share one answer.

Patches are strategic-merge patches of the Node, as kubectl sends them: ``spec.unschedulable``
for cordon, the whole ``spec.taints`` list (it has no merge key: the list is replaced, as
``kubectl taint`` does), and labels and annotations as maps (``null`` deletes a key).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from gpuwarden.remediate.model import (
    CORDONED_BY_LABEL,
    CORDONED_BY_VALUE,
    DRAINED_AT,
    MAX_NOTIFIED,
    NOTIFIED,
    OUR_ANNOTATIONS,
    OUR_TAINTS,
    QUARANTINED_AT,
    QUARANTINED_GPU,
    QUARANTINED_GPUS,
    REASON,
    Action,
    AddTaint,
    Cordon,
    Drain,
    NodeFinding,
    NodeState,
    Reason,
    SetAnnotations,
    SetLabels,
    Taint,
    Uncordon,
    Webhook,
)
from gpuwarden.units import iso_utc

JSON = dict[str, Any]


def parse_iso(text: str | None) -> float | None:
    """An RFC 3339 annotation → Unix seconds; None when absent or not a time (a person edited
    it): unknown, never an error. A time is one ``iso`` can show again (a UTC date)."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
        return when.astimezone(UTC).timestamp() if when.tzinfo is not None else None
    except (ValueError, OverflowError):  # 9999-12-31T23:00:00-02:00 is in the year 10000 UTC
        return None


# --- reading a Node object


def _taint(entry: object) -> Taint | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
        return None
    value = entry.get("value")
    return Taint(entry["key"], value if isinstance(value, str) else "", str(entry.get("effect")))


def _ready(status: object) -> bool | None:
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return None


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def node_state(obj: Mapping[str, Any]) -> NodeState:
    """A Node as the API returns it (JSON) → ``NodeState``."""
    meta = _object(obj.get("metadata"))
    spec = _object(obj.get("spec"))
    taints = spec.get("taints")
    version = meta.get("resourceVersion")
    return NodeState(
        name=str(meta.get("name")),
        labels=_strings(meta.get("labels")),
        annotations=_strings(meta.get("annotations")),
        unschedulable=spec.get("unschedulable") is True,
        taints=tuple(
            t for t in (_taint(e) for e in (taints if isinstance(taints, list) else ())) if t
        ),
        ready=_ready(obj.get("status")),
        resource_version=version if isinstance(version, str) else None,
    )


# --- what gpuwarden did to a node


def cordoned_by_us(node: NodeState) -> bool:
    return node.labels.get(CORDONED_BY_LABEL) == CORDONED_BY_VALUE


def our_taints(node: NodeState) -> frozenset[tuple[str, str]]:
    """(key, effect) of the taints gpuwarden added (its annotation; garbage reads as none)."""
    try:
        listed = json.loads(node.annotations.get(OUR_TAINTS, "[]"))
    except ValueError:
        return frozenset()
    if not isinstance(listed, list):
        return frozenset()
    pairs = (str(item).rpartition(":") for item in listed)
    return frozenset((key, effect) for key, sep, effect in pairs if sep)


def quarantined_at(node: NodeState) -> float | None:
    return parse_iso(node.annotations.get(QUARANTINED_AT))


def drained_at(node: NodeState) -> float | None:
    return parse_iso(node.annotations.get(DRAINED_AT))


def unavailable(node: NodeState) -> bool:
    """Out of the scheduler's reach: cordoned (by anyone), NotReady, or carrying a blocking taint
    gpuwarden put there. Others' NoSchedule taints do not count: GPU nodes commonly carry one to
    keep CPU pods off (``nvidia.com/gpu=present:NoSchedule``)."""
    if node.unschedulable or node.ready is False:
        return True
    ours = our_taints(node)
    return any(t.blocking and (t.key, t.effect) in ours for t in node.taints)


def notified(node: NodeState) -> dict[str, str]:
    try:
        sent = json.loads(node.annotations.get(NOTIFIED, "{}"))
    except ValueError:
        return {}
    return _strings(sent)


def fingerprint(rule: str, webhook: Webhook, finding: NodeFinding | None) -> str:
    """One notification per (rule, URL, code, GPU): the same finding does not page twice."""
    code = finding.code if finding else ""
    uuid = (finding.uuid or finding.node or "") if finding else ""
    text = "\0".join((rule, webhook.url, code, uuid))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- patches


@dataclass(frozen=True, slots=True)
class Change:
    """What an action does to a node: the patch, or why it needs none."""

    patch: JSON | None  # None: nothing to change
    why_not: str | None = None  # kebab-case when patch is None
    detail: str = ""  # what is (or would be) changed, or why nothing is


def reason_text(reason: Reason | None) -> str:
    if reason is None:
        return ""
    return " ".join(p for p in (reason.code, reason.uuid or "", f"(rule {reason.rule})") if p)


def _quarantine_marks(node: NodeState, reason: Reason | None, now_s: float) -> JSON:
    """The marks of a new quarantine; an existing one keeps its time (the breaker's window).
    With them, what uncordon must see again: the triggering GPU and the node's GPU count."""
    if unavailable(node) and quarantined_at(node) is not None:
        return {}
    marks: JSON = {QUARANTINED_AT: iso_utc(now_s), REASON: reason_text(reason)[:1024]}
    if reason is not None and reason.uuid:
        marks[QUARANTINED_GPU] = reason.uuid
    if reason is not None and reason.node_gpus is not None:
        marks[QUARANTINED_GPUS] = str(reason.node_gpus)
    return marks


def quarantined_gpu(node: NodeState) -> str | None:
    return node.annotations.get(QUARANTINED_GPU) or None


def quarantined_gpus(node: NodeState) -> int | None:
    """The GPU count recorded with the quarantine; None when absent or not a count (a person
    edited it)."""
    text = node.annotations.get(QUARANTINED_GPUS, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 7 else None


def _cordon(node: NodeState, reason: Reason | None, now_s: float) -> Change:
    if node.unschedulable:
        who = "gpuwarden" if cordoned_by_us(node) else "someone else (not gpuwarden)"
        return Change(None, "already-cordoned", f"already cordoned, by {who}")
    return Change(
        {
            "spec": {"unschedulable": True},
            "metadata": {
                "labels": {CORDONED_BY_LABEL: CORDONED_BY_VALUE},
                "annotations": _quarantine_marks(node, reason, now_s),
            },
        },
        detail="cordon (spec.unschedulable: true)",
    )


def _taints_record(taints: frozenset[tuple[str, str]]) -> str:
    return json.dumps(sorted(f"{k}:{e}" for k, e in taints))


def _add_taint(node: NodeState, taint: Taint, reason: Reason | None, now_s: float) -> Change:
    same = [t for t in node.taints if (t.key, t.effect) == (taint.key, taint.effect)]
    if same and same[0].value == taint.value:
        return Change(None, "already-tainted", f"already tainted {_taint_text(taint)}")
    kept = [t.record() for t in node.taints if (t.key, t.effect) != (taint.key, taint.effect)]
    annotations: JSON = {OUR_TAINTS: _taints_record(our_taints(node) | {(taint.key, taint.effect)})}
    if taint.blocking:
        annotations.update(_quarantine_marks(node, reason, now_s))
    verb = "replace the value of" if same else "add"
    return Change(
        {"spec": {"taints": [*kept, taint.record()]}, "metadata": {"annotations": annotations}},
        detail=f"{verb} taint {_taint_text(taint)}",
    )


def _taint_text(taint: Taint) -> str:
    return (
        f"{taint.key}={taint.value}:{taint.effect}"
        if taint.value
        else f"{taint.key}:{taint.effect}"
    )


def _set_map(
    current: Mapping[str, str], wanted: tuple[tuple[str, str], ...], field: str, what: str
) -> Change:
    changed = {k: v for k, v in wanted if current.get(k) != v}
    if not changed:
        return Change(None, f"already-{what}", f"already {what}: {_pairs_text(wanted)}")
    return Change(
        {"metadata": {field: changed}}, detail=f"set {_pairs_text(tuple(changed.items()))}"
    )


def _pairs_text(pairs: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in pairs)


def _uncordon(node: NodeState) -> Change:
    ours = our_taints(node)
    spec: JSON = {}
    if node.unschedulable and cordoned_by_us(node):
        spec["unschedulable"] = None
    removed = [t for t in node.taints if (t.key, t.effect) in ours]
    if removed:
        spec["taints"] = [t.record() for t in node.taints if (t.key, t.effect) not in ours]
    labels = {CORDONED_BY_LABEL: None} if CORDONED_BY_LABEL in node.labels else {}
    annotations = {k: None for k in OUR_ANNOTATIONS if k in node.annotations}
    if not spec and not labels and not annotations:
        return Change(None, "not-ours", "no quarantine of gpuwarden's on the node")
    if node.unschedulable and not cordoned_by_us(node):
        what = "remove gpuwarden's marks; the cordon is someone else's and stays"
    else:
        parts = ["uncordon"] if "unschedulable" in spec else []
        parts += [f"remove taint {_taint_text(t)}" for t in removed]
        what = ", ".join(parts) or "remove gpuwarden's marks"
    patch: JSON = {"metadata": {"labels": labels, "annotations": annotations}}
    if spec:
        patch["spec"] = spec
    return Change(patch, detail=what)


def change_for(node: NodeState, action: Action, reason: Reason | None, now_s: float) -> Change:
    """The patch ``action`` needs on ``node`` (None when it is already so). Drain and webhook
    are not patches: see ``drain_marks`` and ``notified_patch``."""
    match action:
        case Cordon():
            return _cordon(node, reason, now_s)
        case AddTaint():
            return _add_taint(node, action.taint, reason, now_s)
        case SetLabels():
            return _set_map(node.labels, action.labels, "labels", "labelled")
        case SetAnnotations():
            return _set_map(node.annotations, action.annotations, "annotations", "annotated")
        case Uncordon():
            return _uncordon(node)
        case Drain() | Webhook():
            raise ValueError(f"{action.kind} is not a node patch")


def quarantines(node: NodeState, action: Action) -> bool:
    """Does ``action`` take a node that is available out of the scheduler's reach?"""
    if unavailable(node):
        return False
    match action:
        case Cordon() | Drain():  # drain cordons first, as kubectl drain does
            return True
        case AddTaint():
            return action.taint.blocking
        case _:
            return False


def after(node: NodeState, action: Action, reason: Reason | None, now_s: float) -> NodeState:
    """The node once ``action`` is done (what the plan assumes for the node's next actions)."""
    if isinstance(action, Drain):
        action = Cordon()
    if isinstance(action, Webhook):
        return node
    change = change_for(node, action, reason, now_s)
    return node if change.patch is None else patched(node, change.patch)


def _merged(current: Mapping[str, str], update: object) -> dict[str, str]:
    out = dict(current)
    for key, value in (update if isinstance(update, dict) else {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = str(value)
    return out


def patched(node: NodeState, patch: JSON) -> NodeState:
    """``node`` with a patch of ``change_for`` applied (as the API server would)."""
    meta = patch.get("metadata", {})
    spec = patch.get("spec", {})
    taints = node.taints
    if "taints" in spec:
        taints = tuple(t for t in (_taint(e) for e in spec["taints"] or []) if t is not None)
    return replace(
        node,
        labels=_merged(node.labels, meta.get("labels")),
        annotations=_merged(node.annotations, meta.get("annotations")),
        unschedulable=spec["unschedulable"] is True
        if "unschedulable" in spec
        else node.unschedulable,
        taints=taints,
    )


def drain_marks(node: NodeState, now_s: float) -> JSON | None:
    """The annotation of a first drain (min_interval's clock); None when one is there."""
    if drained_at(node) is not None:
        return None
    return {"metadata": {"annotations": {DRAINED_AT: iso_utc(now_s)}}}


def notified_patch(node: NodeState, key: str, now_s: float) -> JSON:
    sent = notified(node)
    sent[key] = iso_utc(now_s)
    newest = dict(sorted(sent.items(), key=lambda kv: kv[1])[-MAX_NOTIFIED:])
    return {"metadata": {"annotations": {NOTIFIED: json.dumps(newest, sort_keys=True)}}}
