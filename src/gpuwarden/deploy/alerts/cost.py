"""Cost: GPUs held and idle, and the recording rules the fleet report and the dashboards read
(idle GPUs, utilization and allocation by namespace, node and model)."""

from __future__ import annotations

from gpuwarden.deploy.alerts.spec import (
    AlertSpec,
    Case,
    FailureMode,
    RecordCase,
    RecordSpec,
    Sample,
)
from gpuwarden.deploy.alerts.spec import series as _s
from gpuwarden.deploy.alerts.xid import XID_LAST_RECORD, XID_TOPIC, last_xid_record
from gpuwarden.deploy.knobs import AlertKnobs
from gpuwarden.deploy.promql import GPU, GPU_INSTANCE, NODE
from gpuwarden.types.health import Severity

COST = FailureMode.COST
IDLE = "gpuwarden:gpu_idle:bool"
ACTIVITY = "gpuwarden:gpu_activity:ratio"


def idle_allocated(k: AlertKnobs) -> AlertSpec:
    idle, held, w = k.idle_utilization_max_percent, k.process_memory_min_mib, k.idle_window
    return AlertSpec(
        "GpuIdleAllocated",
        "low-utilization",
        COST,
        Severity.WARNING,
        "held by a process but idle",
        f"utilization below {idle:g} % for all of the last {w} while more than {held:g} MiB of "
        "memory are in use (a notebook, a stuck or finished job that did not exit)",
        f"max_over_time(DCGM_FI_DEV_GPU_UTIL[{w}]) < {idle:g}\n"
        f"and on({GPU}) DCGM_FI_DEV_FB_USED > {held:g}",
        None,  # gpuwarden's low-utilization finding is GpuLowUtilization's
        for_="30m",
        cases=(
            Case(
                "idle for hours, memory held",
                (_s("DCGM_FI_DEV_GPU_UTIL", "0x120"), _s("DCGM_FI_DEV_FB_USED", "30000x120")),
                (0,),
                at_minutes=100,
            ),
            Case(
                "healthy: idle and empty (unallocated: the fleet report's)",
                (_s("DCGM_FI_DEV_GPU_UTIL", "0x120"), _s("DCGM_FI_DEV_FB_USED", "0x120")),
                at_minutes=100,
            ),
            Case(
                "healthy: worked within the hour",
                (
                    _s("DCGM_FI_DEV_GPU_UTIL", "0x60 80 0x59"),
                    _s("DCGM_FI_DEV_FB_USED", "30000x120"),
                ),
                at_minutes=100,
            ),
        ),
    )


