"""Grafana dashboards by failure mode (fleet.md §5.2), as data: an overview and one dashboard per
rule group's failure mode, each panel a PromQL query over dcgm-exporter's names, gpuwarden's
series and the recording rules of ``rules``. ``grafana`` turns them into dashboard JSON.

Every per-GPU query is filtered by the template variables ``$Hostname`` and ``$gpu`` (both
"All" = ``.*``, which also matches a series whose node label is the newest exporter's
``hostname``). ``$__range``/``$__rate_interval`` are Grafana's own.

A panel that counts, sums or compares GPUs takes each GPU (MIG instance) once, by ``UUID``: a node
with two exporters (dcgm-exporter and gpuwarden's) or two scrape jobs of one serves every GPU
twice, under the same UUID (the recording rules of ``alerts.cost`` count the same way).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.deploy.alerts.cost import ACTIVITY, IDLE
from gpuwarden.deploy.alerts.spec import FailureMode
from gpuwarden.deploy.knobs import DEFAULT_KNOBS
from gpuwarden.deploy.promql import EACH_GPU, GPU, NODE, ONE_NODE_LABEL, per_gpu_on_node

F = '{Hostname=~"$Hostname", gpu=~"$gpu"}'
ONE_GPU = "{{Hostname}}{{hostname}} GPU {{gpu}}"
RATE = "$__rate_interval"
PRICE_VARIABLE = "price_per_gpu_hour"


def once(aggregation: str, expr: str, *labels: str) -> str:
    """``expr`` with one series per GPU (MIG instance) and ``labels``, whichever exporters and
    scrape jobs serve it."""
    return f"{aggregation} by ({', '.join((EACH_GPU, *labels))}) ({expr})"


def per_gpu(aggregation: str, expr: str) -> str:
    """One series per GPU: a MIG GPU's instances together (``min``: idle when all are)."""
    return f"{aggregation} by ({GPU}) ({expr})"


# a GPU idle while all its instances are, averaged over the range: its idle share
_IDLE_GPU_HOURS = (
    f"sum(avg_over_time(({per_gpu('min', f'{IDLE}{F}')})[$__range:])) * $__range_s / 3600"
)


def _against_node_median(metric: str, operator: str) -> str:
    """Each GPU's ``metric`` ``operator`` (- or /) the median of its node's GPUs, each GPU once."""
    each = once("max", f"{metric}{F}", NODE, "gpu")  # gpu: the panel's legend
    return f"{each} {operator} on({NODE}) group_left() quantile by ({NODE}) (0.5, {each})"


@dataclass(frozen=True, slots=True)
class Query:
    expr: str
    legend: str = ONE_GPU
    instant: bool = False


@dataclass(frozen=True, slots=True)
class PanelSpec:
    title: str
    kind: str  # "timeseries", "stat", "table"
    queries: tuple[Query, ...]
    description: str
    unit: str | None = None  # Grafana's unit ids: "celsius", "watt", "percent", "percentunit"
    width: int = 12


@dataclass(frozen=True, slots=True)
class DashboardSpec:
    uid: str
    title: str
    description: str
    rows: tuple[tuple[str, tuple[PanelSpec, ...]], ...]
    mode: FailureMode | None = None  # None: the overview


def _ts(
    title: str, expr: str, description: str, unit: str | None = None, legend: str = ONE_GPU
) -> PanelSpec:
    return PanelSpec(title, "timeseries", (Query(expr, legend),), description, unit)


def _stat(title: str, expr: str, description: str, unit: str | None = None) -> PanelSpec:
    return PanelSpec(title, "stat", (Query(expr, "", instant=True),), description, unit, width=6)


def _table(title: str, expr: str, description: str) -> PanelSpec:
    return PanelSpec(title, "table", (Query(expr, "", instant=True),), description, width=24)


def _firing(mode: FailureMode) -> PanelSpec:
    return _stat(
        "Firing alerts",
        f'count(ALERTS{{alertstate="firing", failure_mode="{mode.value}"}}) or vector(0)',
        f"gpuwarden's {mode.value} alerts firing now (the overview lists them)",
    )


