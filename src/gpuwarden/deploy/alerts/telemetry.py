"""Telemetry health: no data must never read as healthy (fleet.md §5.2 item 7). The exporter is
down, absent, frozen or failing to read its GPUs.

These codes are new to diagnosis.md (they are about the monitoring, not a GPU): ``exporter-down``,
``telemetry-absent``, ``telemetry-stale``, ``telemetry-errors``.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwarden.deploy.alerts.spec import (
    DCGM_TARGET,
    GPUWARDEN_TARGET,
    AlertSpec,
    Case,
    FailureMode,
    InputSeries,
    Text,
)
from gpuwarden.deploy.knobs import AlertKnobs
from gpuwarden.deploy.promql import selector, set_label
from gpuwarden.types.health import Severity

_WARN = Severity.WARNING
DAEMONSET_DESIRED = "kube_daemonset_status_desired_number_scheduled"
# gpu-operator's dcgm-exporter DaemonSet as kube-state-metrics labels it
_DCGM_DAEMONSET = {
    "daemonset": "nvidia-dcgm-exporter",
    "namespace": "gpu-operator",
    "job": "kube-state-metrics",
}


def _node(metric: str, values: str, labels: Mapping[str, str]) -> InputSeries:
    return InputSeries(metric, values, labels, gpu=None)


def telemetry_alerts(k: AlertKnobs) -> tuple[AlertSpec, ...]:
    up = selector("up", job="~" + k.exporter_job_regex)
    energy = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    w, n = k.frozen_counter_window, k.frozen_counter_min_samples_count
    frozen = (
        f"changes({energy}[{w}]) == 0\nand count_over_time({energy}[{w}]) >= {n}\n"
        "unless on(instance, job) gpuwarden_exporter_info"
    )
    age = k.reading_max_age_s
    # kube-state-metrics' DaemonSet gauge (STABLE): the exporter DaemonSets want no pod when the
    # GPU pool scaled to zero; without kube-state-metrics the alert fires as before.
    wanted = selector(DAEMONSET_DESIRED, daemonset="~" + k.exporter_job_regex)
    no_gpu_nodes = f"max({wanted}) == 0"
    return (
        AlertSpec(
            "GpuExporterDown",
            "exporter-down",
            FailureMode.HEALTH,
            _WARN,
            "GPU exporter {{ $labels.instance }} is down",
            f"Prometheus cannot scrape it: {up} == 0",
            f"{up} == 0",
            None,
            for_="5m",
            text=Text(
                "Prometheus cannot scrape this GPU exporter: its GPUs are unwatched, and no alert "
                "about them can fire",
                "check the exporter pod or service on that node (`kubectl -n <ns> logs "
                "ds/gpuwarden-exporter`), the node itself and the network policy",
            ),
            per_gpu=False,
            cases=(
                Case(
                    "the scrape fails",
                    (_node("up", "1x5 0x20", DCGM_TARGET),),
                    (0,),
                    DCGM_TARGET,
                    node_level=True,
                ),
                Case("healthy: scraped", (_node("up", "1x25", DCGM_TARGET),), node_level=True),
                Case(
                    "healthy: another job's target",
                    (_node("up", "0x25", {"instance": "10.0.0.9:9100", "job": "node"}),),
                    node_level=True,
                ),
            ),
        ),
        AlertSpec(
            "GpuTelemetryAbsent",
            "telemetry-absent",
            FailureMode.HEALTH,
            _WARN,
            "no GPU exporter is scraped at all",
            f"absent({up}), unless kube-state-metrics says the exporter DaemonSets want no "
            "pod (no GPU node)",
            f"absent({up})\nunless on() {no_gpu_nodes}",
            None,
            for_="15m",
            text=Text(
                "Prometheus has no target of a GPU exporter job: no GPU is watched, and silence "
                "is not health",
                "deploy the exporter (`gpuwarden deploy k8s`) and its ServiceMonitor or scrape "
                "config, or adapt the job regex of these rules to your job names",
            ),
            per_gpu=False,
            cases=(
                Case(
                    "no exporter target",
                    (_node("up", "1x30", {"instance": "x:9100", "job": "node"}),),
                    (0,),
                    {},
                    at_minutes=25,
                    node_level=True,
                ),
                Case(
                    "healthy: an exporter target",
                    (_node("up", "1x30", DCGM_TARGET),),
                    at_minutes=25,
                    node_level=True,
                ),
                Case(
                    "healthy: the GPU pool scaled to zero, the DaemonSet wants no pod",
                    (
                        _node("up", "1x30", {"instance": "x:9100", "job": "node"}),
                        _node(DAEMONSET_DESIRED, "0x30", _DCGM_DAEMONSET),
                    ),
                    at_minutes=25,
                    node_level=True,
                ),
                Case(
                    "the DaemonSet wants pods, no target",
                    (
                        _node("up", "1x30", {"instance": "x:9100", "job": "node"}),
                        _node(DAEMONSET_DESIRED, "2x30", _DCGM_DAEMONSET),
                    ),
                    (0,),
                    {},
                    at_minutes=25,
                    node_level=True,
                ),
            ),
        ),
        AlertSpec(
            "GpuTelemetryStale",
            "telemetry-stale",
            FailureMode.HEALTH,
            _WARN,
            "GPU telemetry is frozen on {{ $labels.instance }}",
            f"the energy counter {energy} has not moved for {w} ({n} scrapes or more): "
            "dcgm-exporter serves stale values (e.g. after an nv-hostengine restart)",
            frozen,
            set_label(f"gpuwarden_reading_age_seconds > {age:g}", "severity", _WARN.value),
            for_="5m",
            text=Text(
                "the exporter answers but its readings do not change: what it serves is old, so "
                "the GPU may be in any state",
                "restart the exporter (and nv-hostengine for dcgm-exporter); check the exporter's "
                "log for backend errors; `gpuwarden snapshot` on the node reads the GPUs directly",
            ),
            per_gpu=False,
            defers=True,
            cases=(
                Case(
                    "frozen energy counter",
                    (InputSeries(energy, "1000+500x5 3500x25", DCGM_TARGET),),
                    (0,),
                    DCGM_TARGET,
                    at_minutes=25,
                ),
                Case(
                    "healthy: the counter moves",
                    (InputSeries(energy, "1000+500x30", DCGM_TARGET),),
                    at_minutes=25,
                ),
                Case(
                    "gpuwarden: no reading for minutes",
                    (
                        _node(
                            "gpuwarden_reading_age_seconds", f"1x5 {age * 3:g}x20", GPUWARDEN_TARGET
                        ),
                    ),
                    (0,),
                    GPUWARDEN_TARGET,
                    at_minutes=20,
                    node_level=True,
                ),
            ),
        ),
        AlertSpec(
            "GpuTelemetryErrors",
            "telemetry-errors",
            FailureMode.HEALTH,
            _WARN,
            "exporter {{ $labels.instance }} keeps failing to read its GPUs",
            "gpuwarden_collection_errors_total rising",
            None,
            set_label(
                f"increase(gpuwarden_collection_errors_total[{w}]) > 0", "severity", _WARN.value
            ),
            for_="10m",
            text=Text(
                "the exporter's backend fails to read the GPUs (NVML errors, nvidia-smi timing "
                "out): some fields or GPUs are missing from what it serves",
                "read the exporter's log for the backend error; `gpuwarden snapshot --backend "
                "<backend>` on the node shows it directly",
            ),
            per_gpu=False,
            cases=(
                Case(
                    "errors every minute",
                    (
                        _node(
                            "gpuwarden_collection_errors_total",
                            "0+3x30",
                            {**GPUWARDEN_TARGET, "backend": "nvml"},
                        ),
                    ),
                    (0,),
                    {**GPUWARDEN_TARGET, "backend": "nvml"},
                    at_minutes=25,
                    node_level=True,
                ),
                Case(
                    "healthy: one error long ago",
                    (
                        _node(
                            "gpuwarden_collection_errors_total",
                            "0 1x40",
                            {**GPUWARDEN_TARGET, "backend": "nvml"},
                        ),
                    ),
                    at_minutes=35,
                    node_level=True,
                ),
            ),
        ),
    )
