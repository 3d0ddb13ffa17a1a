"""GpuTemperatureHigh judges a dcgm-exporter scrape as doctor does (the temperature-high rule of
health.rules.thermal_power): the thresholds the GPU states, else its model's on record in
catalog/data/gpu_thermal.csv, else the fallback degrees.

Each reading is the real Tesla T4 scrape (Datadog's fixture: the GPU on driver 460.106.00, which
states no threshold) with its temperature, its ``modelName`` or its stated thresholds changed.
doctor judges the scrape saved as a file; promtool runs the rule file on the same scrape as
input series and must fire GpuTemperatureHigh exactly where doctor finds temperature-high, with
the threshold doctor names."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import promql_parser
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwarden.catalog.thermal import reported_names, thermal_catalog, thermal_thresholds_for
from gpuwarden.deploy.alerts.health import (
    FALLBACK_THRESHOLD,
    STATED_MAX_OPERATING,
    STATED_SLOWDOWN,
    catalog_line,
)
from gpuwarden.deploy.alerts.spec import FailureMode, group_name
from gpuwarden.deploy.rule_tests import expand, series_text
from gpuwarden.deploy.rules import (
    alert_annotations,
    expression,
    rule_set,
    rules_document,
    static_labels,
)
from gpuwarden.deploy.yaml_text import to_yaml
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS
from gpuwarden.types.health import Finding
from tests.deploy.servers import PROMTOOL, needs_prometheus

RULES = rule_set()
ALERT = next(s for s in RULES.alerts if s.name == "GpuTemperatureHigh")
GROUP = group_name(FailureMode.HEALTH, "thermal")
T4_SCRAPE = "datadog-integrations-core__tesla-t4__metrics.prom"
# The scrape's GPU that reports a temperature and states no threshold (driver 460.106.00).
T4_GPU = 'UUID="GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"'
INSTANCE = "10.0.0.9:9400"
FALLBACK = DEFAULT_THRESHOLDS.gpu_temperature_fallback_celsius
# Not in the catalog: gpu_thermal.csv has no H100 NVL row (the H100 80GB HBM3's is derived from
# its T.Limit readings).
UNLISTED = "NVIDIA H100 NVL"
AT_MINUTES = 20


@dataclass(frozen=True, slots=True)
class Reading:
    """The T4 scrape with ``celsius`` as its temperature, ``model`` as its modelName (None: the
    scrape's own, "": no modelName label, as exporters before 2.x) and threshold fields it
    states added (DCGM field name → value)."""

    name: str
    celsius: float
    model: str | None = None
    stated: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Expected:
    """What the brief asks of a reading: does doctor find temperature-high, and the words of its
    title that name the threshold ("" where the GPU states it)."""

    reading: Reading
    fires: bool
    words: str = ""


def _t4(name: str, celsius: float, **stated: float) -> Reading:
    return Reading(name, celsius, None, {f"DCGM_FI_DEV_{k}": v for k, v in stated.items()})


BRIEF = (
    Expected(Reading("T4 at 81 °C", 81), True, "(max operating 85 °C for its model)"),
    Expected(Reading("T4 at 79 °C", 79), False),
    Expected(Reading("unlisted model at 84 °C", 84, UNLISTED), True, "GPU at 84 °C"),
    Expected(Reading("unlisted model at 82 °C", 82, UNLISTED), False),
    Expected(Reading("no modelName label at 84 °C", 84, ""), True, "GPU at 84 °C"),
    Expected(_t4("T4 at 84 °C stating slowdown 93 °C", 84, SLOWDOWN_TEMP=93), False),
    Expected(_t4("T4 at 89 °C stating slowdown 93 °C", 89, SLOWDOWN_TEMP=93), True, "slowdown 93"),
    Expected(
        _t4(
            "T4 at 60 °C stating slowdown 93 °C, T.Limit 3 °C",
            60,
            SLOWDOWN_TEMP=93,
            GPU_TEMP_LIMIT=3,
        ),
        True,
        "3 °C from its max operating temperature",
    ),
    Expected(
        _t4("T4 at 81 °C stating slowdown 93, max op 85", 81, SLOWDOWN_TEMP=93, GPU_MAX_OP_TEMP=85),
        True,
        "4 °C from its max operating temperature",
    ),
    Expected(_t4("T4 at 75 °C stating T.Limit 10 °C", 75, GPU_TEMP_LIMIT=10), False),
    # DCGM 4's canonical names of the same fields (a counters CSV may list either)
    Expected(_t4("T4 at 84 °C, DCGM 4 slowdown 93 °C", 84, GPU_TEMP_SLOWDOWN_CELSIUS=93), False),
    Expected(
        _t4("T4 at 89 °C, DCGM 4 slowdown 93 °C", 89, GPU_TEMP_SLOWDOWN_CELSIUS=93),
        True,
        "slowdown 93",
    ),
    Expected(
        _t4("T4 at 70 °C, DCGM 4 T.Limit 2 °C", 70, GPU_TEMP_MARGIN_CELSIUS=2),
        True,
        "2 °C from its max operating temperature",
    ),
    Expected(_t4("T4 at 81 °C, DCGM 4 max op 95 °C", 81, GPU_MAX_OP_TEMP_CELSIUS=95), False),
    Expected(
        Reading("P100 at 78 °C (slowdown 82 °C, below the fallback)", 78, "Tesla P100-PCIE-16GB"),
        True,
        "(slowdown 82 °C for its model)",
    ),
    Expected(Reading("RTX 2070, old driver's name, at 83 °C", 83, "GeForce RTX 2070"), False),
    Expected(
        Reading("RTX 2070 at 85 °C", 85, "NVIDIA GeForce RTX 2070"),
        True,
        "(max operating 89 °C for its model)",
    ),
)


def _grid() -> Iterator[Reading]:
    """Every name of every catalog row, at its line and a degree under it; the fallback's
    edge for a model not on record."""
    for row in thermal_catalog():
        line = catalog_line(row, DEFAULT_THRESHOLDS)
        if line is None:
            continue
        for name in reported_names(row):
            yield Reading(f"{name} at {line[0]:g} °C", line[0], name)
            yield Reading(f"{name} at {line[0] - 1:g} °C", line[0] - 1, name)
    yield Reading(f"unlisted at {FALLBACK:g} °C", FALLBACK, UNLISTED)
    yield Reading(f"unlisted at {FALLBACK - 1:g} °C", FALLBACK - 1, UNLISTED)


def _scrape(fixtures: Path, reading: Reading) -> str:
    """The T4 GPU's lines of the real scrape, changed as ``reading`` says."""
    text = (fixtures / "dcgm" / T4_SCRAPE).read_text()
    lines = [line for line in text.splitlines() if T4_GPU in line]
    temp = next(line for line in lines if line.startswith("DCGM_FI_DEV_GPU_TEMP{"))
    lines = [line for line in lines if line is not temp]
    temp = re.sub(r" \S+$", f" {reading.celsius:g}", temp)
    lines += [temp] + [
        temp.replace("DCGM_FI_DEV_GPU_TEMP{", f"{metric}{{").rsplit(" ", 1)[0] + f" {value:g}"
        for metric, value in reading.stated.items()
    ]
    body = "\n".join(lines) + "\n"
    if reading.model == "":
        return body.replace('modelName="Tesla T4",', "")
    if reading.model is not None:
        return body.replace('modelName="Tesla T4"', f'modelName="{reading.model}"')
    return body


def _doctor(path: Path) -> Finding | None:
    report = diagnose_captures([str(path)], DoctorOptions())
    return next((f for f in report.findings if f.code == "temperature-high"), None)


def _threshold(found: Finding) -> str:
    """The ``threshold`` label the alert carries for doctor's finding, read from its words: the
    catalog's line as its title names it, the fallback, or the threshold the GPU states."""
    named = re.search(r"\(([^()]+ for its model)\)", found.title)
    if named:
        return named.group(1)
    if any("states no slowdown threshold" in (e.detail or "") for e in found.evidence):
        return FALLBACK_THRESHOLD
    if re.search(r"\(slowdown \d+ °C\)", found.title):
        return STATED_SLOWDOWN
    assert "from its max operating temperature" in found.title, found.title
    return STATED_MAX_OPERATING


def _series_of(text: str, gpu: int, reading: Reading) -> list[dict[str, str]]:
    """promtool input series holding the scrape's values until a while after the alert's
    evaluation, as dcgm-exporter's target labels them; each reading a GPU of its own (its UUID
    numbered, a ``reading`` label naming it in promtool's report) so one test holds them all."""
    extra = {
        "instance": INSTANCE,
        "job": "nvidia-dcgm-exporter",
        "UUID": f"GPU-20c56d28-0da5-6d26-a36a-{gpu:012d}",
        "reading": reading.name,
    }
    return [
        {"series": series_text(s.name, s.labels | extra), "values": f"{s.value:g}x{AT_MINUTES + 5}"}
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def _expected_alert(series: list[dict[str, str]], found: Finding) -> dict[str, Any]:
    """The alert on the reading's GPU: its temperature series' labels, the rule's, and the
    threshold doctor names."""
    temp = next(s["series"] for s in series if s["series"].startswith("DCGM_FI_DEV_GPU_TEMP{"))
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', temp))
    labels |= static_labels(ALERT) | {"severity": ALERT.severity.value}
    labels["threshold"] = _threshold(found)
    annotations = {k: expand(v, labels) for k, v in alert_annotations(ALERT).items()}
    return {"exp_labels": labels, "exp_annotations": annotations}


def _promtool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL
    return subprocess.run(
        [PROMTOOL, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("expected", BRIEF, ids=lambda e: e.reading.name)
def test_doctor_judges_the_brief_readings(
    expected: Expected, fixtures: Path, tmp_path: Path
) -> None:
    path = tmp_path / "metrics.prom"
    path.write_text(_scrape(fixtures, expected.reading))
    found = _doctor(path)
    assert (found is not None) == expected.fires
    if found is not None:
        assert expected.words in found.title


@needs_prometheus
def test_the_alert_fires_where_doctor_finds_temperature_high(
    fixtures: Path, tmp_path: Path
) -> None:
    readings = [e.reading for e in BRIEF] + list(_grid())
    series: list[dict[str, str]] = []
    expected: list[dict[str, Any]] = []
    for gpu, reading in enumerate(readings):
        text = _scrape(fixtures, reading)
        (tmp_path / f"{gpu}.prom").write_text(text)
        found = _doctor(tmp_path / f"{gpu}.prom")
        own = _series_of(text, gpu, reading)
        series += own
        expected += [_expected_alert(own, found)] if found is not None else []
    assert 0 < len(expected) < len(readings)  # both verdicts are exercised
    test = {
        "name": "GpuTemperatureHigh as doctor's temperature-high",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": f"{AT_MINUTES}m", "alertname": ALERT.name, "exp_alerts": expected}
        ],
    }
    document = rules_document(RULES, GROUP)
    for group in document["groups"]:  # this alert alone: promtool evaluates every rule each step
        group["rules"] = [r for r in group["rules"] if r.get("alert") == ALERT.name]
    (tmp_path / "rules.yml").write_text(to_yaml(document))
    (tmp_path / "parity.test.yml").write_text(
        to_yaml({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [test]})
    )
    checked = _promtool(tmp_path, "check", "rules", "rules.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    done = _promtool(tmp_path, "test", "rules", "parity.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_reported_name_resolves_to_its_row() -> None:
    for row in thermal_catalog():
        names = reported_names(row)
        assert row.smi_name in names
        assert all(thermal_thresholds_for(n) == row for n in names)


def test_one_arm_per_distinct_line_each_naming_its_models() -> None:
    expr = expression(ALERT)
    promql_parser.parse(expr)
    lines = {catalog_line(row, DEFAULT_THRESHOLDS) for row in thermal_catalog()} - {None}
    assert len(lines) < len(thermal_catalog())  # models share lines, and so arms
    for line in lines:
        assert line is not None
        assert expr.count(f'"{line[1]}"') == 1, line
    for row in thermal_catalog():
        assert all(name in expr for name in reported_names(row)), row.smi_name
