"""`gpuwarden deploy` given option values Kubernetes refuses: refused here, exit 2 naming the
option and the syntax, instead of manifests that `kubectl apply` rejects later (or, for
`--tests ''`, promtool tests silently not written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.cli.main import main

POLICY = "rules:\n  - match: {code: ecc-uncorrectable}\n    actions: [cordon]\n"


def _deploy(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, str]]:
    """The exit code and the error as printed: ``error: REF``, the message, ``hint: ...``."""
    code = main(["deploy", *args])
    lines = capsys.readouterr().err.splitlines()
    if not lines:
        return code, {}
    assert lines[0].startswith("error: ") and lines[-1].startswith("hint: "), lines
    message = " ".join(line.strip() for line in lines[1:-1])
    return code, {"reference": lines[0].removeprefix("error: "), "message": message}


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yml"
    path.write_text(POLICY)
    return path


BAD_NAMES = ("", "Bad_NS", "gpu-", "a b", "x" * 64, "默认")


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_namespace_kubernetes_refuses_is_refused(
    capsys: pytest.CaptureFixture[str], policy: Path, name: str
) -> None:
    """Before: exit 0 and a manifest with metadata.namespace the API server rejects."""
    for args in (
        ["k8s", "--namespace", name],
        ["prometheus-rules", "--format", "prometheusrule", "--namespace", name],
        [
            "remediate",
            "--policy",
            str(policy),
            "--prometheus",
            "http://p:9090",
            "--namespace",
            name,
        ],
    ):
        code, error = _deploy(capsys, *args)
        assert (code, error["reference"]) == (2, "invalid-argument"), args
        assert "--namespace" in error["message"] and "DNS label" in error["message"]


@pytest.mark.parametrize(
    ("option", "value", "syntax"),
    [
        ("--service-monitor-label", "release=kube prometheus", "label value"),
        ("--service-monitor-label", "my release=x", "label/taint key"),
        ("--service-monitor-label", "release=" + "x" * 64, "label value"),
        ("--runtime-class", "NVIDIA", "DNS subdomain"),
        ("--runtime-class", "nvidia runtime", "DNS subdomain"),
        ("--image", "registry/gpuwarden:0.1.0 ", "image reference"),
        ("--image", "", "image reference"),
    ],
)
def test_k8s_options_kubernetes_refuses_are_refused(
    capsys: pytest.CaptureFixture[str], option: str, value: str, syntax: str
) -> None:
    code, error = _deploy(capsys, "k8s", option, value)
    assert (code, error["reference"]) == (2, "invalid-argument")
    assert option in error["message"] and syntax in error["message"]


def test_a_bad_rule_label_and_audit_claim_are_refused(
    capsys: pytest.CaptureFixture[str], policy: Path
) -> None:
    code, error = _deploy(
        capsys, "prometheus-rules", "--format", "prometheusrule", "--label", "a b=c"
    )
    assert (code, error["reference"]) == (2, "invalid-argument") and "--label" in error["message"]
    code, error = _deploy(
        capsys,
        "remediate",
        "--policy",
        str(policy),
        "--prometheus",
        "http://p:9090",
        "--audit-claim",
        "Audit_Log",
    )
    assert (code, error["reference"]) == (2, "invalid-argument")
    assert "--audit-claim" in error["message"]


def test_the_valid_spellings_still_pass(capsys: pytest.CaptureFixture[str], policy: Path) -> None:
    for args in (
        ["k8s", "--namespace", "gpu-monitoring", "--runtime-class", "none"],
        ["k8s", "--runtime-class", "", "--service-monitor-label", "release=kube-prometheus-stack"],
        ["k8s", "--service-monitor-label", "app.kubernetes.io/part-of=", "--image", "r.io/g:1"],
        ["prometheus-rules", "--format", "prometheusrule", "--label", "release=prom"],
        ["remediate", "--policy", str(policy), "--prometheus", "http://p:9090", "--audit-claim",
         "gpuwarden-audit.v1"],
    ):  # fmt: skip
        assert main(["deploy", *args]) == 0, args
        assert capsys.readouterr().out.startswith(("apiVersion", "---", "groups", "kind"))


def test_an_empty_tests_path_is_an_error_not_silence(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before: --tests '' was read as "no --tests": exit 0, no tests written."""
    code, error = _deploy(capsys, "prometheus-rules", "-o", str(tmp_path / "r.yml"), "--tests", "")
    assert code == 4 and error["reference"] == "output-unwritable"


def test_a_prometheus_url_with_a_password_stays_out_of_the_cronjob(
    capsys: pytest.CaptureFixture[str], policy: Path
) -> None:
    """Before: exit 0, the password in the CronJob's arguments (and a URL the pod's client
    cannot use)."""
    url = "http://admin:s3cret@prometheus:9090"
    code, error = _deploy(capsys, "remediate", "--policy", str(policy), "--prometheus", url)
    assert (code, error["reference"]) == (2, "fleet-prometheus-url")
    assert "s3cret" not in error["message"]
