"""`gpuwarden remediate`: the `gpuwarden.remediation/1` document and the terminal table.

The document (diagnosis.md §3, fields beyond it documented in the README):

* ``actions``: one per (node, action) in the order they ran — ``node``, ``action``, ``params``,
  ``reason`` (``code``, ``UUID``, ``severity``, ``rule``, ``findings``: how many findings on the
  node that rule matched), ``status`` (planned · applied · deferred · skipped · failed), ``why``
  (kebab-case, for scripts: ``max-unavailable``, ``circuit-breaker``, ``min-interval``,
  ``already-cordoned``, ``forbidden``, ...), ``detail`` (in words), ``calls`` (each request:
  method, path, query, body, the HTTP status and error), ``started``/``finished``;
* ``limits``: the blast radius before and after (nodes in scope, unavailable, max_unavailable),
  the circuit breaker (limit per window, quarantines in the window, state, why, whether the trip
  was stored, how to reset it) and min_interval's clock;
* ``dry_run``, ``cluster``, ``policy``, ``findings``, ``audit_log``, ``summary`` (counts by
  status), ``notes``.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from rich.table import Table
from rich.text import Text

from gpuwarden.remediate import audit
from gpuwarden.remediate.model import (
    ActionResult,
    ApiCall,
    Budget,
    Reason,
    Remediation,
    Status,
    action_params,
)
from gpuwarden.report.output import console, print_json
from gpuwarden.units import iso_utc

REMEDIATION_SCHEMA = "gpuwarden.remediation/1"
_STYLE = {
    Status.PLANNED: "cyan",
    Status.APPLIED: "green",
    Status.DEFERRED: "yellow",
    Status.SKIPPED: "dim",
    Status.FAILED: "bold red",
}


def _time(seconds: float | None) -> str | None:
    return None if seconds is None else iso_utc(seconds)


def reason_record(reason: Reason | None) -> dict[str, Any]:
    """The audit log's record of a reason, with how many findings the rule matched."""
    return {**audit.reason_record(reason), "findings": 0 if reason is None else reason.findings}


def call_record(call: ApiCall) -> dict[str, Any]:
    """The audit log's record of a call, with its answer and time."""
    return {
        **audit.call_record(call),
        "status": call.status,
        "error": call.error,
        "at": _time(call.at_s),
    }


def action_record(result: ActionResult) -> dict[str, Any]:
    planned = result.planned
    return {
        "node": planned.node,
        "action": planned.action.kind,
        "params": action_params(planned.action),
        "reason": reason_record(planned.reason),
        "status": result.status.value,
        "why": result.why,
        "detail": result.detail,
        "calls": [call_record(c) for c in result.calls],
        "started": _time(result.started_s),
        "finished": _time(result.finished_s),
    }


def _breaker_record(remediation: Remediation) -> dict[str, Any]:
    budget = remediation.plan.budget
    latch = budget.breaker_tripped_before
    state = "tripped" if latch is not None or budget.breaker_trips else "closed"
    return {
        "state": state,
        "limit": budget.breaker_limit,
        "quarantined_in_window": budget.quarantined_in_window,
        "quarantined_by_run": budget.quarantined_by_plan,
        "tripped_at": _time(latch.tripped_at_s) if latch else None,
        "reason": latch.reason if latch else budget.breaker_trips,
        "tripped_by_run": budget.breaker_trips is not None and latch is None,
        "stored": remediation.breaker_written,
    }


def limits_record(remediation: Remediation) -> dict[str, Any]:
    budget = remediation.plan.budget
    return {
        "nodes_in_scope": budget.nodes_in_scope,
        "unavailable_before": budget.unavailable_before,
        "max_unavailable": budget.max_unavailable,
        "unavailable_after": budget.unavailable_after,
        "circuit_breaker": _breaker_record(remediation),
        "min_interval": {
            "last_started": _time(budget.last_spaced_s),
            "started_by_run": budget.spaced_by_plan,
        },
    }


