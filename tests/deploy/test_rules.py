"""The rule file: promtool accepts it, its unit tests (every alert, firing and quiet) pass,
every expression parses, every alert speaks diagnosis.md's vocabulary, and healthy real
captures fire nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import promql_parser
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from gpuwarden.deploy.alerts.spec import FailureMode
from gpuwarden.deploy.knobs import DEFAULT_KNOBS, KNOB_SOURCES, AlertKnobs
from gpuwarden.deploy.rule_tests import quiet_everywhere, rule_tests_document, series_text
from gpuwarden.deploy.rules import (
    expression,
    group_names,
    prometheus_rule,
    rule_groups,
    rule_set,
    rules_document,
    runbook_url_problem,
)
from gpuwarden.deploy.yaml_text import from_yaml, to_yaml
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, Thresholds
from tests.deploy.servers import PROMTOOL, needs_prometheus

RULES = rule_set()
# codes the telemetry alerts add (alerts/telemetry.py): about the monitoring, not a GPU
NEW_CODES = {"exporter-down", "telemetry-absent", "telemetry-stale", "telemetry-errors"}
# diagnosis.md §2 codes without a CODES row of health's own (its Xid and escalation findings)
XID_CODES = {"xid", "rma-candidate"}


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def _alerts(groups: list[dict[str, object]]) -> list[dict[str, object]]:
    return [r for g in groups for r in g["rules"] if "alert" in r]  # type: ignore[union-attr,attr-defined]


def test_every_alert_carries_a_code_severity_and_failure_mode() -> None:
    for spec in RULES.alerts:
        expr = expression(spec)
        if spec.code is None:  # the catch-all: the finding's own code and severity labels
            assert spec.gpuwarden and "gpuwarden_finding" in spec.gpuwarden and spec.dcgm is None
            continue
        assert spec.code in CODES or spec.code in NEW_CODES | XID_CODES, spec.name
        # every branch sets severity: gpuwarden's findings carry it, the rest get label_replace
        if spec.dcgm:
            assert f'"severity", "{spec.severity.value}"' in expr, spec.name
        if spec.gpuwarden and "gpuwarden_finding" not in spec.gpuwarden:
            assert '"severity"' in spec.gpuwarden, spec.name
    for rule in _alerts(rule_groups(RULES)):
        assert rule["labels"]["failure_mode"] in {m.value for m in FailureMode}  # type: ignore[index]
        assert set(rule["annotations"]) >= {"summary", "description", "runbook"}  # type: ignore[arg-type]


def test_gpu_alerts_defer_to_gpuwarden_where_it_watches_the_gpu() -> None:
    for spec in RULES.alerts:
        if spec.dcgm and spec.defers_to_gpuwarden:
            assert "unless on(UUID) gpuwarden_gpu_lost" in expression(spec), spec.name


def test_every_expression_parses_as_promql() -> None:
    for group in rule_groups(RULES):
        for rule in group["rules"]:
            promql_parser.parse(rule["expr"])


def test_a_broken_expression_does_not_parse() -> None:
    with pytest.raises(ValueError, match="unclosed"):
        promql_parser.parse("sum by (x (DCGM_FI_DEV_GPU_UTIL")


def test_every_knob_names_its_source() -> None:
    assert set(KNOB_SOURCES) == set(AlertKnobs.__dataclass_fields__)


@needs_prometheus
def test_promtool_checks_the_rule_file_and_the_crd(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(to_yaml(rules_document(RULES)))
    crd = from_yaml(
        to_yaml(prometheus_rule(RULES, namespace="monitoring", labels=[("release", "kps")]))
    )
    assert crd["apiVersion"] == "monitoring.coreos.com/v1" and crd["kind"] == "PrometheusRule"
    assert crd["metadata"]["labels"]["release"] == "kps"
    (tmp_path / "crd-groups.yml").write_text(to_yaml({"groups": crd["spec"]["groups"]}))
    for name in ("rules.yml", "crd-groups.yml"):
        done = _promtool("check", "rules", name, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert (
            f"SUCCESS: {sum(len(g['rules']) for g in rule_groups(RULES))} rules found"
            in done.stdout
        )


@needs_prometheus
def test_promtool_unit_tests_of_every_alert_pass(tmp_path: Path) -> None:
    """One rule file and test file per group (promtool evaluates every rule of a file at each
    step: per group it runs several times faster), run two at a time on the 2 cores."""
    tests: list[str] = []
    for group in group_names(RULES):
        (tmp_path / f"{group}.yml").write_text(to_yaml(rules_document(RULES, group)))
        document = rule_tests_document(RULES, f"{group}.yml", group)
        (tmp_path / f"{group}.test.yml").write_text(to_yaml(document))
        tests.append(f"{group}.test.yml")
    assert PROMTOOL
    runs = [
        subprocess.Popen(
            [PROMTOOL, "test", "rules", *tests[i::2]],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    for run in runs:
        out, _ = run.communicate(timeout=120)
        assert run.returncode == 0, out


def test_every_alert_has_firing_and_quiet_unit_tests() -> None:
    document = rule_tests_document(RULES, "rules.yml")
    for spec in RULES.alerts:
        checks = [
            check
            for test in document["tests"]
            for check in test.get("alert_rule_test", [])
            if check["alertname"] == spec.name
        ]
        assert any(c["exp_alerts"] for c in checks), f"{spec.name} never fires in its tests"
        assert any(not c["exp_alerts"] for c in checks), f"{spec.name} never stays quiet"


def test_both_exporters_alert_once() -> None:
    names = [t["name"] for t in rule_tests_document(RULES, "rules.yml")["tests"]]
    for spec in RULES.alerts:
        if spec.dcgm and spec.gpuwarden and spec.code and "gpuwarden_finding" in spec.gpuwarden:
            assert f"{spec.name}: both exporters: one alert, gpuwarden's" in names


# --- healthy real captures fire nothing

_EXPORTER_OWN = ("gpuwarden_reading_age_seconds", "gpuwarden_last_reading_timestamp_seconds")
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
HOURS = 2


def _series_of(exposition: str, instance: str) -> list[dict[str, str]]:
    """promtool input series holding a scrape's values for ``HOURS``: the energy counter grows at
    the scrape's own power draw (a real counter moves), everything else stays as captured."""
    samples = [
        s
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
        if s.name.startswith(("DCGM_", "gpuwarden_")) and s.name not in _EXPORTER_OWN
    ]
    power = {s.labels.get("UUID"): s.value for s in samples if s.name == "DCGM_FI_DEV_POWER_USAGE"}
    minutes = HOURS * 60
    series = [
        {
            "series": f'up{{instance="{instance}",job="nvidia-dcgm-exporter"}}',
            "values": f"1x{minutes}",
        }
    ]
    for s in samples:
        labels = {**s.labels, "instance": instance, "job": "nvidia-dcgm-exporter"}
        values = f"{s.value:g}x{minutes}"
        if s.name == ENERGY:
            values = f"{s.value:g}+{power.get(s.labels.get('UUID'), 1.0) * 60_000:g}x{minutes}"
        series.append({"series": series_text(s.name, labels), "values": values})
    return series


