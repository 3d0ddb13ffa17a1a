"""`gpuwarden deploy ...` as a user runs it: documents on stdout or in --output, and errors
that name the problem."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.commands.deploy import _key_value
from gpuwarden.cli.main import main
from gpuwarden.deploy.yaml_text import from_yaml, from_yaml_stream


def test_rules_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy", "prometheus-rules"]) == 0
    document = from_yaml(capsys.readouterr().out)
    names = [g["name"] for g in document["groups"]]
    assert names[0] == "gpuwarden-health-xid" and "gpuwarden-cost" in names


def test_prometheus_rule_crd(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["deploy", "prometheus-rules", "--format", "prometheusrule", "--namespace", "mon"]
    assert main([*args, "--label", "release=kps"]) == 0
    crd = from_yaml(capsys.readouterr().out)
    assert crd["kind"] == "PrometheusRule" and crd["metadata"]["namespace"] == "mon"
    assert crd["metadata"]["labels"]["release"] == "kps"


def test_thresholds_file_changes_the_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "t.toml"
    toml.write_text("gpu_temperature_fallback_celsius = 78\n")
    assert main(["deploy", "prometheus-rules", "--thresholds", str(toml)]) == 0
    assert "DCGM_FI_DEV_GPU_TEMP >= 78\n" in capsys.readouterr().out


def test_rules_with_their_unit_tests(tmp_path: Path) -> None:
    rules, tests = tmp_path / "rules.yml", tmp_path / "rules_test.yml"
    assert main(["deploy", "prometheus-rules", "-o", str(rules), "--tests", str(tests)]) == 0
    document = from_yaml(tests.read_text())
    assert document["rule_files"] == [str(rules.resolve())]
    assert len(document["tests"]) > 100


def test_tests_need_the_rule_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy", "prometheus-rules", "--tests", "t.yml"]) == 2
    assert "rule-tests-need-output" in capsys.readouterr().err


def test_unwritable_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing" / "rules.yml"
    assert main(["deploy", "prometheus-rules", "-o", str(target)]) == 4
    err = capsys.readouterr().err
    assert "output-unwritable" in err and str(target) in err


def test_grafana_to_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy", "grafana", "-o", str(tmp_path / "dash")]) == 0
    files = sorted(p.name for p in (tmp_path / "dash").iterdir())
    assert len(files) == 6 and "gpuwarden-overview.json" in files
    overview = json.loads((tmp_path / "dash" / "gpuwarden-overview.json").read_text())
    assert overview["uid"] == "gpuwarden-overview"
    assert "wrote 6 dashboards" in capsys.readouterr().err


def test_k8s_without_pod_labels(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["deploy", "k8s", "--namespace", "gpu-mon", "--image", "reg.example/gw:1"]
    assert main([*args, "--no-pod-labels", "--runtime-class", "none"]) == 0
    docs = from_yaml_stream(capsys.readouterr().out)
    daemon_set = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = daemon_set["spec"]["template"]["spec"]
    assert daemon_set["metadata"]["namespace"] == "gpu-mon"
    assert pod["containers"][0]["image"] == "reg.example/gw:1"
    assert "runtimeClassName" not in pod
    assert pod["containers"][0]["securityContext"]["runAsNonRoot"] is True


def test_a_bad_label_is_an_argument_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["deploy", "prometheus-rules", "--format", "prometheusrule", "--label", "oops"])
    assert code == 2
    assert "KEY=VALUE" in capsys.readouterr().err


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30))
def test_key_value_parses_or_refuses(text: str) -> None:
    key, sep, value = text.partition("=")
    if sep and key:
        assert _key_value(text) == (key, value)
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            _key_value(text)


def test_a_runbook_url_pattern_that_names_no_field_is_an_argument_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["deploy", "prometheus-rules", "--runbook-url", "https://w.example/{page}"]) == 2
    err = capsys.readouterr().err
    assert "argument --runbook-url: the pattern names a field no alert has" in err
    assert "{alert_lower}" in err
