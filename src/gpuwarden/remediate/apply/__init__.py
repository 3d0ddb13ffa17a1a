"""Acting on the cluster: the only code that changes anything (Kubernetes writes, the webhook
POST through ``gpuwarden.transport``), and the only package that imports ``kubernetes`` (the
official client, in ``client`` alone).

* ``client``: the API server through the official client; failed calls in words;
* ``connect``: the kubeconfig (or the pod's service account) → ``KubeCluster``;
* ``state``: the nodes and the stored circuit breaker the plan reads; storing a trip;
* ``execute``: the plan's actions in order — node patches with optimistic concurrency, webhooks;
* ``drain``: evictions through the Eviction API, PodDisruptionBudgets honoured;
* ``lock``: one applying run at a time (a Lease, renewed while the run waits);
* ``context``: what one execution carries from action to action, and its settings.
"""

from __future__ import annotations

from gpuwarden.remediate.apply.client import DEFAULT_REQUEST_TIMEOUT_S, KubeCluster, closing
from gpuwarden.remediate.apply.connect import connect
from gpuwarden.remediate.apply.context import ApplySettings, ProgressFn
from gpuwarden.remediate.apply.execute import execute
from gpuwarden.remediate.apply.lock import holding
from gpuwarden.remediate.apply.state import read_cluster, trip_breaker

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_S",
    "ApplySettings",
    "KubeCluster",
    "ProgressFn",
    "closing",
    "connect",
    "execute",
    "holding",
    "read_cluster",
    "trip_breaker",
]