def cost_records(k: AlertKnobs) -> tuple[RecordSpec, ...]:
    idle = k.idle_utilization_max_percent
    pods = 'namespace!=""'
    busy = (_s("DCGM_FI_DEV_GPU_UTIL", "90x20", gpu=0, namespace="ml"),)
    idle_ns = (_s("DCGM_FI_DEV_GPU_UTIL", "0x20", gpu=1, namespace="ml"),)
    free = (_s("DCGM_FI_DEV_GPU_UTIL", "0x20", gpu=2),)
    return (
        RecordSpec(
            IDLE,
            f"DCGM_FI_DEV_GPU_UTIL < bool {idle:g}",
            COST,
            f"1 while a GPU's utilization is below {idle:g} % (the fleet report's idle cut), "
            "else 0; every label of the GPU kept (namespace, pod where dcgm-exporter adds them)",
            (
                RecordCase(
                    "busy, idle",
                    (*busy, *idle_ns),
                    (Sample(0, {"namespace": "ml"}, 0), Sample(1, {"namespace": "ml"}, 1)),
                ),
            ),
        ),
        RecordSpec(
            ACTIVITY,
            f'DCGM_FI_PROF_SM_ACTIVE{{{GPU_INSTANCE}=""}}\n'
            f' or DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{GPU_INSTANCE}=""}}\n'
            " or DCGM_FI_DEV_GPU_UTIL / 100",
            COST,
            "how busy a whole GPU is, 0..1: SM active where the profiling pillars are exported, "
            "else the graphics engine's active time, else utilization / 100",
            (
                RecordCase(
                    "pillar first, utilization else",
                    (
                        _s("DCGM_FI_PROF_SM_ACTIVE", "0.5x20"),
                        _s("DCGM_FI_DEV_GPU_UTIL", "99x20"),
                        _s("DCGM_FI_DEV_GPU_UTIL", "40x20", gpu=1),
                    ),
                    (Sample(0.5, gpu=0), Sample(0.4, gpu=1)),
                ),
            ),
        ),
        RecordSpec(
            "namespace:gpus:count",
            f"count by (namespace) (DCGM_FI_DEV_GPU_UTIL{{{pods}}})",
            COST,
            "GPUs held by each namespace's pods (dcgm-exporter / gpuwarden with --kubernetes)",
            (
                RecordCase(
                    "two held, one free",
                    (*busy, *idle_ns, *free),
                    (Sample(2, {"namespace": "ml"}),),
                ),
            ),
        ),
        RecordSpec(
            "namespace:gpus_idle:count",
            f"sum by (namespace) ({IDLE}{{{pods}}})",
            COST,
            "GPUs held by each namespace's pods and idle now",
            (
                RecordCase(
                    "one of two idle", (*busy, *idle_ns, *free), (Sample(1, {"namespace": "ml"}),)
                ),
            ),
        ),
        RecordSpec(
            "namespace:gpu_utilization_percent:avg",
            f"avg by (namespace) (DCGM_FI_DEV_GPU_UTIL{{{pods}}})",
            COST,
            "mean utilization of each namespace's GPUs",
            (RecordCase("90 and 0", (*busy, *idle_ns, *free), (Sample(45, {"namespace": "ml"}),)),),
        ),
        RecordSpec(
            "hostname:gpus:count",
            f"count by ({NODE}) (DCGM_FI_DEV_GPU_TEMP)",
            COST,
            "GPUs reporting on each node (a drop means a GPU fell off or the exporter lost it)",
        ),
        RecordSpec(
            "hostname:gpus_idle:count",
            f"sum by ({NODE}) ({IDLE})",
            COST,
            "idle GPUs on each node",
        ),
        RecordSpec(
            "hostname:gpu_power_watts:sum",
            f"sum by ({NODE}) (DCGM_FI_DEV_POWER_USAGE)",
            COST,
            "power drawn by each node's GPUs",
        ),
        RecordSpec(
            "modelName:gpu_utilization_percent:avg",
            "avg by (modelName) (DCGM_FI_DEV_GPU_UTIL)",
            COST,
            "mean utilization by GPU model",
        ),
        RecordSpec(
            "gpuwarden:gpus:count",
            "count(DCGM_FI_DEV_GPU_TEMP)",
            COST,
            "GPUs reporting in the fleet",
        ),
        RecordSpec(
            "gpuwarden:gpus_idle:count",
            f"sum({IDLE})",
            COST,
            "idle GPUs in the fleet",
        ),
        RecordSpec(
            "gpuwarden:gpus_unallocated_idle:count",
            f'sum({IDLE}{{pod=""}})',
            COST,
            "idle GPUs held by no pod (meaningful where pod labels are exported)",
        ),
    )


def health_records(k: AlertKnobs) -> tuple[RecordSpec, ...]:
    return (
        RecordSpec(
            XID_LAST_RECORD,
            last_xid_record(k),
            FailureMode.HEALTH,
            "dcgm-exporter's last-value Xid gauge as a series labelled xid, while it changed "
            f"within {k.xid_recent_window} (the Xid alerts read it)",
            (
                RecordCase(
                    "a new Xid, and none",
                    (
                        _s("DCGM_FI_DEV_XID_ERRORS", "0x5 48x10"),
                        _s("DCGM_FI_DEV_XID_ERRORS", "0x15", gpu=1),
                    ),
                    (Sample(1, {"xid": "48"}, 0),),
                ),
            ),
            topic=XID_TOPIC,
        ),
        RecordSpec(
            "gpuwarden:findings:count",
            "count by (code, severity) (gpuwarden_finding)",
            FailureMode.HEALTH,
            "gpuwarden's active findings by code and severity",
            topic="telemetry",
        ),
    )
