"""Every alert and recording rule gpuwarden ships, by failure mode, as data (``spec``)."""

from __future__ import annotations

from dataclasses import replace

from gpuwarden.deploy.alerts.cost import cost_records, health_records, idle_allocated
from gpuwarden.deploy.alerts.health import health_alerts
from gpuwarden.deploy.alerts.performance import bottlenecks, distributed, throughput
from gpuwarden.deploy.alerts.spec import (
    GPUWARDEN_TARGET,
    TEST_NODE,
    AlertSpec,
    Case,
    FailureMode,
    InputSeries,
    RecordSpec,
    Text,
)
from gpuwarden.deploy.alerts.telemetry import telemetry_alerts
from gpuwarden.deploy.knobs import AlertKnobs
from gpuwarden.deploy.promql import alternatives, selector
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.types.health import Severity

__all__ = ["AlertSpec", "FailureMode", "RecordSpec", "alert_specs", "record_specs"]


_NODE = {"Hostname": TEST_NODE, "hostname": TEST_NODE, **GPUWARDEN_TARGET}


def _node_finding(code: str, severity: str) -> InputSeries:
    return InputSeries(
        "gpuwarden_finding", "1x20", {**_NODE, "code": code, "severity": severity}, None
    )


_CATCH_ALL_CASES = (
    Case(
        "a node-level finding no alert names",
        (_node_finding("driver-too-old", "critical"),),
        (0,),
        {**_NODE, "code": "driver-too-old", "severity": "critical"},
        node_level=True,
    ),
    Case(
        "healthy: information is not an alert",
        (_node_finding("persistence-off", "info"),),
        node_level=True,
    ),
    Case(
        "healthy: a named alert's code",
        (_node_finding("ecc-uncorrectable", "critical"),),
        node_level=True,
    ),
)


def _any_other_finding(named: tuple[str, ...]) -> AlertSpec:
    """gpuwarden's findings no named alert covers (node-level ones from ``doctor``'s checks,
    codes added later): one alert per finding, with the finding's own code and severity."""
    return AlertSpec(
        "GpuwardenFinding",
        None,
        FailureMode.HEALTH,
        Severity.WARNING,
        "gpuwarden finding {{ $labels.code }} ({{ $labels.severity }}) on {{ $labels.instance }}",
        "gpuwarden's health finding",
        None,
        selector(
            "gpuwarden_finding", code="!~" + alternatives(sorted(set(named))), severity="!info"
        ),
        text=Text(
            "gpuwarden's health rules found a problem no dedicated alert covers (the code label "
            "names it: diagnosis.md)",
            "`gpuwarden doctor` on the node prints the finding's evidence, cause and fix",
        ),
        per_gpu=False,
        topic="telemetry",
        cases=_CATCH_ALL_CASES,
    )


def alert_specs(t: Thresholds, k: AlertKnobs) -> tuple[AlertSpec, ...]:
    """Every alert, in rule-file order (by failure mode)."""
    named = (
        *health_alerts(t, k),
        *(replace(s, topic="telemetry") for s in telemetry_alerts(k)),
        *throughput(t, k),
        *bottlenecks(t, k),
        *distributed(t, k),
        idle_allocated(k),
    )
    codes = tuple(s.code for s in named if s.code is not None)
    return (*named, _any_other_finding(codes))


def record_specs(k: AlertKnobs) -> tuple[RecordSpec, ...]:
    return (*health_records(k), *cost_records(k))
