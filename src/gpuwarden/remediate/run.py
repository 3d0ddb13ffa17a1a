"""One `gpuwarden remediate` run: read the policy and the findings, read the cluster, plan,
store a circuit-breaker trip, act (or dry-run), and keep the audit log of it all.

Nothing reaches the cluster before the policy, the findings and the audit log are known to be
usable: a bad input fails the run before its first request.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpuwarden.remediate.apply import (
    DEFAULT_REQUEST_TIMEOUT_S,
    ApplySettings,
    ProgressFn,
    closing,
    connect,
    execute,
    holding,
    read_cluster,
    trip_breaker,
)
from gpuwarden.remediate.audit import AuditLog, whoami
from gpuwarden.remediate.findings import load_findings
from gpuwarden.remediate.model import Remediation
from gpuwarden.remediate.plan import make_plan
from gpuwarden.remediate.policy import load_policy
from gpuwarden.transport import Transport


@dataclass(frozen=True, slots=True)
class RemediateOptions:
    policy: str
    findings: tuple[str, ...]
    kubeconfig: str | None = None
    context: str | None = None
    apply: bool = False
    audit_log: str | None = None
    node: str | None = None  # the node of doctor documents (their host may be a pod's name)
    allow_simulated: bool = False
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    settings: ApplySettings | None = None  # tests: shorter backoffs and polls


def remediate(
    options: RemediateOptions,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    transport: Transport | None = None,
    progress: ProgressFn | None = None,
) -> Remediation:
    policy = load_policy(options.policy)
    findings = load_findings(options.findings, options.node)
    dry_run = not options.apply
    cluster = connect(options.kubeconfig, options.context, options.request_timeout_s)
    cluster.clock = clock
    settings = replace(options.settings or ApplySettings(), dry_run=dry_run)
    with (
        closing(cluster),
        AuditLog(
            options.audit_log, whoami(cluster.user, cluster.context), dry_run=dry_run
        ) as audit,
        holding(cluster, policy, audit, dry_run=dry_run) as lock,
    ):
        state = read_cluster(cluster, policy)
        plan = make_plan(policy, findings, state, clock(), allow_simulated=options.allow_simulated)
        audit.write(
            "run-start",
            {
                "policy": {"path": options.policy, "sha256": policy.sha256},
                "findings": [
                    {"path": p, "sha256": digest}
                    for p, digest in zip(findings.sources, findings.sha256, strict=True)
                ],
                "cluster": {"server": cluster.server, "context": cluster.context},
                "planned": Counter(a.status.value for a in plan.actions),
            },
        )
        notes = list(findings.notes)
        stored = False
        trips = plan.budget.breaker_trips
        if trips is not None and not dry_run:
            stored, text = trip_breaker(cluster, policy, trips, audit, clock())
            notes.append(f"circuit breaker: {text}")
        results = execute(
            plan,
            state,
            cluster,
            audit,
            settings,
            transport=transport,
            sleep=sleep if lock is None else lock.sleeping(sleep),
            progress=progress,
        )
        audit.write("run-end", {"results": Counter(r.status.value for r in results)})
    return Remediation(
        plan=plan,
        results=results,
        dry_run=dry_run,
        cluster=cluster.server,
        context=cluster.context,
        policy=options.policy,
        findings=tuple(options.findings),
        audit_log=options.audit_log,
        breaker_written=stored,
        notes=tuple(notes),
    )
