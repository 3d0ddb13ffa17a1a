"""Kubernetes facts that both deploy (the RBAC it writes) and remediate (the requests it sends)
rely on, so the two cannot disagree."""

from __future__ import annotations

# A Node is cluster-scoped; client-go's event recorder (kubectl describe node's Events) puts the
# Events about a cluster-scoped object in the "default" namespace.
NODE_EVENTS_NAMESPACE = "default"
