"""The audit log: append-only JSON lines, one per event, written as it happens (a run killed
half-way leaves every write it made in the log).

Events (``event``), each with ``schema`` ``gpuwarden.audit/1``, ``time`` (RFC 3339 UTC), ``run``
(one id per run), ``who`` (``user`` and ``host`` of the process, ``kube_user`` and ``context``
of the kubeconfig) and ``dry_run``:

* ``run-start``: the policy (path and sha256), the findings files, the API server;
* ``api-call``: one write to the cluster or one webhook POST — ``node``, ``action``, ``why``
  (``code``, ``UUID``, ``severity``, ``rule``), ``call`` (``method``, ``path``, ``query``,
  ``body``) and ``response`` (``status``, ``error``); a dry run logs its ``dryRun=All`` calls;
* ``action``: the outcome of one planned action (``status``, ``detail``);
* ``circuit-breaker``: the breaker tripped (and whether the trip was stored);
* ``run-end``: counts by status.

Header values of webhooks are never written (they carry tokens). The file is opened with
``O_APPEND``: every line lands at the end whatever else writes to it, and nothing is rewritten.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.remediate.model import (
    ActionResult,
    ApiCall,
    PlannedAction,
    Reason,
    action_params,
)
from gpuwarden.units import iso_utc

AUDIT_SCHEMA = "gpuwarden.audit/1"


@dataclass(frozen=True, slots=True)
class Who:
    user: str
    host: str
    kube_user: str | None = None
    context: str | None = None

    def record(self) -> dict[str, str | None]:
        return {
            "user": self.user,
            "host": self.host,
            "kube_user": self.kube_user,
            "context": self.context,
        }


def local_user() -> str:
    """The login name; a container without a passwd entry has only a uid."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"


def whoami(kube_user: str | None = None, context: str | None = None) -> Who:
    return Who(local_user(), socket.gethostname(), kube_user, context)


def reason_record(reason: Reason | None) -> dict[str, Any]:
    if reason is None:
        return {"code": None, "UUID": None, "severity": None, "rule": None}
    return {
        "code": reason.code,
        "UUID": reason.uuid,
        "severity": reason.severity.value if reason.severity else None,
        "rule": reason.rule,
    }


def call_record(call: ApiCall) -> dict[str, Any]:
    return {
        "method": call.method,
        "path": call.path,
        "query": dict(call.query),
        "body": call.body,
    }


class AuditError(EnvironmentProblemError):
    reference = "audit-log-unwritable"


class AuditLog:
    """Appends events to ``path``; with ``path`` None it keeps nothing (no --audit-log)."""

    def __init__(self, path: str | None, who: Who, *, dry_run: bool) -> None:
        self.path = path
        self.who = who
        self.dry_run = dry_run
        self.run = uuid.uuid4().hex[:12]
        self._fd: int | None = None
        if path is not None:
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            except OSError as exc:
                raise AuditError(
                    f"cannot open the audit log {path!r}: {exc.strerror or exc}",
                    hint="choose a writable file with --audit-log; nothing was done",
                ) from None

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def write(self, event: str, fields: Mapping[str, Any]) -> None:
        if self._fd is None:
            return
        record = {
            "schema": AUDIT_SCHEMA,
            "event": event,
            "time": iso_utc(time.time()),
            "run": self.run,
            "who": self.who.record(),
            "dry_run": self.dry_run,
            **fields,
        }
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        try:
            os.write(self._fd, line.encode())
            os.fsync(self._fd)  # a record the next crash cannot take back
        except OSError as exc:
            raise AuditError(
                f"cannot write the audit log {self.path!r}: {exc.strerror or exc}; stopped "
                "before the next action",
                hint="free space or fix the file's permissions; the log holds every action "
                "done before this one",
            ) from None

    # --- the events

    def call(self, planned: PlannedAction, call: ApiCall) -> None:
        self.write(
            "api-call",
            {
                "node": planned.node,
                "action": planned.action.kind,
                "params": action_params(planned.action),
                "why": reason_record(planned.reason),
                "call": call_record(call),
                "response": {"status": call.status, "error": call.error},
            },
        )

    def action(self, result: ActionResult) -> None:
        planned = result.planned
        self.write(
            "action",
            {
                "node": planned.node,
                "action": planned.action.kind,
                "params": action_params(planned.action),
                "why": reason_record(planned.reason),
                "status": result.status.value,
                "reason": result.why,
                "detail": result.detail,
                "calls": len(result.calls),
            },
        )
