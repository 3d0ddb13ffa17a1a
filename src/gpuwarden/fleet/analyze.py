"""``FleetData`` + prices + thresholds → ``FleetReport``. Pure: numbers in, report out."""

from __future__ import annotations

from dataclasses import replace

from gpuwarden.fleet import incidents as incident_rules
from gpuwarden.fleet import usage
from gpuwarden.fleet.model import FleetData, FleetFinding, FleetReport
from gpuwarden.fleet.pricing import PriceBook, costs
from gpuwarden.fleet.queries import LEVEL_SOURCES
from gpuwarden.fleet.stragglers import stragglers
from gpuwarden.fleet.thermal import thermal_outliers
from gpuwarden.fleet.thresholds import DEFAULT_FLEET_THRESHOLDS, FleetThresholds

_SOURCE_NAMES = {name: metric for name, metric, _ in LEVEL_SOURCES}


def main_source(data: FleetData) -> str:
    """The utilisation source most GPUs were read with."""
    sources = data.collection.level_sources
    return max(sources, key=lambda name: sources[name]) if sources else "gpu_util"


def _notes(data: FleetData) -> list[str]:
    c = data.collection
    used = ", ".join(
        f"{_SOURCE_NAMES.get(k, k)} on {n} GPU(s)" for k, n in c.level_sources.items() if n
    )
    notes = [
        f"utilisation: {used} (each GPU read with the best it exports; GPU_UTIL counts time a "
        "kernel ran and overstates work)",
        f"a reading counts for {c.lookback_s} s after it was scraped"
        + (f" (scrape interval ≈ {c.scrape_interval_s:.0f} s)" if c.scrape_interval_s else ""),
    ]
    if c.pod_labels is None:
        notes.append(
            "no pod labels on the GPU series: GPUs held by pods cannot be told from unallocated "
            "ones (run dcgm-exporter with Kubernetes mapping, or `gpuwarden export --kubernetes`)"
        )
    elif c.pod_labels.startswith("exported_"):
        notes.append(
            "pods read from exported_namespace/exported_pod (the scrape renamed the exporter's "
            "labels: a ServiceMonitor without honorLabels)"
        )
    if c.mig:
        notes.append(
            "MIG: a GPU's minute is shared among its instances by their compute slices (equally "
            "where a profile is unknown)"
        )
    if not c.gpuwarden_exporter:
        notes.append(
            "Xids from dcgm-exporter: where only DCGM_FI_DEV_XID_ERRORS exists, repeats of the "
            "same Xid are invisible and counts are lower bounds"
        )
    return notes


def _severity_order(item: FleetFinding) -> tuple[int, str, float]:
    f = item.finding
    return (-f.severity.rank, f.code, f.first_seen_s or 0.0)


def analyze(
    data: FleetData, prices: PriceBook, thresholds: FleetThresholds = DEFAULT_FLEET_THRESHOLDS
) -> FleetReport:
    t = replace(thresholds, idle_below_percent=data.idle_below_percent)
    models = [gpu.model for gpu in data.gpus.values()]
    table, per_model = costs(prices, models)
    kwh = prices.usd_per_kwh
    pods = usage.by_pod(data, per_model, kwh)
    source = main_source(data)
    found = incident_rules.incidents(data, t)
    straggling, straggler_notes = stragglers(data, source, t)
    findings = (
        *incident_rules.incident_findings(data, found, t),
        *thermal_outliers(data, t),
        *straggling,
    )
    ordered = tuple(sorted(findings, key=_severity_order))
    low = usage.low_utilization(pods, source, t)  # already ranked by idle dollars
    return FleetReport(
        window=data.window,
        idle_below_percent=data.idle_below_percent,
        totals=usage.totals(data, per_model, kwh),
        costs=table,
        by_namespace=usage.by_namespace(data, per_model, kwh),
        by_node=usage.by_node(data, per_model, kwh),
        by_model=usage.by_model(data, per_model, kwh),
        by_pod=pods,
        findings=(*ordered, *low),
        incidents=found,
        timeline=usage.timeline(data),
        collection=data.collection,
        notes=(*_notes(data), *straggler_notes),
    )
