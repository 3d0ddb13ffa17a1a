"""One applying run at a time: a ``coordination.k8s.io/v1`` Lease beside the circuit breaker's
ConfigMap (same namespace and name), held the way Kubernetes' leader election holds one.

Two runs acting at once could each stay within ``max_unavailable`` and together exceed it, or
both act before either stores a breaker trip. A run that finds the Lease held by another and not
expired stops before it reads the cluster. A holder that died leaves a Lease that expires
``LEASE_DURATION_S`` after its last renewal; a live run renews it between its waits (drain
backoffs and polls), at most every ``RENEW_EVERY_S``, and gives it back when it ends. Taking it
is conditional (create, or a PUT naming the version read): of two runs racing for it, one gets
``409 Conflict`` and stops. Dry runs take no lock: they store nothing.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.remediate import changes
from gpuwarden.remediate.apply.client import Answer, KubeCluster
from gpuwarden.remediate.apply.state import MANAGED_BY, unreachable
from gpuwarden.remediate.audit import AuditLog
from gpuwarden.remediate.changes import JSON
from gpuwarden.remediate.model import Policy
from gpuwarden.units import iso_utc

LEASE_DURATION_S = 300  # a dead run's lock frees itself this long after its last renewal
RENEW_EVERY_S = 60.0


def holder_identity() -> str:
    """Who holds the lock, as `kubectl get lease` shows it: the host (a pod's name in a
    CronJob), the process, and a nonce so two runs on one host differ."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def _micro_time(seconds: float) -> str:
    """A Lease's MicroTime: RFC 3339 in UTC with microseconds."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _spec(body: Any) -> dict[str, Any]:
    spec = body.get("spec") if isinstance(body, dict) else None
    return spec if isinstance(spec, dict) else {}


def expires_at_s(lease: Any) -> float | None:
    """When a held Lease frees itself (its last renewal + its duration); None when nobody holds
    it or it says nothing usable (a Lease a person emptied)."""
    spec = _spec(lease)
    duration = spec.get("leaseDurationSeconds")
    renewed = changes.parse_iso(spec.get("renewTime") or spec.get("acquireTime"))
    if not spec.get("holderIdentity") or renewed is None:
        return None
    if isinstance(duration, bool) or not isinstance(duration, int) or duration <= 0:
        return None
    return renewed + duration


@dataclass(slots=True)
class RunLock:
    cluster: KubeCluster
    namespace: str
    name: str
    holder: str
    audit: AuditLog
    lease: JSON = field(default_factory=dict)  # the Lease as last stored
    renewed_at_s: float = 0.0

    def _body(self, now_s: float, acquired: bool) -> JSON:
        spec = dict(_spec(self.lease))
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        if acquired:
            spec.update(acquireTime=_micro_time(now_s), leaseTransitions=transitions + 1)
        spec.update(
            holderIdentity=self.holder,
            leaseDurationSeconds=LEASE_DURATION_S,
            renewTime=_micro_time(now_s),
        )
        meta = self.lease.get("metadata") if isinstance(self.lease, dict) else None
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        metadata: JSON = {"name": self.name, "namespace": self.namespace, "labels": MANAGED_BY}
        if version is not None:
            metadata["resourceVersion"] = version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }

    def _stored(self, answer: Answer, now_s: float, event: str) -> bool:
        if answer.ok and isinstance(answer.body, dict):  # held, whether or not the log takes it
            self.lease, self.renewed_at_s = answer.body, now_s
        self.audit.write(
            "run-lock",
            {
                "lock": event,
                "lease": f"{self.namespace}/{self.name}",
                "holder": self.holder,
                "call": {"method": answer.call.method, "path": answer.call.path},
                "response": {"status": answer.call.status, "error": answer.call.error},
            },
        )
        return answer.ok

    def keep_alive(self) -> None:
        """Renew the Lease when RENEW_EVERY_S has passed since the last renewal. A renewal that
        fails is in the audit log; the run goes on (it is inside its actions, and the Lease
        still has LEASE_DURATION_S − RENEW_EVERY_S before another run could take it)."""
        now = self.cluster.clock()
        if now - self.renewed_at_s < RENEW_EVERY_S:
            return
        body = self._body(now, acquired=False)
        self._stored(self.cluster.replace_lease(self.namespace, self.name, body), now, "renewed")

    def sleeping(self, sleep: Callable[[float], None]) -> Callable[[float], None]:
        """``sleep`` that keeps the Lease alive: the run's long parts are its waits."""

        def sleep_and_renew(seconds: float) -> None:
            self.keep_alive()
            sleep(seconds)
            self.keep_alive()

        return sleep_and_renew

    def _give_back(self, now_s: float) -> Answer:
        body = self._body(now_s, acquired=False)
        body["spec"].pop("holderIdentity", None)
        return self.cluster.replace_lease(self.namespace, self.name, body)

    def release(self) -> None:
        """Give the Lease back (no holder): the next run need not wait for it to expire."""
        now = self.cluster.clock()
        self._stored(self._give_back(now), now, "released")


def _held_elsewhere(lock: RunLock, lease: Any, why: str) -> EnvironmentProblemError:
    holder = _spec(lease).get("holderIdentity") or "another run"
    expires = expires_at_s(lease)
    until = "" if expires is None else f" until {iso_utc(expires)} unless it renews it"
    return EnvironmentProblemError(
        f"another `gpuwarden remediate --apply` holds the run lock (Lease "
        f"{lock.namespace}/{lock.name}, holder {holder}){until}: {why}",
        reference="remediation-run-in-progress",
        hint="runs act one at a time (a CronJob with concurrencyPolicy: Forbid); if that run is "
        f"dead, `kubectl -n {lock.namespace} delete lease {lock.name}` frees it at once",
    )


@contextmanager
def holding(
    cluster: KubeCluster, policy: Policy, audit: AuditLog, *, dry_run: bool
) -> Iterator[RunLock | None]:
    """The run lock for the run's length, given back however it ends; None for a dry run."""
    if dry_run:
        yield None
        return
    lock = acquire(cluster, policy, audit)
    try:
        yield lock
    finally:
        lock.release()


def acquire(cluster: KubeCluster, policy: Policy, audit: AuditLog) -> RunLock:
    """The run lock, or an error naming who holds it. Free when absent, released or expired."""
    lock = RunLock(
        cluster, policy.state_namespace, policy.state_configmap, holder_identity(), audit
    )
    now = cluster.clock()
    found = cluster.read_lease(lock.namespace, lock.name)
    if found.status == 404:
        answer = cluster.create_lease(lock.namespace, lock._body(now, acquired=True))
    elif found.ok and isinstance(found.body, dict):
        expires = expires_at_s(found.body)
        if expires is not None and expires > now:
            raise _held_elsewhere(lock, found.body, "it is not expired")
        lock.lease = found.body
        answer = cluster.replace_lease(lock.namespace, lock.name, lock._body(now, acquired=True))
    else:
        raise unreachable(found, "read the run lock (a Lease)")
    if answer.status == 409:  # another run took it between our read and our write
        again = cluster.read_lease(lock.namespace, lock.name)
        raise _held_elsewhere(lock, again.body, "it took the lock as this run did")
    try:
        taken = lock._stored(answer, now, "acquired")
    except BaseException:
        # The audit log failed (a full disk) with the Lease taken: the run stops here, and
        # gives the Lease back unlogged rather than block every run for LEASE_DURATION_S.
        if answer.ok:
            lock._give_back(now)
        raise
    if not taken:
        raise unreachable(answer, "take the run lock (a Lease)")
    return lock
