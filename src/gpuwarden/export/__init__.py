"""``gpuwarden export``: a Prometheus endpoint with dcgm-exporter's metric names, units and labels,
plus gpuwarden's own verdicts, from any telemetry backend (nvml, smi, dcgm, replay, sim).

Pieces, from the data to the wire:

* ``fields``: DeviceSample fields → DCGM metrics (name, field id, type, help, unit);
* ``labels``: dcgm-exporter's label sets, the node's name, the ``simulated`` mark;
* ``pod_resources`` / ``kubelet``: which pod holds which GPU (kubelet pod-resources ``List``);
* ``state``: the collection thread's view (window, health verdict, Xid counters), bounded;
* ``families``: a view → metric families (plain data);
* ``prometheus``: the scrape-time prometheus_client Collector and the text exposition (the only
  importer of prometheus_client);
* ``webconfig`` / ``server``: Prometheus' web config (TLS, basic auth) and the HTTP endpoint;
* ``service``: the collection loop and the Site the server answers from.

Importing this package imports none of the optional dependencies.
"""

# The defaults `gpuwarden export --help` shows, here so that its parser imports neither the HTTP
# server (ssl, http.server) nor the kubelet client.
DEFAULT_LISTEN = "127.0.0.1:9400"  # dcgm-exporter's port, on loopback unless told otherwise
KUBELET_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
