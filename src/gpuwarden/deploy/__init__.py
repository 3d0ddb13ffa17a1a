"""`gpuwarden deploy`: what a fleet loads to watch its GPUs — Prometheus alerting and recording
rules (``rules``), Grafana dashboards by failure mode (``dashboards``) and the Kubernetes manifests
of the exporter (``k8s``).

Every artefact is built as plain data (dicts and lists) by pure functions; ``yaml_text`` and
``grafana`` are the only modules that import their libraries (PyYAML, grafana-foundation-sdk).
"""
