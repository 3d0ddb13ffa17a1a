"""`gpuwarden snapshot` judges what it reads: the health column and the JSON findings/checks come
from the health rules; a saved series is judged as a window; --thresholds overrides them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.health.rules import CHECK_NAMES

SMI = "nvidia-smi"
H100_Q = f"{SMI}/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
H100_DMON = f"{SMI}/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.dmon.txt"
FINDING_KEYS = {
    "code", "severity", "title", "device", "evidence", "cause", "remedy", "action", "confidence",
    "method", "references", "first_seen_s", "last_seen_s", "count",
}  # fmt: skip


def snapshot_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["snapshot", *args, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_json_carries_findings_and_checks(capsys: pytest.CaptureFixture[str]) -> None:
    doc = snapshot_json(capsys, "--backend", "sim", "--scenario", "thermal-throttling")
    assert doc["schema"] == "gpuwarden.snapshot/1"
    codes = [(f["code"], f["severity"], f["device"]["index"]) for f in doc["findings"]]
    assert codes == [("temperature-high", "warning", 0), ("thermal-slowdown", "warning", 0)]
    finding = doc["findings"][0]
    assert set(finding) == FINDING_KEYS
    device = finding["device"]
    assert device["uuid"] == doc["devices"][0]["uuid"]
    assert device["pci_bus_id"] == doc["devices"][0]["pci_bus_id"]
    assert device["host"] == "sim-thermal-throttling"
    (proof,) = finding["evidence"]
    assert set(proof) == {"field", "value", "source", "detail"}
    assert proof["source"].startswith("sim:thermal-throttling?seed=0")
    assert proof["value"] == doc["devices"][0]["temperature_gpu_celsius"]
    assert [c["name"] for c in doc["checks"]] == list(CHECK_NAMES)
    by_name = {c["name"]: c for c in doc["checks"]}
    assert by_name["temperature"]["status"] == "warn"
    assert by_name["temperature"]["codes"] == ["temperature-high"]
    assert by_name["utilization"]["status"] == "skip"


def test_table_health_column_and_findings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--backend", "sim", "--scenario", "gpu-fallen-off-bus"]) == 0
    out = capsys.readouterr().out
    gpu_table = re.split(r"^\s+processes\s*$", out, flags=re.MULTILINE)[0]
    rows = [ln for ln in gpu_table.splitlines() if re.match(r"│\s+\d+ │", ln)]
    assert len(rows) == 8
    assert all(ln.rstrip("│ ").endswith("ok") for i, ln in enumerate(rows) if i != 3)
    assert "GPU-LOST" in rows[3]
    assert "CRIT  gpu-lost" in out and "GPU 3 is lost" in out
    # devices (the lost GPU) and xid (its Xid 79 event) fail
    assert re.search(r"health \(\d+ pass, 0 warn, 2 fail, \d+ skip of 20 checks", out)


def test_a_healthy_capture_reads_ok(capsys: pytest.CaptureFixture[str], fixtures: Path) -> None:
    assert main(["snapshot", "--backend", "smi", "--from", str(fixtures / H100_Q)]) == 0
    out = capsys.readouterr().out
    assert "health: no findings" in out
    assert re.search(r"│ ok\s+│", out)


def test_a_saved_series_is_judged_as_a_window(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    doc = snapshot_json(capsys, "--backend", "smi", "--from", str(fixtures / H100_DMON))
    assert doc["findings"] == []
    utilization = next(c for c in doc["checks"] if c["name"] == "utilization")
    assert "not enough data (5 readings over 4 s" in utilization["detail"]


def test_a_fault_in_a_capture_reaches_the_json(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    text = (fixtures / H100_Q).read_text()
    text = re.sub(r"(SRAM Threshold Exceeded\s*: )No", r"\1Yes", text, count=1)
    path = tmp_path / "q.txt"
    path.write_text(text)
    doc = snapshot_json(capsys, "--backend", "smi", "--from", str(path))
    (finding,) = doc["findings"]
    assert (finding["code"], finding["severity"], finding["action"]) == (
        "sram-threshold-exceeded",
        "critical",
        "CONTACT_SUPPORT",
    )
    assert finding["device"]["host"] is None  # a saved file does not name its host
    assert finding["evidence"][0]["source"] == f"smi:{path}"


def test_thresholds_file_moves_the_verdict(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    strict = tmp_path / "strict.toml"
    strict.write_text("memory_used_max_ratio = 0.2  # the capture uses 24 %\n")
    args = ["--backend", "smi", "--from", str(fixtures / H100_Q), "--thresholds", str(strict)]
    doc = snapshot_json(capsys, *args)
    assert [f["code"] for f in doc["findings"]] == ["memory-nearly-full"]
    assert "24 % > 20 %" in doc["findings"][0]["evidence"][0]["detail"]


def test_a_bad_thresholds_file_is_exit_2_naming_file_and_key(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("memory_used_max_ration = 0.9\n")
    args = ["snapshot", "--backend", "smi", "--from", str(fixtures / H100_Q)]
    assert main([*args, "--thresholds", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "thresholds-invalid" in err
    assert f"{bad}: unknown threshold 'memory_used_max_ration'" in err
    assert "did you mean 'memory_used_max_ratio'" in err


def two_masked_gpus(fixtures: Path, tmp_path: Path) -> Path:
    """The H100 capture (its UUID masked, as shared captures are) as a node of two GPUs, the
    second one's SRAM past its threshold: both GPUs carry the same masked UUID."""
    text = (fixtures / H100_Q).read_text()
    head, bus, gpu = text.partition("GPU 00000000:00:09.0\n")
    faulty = re.sub(r"(SRAM Threshold Exceeded\s*: )No", r"\1Yes", gpu, count=1)
    faulty = re.sub(r"(Minor Number\s*: )0", r"\g<1>1", faulty, count=1)
    head = re.sub(r"(Attached GPUs\s*: )1", r"\g<1>2", head, count=1)
    path = tmp_path / "two.q.txt"
    path.write_text(head + bus + gpu + "GPU 00000000:00:0A.0\n" + faulty)
    return path


def test_a_masked_uuid_does_not_spread_a_finding_to_every_gpu(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    path = two_masked_gpus(fixtures, tmp_path)
    assert main(["snapshot", "--backend", "smi", "--from", str(path)]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if re.match(r"│\s+\d+ │ H100", ln)]
    assert len(rows) == 2
    assert rows[0].rstrip("│ ").endswith("ok")
    assert "CRIT" in rows[1]
