"""Cost: GPUs held and idle, and the recording rules the fleet report and the dashboards read
(idle GPUs, utilization and allocation by namespace, node and model)."""

from __future__ import annotations

from gpuwarden.deploy.alerts.spec import (
    GPUWARDEN_TARGET,
    TEST_NODE,
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
from gpuwarden.deploy.promql import (
    EACH_GPU,
    GPU,
    GPU_INSTANCE,
    ONE_NODE_LABEL,
    per_gpu_on_node,
    quote,
    selector,
)
from gpuwarden.fleet.queries import LEVEL_SOURCES, POD_LABELS, RENAMED_BY_SCRAPE
from gpuwarden.types.health import Severity

COST = FailureMode.COST
IDLE = "gpuwarden:gpu_idle:bool"
ACTIVITY = "gpuwarden:gpu_activity:ratio"
PERCENT = 100  # LEVEL_SOURCES' factor of a ratio 0..1 to percent


def idle_allocated(k: AlertKnobs) -> AlertSpec:
    idle, held, w = k.idle_utilization_max_percent, k.process_memory_min_mib, k.idle_window
    return AlertSpec(
        "GpuIdleAllocated",
        "low-utilization",
        COST,
        Severity.WARNING,
        "held by a process but idle",
        f"less than {idle:g} % busy ({ACTIVITY}: SM active, else utilization) for all of the "
        f"last {w} while more than {held:g} MiB of memory are in use (a notebook, a stuck or "
        "finished job that did not exit)",
        f"max_over_time({ACTIVITY}[{w}]) < {idle / PERCENT:g}\n"
        f"and on({EACH_GPU}) DCGM_FI_DEV_FB_USED > {held:g}",
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
                "a MIG instance idle for hours, its memory held",
                (
                    _s("DCGM_FI_PROF_SM_ACTIVE", "0x120", GPU_I_ID="1"),
                    _s("DCGM_FI_DEV_FB_USED", "30000x120", GPU_I_ID="1"),
                    _s("DCGM_FI_PROF_SM_ACTIVE", "0.7x120", GPU_I_ID="2"),
                    _s("DCGM_FI_DEV_FB_USED", "30000x120", GPU_I_ID="2"),
                ),
                (0,),
                {GPU_INSTANCE: "1"},
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


def _activity_sources(**matchers: str) -> str:
    """The fleet report's utilisation families as a ratio, most faithful first (SM active, the
    graphics engine's active time, utilization / 100), for whole GPUs; then a MIG GPU's
    instances (no GPU_UTIL there, the pillars per instance)."""
    whole = [
        selector(metric, **{GPU_INSTANCE: "", **matchers})
        + ("" if per_cent == PERCENT else f" / {PERCENT // per_cent}")
        for _, metric, per_cent in LEVEL_SOURCES
    ]
    instances = [
        selector(metric, **{GPU_INSTANCE: "!", **matchers})
        for _, metric, per_cent in LEVEL_SOURCES
        if per_cent == PERCENT  # a ratio 0..1: the profiling pillars
    ]
    return "\n or ".join((*whole, *instances))


def _workload_labels(expr: str, renamed_where: str) -> str:
    """``expr`` with the workload's namespace and pod under their own names. Scraped through a
    ServiceMonitor without honorLabels, the exporter's pod labels arrive renamed exported_* and
    namespace/pod are the exporter's own (fleet's WORKLOAD_LABELS): on the jobs where
    ``renamed_where`` finds exported_pod, the exported_* values replace them (empty: no pod)."""
    renamed = expr
    for label in POD_LABELS:
        renamed = (
            f'label_replace({renamed}, {quote(label)}, "$1", '
            f'{quote(RENAMED_BY_SCRAPE + label)}, "(.*)")'
        )
    jobs = f"group by (job) ({renamed_where})"
    return f"(\n  {renamed}\n  and on(job) {jobs}\n)\nor\n(({expr}) unless on(job) {jobs})"


def _activity() -> str:
    renamed = _activity_sources(**{RENAMED_BY_SCRAPE + "pod": "!"})
    return _workload_labels(f"({_activity_sources()})", f"({renamed})")


def cost_records(k: AlertKnobs) -> tuple[RecordSpec, ...]:
    idle = k.idle_utilization_max_percent
    pods = 'namespace!=""'
    busy = (_s("DCGM_FI_DEV_GPU_UTIL", "90x20", gpu=0, namespace="ml"),)
    idle_ns = (_s("DCGM_FI_DEV_GPU_UTIL", "0x20", gpu=1, namespace="ml"),)
    free = (_s("DCGM_FI_DEV_GPU_UTIL", "0x20", gpu=2),)
    # gpu-operator's dcgm-exporter scraped without honorLabels: its own namespace and pod on
    # every series, the workload's renamed (gpu 0 held by ml/train-0, gpu 2 by nobody)
    operator = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p"}
    renamed = (
        _s("DCGM_FI_DEV_GPU_UTIL", "90x20", gpu=0, **operator, exported_namespace="ml",
           exported_pod="train-0"),
        _s("DCGM_FI_DEV_GPU_UTIL", "0x20", gpu=1, **operator, exported_namespace="ml",
           exported_pod="notebook-0"),
        _s("DCGM_FI_DEV_GPU_UTIL", "0x20", gpu=2, **operator),
    )  # fmt: skip
    # a MIG GPU: no GPU_UTIL, SM active per instance
    mig = (
        _s("DCGM_FI_PROF_SM_ACTIVE", "0.6x20", gpu=3, GPU_I_ID="1", namespace="ml"),
        _s("DCGM_FI_PROF_SM_ACTIVE", "0x20", gpu=3, GPU_I_ID="2", namespace="ml"),
    )
    # gpuwarden's exporter beside dcgm-exporter: the same GPUs twice
    beside = {**GPUWARDEN_TARGET, "hostname": TEST_NODE}  # gpuwarden's exporter's own labels
    twice = (*free, *idle_ns, _s("DCGM_FI_DEV_GPU_UTIL", "0x20", gpu=1, namespace="ml", **beside))
    temps = (_s("DCGM_FI_DEV_GPU_TEMP", "40x20", gpu=1), _s("DCGM_FI_DEV_GPU_TEMP", "41x20", gpu=2))
    return (
        RecordSpec(
            ACTIVITY,
            _activity(),
            COST,
            "how busy a GPU (a MIG instance) is, 0..1: SM active where the profiling pillars "
            "are exported, else the graphics engine's active time, else utilization / 100; "
            "namespace and pod are the workload's (exported_* where the scrape renamed them)",
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
            IDLE,
            f"{ACTIVITY} < bool {idle / PERCENT:g}",
            COST,
            f"1 while a GPU (a MIG instance) is less than {idle:g} % busy (the fleet report's "
            f"idle cut, on {ACTIVITY}), else 0; every label of the GPU kept",
            (
                RecordCase(
                    "busy, idle",
                    (*busy, *idle_ns),
                    (Sample(0, {"namespace": "ml"}, 0), Sample(1, {"namespace": "ml"}, 1)),
                ),
            ),
        ),
        RecordSpec(
            "namespace:gpus:count",
            f"count by (namespace) (group by (namespace, {EACH_GPU}) ({ACTIVITY}{{{pods}}}))",
            COST,
            "GPUs (MIG instances) held by each namespace's pods (dcgm-exporter / gpuwarden with "
            "--kubernetes)",
            (
                RecordCase(
                    "two held, one free",
                    (*busy, *idle_ns, *free),
                    (Sample(2, {"namespace": "ml"}),),
                ),
                RecordCase(
                    "scraped without honorLabels: the workload's namespace",
                    renamed,
                    (Sample(2, {"namespace": "ml"}),),
                ),
                RecordCase("MIG: instances", mig, (Sample(2, {"namespace": "ml"}),)),
            ),
        ),
        RecordSpec(
            "namespace:gpus_idle:count",
            f"sum by (namespace) (min by (namespace, {EACH_GPU}) ({IDLE}{{{pods}}}))",
            COST,
            "GPUs (MIG instances) held by each namespace's pods and idle now",
            (
                RecordCase(
                    "one of two idle", (*busy, *idle_ns, *free), (Sample(1, {"namespace": "ml"}),)
                ),
                RecordCase(
                    "scraped without honorLabels: the workload's namespace",
                    renamed,
                    (Sample(1, {"namespace": "ml"}),),
                ),
                RecordCase("MIG: one instance idle", mig, (Sample(1, {"namespace": "ml"}),)),
            ),
        ),
        RecordSpec(
            "namespace:gpu_utilization_percent:avg",
            f"100 * avg by (namespace) ({ACTIVITY}{{{pods}}})",
            COST,
            f"mean activity of each namespace's GPUs, in percent ({ACTIVITY})",
            (RecordCase("90 and 0", (*busy, *idle_ns, *free), (Sample(45, {"namespace": "ml"}),)),),
        ),
        RecordSpec(
            "hostname:gpus:count",
            f"count by ({ONE_NODE_LABEL}) ({per_gpu_on_node('group', 'DCGM_FI_DEV_GPU_TEMP')})",
            COST,
            "GPUs reporting on each node, each once whichever exporters serve it (a drop means "
            "a GPU fell off or the exporter lost it); the node under Hostname",
            (
                RecordCase(
                    "two GPUs, one served by both exporters",
                    (
                        *temps,
                        _s(
                            "DCGM_FI_DEV_GPU_TEMP",
                            "40x20",
                            gpu=1,
                            **GPUWARDEN_TARGET,
                            hostname=TEST_NODE,
                        ),
                    ),
                    (Sample(2, {ONE_NODE_LABEL: TEST_NODE}),),
                ),
            ),
        ),
        RecordSpec(
            "hostname:gpus_idle:count",
            f"sum by ({ONE_NODE_LABEL}) ({per_gpu_on_node('min', IDLE)})",
            COST,
            "idle GPUs on each node (a MIG GPU when all its instances are)",
            (
                RecordCase(
                    "one idle GPU served twice", twice, (Sample(2, {ONE_NODE_LABEL: TEST_NODE}),)
                ),
            ),
        ),
        RecordSpec(
            "hostname:gpu_power_watts:sum",
            f"sum by ({ONE_NODE_LABEL}) ({per_gpu_on_node('max', 'DCGM_FI_DEV_POWER_USAGE')})",
            COST,
            "power drawn by each node's GPUs",
        ),
        RecordSpec(
            "modelName:gpu_utilization_percent:avg",
            f"100 * avg by (modelName) (avg by (modelName, {EACH_GPU}) ({ACTIVITY}))",
            COST,
            f"mean activity by GPU model, in percent ({ACTIVITY})",
        ),
        RecordSpec(
            "gpuwarden:gpus:count",
            f"count(group by ({GPU}) (DCGM_FI_DEV_GPU_TEMP))",
            COST,
            "GPUs reporting in the fleet, each once whichever exporters serve it",
            (
                RecordCase(
                    "one GPU served by both exporters",
                    (*temps[:1], _s("DCGM_FI_DEV_GPU_TEMP", "40x20", gpu=1, **beside)),
                    (Sample(1),),
                ),
            ),
        ),
        RecordSpec(
            "gpuwarden:gpus_idle:count",
            f"sum(min by ({GPU}) ({IDLE}))",
            COST,
            "idle GPUs in the fleet (a MIG GPU when all its instances are)",
            (RecordCase("one idle GPU served twice", twice, (Sample(2),)),),
        ),
        RecordSpec(
            "gpuwarden:gpus_unallocated_idle:count",
            f'sum(min by ({EACH_GPU}) ({IDLE}{{pod=""}})\n'
            f'  unless on({EACH_GPU}) {IDLE}{{pod!=""}})',
            COST,
            "idle GPUs (MIG instances) held by no pod (meaningful where pod labels are exported)",
            (
                RecordCase("scraped without honorLabels: a free GPU", renamed, (Sample(1),)),
                RecordCase(
                    "one free; one held, served also by an exporter without pod labels",
                    (*renamed, _s("DCGM_FI_DEV_GPU_UTIL", "0x20", gpu=1, **beside)),
                    (Sample(1),),
                ),
            ),
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
