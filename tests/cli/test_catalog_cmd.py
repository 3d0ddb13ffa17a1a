"""`gpuwarden catalog ...` end to end, run as a user runs it, checked against the real data."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", *args], capture_output=True, text=True, check=False
    )


def run_json(*args: str) -> dict[str, Any]:
    proc = run_cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def test_gpus_json_has_datasheet_and_capture_values() -> None:
    document = run_json("catalog", "gpus")
    assert document["schema"] == "gpuwarden.catalog.gpus/1"
    gpus = {g["key"]: g for g in document["gpus"]}
    h100 = gpus["h100-sxm5-80gb"]
    # H100 datasheet: 3.35 TB/s, BF16 1,979 TFLOPS with sparsity (989.4 dense), NVLink 900 GB/s.
    assert h100["memory_bandwidth_bytes_per_s"] == 3.35e12
    assert h100["dense_tflops"]["bf16"] == 989.4
    assert h100["nvlink_bytes_per_s"] == 900e9
    assert h100["sm_count"] == 132  # H100 SXM5: 132 SMs (H100 whitepaper)
    assert gpus["rtx-5090-32gb"]["sm_count"] == 170  # GeForce RTX 5090: 170 SMs
    # nvidia-smi on the captured H100 printed "Total : 81559 MiB".
    assert h100["memory_bytes"] == 81559 * 2**20
    # CUDA gives a job the total less the 479 MiB the driver reserved on that capture
    assert h100["usable_bytes"] == 81080 * 2**20 and "reserved 479" in h100["usable_basis"]
    assert h100["nominal_memory_bytes"] == 80 * 2**30
    assert "NVIDIA H100 80GB HBM3" in h100["smi_names"]
    assert gpus["t4-16gb"]["dense_tflops"].get("bf16") is None  # T4 has no BF16 unit
    assert all(g["source"] for g in gpus.values())


def test_gpus_table_and_filter() -> None:
    proc = run_cli("catalog", "gpus")
    assert proc.returncode == 0, proc.stderr
    assert "h100-sxm5-80gb" in proc.stdout and "rtx-4090-24gb" in proc.stdout
    one = run_json("catalog", "gpus", "--gpu", "A100 80GB")
    assert [g["key"] for g in one["gpus"]] == ["a100-sxm4-80gb"]


def test_models_json_lists_every_bundled_model_with_its_count() -> None:
    """Every bundled model with the count its SOURCES.md row gives (the shared fixtures' rows and
    the models added since)."""
    counts = {}
    sources = resources.files("gpuwarden.catalog.data.models").joinpath("SOURCES.md")
    for line in sources.read_text().splitlines():
        if match := re.match(r"^\| (\S+) \| [^|]+ \| ([\d,]+) \|", line):
            counts[match[1]] = int(match[2].replace(",", ""))
    document = run_json("catalog", "models")
    assert document["schema"] == "gpuwarden.catalog.models/1"
    listed = {m["name"]: m["parameters"] for m in document["models"]}
    assert listed == counts
    t0 = next(m for m in document["models"] if m["name"] == "T0_3B")
    assert (t0["structure"], t0["num_encoder_layers"], t0["num_layers"]) == (
        "encoder-decoder",
        24,
        24,
    )


def test_instances_json_matches_the_fixture(fixtures: Path) -> None:
    with (fixtures / "catalog" / "instances.csv").open() as handle:
        rows = {r["instance_type"]: r for r in csv.DictReader(handle)}
    document = run_json("catalog", "instances")
    assert document["schema"] == "gpuwarden.catalog.instances/1"
    listed = {i["instance_type"]: i for i in document["instances"]}
    assert set(listed) == set(rows)
    for name, row in rows.items():
        price = row["on_demand_usd_per_hour"]
        assert listed[name]["usd_per_hour"] == (float(price) if price else None), name
        assert listed[name]["gpu_count"] == int(row["gpu_count"])
    assert listed["p5e.48xlarge"]["usd_per_gpu_hour"] is None
    assert listed["p5.48xlarge"]["usd_per_gpu_hour"] == pytest.approx(98.32 / 8)


def test_instances_table_and_gpu_filter() -> None:
    proc = run_cli("catalog", "instances", "--gpu", "H200")
    assert proc.returncode == 0, proc.stderr
    assert "p5en.48xlarge" in proc.stdout and "p4d.24xlarge" not in proc.stdout
    assert "no public price" in proc.stdout  # p5e has none


def test_models_table() -> None:
    proc = run_cli("catalog", "models")
    assert proc.returncode == 0, proc.stderr
    assert "Llama-2-7b-hf" in proc.stdout and "6.74 B" in proc.stdout


def test_ambiguous_gpu_is_a_usage_error_with_a_reference() -> None:
    proc = run_cli("catalog", "gpus", "--gpu", "A100")
    assert proc.returncode == 2
    assert "error: ambiguous-gpu" in proc.stderr and "a100-sxm4-80gb" in proc.stderr
    assert "Traceback" not in proc.stderr
    as_json = run_cli("catalog", "instances", "--gpu", "no-such-gpu", "--json")
    assert as_json.returncode == 2
    error = json.loads(as_json.stderr)
    assert (error["schema"], error["reference"]) == ("gpuwarden.error/1", "unknown-gpu")


def test_unknown_catalog_is_an_argparse_error() -> None:
    proc = run_cli("catalog", "xids")
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr
