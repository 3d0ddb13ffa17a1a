"""The NVIDIA L20 (Ada AD102, 48 GB GDDR6, PCIe; a China-market card whose NVIDIA datasheet was not
found): found by key, loose name and the name nvidia-smi prints, its memory figures the readings
its row cites, and the held 8x L20 table (tests/data/smi_heldout6) named from the catalog by
doctor without a false alarm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.catalog import resolve_gpu
from gpuwarden.catalog.gpus import gpu_by_smi_name
from gpuwarden.cli.main import main
from gpuwarden.units import GIB, MIB

CAPTURE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "smi_heldout6"
    / "table__zh-k8s-gpu-guide__8x-l20-indented__550.120.txt"
)


@pytest.mark.parametrize("typed", ["L20", "l20", "l20-48gb", "L20 48GB", "NVIDIA L20"])
def test_the_l20_resolves(typed: str) -> None:
    assert resolve_gpu(typed).key == "l20-48gb"


def test_nvidia_smi_name_and_neighbours() -> None:
    gpu = gpu_by_smi_name("NVIDIA L20")
    assert gpu is not None and gpu.key == "l20-48gb"
    assert resolve_gpu("L40").key == "l40-48gb"
    assert resolve_gpu("L40S").key == "l40s-48gb"
    assert resolve_gpu("L4").key == "l4-24gb"


def test_figures_the_row_cites() -> None:
    gpu = resolve_gpu("L20")
    assert gpu.architecture == "Ada Lovelace" and gpu.compute_capability == "8.9"
    assert gpu.sm_count == 11_776 // 128  # CUDA cores / cores per Ada SM
    assert gpu.memory_bytes == 46068 * MIB  # ECC on: 1/16 of 49152 MiB gone, as on the L40
    assert gpu.nominal_memory_bytes == 48 * GIB
    # torch's "total capacity of 44.53 GiB": within its rounding, from the lower end
    assert 44.525 * GIB <= gpu.usable_bytes < 44.535 * GIB
    assert gpu.tdp_watts == 350  # the power cap the boards print, not third-party 275 W
    assert gpu.memory_bandwidth_bytes_per_s == 864e9
    assert gpu.dense_tflops["bf16"] == 119.5


def test_doctor_names_the_held_l20_table_from_the_catalog(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["doctor", "--from", str(CAPTURE), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["verdict"] == "healthy"
    assert len(doc["devices"]) == 8
    for device in doc["devices"]:
        gpu = gpu_by_smi_name(device["name"])
        assert gpu is not None and gpu.key == "l20-48gb", device["name"]
        assert device["memory_total_bytes"] == gpu.memory_bytes


def test_plan_on_the_l20_judges_against_its_usable_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["plan", "Qwen3-8B", "--mode", "infer", "--gpu", "L20", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0
    assert plan["gpu"]["key"] == "l20-48gb"
    assert plan["usable_bytes"] == 45594 * MIB
