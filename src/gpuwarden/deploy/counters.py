"""dcgm-exporter's counters CSV holding exactly what the rules read, and gpu-operator's ConfigMap.

dcgm-exporter publishes only the fields its collectors CSV lists (``-f`` / ``--collectors``;
format ``# DCGM FIELD, Prometheus metric type, help message``, ``#`` lines ignored). Its
``etc/default-counters.csv`` leaves out fields alerts read (row-remap pending, retired pages,
the recovery action, the fabric manager's status, the PCIe link, the power limit): those alerts
can never fire on the default. The CSV here is the default's rows plus every DCGM field a rule's
expression reads, found in the rules themselves (one source). gpu-operator reads a custom CSV
from a ConfigMap named by its ClusterPolicy's ``dcgmExporter.config.name`` (Helm:
``--set dcgmExporter.config.name=<name>``), the CSV under the key ``dcgm-metrics.csv``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpuwarden.deploy.rules import RuleSet
from gpuwarden.telemetry.dcgm.fields import CLOCK_EVENT_FIELDS, pre_dcgm46_name

# The rows NVIDIA/dcgm-exporter etc/default-counters.csv @ 7ad58324 (4.x) enables, in its order.
DEFAULT_COUNTERS = (
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
)
# The default's label row: the driver version as a label of every metric.
DRIVER_VERSION_ROW = "DCGM_FI_DRIVER_VERSION, label, Driver Version"
CSV_HEADER = "# Format\n# If line starts with a '#' it is considered a comment\n"
CSV_COLUMNS = "# DCGM FIELD, Prometheus metric type, help message"
CONFIGMAP_KEY = "dcgm-metrics.csv"  # the key gpu-operator mounts the custom CSV from

_DCGM_FIELD = re.compile(r"\bDCGM_FI_[A-Z0-9_]+\b")

# (metric type, help text) of a DCGM field, by the name dcgm-exporter's CSVs list it under
Catalog = Mapping[str, tuple[str, str]]


def fields_read(rules: RuleSet) -> tuple[str, ...]:
    """Every DCGM field an alert or recording rule's expression names, sorted."""
    texts = [a.dcgm or "" for a in rules.alerts] + [r.expr for r in rules.records]
    return tuple(sorted({name for text in texts for name in _DCGM_FIELD.findall(text)}))


def csv_name(field: str, catalog: Catalog) -> str | None:
    """The name a CSV row enables ``field`` under: itself, or the older name of a field the rules
    read under both (DCGM 4.6's renames; the clock-event bitmask's two names), whichever the
    catalog knows; None when it knows neither."""
    aliases = CLOCK_EVENT_FIELDS if field in CLOCK_EVENT_FIELDS else (field,)
    for name in (field, pre_dcgm46_name(field), *sorted(aliases)):
        if name in catalog:
            return name
    return None


def counter_rows(rules: RuleSet, catalog: Catalog) -> tuple[str, ...]:
    """The CSV's field names: the default's, then those only the rules read."""
    from_rules = (csv_name(f, catalog) for f in fields_read(rules))
    extra = sorted({n for n in from_rules if n is not None} - set(DEFAULT_COUNTERS))
    return (*DEFAULT_COUNTERS, *extra)


def unknown_fields(rules: RuleSet, catalog: Catalog) -> tuple[str, ...]:
    """Fields the rules read that no row can enable (the catalog knows no name of them)."""
    return tuple(f for f in fields_read(rules) if csv_name(f, catalog) is None)


def counters_csv(rules: RuleSet, catalog: Catalog) -> str:
    lines = [CSV_HEADER + CSV_COLUMNS, ""]
    added = False
    for name in counter_rows(rules, catalog):
        if name not in DEFAULT_COUNTERS and not added:
            lines += ["", "# Read by gpuwarden's alerting and recording rules"]
            added = True
        kind, text = catalog[name]
        lines.append(f"{name}, {kind}, {_one_cell(text)}")
    lines += ["", DRIVER_VERSION_ROW]
    return "\n".join(lines) + "\n"


def _one_cell(text: str) -> str:
    """A help text as one CSV cell: dcgm-exporter refuses a row of more than three fields, and a
    quoted cell after the separator's space is a parse error in Go's encoding/csv."""
    return text.replace(",", ";").replace('"', "'")


def counters_configmap(
    csv_text: str, *, name: str = "gpuwarden-dcgm-metrics", namespace: str = "gpu-operator"
) -> dict[str, Any]:
    """The ConfigMap gpu-operator's ``dcgmExporter.config.name`` names (in its namespace)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": "gpuwarden",
                "app.kubernetes.io/component": "dcgm-exporter-counters",
            },
        },
        "data": {CONFIGMAP_KEY: csv_text},
    }
