"""`gpuwarden snapshot` end to end: the sim backend (no GPU here), errors, the backend choice."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.telemetry.sim import SCENARIOS
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["snapshot", *args, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_sim_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "--backend", "sim", "--seed", "4")
    assert doc["schema"] == "gpuwarden.snapshot/1"
    assert doc["backend"] == "sim" and doc["simulated"] is True
    assert doc["host"] == "sim-healthy-training"
    assert doc["timestamp"].endswith("+00:00")
    assert len(doc["devices"]) == SCENARIOS["healthy-training"].gpus
    device = doc["devices"][0]
    # every DeviceInfo and DeviceSample field, identity first, null where not reported
    keys = list(device)
    assert keys[:4] == ["index", "uuid", "name", "pci_bus_id"]
    fields = [f.name for f in dataclasses.fields(DeviceInfo)] + [
        f.name for f in dataclasses.fields(DeviceSample) if f.name != "info"
    ]
    assert sorted(keys) == sorted([*fields, "host"])
    assert device["host"] == "sim-healthy-training"  # the snapshot's: one host
    assert device["name"] == "NVIDIA H100 80GB HBM3"
    assert (
        device["memory_used_bytes"] + device["memory_free_bytes"] + device["memory_reserved_bytes"]
        == device["memory_total_bytes"]
    )
    assert device["power_average_watts"] is None  # one reading has no rate
    assert device["state"] == "ok" and device["extra"]["simulated"] == 1.0


def test_same_seed_same_document_apart_from_time(capsys: pytest.CaptureFixture[str]) -> None:
    a = _json(capsys, "--backend", "sim", "--scenario", "straggler", "--seed", "9")
    b = _json(capsys, "--backend", "sim", "--scenario", "straggler", "--seed", "9")
    strip = ("timestamp_s",)
    assert [{k: v for k, v in d.items() if k not in strip} for d in a["devices"]] == [
        {k: v for k, v in d.items() if k not in strip} for d in b["devices"]
    ]


def test_sim_at_shows_the_fault(capsys: pytest.CaptureFixture[str]) -> None:
    early = _json(capsys, "--backend", "sim", "--scenario", "gpu-fallen-off-bus", "--at", "5")
    late = _json(capsys, "--backend", "sim", "--scenario", "gpu-fallen-off-bus")  # default 45 s
    assert [d["state"] for d in early["devices"]].count("gpu-lost") == 0
    assert [d["state"] for d in late["devices"]].count("gpu-lost") == 1
    assert {(e["kind"], e["code"]) for e in late["events"]} == {("xid", 79), ("gpu-lost", None)}


def test_table_says_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--backend", "sim", "--scenario", "power-capping"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SIMULATED")
    assert "H100 80GB HBM3" in out and "sw_power_cap" in out


def test_scenario_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--backend", "sim", "--scenario", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(SCENARIOS)
    doc = _json(capsys, "--backend", "sim", "--scenario", "list")
    assert doc["schema"] == "gpuwarden.sim.scenarios/1"
    rows = {row["name"]: row for row in doc["scenarios"]}
    for name, scenario in SCENARIOS.items():
        assert rows[name]["description"] == scenario.description
        assert [(f["kind"], f["gpu"], f["at_s"]) for f in rows[name]["faults"]] == [
            (f.kind.value, f.gpu, f.at_s) for f in scenario.faults
        ]


def test_smi_capture_through_the_same_verb(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    xml = fixtures / "nvidia-smi" / "netdata__a100-sxm4-mig.xml"
    doc = _json(capsys, "--backend", "smi", "--from", str(xml))
    assert doc["backend"] == "smi" and doc["simulated"] is False
    # the XML says <product_name>NVIDIA A100-SXM4-40GB</product_name>, <power_limit>400.00 W
    assert doc["devices"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert doc["devices"][0]["power_limit_watts"] == 400.0


@pytest.mark.parametrize(
    ("args", "reference", "code"),
    [
        (["--backend", "sim", "--scenario", "fake-lod"], "unknown-scenario", 2),
        (["--backend", "sim", "--scenario", "straggler", "--gpus", "2"], "sim-gpu-count", 2),
        (["--backend", "smi", "--scenario", "fake-load"], "sim-option-without-sim", 2),
        (["--backend", "dcgm"], "backend-needs-source", 2),
        (["--from", "x.xml"], "source-needs-backend", 2),
        (["--backend", "sim", "--at", "-1"], "invalid-sim-time", 2),
        (["--backend", "sim", "--query-fields", "index,name"], "query-fields-without-smi-file", 2),
        (["--backend", "smi", "--query-fields", "index"], "query-fields-without-smi-file", 2),
    ],
)
def test_bad_options_are_clear_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], reference: str, code: int
) -> None:
    assert main(["snapshot", *args]) == code
    err = capsys.readouterr().err
    assert f"error: {reference}" in err and "hint:" in err and "Traceback" not in err


def test_no_gpu_backend_here(tmp_path: Path) -> None:
    """No NVIDIA driver on this machine and no nvidia-smi on PATH: exit 4 with the ways out."""
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    proc = run_cli("snapshot", env=env)
    assert proc.returncode == 4, proc.stderr
    assert "error: no-gpu-backend" in proc.stderr
    for way_out in ("--backend smi --from FILE", "--backend dcgm --from URL", "--backend sim"):
        assert way_out in proc.stderr


H100_CSV = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv"


def test_smi_noheader_csv_with_query_fields(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    """A `--format=csv,noheader` file reads with the field list it was written with."""
    header, row = (fixtures / "nvidia-smi" / H100_CSV).read_text().splitlines()[:2]
    names = ",".join(h.split(" [")[0] for h in header.split(", "))
    noheader = tmp_path / "noheader.csv"
    noheader.write_text(row + "\n")
    assert main(["snapshot", "--backend", "smi", "--from", str(noheader)]) == 2  # bad input
    err = capsys.readouterr().err
    assert "without a header row" in err and "--query-fields" in err
    doc = _json(capsys, "--backend", "smi", "--from", str(noheader), "--query-fields", names)
    full = _json(capsys, "--backend", "smi", "--from", str(fixtures / "nvidia-smi" / H100_CSV))
    assert doc["devices"] == full["devices"]
    assert doc["devices"][0]["memory_total_bytes"] == 81559 << 20  # "81559 MiB" in the row


def test_smi_series_shows_its_newest_reading(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    """A `-l` log without an index column: one GPU, and the snapshot is the last row."""
    lines = (fixtures / "nvidia-smi" / H100_CSV).read_text().splitlines()
    header = lines[0].split(", ")
    keep = [i for i, h in enumerate(header) if h.split(" [")[0] not in ("index", "uuid")]
    keep = [i for i in keep if header[i] != "pci.bus_id"]
    at = header.index("timestamp")
    rows = []
    for second in (53, 54, 55):
        cells = lines[1].split(", ")
        cells[at] = f"2026/07/14 08:12:{second}.500"
        rows.append(", ".join(cells[i] for i in keep))
    path = tmp_path / "loop.csv"
    path.write_text("\n".join([", ".join(header[i] for i in keep), *rows]) + "\n")
    doc = _json(capsys, "--backend", "smi", "--from", str(path))
    assert len(doc["devices"]) == 1
    assert doc["timestamp"].startswith("2026-07-14T08:12:55.500")
