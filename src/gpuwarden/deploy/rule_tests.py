"""promtool unit tests of the rule file (``promtool test rules``), from each alert's cases.

Every alert gets its own cases (firing and quiet), each with dcgm-exporter's ``Hostname`` and
with the newest exporter's ``hostname``; every alert that reads gpuwarden's findings also gets:
the finding fires it; a GPU watched by both exporters alerts once (gpuwarden's verdict); and a
GPU gpuwarden watches and finds healthy does not alert on dcgm-exporter's reading. Expected
annotations are the rule's templates expanded the way Prometheus does for these labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpuwarden.deploy.alerts.health import finding
from gpuwarden.deploy.alerts.spec import (
    DCGM_TARGET,
    GPUWARDEN_TARGET,
    TEST_NODE,
    AlertSpec,
    Case,
    FailureMode,
    InputSeries,
    RecordSpec,
    Sample,
    group_name,
)
from gpuwarden.deploy.promql import WATCHED, quote
from gpuwarden.deploy.rules import HOST, RuleSet, alert_annotations, static_labels
from gpuwarden.fleet.window import parse_duration

INTERVAL = "1m"
_TEMPLATE = re.compile(r"\{\{ \$labels\.(\w+) \}\}")
# "{{ with $labels.X }}…{{ . }}…{{ end }}": the inner text with X's value, nothing when X is
# absent or empty (Go's zero value is false to `with`)
_WITH = re.compile(r"\{\{ with \$labels\.(\w+) \}\}(.*?)\{\{ end \}\}")


def gpu_labels(
    index: int, *, gpuwarden: bool = False, host_label: str = "Hostname"
) -> dict[str, str]:
    """The labels of test GPU ``index`` as dcgm-exporter (or gpuwarden's exporter) writes them."""
    labels = {
        "gpu": str(index),
        "UUID": f"GPU-5ca1ab1e-0000-4000-8000-{index:012d}",
        "pci_bus_id": f"00000000:{0x18 + 0x10 * index:02X}:00.0",
        # a model gpu_thermal.csv holds no line for: the temperature cases test the fallback
        "modelName": "NVIDIA H100 NVL",
    }
    if gpuwarden:
        return {**labels, "Hostname": TEST_NODE, "hostname": TEST_NODE, **GPUWARDEN_TARGET}
    return {**labels, "device": f"nvidia{index}", host_label: TEST_NODE, **DCGM_TARGET}


def series_text(metric: str, labels: Mapping[str, str]) -> str:
    body = ",".join(f"{k}={quote(v)}" for k, v in labels.items())
    return f"{metric}{{{body}}}"


def expand(template: str, labels: Mapping[str, str]) -> str:
    """The rules' annotation templates as Prometheus expands them: ``{{ $labels.X }}``,
    ``{{ with $labels.X }}…{{ end }}`` and the Hostname-else-hostname choice (Go prints a
    missing map key as ``<no value>``)."""
    host = labels.get("Hostname") or labels.get("hostname", "<no value>")
    text = template.replace(HOST, host)
    text = _WITH.sub(lambda m: _with(m.group(2), labels.get(m.group(1), "")), text)
    return _TEMPLATE.sub(lambda m: labels.get(m.group(1), "<no value>"), text)


def _with(inner: str, value: str) -> str:
    return inner.replace("{{ . }}", value) if value else ""


def _input(series: InputSeries, host_label: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    if series.gpu is not None:
        gpuwarden = series.metric.startswith("gpuwarden_")
        labels = gpu_labels(series.gpu, gpuwarden=gpuwarden, host_label=host_label)
    labels.update(series.labels)
    return {"series": series_text(series.metric, labels), "values": series.values}


def _expected_alert(
    spec: AlertSpec, case: Case, gpu: int, host_label: str, gpuwarden: bool
) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if not case.node_level:
        labels = gpu_labels(gpu, gpuwarden=gpuwarden, host_label=host_label)
    labels.update(static_labels(spec))
    labels["severity"] = spec.severity.value
    labels.update(case.labels)
    return {
        "exp_labels": labels,
        "exp_annotations": {k: expand(v, labels) for k, v in alert_annotations(spec).items()},
    }


def _test(
    spec: AlertSpec, case: Case, host_label: str = "Hostname", gpuwarden: bool = False
) -> dict[str, Any]:
    variant = "" if host_label == "Hostname" else f" ({host_label} label)"
    return {
        "name": f"{spec.name}: {case.name}{variant}",
        "interval": INTERVAL,
        "input_series": [_input(s, host_label) for s in case.series],
        "alert_rule_test": [
            {
                "eval_time": f"{case.at_minutes}m",
                "alertname": spec.name,
                "exp_alerts": [
                    _expected_alert(spec, case, g, host_label, gpuwarden) for g in case.fires_on
                ],
            }
        ],
    }


def _gpus_of(case: Case) -> tuple[int, ...]:
    return tuple(sorted({s.gpu for s in case.series if s.gpu is not None}))


def _gpuwarden_cases(spec: AlertSpec) -> Iterator[Case]:
    """The cases of an alert that reads gpuwarden's findings of its code: the finding fires it;
    another code's does not; with dcgm-exporter's faulty reading too, it alerts once; and a GPU
    gpuwarden watches and finds healthy is not alerted on dcgm-exporter's reading."""
    if spec.code is None or spec.gpuwarden != finding(spec.code):
        return
    faulty = next((c for c in spec.cases if c.fires_on and not c.node_level), None)
    # without a faulty case, past the alert's `for` (a threshold no reading can cross)
    at = faulty.at_minutes if faulty else max(10, parse_duration(spec.for_) // 60 + 5)
    fires_on = faulty.fires_on if faulty else (0,)
    gpus = _gpus_of(faulty) if faulty else (0,)
    watched = tuple(InputSeries(WATCHED, f"0x{at + 10}", gpu=g) for g in gpus)

    def findings(code: str) -> tuple[InputSeries, ...]:
        labels = {"code": code, "severity": spec.severity.value}
        return tuple(InputSeries("gpuwarden_finding", f"1x{at + 10}", labels, g) for g in fires_on)

    yield Case("gpuwarden's finding", (*watched, *findings(spec.code)), fires_on, at_minutes=at)
    other = "persistence-off" if spec.code != "persistence-off" else "memory-bound"
    yield Case("healthy: another code's finding", (*watched, *findings(other)), at_minutes=at)
    if faulty is None:
        return
    yield Case(
        "both exporters: one alert, gpuwarden's",
        (*faulty.series, *watched, *findings(spec.code)),
        fires_on,
        at_minutes=at,
    )
    yield Case(
        "healthy: gpuwarden watches and finds nothing, dcgm-exporter's reading does not decide",
        (*faulty.series, *watched),
        at_minutes=at,
    )


def alert_tests(spec: AlertSpec) -> Iterator[dict[str, Any]]:
    for case in spec.cases:
        gpuwarden = bool(case.series) and all(s.metric.startswith("gpuwarden") for s in case.series)
        yield _test(spec, case, gpuwarden=gpuwarden)
        if not case.node_level and not gpuwarden:
            yield _test(spec, case, host_label="hostname")
    for case in _gpuwarden_cases(spec):
        yield _test(spec, case, gpuwarden=True)


def _sample(record: RecordSpec, sample: Sample) -> dict[str, Any]:
    labels = gpu_labels(sample.gpu) if sample.gpu is not None else {}
    labels.update(sample.labels)
    return {"labels": series_text(record.record, labels), "value": sample.value}


def record_tests(record: RecordSpec) -> Iterator[dict[str, Any]]:
    for case in record.cases:
        yield {
            "name": f"{record.record}: {case.name}",
            "interval": INTERVAL,
            "input_series": [_input(s, "Hostname") for s in case.series],
            "promql_expr_test": [
                {
                    "expr": record.record,
                    "eval_time": f"{case.at_minutes}m",
                    "exp_samples": [_sample(record, s) for s in case.expected],
                }
            ],
        }


def rule_tests_document(rules: RuleSet, rule_file: str, group: str | None = None) -> dict[str, Any]:
    """The promtool test file for ``rule_file`` (a path relative to the test file); ``group``:
    only the tests of that rule group (promtool evaluates every rule of the file at every step,
    so a file per group runs several times faster)."""

    def wanted(mode: FailureMode, topic: str) -> bool:
        return group in (None, group_name(mode, topic))

    tests = [t for spec in rules.alerts if wanted(spec.mode, spec.topic) for t in alert_tests(spec)]
    tests += [t for r in rules.records if wanted(r.mode, r.topic) for t in record_tests(r)]
    return {"rule_files": [rule_file], "evaluation_interval": INTERVAL, "tests": tests}


def quiet_everywhere(
    rules: RuleSet, name: str, series: list[dict[str, str]], at_minutes: tuple[int, ...]
) -> dict[str, Any]:
    """A test that no alert fires on ``series`` (promtool input series) at these times: the
    healthy captures' check."""
    return {
        "name": name,
        "interval": INTERVAL,
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": f"{m}m", "alertname": spec.name, "exp_alerts": []}
            for spec in rules.alerts
            for m in at_minutes
        ],
    }