OVERVIEW = DashboardSpec(
    "gpuwarden-overview",
    "GPU fleet overview",
    "How many GPUs report, what is firing, what is idle, and whether the telemetry itself is "
    "healthy (no data is never 'healthy').",
    (
        (
            "Fleet",
            (
                _stat(
                    "GPUs reporting",
                    f"count({per_gpu('group', f'DCGM_FI_DEV_GPU_TEMP{F}')})",
                    "GPUs with a temperature series now",
                ),
                _stat(
                    "Idle GPUs",
                    f"sum({per_gpu('min', f'{IDLE}{F}')})",
                    "GPUs below the idle cut now (a MIG GPU when all its instances are)",
                ),
                _stat(
                    "Power drawn",
                    f"sum({per_gpu('max', f'DCGM_FI_DEV_POWER_USAGE{F}')})",
                    "sum over the GPUs",
                    "watt",
                ),
                _stat(
                    "Findings (gpuwarden)",
                    f"count(group by (code, {GPU}, {NODE}) (gpuwarden_finding{F})) or vector(0)",
                    "gpuwarden's active health findings",
                ),
                _table(
                    "Firing GPU alerts by failure mode",
                    "count by (failure_mode, alertname, code, severity) "
                    '(ALERTS{alertstate="firing", failure_mode!=""})',
                    "every gpuwarden alert firing now",
                ),
                _ts(
                    "GPU activity",
                    f"{ACTIVITY}{F}",
                    "SM active, else engine active, else utilization",
                    "percentunit",
                ),
            ),
        ),
        (
            "Telemetry health",
            (
                PanelSpec(
                    "Exporters up",
                    "timeseries",
                    (
                        Query(
                            f'up{{job=~"{DEFAULT_KNOBS.exporter_job_regex}"}}',
                            "{{job}} {{instance}}",
                        ),
                    ),
                    "1 = Prometheus scrapes the exporter; 0 = it cannot",
                ),
                _ts(
                    "Reading age (gpuwarden)",
                    "gpuwarden_reading_age_seconds",
                    "how old the newest reading each gpuwarden exporter serves is",
                    "s",
                    "{{instance}}",
                ),
                _ts(
                    "Collection errors (gpuwarden)",
                    f"sum by (instance, backend) (rate(gpuwarden_collection_errors_total[{RATE}]))",
                    "backend reads failing per second",
                    legend="{{instance}} {{backend}}",
                ),
                _ts(
                    "Energy counter moving",
                    f"rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{F}[{RATE}]) / 1000",
                    "mean power from the energy counter: flat zero while the GPU is on means "
                    "frozen telemetry",
                    "watt",
                ),
            ),
        ),
    ),
)

