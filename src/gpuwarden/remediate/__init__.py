"""`gpuwarden remediate`: findings (`gpuwarden.doctor/1`, `gpuwarden.fleet/1`) → safe actions on
Kubernetes nodes, inside a blast radius, dry-run first, with an audit trail.

* ``policy``: the YAML policy file → ``Policy`` (rules, limits), errors naming the key;
* ``findings``: the findings documents → ``FindingsInput`` (which node, which code, since when);
* ``changes``: what an action would change on a node (pure; shared by the plan and the apply);
* ``plan``: pure — policy + findings + cluster state + now → planned actions, with the limits
  (max_unavailable, min_interval, the circuit breaker) applied;
* ``apply``: the only code that acts (API writes, server-side dry runs, drains through the
  Eviction API, the webhook POST); its ``client`` is the only module that imports ``kubernetes``;
* ``audit``: the append-only JSON-lines audit log.
"""
