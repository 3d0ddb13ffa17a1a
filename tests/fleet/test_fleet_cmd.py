"""`gpuwarden fleet report` end to end against the session's Prometheus: outputs, exit codes."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.fleet import prometheus
from gpuwarden.fleet.model import FleetReport
from gpuwarden.transport import RetryPolicy
from tests.fleet import synth

WINDOW = ["--start", "2024-01-01T00:00:00Z", "--end", "2024-01-02T00:00:00Z"]
LAB = ["--selector", 'cluster="lab"']


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["fleet", "report", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _error(err: str) -> dict[str, Any]:
    """The JSON error document on stderr (after any retry warnings)."""
    return dict(json.loads(err[err.index("{") :]))


def test_json_document(
    capsys: pytest.CaptureFixture[str], prometheus_url: str, lab_report: FleetReport
) -> None:
    code, out, _ = _run(
        capsys, "--prometheus", prometheus_url, *WINDOW, *LAB, "--price-per-gpu-hour", "2", "--json"
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "gpuwarden.fleet/1"
    assert doc["window"]["start"] == "2024-01-01T00:00:00Z" and doc["window"]["hours"] == 24
    assert doc["gpu_hours"] == pytest.approx(lab_report.totals.gpu_hours)
    assert doc["idle_gpu_hours"] == pytest.approx(lab_report.totals.idle_gpu_hours, abs=1e-4)
    assert doc["cost"]["price_per_gpu_hour"] == 2.0
    assert doc["cost"]["idle_dollars"] == pytest.approx(2 * doc["idle_gpu_hours"], abs=0.01)
    row = doc["by_namespace"][0]
    assert {"namespace", "gpu_hours", "idle_gpu_hours", "cost"} <= set(row)
    assert {r["Hostname"] for r in doc["by_node"]} == {"node-a", "node-b", "node-c", "node-d"}
    finding = next(f for f in doc["findings"] if f["code"] == "rma-candidate")
    assert {"code", "severity", "Hostname", "gpu", "UUID", "evidence"} <= set(finding)
    assert finding["Hostname"] in {"node-b", "node-c"} and finding["UUID"].startswith("GPU-")
    low = next(f for f in doc["findings"] if f["code"] == "low-utilization")
    assert (low["namespace"], low["pod"], low["idle_dollars"]) == (
        "research",
        "notebook-alice",
        192.0,
    )
    assert doc["utilization_source"] == {"sm_active": 24, "gr_engine_active": 0, "gpu_util": 4}


def test_terminal_and_html(
    capsys: pytest.CaptureFixture[str], prometheus_url: str, tmp_path: Path
) -> None:
    page = tmp_path / "fleet.html"
    code, out, err = _run(
        capsys, "--prometheus", prometheus_url, *WINDOW, *LAB, "--html", str(page)
    )
    assert code == 0 and f"wrote {page}" in err
    assert "idle" in out and "notebook-alice" in out and "rma-candidate" in out
    html = page.read_text()
    for anchor in (
        'id="plot-timeline"',
        'id="plot-namespaces"',
        'id="plot-incidents"',
        'id="table-findings"',
        "Content-Security-Policy",
    ):
        assert anchor in html
    assert "<script src" not in html and "notebook-alice" in html


def test_output_writes_the_document_remediate_reads(
    capsys: pytest.CaptureFixture[str], prometheus_url: str, tmp_path: Path
) -> None:
    findings = tmp_path / "findings.json"
    args = ["--prometheus", prometheus_url, *WINDOW, *LAB, "--price-per-gpu-hour", "2"]
    code, out, err = _run(capsys, *args, "--output", str(findings))
    assert code == 0 and out == "" and f"wrote {findings}" in err
    assert [p.name for p in tmp_path.iterdir()] == ["findings.json"]  # no temporary left
    written = json.loads(findings.read_text())
    code, out, _ = _run(capsys, *args, "--json")
    printed = json.loads(out)
    for document in (written, printed):
        document.pop("source")  # how long the server took differs run to run
    assert written == printed
    # checked before any query: a directory that does not exist is exit 2 at once
    missing = tmp_path / "no-such-dir" / "findings.json"
    code, _, err = _run(capsys, *args, "--output", str(missing), "--json")
    assert code == 2 and _error(err)["reference"] == "fleet-output-path"


def test_a_prices_file(
    capsys: pytest.CaptureFixture[str], prometheus_url: str, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(
        f'usd_per_kwh = 0.1\n[usd_per_gpu_hour]\n"{synth.H100}" = 3.0\n"a100-sxm4-40gb" = 1.0\n'
    )
    code, out, _ = _run(
        capsys, "--prometheus", prometheus_url, *WINDOW, *LAB, "--prices", str(prices), "--json"
    )
    assert code == 0
    doc = json.loads(out)
    models = {r["modelName"]: r for r in doc["by_model"]}
    assert models[synth.H100]["cost"]["gpu_dollars"] == pytest.approx(
        3.0 * models[synth.H100]["gpu_hours"], abs=0.01
    )
    assert models[synth.A100]["cost"]["gpu_dollars"] == pytest.approx(1.0 * 4 * 24, abs=0.01)
    assert doc["cost"]["energy_dollars"] == pytest.approx(0.1 * doc["energy_kwh"], abs=0.01)
    prices.write_text('[usd_per_gpu_hour]\n"h100" = "a lot"\n')
    code, _, err = _run(
        capsys, "--prometheus", prometheus_url, *WINDOW, "--prices", str(prices), "--json"
    )
    assert code == 2
    error = _error(err)
    assert error["reference"] == "fleet-prices-invalid" and str(prices) in error["message"]


def test_a_bad_selector_names_the_query(
    capsys: pytest.CaptureFixture[str], prometheus_url: str
) -> None:
    code, _, err = _run(
        capsys, "--prometheus", prometheus_url, *WINDOW, "--selector", 'cluster=~"(', "--json"
    )
    assert code == 2
    error = _error(err)
    assert error["reference"] == "fleet-selector-rejected"
    assert "cluster=~" in error["context"] and "query" in error["message"]


def test_an_empty_window_says_so(capsys: pytest.CaptureFixture[str], prometheus_url: str) -> None:
    code, _, err = _run(
        capsys,
        "--prometheus",
        prometheus_url,
        "--start",
        "2020-01-01",
        "--end",
        "2020-01-02",
        "--json",
    )
    assert code == 2
    assert _error(err)["reference"] == "fleet-no-gpu-series"


def test_a_wrong_path_prefix_is_not_found(
    capsys: pytest.CaptureFixture[str], prometheus_url: str
) -> None:
    code, _, err = _run(capsys, "--prometheus", f"{prometheus_url}/prometheus", *WINDOW, "--json")
    assert code == 4
    assert _error(err)["reference"] == "prometheus-not-found"


def test_nobody_listening_is_exit_4(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus, "RetryPolicy", lambda: RetryPolicy(attempts=2, backoff_s=0.01))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: refused, and no one else can take it
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        code, _, err = _run(capsys, "--prometheus", url, "--range", "24h", "--json")
    assert code == 4
    error = _error(err)
    assert error["reference"] == "prometheus-unreachable" and url in error["message"]


@pytest.mark.parametrize(
    ("args", "reference"),
    [
        (["--prometheus", "prometheus:9090", "--range", "24h"], "fleet-prometheus-url"),
        (["--prometheus", "http://p:9090", "--range", "24"], "fleet-range-invalid"),
        (["--prometheus", "http://p:9090", "--start", "tomorrow"], "fleet-time-invalid"),
        (
            ["--prometheus", "http://p:9090", "--range", "1h", "--end", "2024-01-01"],
            "fleet-window-missing",
        ),
        (
            ["--prometheus", "http://p:9090", "--range", "1h", "--idle-below", "0"],
            "invalid-argument",
        ),
        (["--prometheus", "http://p:9090"], "missing-argument"),
    ],
)
def test_bad_arguments_are_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], reference: str
) -> None:
    code, _, err = _run(capsys, *args, "--json")
    assert code == 2
    assert _error(err)["reference"] == reference


def test_a_token_file(
    capsys: pytest.CaptureFixture[str], prometheus_url: str, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("abc\x01def\n")
    code, _, err = _run(
        capsys, "--prometheus", prometheus_url, *WINDOW, "--bearer-token-file", str(token), "--json"
    )
    assert code == 2
    error = _error(err)
    assert error["reference"] == "fleet-token-invalid" and "abc" not in error["message"]
    token.write_text("s3cret-token\n")  # Prometheus ignores it; the report runs
    code, _, _ = _run(
        capsys,
        "--prometheus",
        prometheus_url,
        *WINDOW,
        *LAB,
        "--bearer-token-file",
        str(token),
        "--json",
    )
    assert code == 0
