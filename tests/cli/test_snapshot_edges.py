"""`gpuwarden snapshot` on the input of issue 13: non-finite and impossible readings, endless
and empty inputs, simulated times that are no time; and what the table shows: the header without
a host, a host column for scrapes of several nodes, the processes as nvidia-smi lists them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from tests.cli.test_snapshot_mig import _tables

SMI = "nvidia-smi"
H100_Q = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
H100_MIG_Q = "linux-x86_64__nvidia-h100-mig__590.48.01.load.q.txt"
T4 = "datadog-integrations-core__tesla-t4__metrics.prom"
T4_UUID = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"


def _strict(text: str) -> dict[str, Any]:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the JSON")

    document: dict[str, Any] = json.loads(text, parse_constant=refuse)
    return document


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    """Exit code and the document: stdout on success, the error document on stderr."""
    code = main(["snapshot", *args, "--json"])
    captured = capsys.readouterr()
    return code, _strict(captured.out if code == 0 else captured.err)


@pytest.mark.parametrize("at", ["nan", "inf", "1e300", "-1", "31536001"])
def test_a_sim_time_that_is_no_time_is_refused(capsys: pytest.CaptureFixture[str], at: str) -> None:
    code, error = _run(capsys, "--backend", "sim", "--at", at)
    assert code == 2
    assert error["reference"] == "invalid-sim-time"
    assert f"--at {at.lstrip('+')}" in error["message"] or "--at 1e+300" in error["message"]


def test_a_year_into_the_scenario_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = _run(capsys, "--backend", "sim", "--at", "31536000")
    assert code == 0 and document["simulated"] is True
    assert all(d["temperature_gpu_celsius"] is not None for d in document["devices"])


@pytest.mark.parametrize("value", ["+Inf", "1e308"])
def test_an_infinite_framebuffer_is_null_with_an_event(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path, value: str
) -> None:
    text = re.sub(
        rf'^(DCGM_FI_DEV_FB_FREE\{{[^}}]*"{T4_UUID}"[^}}]*\}}) \S+$',
        rf"\1 {value}",
        (fixtures / "dcgm" / T4).read_text(),
        flags=re.MULTILINE,
    )
    path = tmp_path / "scrape.prom"
    path.write_text(text)
    code, document = _run(capsys, "--backend", "dcgm", "--from", str(path))
    assert code == 0
    gpu = next(d for d in document["devices"] if d["uuid"] == T4_UUID)
    assert gpu["memory_free_bytes"] is None and gpu["power_draw_watts"] == 8.969
    (event,) = document["events"]
    assert event["kind"] == "backend-error" and event["uuid"] == T4_UUID
    assert event["message"].startswith("DCGM_FI_DEV_FB_FREE = ")


@pytest.mark.parametrize(
    ("backend", "reference"), [("smi", "smi-output-too-large"), ("dcgm", "dcgm-scrape-too-large")]
)
def test_an_input_past_the_limit_is_refused(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    backend: str,
    reference: str,
) -> None:
    """(/dev/zero itself is read in a child with a memory limit: test_fuzz_verbs.py)"""
    from gpuwarden import files as capped

    monkeypatch.setattr(capped, "MAX_CAPTURE_BYTES", 1 << 20)
    path = tmp_path / "big"
    path.write_bytes(b"#" * (2 << 20))
    code, error = _run(capsys, "--backend", backend, "--from", str(path))
    assert code == 2 and error["reference"] == reference and error["hint"]


@pytest.mark.parametrize(
    ("backend", "reference"), [("smi", "smi-output-unreadable"), ("dcgm", "dcgm-scrape-no-gpus")]
)
def test_an_empty_file_is_refused_by_both_backends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, backend: str, reference: str
) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("")
    code, error = _run(capsys, "--backend", backend, "--from", str(path))
    assert (code, error["reference"]) == (2, reference)


# --- what the table shows -----------------------------------------------------------------------


def test_the_header_starts_with_what_is_known(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    path = fixtures / SMI / H100_Q  # nvidia-smi -q names no host
    assert main(["snapshot", "--backend", "smi", "--from", str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("backend smi · 2026-07-14T08:12:53.000+00:00")


def test_gpus_of_several_hosts_get_a_host_column(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    """The Datadog scrape holds two nodes' dcgm-exporter pages, each with its GPU 0."""
    path = str(fixtures / "dcgm" / T4)
    assert main(["snapshot", "--backend", "dcgm", "--from", path]) == 0
    rows = _tables(capsys.readouterr().out)["snapshot"]
    assert [(r["host"], r["GPU"]) for r in rows] == [("424773df46e0", "0"), ("551bdf382151", "0")]
    assert rows[0]["temp °C"] == "25" and rows[0]["power W"] == "9"  # the first page's values
    _, document = _run(capsys, "--backend", "dcgm", "--from", path)
    assert [d["host"] for d in document["devices"]] == ["424773df46e0", "551bdf382151"]


def test_one_host_gets_no_host_column(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--backend", "sim", "--gpus", "2"]) == 0
    rows = _tables(capsys.readouterr().out)["SIMULATED snapshot"]
    assert "host" not in rows[0] and [r["GPU"] for r in rows] == ["0", "1"]


def _captured_processes(text: str) -> list[tuple[str, str, str, str]]:
    """(pid, type, name, MiB) of every process in a -q report, as printed."""
    found = re.findall(
        r"Process ID\s+: (\d+)\n\s+Type\s+: (\S+)\n\s+Name\s+: (.+)\n\s+Used GPU Memory\s+: (\d+)",
        text,
    )
    return [(pid, kind, name.strip(), mib) for pid, kind, name, mib in found]


@pytest.mark.parametrize("name", [H100_Q, H100_MIG_Q])
def test_processes_are_listed_as_nvidia_smi_lists_them(
    capsys: pytest.CaptureFixture[str], fixtures: Path, name: str
) -> None:
    path = fixtures / SMI / name
    expected = _captured_processes(path.read_text())
    assert len(expected) == 3
    assert main(["snapshot", "--backend", "smi", "--from", str(path)]) == 0
    tables = _tables(capsys.readouterr().out)
    rows = tables["processes"]
    shown = [(r["PID"], r["type"], r["process name"], r["GPU mem MiB"]) for r in rows]
    assert shown == expected
    assert {r["GPU"] for r in rows} == {"0"}
    assert tables["snapshot"][0]["procs"] == "3"
    if name == H100_MIG_Q:  # under MIG each process names its GPU and compute instance
        assert {(r["GI"], r["CI"]) for r in rows} == {("2", "0")}
    else:
        assert "GI" not in rows[0]


def test_no_process_table_without_processes(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    path = fixtures / "dcgm" / T4  # dcgm-exporter lists no processes
    assert main(["snapshot", "--backend", "dcgm", "--from", str(path)]) == 0
    assert "processes" not in _tables(capsys.readouterr().out)
