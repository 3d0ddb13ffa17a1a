"""GPU catalog against the real data: fixtures/catalog (datasheet rows, compute capabilities) and
the names and framebuffer totals that nvidia-smi, NVML and DCGM printed on real machines."""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from gpuwarden.catalog import gpu_catalog, resolve_gpu
from gpuwarden.errors import UnknownNameError
from gpuwarden.units import GIB, MIB

_ARCHS_WITHOUT_FP8 = {"Pascal", "Volta", "Turing", "Ampere"}


class Captured(NamedTuple):
    capture: str
    name: str
    total_mib: int | None  # framebuffer total as printed
    reserved_mib: int | None  # the driver's reservation, where the tool prints it (R510+)


def _captured_gpus(fixtures: Path) -> Iterator[Captured]:
    """Every GPU in the real captures: product name, framebuffer total and reservation."""
    smi = fixtures / "nvidia-smi"
    for path in sorted(smi.rglob("*.q.txt")) + sorted((smi / "captures").glob("*.txt")):
        lines = path.read_text(errors="replace").splitlines()
        names = [
            ln.split(":", 1)[1].strip() for ln in lines if ln.strip().startswith("Product Name")
        ]
        # GPU-level "FB Memory Usage" is indented 4 spaces; MIG devices' blocks are deeper.
        blocks = [i for i, ln in enumerate(lines[:-2]) if ln == "    FB Memory Usage"]
        readings = [
            (_mib(lines[i + 1]), _mib(lines[i + 2]) if "Reserved" in lines[i + 2] else None)
            for i in blocks
        ]
        for index, name in enumerate(names):
            total, reserved = readings[index] if index < len(readings) else (None, None)
            yield Captured(path.name, name, total, reserved)
    for path in sorted(smi.glob("*.xml")):
        for gpu in ET.parse(path).getroot().findall("gpu"):
            total_text = gpu.findtext("fb_memory_usage/total")
            reserved_text = gpu.findtext("fb_memory_usage/reserved")
            yield Captured(
                path.name,
                gpu.findtext("product_name", ""),
                _mib(total_text) if total_text else None,
                _mib(reserved_text) if reserved_text else None,
            )
    for path in sorted(smi.glob("*query-gpu.csv")) + sorted(smi.glob("*.csv")):
        rows = [
            r for r in csv.reader(path.read_text().splitlines()) if r and not r[0].startswith("#")
        ]
        header = [h.strip() for h in rows[0]]
        if "name" in header:
            for row in rows[1:]:
                yield Captured(path.name, row[header.index("name")].strip(), None, None)
    for path in sorted((fixtures / "dcgm").glob("*.prom")):
        text = path.read_text()
        for name in set(re.findall(r'(?:modelName|DCGM_FI_DEV_NAME)="([^"]+)"', text)):
            yield Captured(path.name, name, None, None)
        for name, total in re.findall(
            r'DCGM_FI_DEV_FB_TOTAL\{[^}]*modelName="([^"]+)"[^}]*\} (\d+)', text
        ):
            yield Captured(path.name, name, int(total), None)


def _mib(text: str) -> int:
    """The MiB count of a "Total : 81559 MiB" line or a "81559 MiB" cell."""
    return int(text.rsplit(":", maxsplit=1)[-1].split(maxsplit=1)[0])


def test_captures_hold_names(fixtures: Path) -> None:
    names = {c.name for c in _captured_gpus(fixtures)}
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "Tesla T4", "NVIDIA GB200"} <= names


def test_every_name_seen_in_real_captures_resolves(fixtures: Path) -> None:
    for capture, name, _, _ in _captured_gpus(fixtures):
        gpu = resolve_gpu(name)
        assert name in gpu.smi_names, f"{capture}: {name!r} resolved to {gpu.key} by a loose match"


def test_memory_is_the_total_a_current_driver_prints(fixtures: Path) -> None:
    # Drivers that print "Reserved" apart (R510+) count it in "Total": that is memory_bytes.
    checked = 0
    for c in _captured_gpus(fixtures):
        if c.total_mib is not None and c.reserved_mib is not None:
            assert resolve_gpu(c.name).memory_bytes == c.total_mib * MIB, c.capture
            checked += 1
    assert checked >= 8


def test_usable_is_the_total_less_the_reservation_where_a_capture_shows_it(
    fixtures: Path,
) -> None:
    # Where the usable figure cites a capture, it is that capture's total − reserved; a capture
    # from before R510 (DCGM on drivers 460/470: no reserved reading) printed the usable figure.
    checked = set()
    for c in _captured_gpus(fixtures):
        gpu = resolve_gpu(c.name)
        if c.total_mib is None or c.capture not in gpu.usable_basis:
            continue
        usable = c.total_mib - (c.reserved_mib or 0)
        assert gpu.usable_bytes == usable * MIB, (c.capture, gpu.key)
        checked.add(gpu.key)
    assert {"h100-sxm5-80gb", "a100-sxm4-40gb", "t4-16gb", "p100-pcie-16gb"} <= checked