HEALTH = DashboardSpec(
    "gpuwarden-health",
    "GPU health: hardware faults, heat and power",
    "Xids, memory errors, lost GPUs, thermal and power events, links (alert group "
    "gpuwarden-health-*).",
    (
        (
            "Faults",
            (
                _firing(FailureMode.HEALTH),
                _table(
                    "gpuwarden findings",
                    f"gpuwarden_finding{F}",
                    "gpuwarden's active findings per GPU",
                ),
                _ts(
                    "Xids by code (gpuwarden)",
                    f"max by ({GPU}, Hostname, gpu, xid) "
                    f"(increase(gpuwarden_xid_total{F}[$__range]))",
                    "Xid occurrences over the dashboard's range",
                    legend="{{Hostname}} GPU {{gpu}} Xid {{xid}}",
                ),
                _ts(
                    "Last Xid (dcgm-exporter)",
                    f"DCGM_FI_DEV_XID_ERRORS{F}",
                    "the value of the last Xid, 0 = none since the exporter started",
                ),
                _ts(
                    "GPUs reporting per node",
                    "hostname:gpus:count",
                    "a drop is a GPU that fell off the bus",
                    legend="{{Hostname}}{{hostname}}",
                ),
                _ts(
                    "GPU lost (gpuwarden)",
                    f"gpuwarden_gpu_lost{F}",
                    "1 while the GPU does not answer",
                ),
            ),
        ),
        (
            "Memory",
            (
                _ts(
                    "Uncorrectable ECC (volatile)",
                    f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{F}",
                    "double-bit errors since the last reset",
                ),
                _ts(
                    "Corrected ECC rate",
                    f"rate(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{F}[{RATE}]) * 60",
                    "single-bit errors per minute",
                ),
                _ts(
                    "Row remap pending / failed",
                    f"DCGM_FI_DEV_ROW_REMAP_PENDING{F} + 2 * DCGM_FI_DEV_ROW_REMAP_FAILURE{F}",
                    "0 healthy, 1 pending (reset needed), 2/3 failed (RMA)",
                ),
                _ts(
                    "Retired pages / remapped rows",
                    f"(DCGM_FI_DEV_RETIRED_SBE{F} + DCGM_FI_DEV_RETIRED_DBE{F})\n or\n"
                    f"(DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{F}"
                    f" + DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{F})",
                    "memory repaired so far: retired pages before Ampere (limit 60 DBE / 63 "
                    "total), remapped rows from Ampere on",
                ),
            ),
        ),
        (
            "Heat and power",
            (
                _ts("GPU temperature", f"DCGM_FI_DEV_GPU_TEMP{F}", "°C", "celsius"),
                _ts(
                    "Headroom to slowdown",
                    f"DCGM_FI_DEV_SLOWDOWN_TEMP{F} - DCGM_FI_DEV_GPU_TEMP{F}",
                    "°C left before the board slows down (alert at 5)",
                    "celsius",
                ),
                _ts("Memory temperature", f"DCGM_FI_DEV_MEMORY_TEMP{F}", "HBM °C", "celsius"),
                _ts(
                    "Clock events active (gpuwarden)",
                    f"gpuwarden_clock_event_active{F} == 1",
                    "the reasons holding the clocks down now",
                    legend="{{Hostname}} GPU {{gpu}} {{reason}}",
                ),
                _ts(
                    "Power vs limit",
                    f"DCGM_FI_DEV_POWER_USAGE{F} / DCGM_FI_DEV_POWER_MGMT_LIMIT{F}",
                    "share of the power limit drawn",
                    "percentunit",
                ),
                _ts(
                    "Temperature above the node's median",
                    _against_node_median("DCGM_FI_DEV_GPU_TEMP", "-"),
                    "thermal outliers stand out (alert at 10 °C at matched power)",
                    "celsius",
                ),
            ),
        ),
        (
            "Links",
            (
                _ts(
                    "PCIe replays per minute",
                    f"rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER{F}[{RATE}]) * 60",
                    "limit 8/min",
                ),
                _ts(
                    "PCIe link generation / max",
                    f"DCGM_FI_DEV_PCIE_LINK_GEN{F} / DCGM_FI_DEV_PCIE_MAX_LINK_GEN{F}",
                    "below 1 under load = degraded (idle downtraining is normal)",
                    "percentunit",
                ),
            ),
        ),
    ),
    FailureMode.HEALTH,
)

THROUGHPUT = DashboardSpec(
    "gpuwarden-throughput",
    "GPU throughput: utilization, fake load, memory",
    "Is the GPU doing useful work (alert group gpuwarden-throughput).",
    (
        (
            "Utilization",
            (
                _firing(FailureMode.THROUGHPUT),
                _ts(
                    "Utilization",
                    f"DCGM_FI_DEV_GPU_UTIL{F}",
                    "time a kernel ran (NVML), %",
                    "percent",
                ),
                _ts(
                    "SM active",
                    f"DCGM_FI_PROF_SM_ACTIVE{F}",
                    "share of SMs with a warp: the work actually done",
                    "percentunit",
                ),
                _ts(
                    "Utilization minus SM active",
                    f"DCGM_FI_DEV_GPU_UTIL{F} / 100 - DCGM_FI_PROF_SM_ACTIVE{F}",
                    "high = busy doing nothing (fake load: a spin-wait, a hung collective)",
                    "percentunit",
                ),
                _ts(
                    "Memory used",
                    f"DCGM_FI_DEV_FB_USED{F} / (DCGM_FI_DEV_FB_USED{F} + DCGM_FI_DEV_FB_FREE{F})",
                    "share of the framebuffer in use (alert at 95 %)",
                    "percentunit",
                ),
                _ts("Power", f"DCGM_FI_DEV_POWER_USAGE{F}", "W", "watt"),
            ),
        ),
    ),
    FailureMode.THROUGHPUT,
)