def summary(remediation: Remediation) -> dict[str, int]:
    counts = Counter(r.status.value for r in remediation.results)
    return {s.value: counts.get(s.value, 0) for s in Status}


def remediation_document(remediation: Remediation) -> dict[str, Any]:
    return {
        "schema": REMEDIATION_SCHEMA,
        "dry_run": remediation.dry_run,
        "time": iso_utc(remediation.plan.now_s),
        "cluster": {"server": remediation.cluster, "context": remediation.context},
        "policy": remediation.policy,
        "findings": list(remediation.findings),
        "audit_log": remediation.audit_log,
        "limits": limits_record(remediation),
        "actions": [action_record(r) for r in remediation.results],
        "summary": summary(remediation),
        "notes": [*remediation.plan.notes, *remediation.notes],
    }


def print_remediation_json(remediation: Remediation) -> None:
    print_json(remediation_document(remediation))


# --- terminal


def _budget_lines(remediation: Remediation) -> list[Text]:
    budget: Budget = remediation.plan.budget
    cap = "no limit" if budget.max_unavailable is None else f"max {budget.max_unavailable}"
    lines = [
        Text(
            f"nodes in scope {budget.nodes_in_scope} · unavailable {budget.unavailable_before} → "
            f"{budget.unavailable_after} ({cap})"
        )
    ]
    breaker = _breaker_record(remediation)
    if budget.breaker_limit is not None:
        lines.append(
            Text(
                f"circuit breaker: {breaker['state']} · quarantined in the window "
                f"{budget.quarantined_in_window} + {budget.quarantined_by_plan} (limit "
                f"{budget.breaker_limit})",
                style="bold red" if breaker["state"] == "tripped" else "",
            )
        )
    if breaker["state"] == "tripped":
        lines.append(Text(f"  why: {breaker['reason']}", style="red"))
        if remediation.dry_run and breaker["tripped_by_run"]:
            lines.append(Text("  a run with --apply would store the trip and stop", style="red"))
    return lines


def _reason_text(result: ActionResult) -> str:
    reason = result.planned.reason
    if reason is None:
        return "healthy" if result.planned.action.kind == "uncordon" else ""
    gpu = f" {reason.uuid}" if reason.uuid else ""
    more = f" (+{reason.findings - 1})" if reason.findings > 1 else ""
    return f"{reason.code}{gpu}{more}"


def _table(remediation: Remediation) -> Table:
    table = Table(show_header=True, header_style="bold", show_lines=False)
    for column in ("node", "action", "status", "reason", "detail"):
        table.add_column(column, overflow="fold")
    for result in remediation.results:
        table.add_row(
            result.planned.node or "–",
            result.planned.action.kind,
            Text(result.status.value, style=_STYLE[result.status]),
            _reason_text(result),
            result.detail,
        )
    return table


def print_remediation_table(remediation: Remediation) -> None:
    out = console()
    mode = (
        Text("DRY RUN: nothing was changed (writes sent with dryRun=All; --apply acts)", "bold")
        if remediation.dry_run
        else Text("APPLIED", "bold")
    )
    out.print(mode)
    out.print(
        Text(
            f"cluster {remediation.cluster}"
            + (f" ({remediation.context})" if remediation.context else "")
        )
    )
    for line in _budget_lines(remediation):
        out.print(line)
    if remediation.results:
        out.print(_table(remediation))
    else:
        out.print(Text("no finding matches a rule: nothing to do"))
    counts = ", ".join(f"{n} {s}" for s, n in summary(remediation).items() if n)
    if counts:
        out.print(Text(counts))
    for note in [*remediation.plan.notes, *remediation.notes]:
        out.print(Text(f"note: {note}", style="yellow"))
    if remediation.audit_log:
        out.print(Text(f"audit log: {remediation.audit_log}", style="dim"))


def progress_printer() -> Callable[[str], None] | None:
    """One line on stderr per action while a run acts (drains take minutes); None when stderr
    is not a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(text: str) -> None:
        print(f"… {text}", file=sys.stderr, flush=True)

    return show