def test_usable_memory_of_the_gpus_people_rent() -> None:
    # What a job can have, MiB, each with its source in usable_basis: the H100's capture (81559 −
    # 479 reserved), torch's total_memory for the L40S / A10G / B200, nvidia-smi -q for the L4
    # (23034 − 556), the pre-R510 nvidia-smi total of the A100 80GB.
    expected = {
        "h100-sxm5-80gb": (81559, 81080),
        "l40s-48gb": (46068, 45589),
        "l4-24gb": (23034, 22478),
        "a10g-24gb": (23028, 22587),
        "a100-sxm4-80gb": (81920, 81251),
        "h200-sxm-141gb": (143771, 143071),
        "b200-hgx-180gb": (183359, 182631),
    }
    for key, (total, usable) in expected.items():
        gpu = resolve_gpu(key)
        assert (gpu.memory_bytes, gpu.usable_bytes) == (total * MIB, usable * MIB), key
        assert gpu.usable_basis and gpu.memory_basis, key


def test_gpus_without_a_cuda_reading_use_the_nvidia_smi_total() -> None:
    for gpu in gpu_catalog():
        if gpu.usable_memory_bytes is None:
            assert gpu.usable_bytes == gpu.memory_bytes, gpu.key
            assert gpu.usable_basis.startswith("not captured"), gpu.key
        else:
            # the driver keeps 0.1-1.1 GiB: nothing else comes between the two figures
            reserved = gpu.memory_bytes - gpu.usable_bytes
            assert 100 * MIB <= reserved <= 1.2 * GIB, gpu.key


def test_nominal_memory_is_the_datasheet_size() -> None:
    # GDDR cards with ECC on (datacenter defaults) lose 1/16 of the datasheet size to it.
    for key in ("l4-24gb", "a10-24gb", "l40s-48gb", "t4-16gb"):
        gpu = resolve_gpu(key)
        assert gpu.nominal_memory_bytes is not None
        assert gpu.memory_bytes == pytest.approx(gpu.nominal_memory_bytes * 15 / 16, rel=1e-3)
    assert resolve_gpu("H100 SXM").nominal_memory_bytes == 80 * GIB
    for gpu in gpu_catalog():
        assert gpu.nominal_memory_bytes is not None
        assert gpu.usable_bytes <= gpu.memory_bytes <= gpu.nominal_memory_bytes, gpu.key


def test_memory_basis_files_exist(fixtures: Path) -> None:
    for gpu in gpu_catalog():
        bases = f"{gpu.memory_basis} {gpu.usable_basis}"
        for cited in re.findall(r"fixtures/(\S+?\.(?:txt|xml|prom|json))", bases):
            assert (fixtures / cited).is_file(), f"{gpu.key}: {cited}"


