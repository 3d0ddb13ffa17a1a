"""`gpuwarden remediate` on the command line: the JSON document, the table, and the exit codes
of every error (a bad policy names its key, a missing or broken kubeconfig, an API server that is
not there)."""

from __future__ import annotations

import json
import random
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from tests.fakes.kube_api import FakeKubeApi
from tests.remediate.conftest import (
    cordon_drain_inputs,
)


@pytest.fixture
def inputs(tmp_path: Path, kube: FakeKubeApi) -> dict[str, Path]:
    return cordon_drain_inputs(tmp_path, kube, nodes=4, failing=2)


def _args(inputs: dict[str, Path], *extra: str) -> list[str]:
    return [
        "remediate",
        "--policy",
        str(inputs["policy"]),
        "--findings",
        str(inputs["findings"]),
        "--kubeconfig",
        str(inputs["kubeconfig"]),
        *extra,
    ]


def _error(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(capsys.readouterr().err)
    assert error["schema"] == "gpuwarden.error/1" and error["hint"]
    return error


def test_the_json_document(inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(inputs, "--json")) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "gpuwarden.remediation/1" and document["dry_run"] is True
    first = document["actions"][0]
    assert {k: first[k] for k in ("node", "action", "status", "why")} == {
        "node": "gpu-2",
        "action": "cordon",
        "status": "planned",
        "why": None,
    }
    assert first["reason"] == {
        "code": "ecc-uncorrectable",
        "UUID": "GPU-2",
        "severity": "critical",
        "rule": "fatal",
        "findings": 1,
    }
    assert first["calls"][0]["method"] == "PATCH"
    assert first["calls"][0]["query"] == {"dryRun": "All"}
    assert document["summary"]["planned"] == 4
    limits = document["limits"]
    assert limits["nodes_in_scope"] == 4 and limits["max_unavailable"] == 2
    assert limits["circuit_breaker"]["state"] == "closed"
    assert limits["circuit_breaker"]["limit"] == 2


def test_the_table_says_dry_run(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(inputs)) == 0
    out = capsys.readouterr().out
    assert "DRY RUN" in out and "gpu-2" in out and "ecc-uncorrectable GPU-2" in out


def test_a_failed_action_exits_1(
    inputs: dict[str, Path], kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    kube.fail("PATCH", "/api/v1/nodes/gpu-2", 500, times=5)
    assert main(_args(inputs, "--apply", "--json")) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["summary"]["failed"] == 1 and document["summary"]["skipped"] == 3


def test_a_bad_policy_exits_2_naming_the_key(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    inputs["policy"].write_text("rules: [{match: {code: ecc}, actions: [cordon]}]")
    assert main(_args(inputs, "--json")) == 2
    error = _error(capsys)
    assert error["reference"] == "remediation-policy-invalid"
    assert "rules[0].match.code: unknown finding code 'ecc'" in error["message"]


def test_kubeconfig_errors(
    inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs["kubeconfig"] = tmp_path / "absent"
    assert main(_args(inputs, "--json")) == 2
    assert _error(capsys)["reference"] == "kubeconfig-missing"
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: [\n")
    inputs["kubeconfig"] = broken
    assert main(_args(inputs, "--json")) == 2
    assert _error(capsys)["reference"] == "kubeconfig-invalid"
    empty = tmp_path / "empty"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    inputs["kubeconfig"] = empty
    assert main(_args(inputs, "--json")) == 2
    assert _error(capsys)["reference"] == "kubeconfig-invalid"


def test_an_unknown_context(inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(inputs, "--context", "prod", "--json")) == 2
    error = _error(capsys)
    assert error["reference"] == "kubeconfig-invalid" and "prod" in error["message"]


def test_an_api_server_that_is_not_there_exits_4(
    inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nobody listens there
    config = json.loads(inputs["kubeconfig"].read_text())
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{port}"
    inputs["kubeconfig"].write_text(json.dumps(config))
    assert main(_args(inputs, "--json")) == 4
    error = _error(capsys)
    assert error["reference"] == "kubernetes-unreachable"
    assert f"cannot connect to http://127.0.0.1:{port}: connection refused" in error["message"]


def test_an_unwritable_audit_log_stops_before_anything(
    inputs: dict[str, Path], kube: FakeKubeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            _args(inputs, "--apply", "--audit-log", str(tmp_path / "no/such/dir/a.jsonl"), "--json")
        )
        == 4
    )
    assert _error(capsys)["reference"] == "audit-log-unwritable"
    assert kube.writes() == []


def _damaged(text: str, rng: random.Random) -> str:
    """Cut, bytes flipped, or numbers made absurd: how files get damaged."""
    choice = rng.randrange(3)
    if choice == 0:
        return text[: rng.randrange(len(text) + 1)]
    if choice == 1:
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return data.decode("utf-8", errors="replace")
    absurd = ("1e308", "-1", "NaN", "Infinity", "99999999999999999999", '""', "null", "[]")
    return re.sub(r"\d+(\.\d+)?", lambda _: rng.choice(absurd), text, count=rng.randint(1, 5))


def test_damaged_inputs_never_crash(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Never exit 70 nor a traceback; with --json always a JSON document on stdout or an error
    with its reference on stderr."""
    rng = random.Random(15)
    findings = inputs["findings"].read_text()
    policy = inputs["policy"].read_text()
    for i in range(40):
        damaged = _damaged(findings, rng) if i % 2 else _absurd_values(findings, rng)
        inputs["findings"].write_text(damaged)
        inputs["policy"].write_text(_damaged(policy, rng) if rng.random() < 0.25 else policy)
        code = main(_args(inputs, "--json"))
        out, err = capsys.readouterr()
        assert code in (0, 1, 2), (code, err)
        if code == 2:
            assert json.loads(err)["reference"] in (
                "remediation-policy-invalid",
                "findings-invalid",
            )
        else:
            document = json.loads(out, parse_constant=_no_constants)
            assert document["schema"] == "gpuwarden.remediation/1"


_ABSURD: tuple[Any, ...] = (1e308, -1, 0, "", None, [], {}, "NaN", 2**70, "gpu-2", "critical")


def _absurd_values(text: str, rng: random.Random) -> str:
    """Valid JSON with absurd values in random places: the reader's checks, not the parser's."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: rng.choice(_ABSURD) if rng.random() < 0.05 else walk(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return json.dumps(walk(json.loads(text)))


def _no_constants(name: str) -> None:
    raise AssertionError(f"{name} in the JSON output")


def test_no_kubeconfig_at_all(
    inputs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [
        a for a in _args(inputs, "--json") if a not in ("--kubeconfig", str(inputs["kubeconfig"]))
    ]
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone.yaml"))
    assert main(args) == 2
    assert _error(capsys)["reference"] == "kubeconfig-missing"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    assert main(args) == 4
    error = _error(capsys)
    assert error["reference"] == "kubeconfig-missing" and "not a pod" in error["message"]