BOTTLENECKS = DashboardSpec(
    "gpuwarden-bottlenecks",
    "GPU bottlenecks: the DCGM pillars",
    "Compute, tensor cores, memory bandwidth and PCIe: which one limits the job (alert group "
    "gpuwarden-bottlenecks).",
    (
        (
            "Pillars",
            (
                _firing(FailureMode.BOTTLENECKS),
                _ts(
                    "Tensor active",
                    f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{F}",
                    "≈ 0 while SMs are busy = no tensor cores",
                    "percentunit",
                ),
                _ts(
                    "DRAM active",
                    f"DCGM_FI_PROF_DRAM_ACTIVE{F}",
                    "> 80 % with few SMs busy = memory bound",
                    "percentunit",
                ),
                _ts(
                    "SM occupancy",
                    f"DCGM_FI_PROF_SM_OCCUPANCY{F}",
                    "resident warps / maximum",
                    "percentunit",
                ),
                _ts(
                    "PCIe received",
                    f"DCGM_FI_PROF_PCIE_RX_BYTES{F}",
                    "host → GPU bytes/s (input pipeline)",
                    "Bps",
                ),
                _ts("PCIe sent", f"DCGM_FI_PROF_PCIE_TX_BYTES{F}", "GPU → host bytes/s", "Bps"),
            ),
        ),
    ),
    FailureMode.BOTTLENECKS,
)

DISTRIBUTED = DashboardSpec(
    "gpuwarden-distributed",
    "Distributed jobs: stragglers and interconnect",
    "Peers compared on one node, NVLink traffic and errors (alert group gpuwarden-distributed).",
    (
        (
            "Peers",
            (
                _firing(FailureMode.DISTRIBUTED),
                _ts(
                    "SM active / node median",
                    _against_node_median("DCGM_FI_PROF_SM_ACTIVE", "/"),
                    "a straggler sits below 0.8",
                    "percentunit",
                ),
                _ts(
                    "Power / node median",
                    _against_node_median("DCGM_FI_DEV_POWER_USAGE", "/"),
                    "the same comparison where the pillars are not exported",
                    "percentunit",
                ),
            ),
        ),
        (
            "NVLink",
            (
                _ts(
                    "NVLink sent",
                    f"DCGM_FI_PROF_NVLINK_TX_BYTES{F}",
                    "bytes/s over all links",
                    "Bps",
                ),
                _ts(
                    "NVLink replay + recovery errors",
                    f"increase(DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{F}[$__range]) + "
                    f"increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL{F}[$__range])",
                    "any is an alert (DCGM's health watch)",
                ),
            ),
        ),
    ),
    FailureMode.DISTRIBUTED,
)

COST = DashboardSpec(
    "gpuwarden-cost",
    "GPU cost: idle and held",
    "Idle GPU-hours and their cost by node, model and namespace; "
    f"${PRICE_VARIABLE} is your cost of one GPU-hour (1 = the panels read in GPU-hours).",
    (
        (
            "Waste",
            (
                _firing(FailureMode.COST),
                _stat(
                    "Idle GPU-hours (range)",
                    _IDLE_GPU_HOURS,
                    "GPU-hours below the idle cut over the dashboard's range (a MIG GPU while "
                    "all its instances are)",
                ),
                _stat(
                    "Idle cost (range)",
                    f"{_IDLE_GPU_HOURS} * ${PRICE_VARIABLE}",
                    "idle GPU-hours × the price variable",
                    "currencyUSD",
                ),
                _ts(
                    "Idle GPUs by node",
                    "hostname:gpus_idle:count",
                    "GPUs below the idle cut now",
                    legend="{{Hostname}}{{hostname}}",
                ),
                _ts(
                    "Idle GPUs by namespace",
                    f"sum by (namespace) ({once('min', f'{IDLE}{F}', 'namespace')})",
                    "empty namespace = held by no pod (or no pod labels exported)",
                    legend="{{namespace}}",
                ),
                _ts(
                    "Utilization by model",
                    "modelName:gpu_utilization_percent:avg",
                    "mean utilization of each GPU model",
                    "percent",
                    legend="{{modelName}}",
                ),
                _ts(
                    "GPU-hours held idle (memory in use, no kernel)",
                    f"sum by ({ONE_NODE_LABEL}) (\n  {per_gpu_on_node('min', f'{IDLE}{F}')}\n"
                    f"  * on({GPU}) group_left()\n"
                    f"  ({per_gpu('max', f'DCGM_FI_DEV_FB_USED{F}')} > bool "
                    f"{DEFAULT_KNOBS.process_memory_min_mib:g})\n)",
                    "idle GPUs a process holds: the GpuIdleAllocated alert's candidates",
                    legend=f"{{{{{ONE_NODE_LABEL}}}}}",
                ),
            ),
        ),
    ),
    FailureMode.COST,
)

DASHBOARDS = (OVERVIEW, HEALTH, THROUGHPUT, BOTTLENECKS, DISTRIBUTED, COST)