def _fixture_rows(fixtures: Path) -> list[dict[str, str]]:
    with (fixtures / "catalog" / "gpus.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_every_fixture_gpu_row_is_in_the_catalog_with_its_values(fixtures: Path) -> None:
    rows = _fixture_rows(fixtures)
    assert len(rows) == 14
    for row in rows:
        variant = re.sub(r"\s*\(.*\)", "", row["variant"])  # "(AWS)", "(consumer)"
        gpu = resolve_gpu(f"{row['gpu']} {variant}")
        label = f"{row['gpu']} {row['variant']}"
        assert gpu.memory_bandwidth_bytes_per_s == float(row["mem_bandwidth_gb_s"]) * 1e9, label
        for precision in ("bf16", "fp16", "fp8"):
            cell = row[f"{precision}_dense_tflops"]
            assert gpu.tflops(precision) == (float(cell) if cell else None), (label, precision)
        assert gpu.tdp_watts == float(row["tdp_w"]), label
        nvlink = row["nvlink_gb_s_per_gpu"]
        assert gpu.nvlink_bytes_per_s == (float(nvlink) * 1e9 if nvlink else None), label
        assert gpu.mig_profiles == tuple(p for p in row["mig_profiles"].split(";") if p), label
        # Captured totals are a little under the nominal size (driver reservations).
        nominal = float(row["memory_gb"]) * GIB
        assert 0.9 * nominal <= gpu.memory_bytes <= nominal, label


def test_compute_capability_matches_gpu_arch(fixtures: Path) -> None:
    with (fixtures / "catalog" / "gpu_arch.csv").open() as handle:
        arch = list(csv.DictReader(handle))
    checked = 0
    for gpu in gpu_catalog():
        known = {
            r["compute_capability"]
            for r in arch
            if r["gpu"] in {gpu.family, f"GeForce {gpu.family}"}
        }
        if known:
            assert gpu.compute_capability in known, gpu.key
            checked += 1
    assert checked >= 22


def test_rows_are_complete_and_unique() -> None:
    gpus = gpu_catalog()
    assert len({g.key for g in gpus}) == len(gpus)
    smi = [name for g in gpus for name in g.smi_names]
    assert len(set(smi)) == len(smi)
    for gpu in gpus:
        assert gpu.source and gpu.memory_basis and gpu.usable_basis and gpu.smi_names, gpu.key
        assert gpu.confidence in {"high", "medium", "low"}, gpu.key
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", gpu.key), gpu.key


def test_required_variants_are_present() -> None:
    keys = {g.key for g in gpu_catalog()}
    for name in (
        "V100 SXM2 16GB",
        "V100 SXM2 32GB",
        "V100 PCIe 16GB",
        "V100 PCIe 32GB",
        "A100 SXM4 40GB",
        "A100 SXM4 80GB",
        "A100 PCIe 40GB",
        "A100 PCIe 80GB",
        "H100 SXM5",
        "H100 PCIe",
        "H100 NVL",
        "H200 SXM",
        "H200 NVL",
        "B200",
        "GB200",
        "L40S",
        "L40",
        "L4",
        "A10G",
        "A10",
        "T4",
        "RTX 4090",
        "RTX 3090",
        "RTX A6000",
        "RTX 6000 Ada",
    ):
        assert resolve_gpu(name).key in keys


def test_no_units_that_the_hardware_lacks() -> None:
    for gpu in gpu_catalog():
        if gpu.architecture in _ARCHS_WITHOUT_FP8:
            assert gpu.tflops("fp8") is None, gpu.key
        if gpu.architecture in {"Pascal", "Volta", "Turing"}:
            assert gpu.tflops("bf16") is None and gpu.tflops("tf32") is None, gpu.key


def test_dense_rates_are_consistent() -> None:
    # Tensor-core rates double per halving of precision (TF32 → BF16 → FP8), and beat FP32.
    for gpu in gpu_catalog():
        bf16, fp8, fp32 = gpu.tflops("bf16"), gpu.tflops("fp8"), gpu.tflops("fp32")
        if bf16 and fp8:
            assert fp8 == pytest.approx(2 * bf16, rel=0.02), gpu.key
        if bf16 and fp32:
            assert bf16 > fp32, gpu.key


def test_h100_sxm_datasheet_values_and_balance_point() -> None:
    h100 = resolve_gpu("h100-sxm5-80gb")
    # H100 datasheet: 3.35 TB/s; BF16 1,979 TFLOPS with sparsity (989.4 dense); 700 W;
    # NVLink 900 GB/s.
    assert h100.memory_bandwidth_bytes_per_s == 3.35e12
    assert h100.tflops("bf16") == 989.4
    assert (h100.tdp_watts, h100.nvlink_bytes_per_s) == (700, 900e9)
    assert h100.balance_point("bf16") == pytest.approx(989.4e12 / 3.35e12)
    assert resolve_gpu("T4").balance_point("bf16") is None  # no BF16 unit


@pytest.mark.parametrize(
    ("typed", "key"),
    [
        ("a100-sxm4-80gb", "a100-sxm4-80gb"),
        ("A100 SXM4 80GB", "a100-sxm4-80gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("a100 80gb", "a100-sxm4-80gb"),
        ("A100-40GB", "a100-sxm4-40gb"),
        ("A100 40GB", "a100-sxm4-40gb"),
        ("A100 40 GB PCIe", "a100-pcie-40gb"),
        ("H100", "h100-sxm5-80gb"),
        ("H100 SXM", "h100-sxm5-80gb"),
        ("h100 pcie", "h100-pcie-80gb"),
        ("H100 NVL", "h100-nvl-94gb"),
        ("H200", "h200-sxm-141gb"),
        ("RTX 4090 24GB", "rtx-4090-24gb"),
        ("GeForce RTX 4090", "rtx-4090-24gb"),
        ("L40", "l40-48gb"),
        ("L40S", "l40s-48gb"),
        ("L4", "l4-24gb"),
        ("RTX 2080", "rtx-2080-8gb"),
        ("RTX 2080 SUPER", "rtx-2080-super-8gb"),
    ],
)
def test_loose_names(typed: str, key: str) -> None:
    assert resolve_gpu(typed).key == key


@pytest.mark.parametrize(
    ("typed", "variants"),
    [
        ("A100", {"a100-sxm4-40gb", "a100-sxm4-80gb"}),
        ("A100 PCIe", {"a100-pcie-40gb", "a100-pcie-80gb"}),
        ("V100", {"v100-sxm2-16gb", "v100-sxm2-32gb"}),
    ],
)
def test_names_that_leave_memory_open_are_ambiguous(typed: str, variants: set[str]) -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_gpu(typed)
    assert info.value.reference == "ambiguous-gpu"
    assert set(info.value.suggestions) == variants
    assert "ambiguous" in info.value.message and info.value.hint


def test_unknown_gpu_suggests_neighbours() -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_gpu("4090")
    assert info.value.reference == "unknown-gpu"
    assert info.value.suggestions[0] == "rtx-4090-24gb"
    with pytest.raises(UnknownNameError):
        resolve_gpu("")
