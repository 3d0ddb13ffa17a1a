"""The Prometheus rule file (and its PrometheusRule CRD) from the alert and recording specs.

Each alert reads gpuwarden's findings where gpuwarden's exporter watches the GPU, and
dcgm-exporter's own series everywhere else (``promql.not_watched``): a fleet running only
dcgm-exporter gets every alert that its fields allow, and a GPU watched by both never alerts
twice. Labels: ``code`` (diagnosis.md), ``severity`` (gpuwarden's finding's own, else the code's
default), ``failure_mode`` (the group); the series' ``gpu``, ``UUID``, ``Hostname`` and the rest
are kept. Annotations: ``summary``, ``description`` (the cause and the evidence), ``runbook``
(the fix) and ``runbook_url``: the public page where one has it (NVIDIA's Xid catalog), else the
team's own page from a pattern (kube-prometheus' ``runbookURLPattern``), else none.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuwarden.deploy.alerts import AlertSpec, FailureMode, RecordSpec, alert_specs, record_specs
from gpuwarden.deploy.alerts.spec import group_name
from gpuwarden.deploy.knobs import DEFAULT_KNOBS, AlertKnobs
from gpuwarden.deploy.promql import either, not_watched, set_label
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, Thresholds
from gpuwarden.transport import http_url_problem

HOST = "{{ with $labels.Hostname }}{{ . }}{{ else }}{{ $labels.hostname }}{{ end }}"
WHERE_GPU = " — GPU {{ $labels.gpu }} ({{ $labels.UUID }}) on " + HOST
CRD_API = "monitoring.coreos.com/v1"


@dataclass(frozen=True, slots=True)
class RuleSet:
    """What the rule file is built from (the same for the rule file, the CRD and its tests)."""

    alerts: tuple[AlertSpec, ...]
    records: tuple[RecordSpec, ...]


def rule_set(
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    knobs: AlertKnobs = DEFAULT_KNOBS,
    runbook_url_pattern: str | None = None,
) -> RuleSet:
    """``runbook_url_pattern``: the team's runbook page of each alert without a public one
    (``RUNBOOK_FIELDS`` are filled in, ``runbook_url_problem`` has checked it)."""
    alerts = alert_specs(thresholds, knobs)
    if runbook_url_pattern is not None:
        alerts = tuple(
            spec
            if spec.runbook_url
            else replace(spec, runbook_url=runbook_url_pattern.format_map(_runbook_fields(spec)))
            for spec in alerts
        )
    return RuleSet(alerts, record_specs(knobs))


# What a runbook URL pattern may name. An alert whose code is its finding's (gpuwarden's own
# findings) gets the firing series' code: annotations are templates.
RUNBOOK_FIELDS = ("alert", "alert_lower", "code", "group")
RUNBOOK_HINT = (
    "an http(s) URL naming any of {alert}, {alert_lower}, {code}, {group}, e.g. "
    "https://wiki.example.com/gpu/{alert_lower}"
)


def _runbook_fields(spec: AlertSpec) -> dict[str, str]:
    return {
        "alert": spec.name,
        "alert_lower": spec.name.lower(),
        "code": spec.code or "{{ $labels.code }}",
        "group": group_name(spec.mode, spec.topic),
    }


def runbook_url_problem(pattern: str) -> str | None:
    """Why ``pattern`` gives no runbook URL, in a few words; None when every alert gets one."""
    no_format = "the pattern is no format string (a literal brace is written {{ or }})"
    try:
        parsed = string.Formatter().parse(pattern)
        fields = [(f, spec, conv) for _, f, spec, conv in parsed if f is not None]
    except ValueError:  # "{alert"
        return no_format
    if not {field for field, _, _ in fields} <= set(RUNBOOK_FIELDS):  # "{}", "{0}", "{alert.x}"
        return "the pattern names a field no alert has"
    if any(spec or conversion for _, spec, conversion in fields):
        # "{alert:d}", "{alert!r}"; "{alert:>999999999}" would build a gigabyte per alert
        return no_format
    specs = alert_specs(DEFAULT_THRESHOLDS, DEFAULT_KNOBS)
    urls = {pattern.format_map(_runbook_fields(spec)) for spec in specs}
    problems = sorted({p for url in urls if (p := http_url_problem(url)) is not None})
    return problems[0] if problems else None


def expression(spec: AlertSpec) -> str:
    """gpuwarden's branch first (its findings carry their severity), then dcgm-exporter's."""
    branches = [spec.gpuwarden] if spec.gpuwarden else []
    if spec.dcgm:
        dcgm = not_watched(spec.dcgm) if spec.defers_to_gpuwarden else spec.dcgm
        branches.append(set_label(dcgm, "severity", spec.severity.value))
    return either(*branches)


def cause_and_fix(spec: AlertSpec) -> tuple[str, str]:
    if spec.text is not None:
        return spec.text.cause, spec.text.remedy
    row = CODES[spec.code or ""]
    return row.cause, row.remedy


def alert_annotations(spec: AlertSpec) -> dict[str, str]:
    cause, fix = cause_and_fix(spec)
    sources = spec.evidence + (" — or gpuwarden's health finding" if spec.gpuwarden else "")
    found: dict[str, str] = {
        "summary": spec.summary[:1].upper()
        + spec.summary[1:]
        + (WHERE_GPU if spec.per_gpu else ""),
        "description": f"{_sentence(cause)} Evidence: {_sentence(sources)}",
        "runbook": _sentence(fix),
    }
    if spec.runbook_url:
        found["runbook_url"] = spec.runbook_url
    return found


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else text


def static_labels(spec: AlertSpec) -> dict[str, str]:
    labels = {"code": spec.code} if spec.code else {}
    labels["failure_mode"] = spec.mode.value
    return labels


def alert_rule(spec: AlertSpec) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": spec.name, "expr": expression(spec)}
    if spec.for_ not in ("0", "0s", "0m"):
        rule["for"] = spec.for_
    rule["labels"] = static_labels(spec)
    rule["annotations"] = alert_annotations(spec)
    return rule


def record_rule(spec: RecordSpec) -> dict[str, Any]:
    return {"record": spec.record, "expr": spec.expr}


def group_names(rules: RuleSet) -> tuple[str, ...]:
    """The groups in file order: by failure mode, then as the specs list their topics."""
    keys = [(a.mode, a.topic) for a in rules.alerts] + [(r.mode, r.topic) for r in rules.records]
    order = {mode: i for i, mode in enumerate(FailureMode)}
    unique = dict.fromkeys(sorted(keys, key=lambda key: order[key[0]]))
    return tuple(group_name(mode, topic) for mode, topic in unique)


def rule_groups(rules: RuleSet) -> list[dict[str, Any]]:
    """Recording rules first in each group: a group evaluates its rules in order, so an alert
    reading a recorded series sees this evaluation's value."""
    groups = []
    for name in group_names(rules):
        records = [record_rule(r) for r in rules.records if group_name(r.mode, r.topic) == name]
        alerts = [alert_rule(a) for a in rules.alerts if group_name(a.mode, a.topic) == name]
        groups.append({"name": name, "rules": [*records, *alerts]})
    return groups


def rules_document(rules: RuleSet, group: str | None = None) -> dict[str, Any]:
    """A Prometheus rule file (``rule_files:``, ``promtool check rules``); ``group``: only it."""
    return {"groups": [g for g in rule_groups(rules) if group in (None, g["name"])]}


def prometheus_rule(
    rules: RuleSet,
    *,
    name: str = "gpuwarden",
    namespace: str = "monitoring",
    labels: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The Prometheus Operator's PrometheusRule (monitoring.coreos.com/v1): the same groups.
    ``labels`` are what the operator's ``ruleSelector`` matches (kube-prometheus-stack: the
    Helm release, ``release: <name>``)."""
    return {
        "apiVersion": CRD_API,
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": "gpuwarden",
                "app.kubernetes.io/component": "alerting-rules",
                **dict(labels),
            },
        },
        "spec": {"groups": rule_groups(rules)},
    }