def _exported(source: Path) -> str:
    """The real exporter's exposition of a saved nvidia-smi capture."""
    done = subprocess.run(
        ["gpuwarden", "export", "--backend", "smi", "--from", str(source), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@needs_prometheus
def test_healthy_captures_fire_nothing(tmp_path: Path, fixtures: Path) -> None:
    dcgm = fixtures / "dcgm"
    smi = fixtures / "nvidia-smi"
    captures = {
        "tesla-t4 dcgm-exporter scrapes": (
            dcgm / "datadog-integrations-core__tesla-t4__metrics.prom"
        ).read_text(),
        "a100 mig dcgm-exporter scrape": (
            dcgm / "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
        ).read_text(),
        "h100 mig + pods dcgm-exporter excerpt": (
            dcgm / "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom"
        ).read_text(),
        "h100 under load (gpuwarden export of nvidia-smi -q)": _exported(
            smi / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
        ),
        "h100 mig under load (gpuwarden export of nvidia-smi -q)": _exported(
            smi / "linux-x86_64__nvidia-h100-mig__590.48.01.load.q.txt"
        ),
        "a100 mig (gpuwarden export of nvidia-smi -q -x)": _exported(
            smi / "netdata__a100-sxm4-mig.xml"
        ),
    }
    (tmp_path / "rules.yml").write_text(to_yaml(rules_document(RULES)))
    tests = [
        quiet_everywhere(RULES, name, _series_of(text, f"10.0.0.{i}:9400"), (30, 100))
        for i, (name, text) in enumerate(captures.items())
    ]
    assert all(len(t["input_series"]) >= 4 for t in tests)  # up + the excerpt's 3 at least
    (tmp_path / "healthy.test.yml").write_text(
        to_yaml({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests})
    )
    done = _promtool("test", "rules", "healthy.test.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the rules follow the thresholds (fuzzed)

_RATIOS = st.floats(0.05, 0.95, allow_nan=False)


@settings(max_examples=30, deadline=None)
@given(
    fallback=st.floats(40, 120, allow_nan=False),
    storm=st.floats(0.5, 1e4, allow_nan=False),
    used=_RATIOS,
    sm=_RATIOS,
    peers=st.integers(2, 16),
    window=st.sampled_from(["5m", "90s", "2h"]),
)
def test_any_thresholds_give_parsable_rules(
    fallback: float, storm: float, used: float, sm: float, peers: int, window: str
) -> None:
    thresholds = Thresholds(
        gpu_temperature_fallback_celsius=fallback,
        ecc_corrected_max_per_minute=storm,
        memory_used_max_ratio=used,
        fake_load_sm_active_max_ratio=sm,
        peers_min_gpus_count=peers,
    )
    knobs = AlertKnobs(counter_rate_window=window, pillar_window=window)
    rules = rule_set(thresholds, knobs)
    document = rules_document(rules)
    assert from_yaml(to_yaml(document)) == document
    for group in document["groups"]:
        for rule in group["rules"]:
            promql_parser.parse(rule["expr"])
    storm_rule = next(s for s in rules.alerts if s.name == "GpuEccCorrectableStorm")
    assert f"* 60 > {storm:g}" in expression(storm_rule)


def test_defaults_are_the_health_rules_defaults() -> None:
    assert rule_set(DEFAULT_THRESHOLDS, DEFAULT_KNOBS) == RULES


RUNBOOKS = "https://wiki.example.com/gpu/{group}/{alert_lower}#{code}"


def test_a_runbook_pattern_gives_every_alert_a_page_and_keeps_public_ones() -> None:
    urls = {spec.name: spec.runbook_url for spec in rule_set(runbook_url_pattern=RUNBOOKS).alerts}
    public = {spec.name: spec.runbook_url for spec in RULES.alerts if spec.runbook_url}
    assert public and all(urls[name] == url for name, url in public.items())
    assert urls["GpuEccUncorrectable"] == (
        "https://wiki.example.com/gpu/gpuwarden-health-memory/gpueccuncorrectable#ecc-uncorrectable"
    )
    # gpuwarden's own findings carry their code: the page is the firing finding's
    assert urls["GpuwardenFinding"].endswith("/gpuwardenfinding#{{ $labels.code }}")
    assert all(url for url in urls.values())


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("https://wiki.example.com/{alert}", None),
        ("https://wiki.example.com/{nope}", "names a field no alert has"),
        ("https://wiki.example.com/{alert", "no format string"),
        ("https://wiki.example.com/{0}", "names a field no alert has"),
        ("https://wiki.example.com/{alert.nope}", "names a field no alert has"),
        ("https://wiki.example.com/{alert:d}", "no format string"),
        # a width would build that many characters for every alert (a gigabyte each)
        ("https://wiki.example.com/{alert:>999999999}", "no format string"),
        ("https://wiki.example.com/{alert!r}", "no format string"),
        ("ftp://wiki.example.com/{alert}", "only http:// and https://"),
        ("{alert}", "only http:// and https://"),
    ],
)
def test_a_runbook_pattern_is_checked(pattern: str, problem: str | None) -> None:
    found = runbook_url_problem(pattern)
    assert found == problem if problem is None else (found is not None and problem in found)


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=40)
    | st.lists(
        st.sampled_from(["https://w.example/", "{alert}", "{", "}", "{alert.", "!r", ":d", "x"])
    ).map("".join)
)
def test_any_runbook_pattern_is_refused_in_words_or_gives_urls(pattern: str) -> None:
    if runbook_url_problem(pattern) is None:
        assert all(spec.runbook_url for spec in rule_set(runbook_url_pattern=pattern).alerts)


@needs_prometheus
def test_promtool_expands_the_runbook_urls_as_the_unit_tests_expect(tmp_path: Path) -> None:
    rules = rule_set(runbook_url_pattern=RUNBOOKS)
    tests = []
    for group in ("gpuwarden-health-telemetry", "gpuwarden-health-memory"):
        (tmp_path / f"{group}.yml").write_text(to_yaml(rules_document(rules, group)))
        document = rule_tests_document(rules, f"{group}.yml", group)
        (tmp_path / f"{group}.test.yml").write_text(to_yaml(document))
        tests.append(f"{group}.test.yml")
    done = _promtool("test", "rules", *tests, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
