"""The catalog's per-model thermal thresholds (catalog/data/gpu_thermal.csv): re-harvested from
every nvidia-smi -q / -q -x capture gpuwarden holds and checked against the file, and the lookup
by the name a device reports."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from gpuwarden.catalog.gpu_names import words
from gpuwarden.catalog.gpus import gpu_catalog
from gpuwarden.catalog.thermal import ThermalThresholds, thermal_catalog, thermal_thresholds_for
from tests.conftest import PROJECT_ROOT

DATA = PROJECT_ROOT / "tests" / "data"
# -q text and -q -x XML spell the same facts: product name, driver, and the three thresholds
_Q = re.compile(
    r"^\s*(Product Name|Driver Version|GPU Slowdown Temp|GPU Max Operating Temp|GPU Shutdown Temp)"
    r"\s*:\s*(.*?)\s*$",
    re.M,
)
_XML = re.compile(
    r"<(product_name|driver_version|gpu_temp_slow_threshold|gpu_temp_max_gpu_threshold"
    r"|gpu_temp_max_threshold)>(.*?)</"
)
_FACT = {
    "Product Name": "name",
    "product_name": "name",
    "Driver Version": "driver",
    "driver_version": "driver",
    "GPU Slowdown Temp": "slowdown",
    "gpu_temp_slow_threshold": "slowdown",
    "GPU Max Operating Temp": "max_operating",
    "gpu_temp_max_gpu_threshold": "max_operating",
    "GPU Shutdown Temp": "shutdown",
    "gpu_temp_max_threshold": "shutdown",
}
# product names that are no model: vGPU guests (they print N/A anyway) and a driver too old for
# its board ("Graphics Device": a GTX 1660 Ti on R418)
_NO_MODEL = {"Graphics Device"}
_KINDS = ("slowdown", "max_operating", "shutdown")


def _degrees(cell: str | None) -> float | None:
    found = re.fullmatch(r"(\d+) C", cell or "")
    return float(found.group(1)) if found else None


def _gpu_blocks(text: str) -> list[dict[str, str]]:
    """Per GPU of a capture, in file order: its name, the driver above it, its thresholds."""
    facts = sorted(
        [(m.start(), _FACT[m.group(1)], m.group(2)) for m in _Q.finditer(text)]
        + [(m.start(), _FACT[m.group(1)], m.group(2)) for m in _XML.finditer(text)]
    )
    blocks: list[dict[str, str]] = []
    driver = ""
    for _, fact, value in facts:
        if fact == "driver":
            driver = value.split()[0] if value.split() else ""
        elif fact == "name":
            blocks.append({"name": value, "driver": driver})
        elif blocks:
            blocks[-1][fact] = value
    return blocks


def harvest(roots: list[Path]) -> dict[frozenset[str], list[tuple[str, str, dict[str, float]]]]:
    """Per model (its name's words): (capture, driver, absolute thresholds) of each GPU that
    printed one."""
    seen: dict[frozenset[str], list[tuple[str, str, dict[str, float]]]] = defaultdict(list)
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if path.suffix in {".json", ".md", ".csv", ".py", ".jsonl"}:
                continue
            for block in _gpu_blocks(path.read_text(errors="replace")):
                values = {k: v for k in _KINDS if (v := _degrees(block.get(k))) is not None}
                if values and block["name"] not in _NO_MODEL:
                    seen[words(block["name"])].append((path.name, block["driver"], values))
    return seen


@pytest.fixture(scope="module")
def harvested(fixtures: Path) -> dict[frozenset[str], list[tuple[str, str, dict[str, float]]]]:
    return harvest([DATA, fixtures])


def _held_rows() -> list[ThermalThresholds]:
    """The rows that come from captures gpuwarden holds (not public pastes)."""
    return [t for t in thermal_catalog() if not t.source.startswith("public")]


def test_every_model_a_held_capture_prints_has_its_lowest_thresholds(
    harvested: dict[frozenset[str], list[tuple[str, str, dict[str, float]]]],
) -> None:
    rows = {words(t.smi_name): t for t in _held_rows()}
    assert set(rows) == set(harvested)
    for model, readings in harvested.items():
        row = rows[model]
        for kind in _KINDS:
            values = [v[kind] for _, _, v in readings if kind in v]
            assert getattr(row, f"{kind}_celsius") == (min(values) if values else None), (
                row.smi_name,
                kind,
            )
        assert row.gpu_readings == len(readings)
        assert set(row.drivers) == {driver for _, driver, _ in readings}
        assert {Path(c).name for c in row.captures} == {name for name, _, _ in readings}


def test_real_values_read_from_the_captures() -> None:
    """Values read by eye from the captures: the T4 (XML, R515), the A10G on two drivers, the
    P100 whose slowdown is below the 83 °C fallback, Pascal without a max operating line."""
    t4 = thermal_thresholds_for("Tesla T4")
    assert t4 is not None and (t4.slowdown_celsius, t4.max_operating_celsius) == (93.0, 85.0)
    a10g = thermal_thresholds_for("NVIDIA A10G")
    assert a10g is not None and a10g.drivers == ("515.105.01", "535.247.01")
    assert (a10g.slowdown_celsius, a10g.max_operating_celsius, a10g.shutdown_celsius) == (
        95.0,
        88.0,
        98.0,
    )
    p100 = thermal_thresholds_for("Tesla P100-PCIE-16GB")
    assert p100 is not None and p100.slowdown_celsius == 82.0
    assert p100.max_operating_celsius is None
    h800 = thermal_thresholds_for("NVIDIA H800")
    assert h800 is not None and h800.drivers == ("525.105.17",) and h800.gpu_key is None
    assert (h800.slowdown_celsius, h800.max_operating_celsius) == (89.0, 87.0)


def test_the_gpu_key_names_the_catalog_row_of_that_name() -> None:
    by_key = {g.key: g for g in gpu_catalog()}
    for row in thermal_catalog():
        if row.gpu_key is None:
            assert thermal_thresholds_for(row.smi_name) is row
            continue
        spec = by_key[row.gpu_key]
        assert words(row.smi_name) in {words(n) for n in spec.smi_names}
        assert thermal_thresholds_for(row.smi_name) is row


def test_thresholds_are_ordered_as_the_driver_applies_them() -> None:
    """Max operating (SW slowdown) ≤ HW slowdown < shutdown on every board on record."""
    for row in thermal_catalog():
        assert row.slowdown_celsius is not None and row.shutdown_celsius is not None
        assert row.slowdown_celsius < row.shutdown_celsius
        if row.max_operating_celsius is not None:
            assert row.max_operating_celsius <= row.slowdown_celsius


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("GeForce RTX 2070", "NVIDIA GeForce RTX 2070"),  # R450 drops the brand prefix
        ("NVIDIA GeForce RTX 2070", "NVIDIA GeForce RTX 2070"),
        ("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"),  # a gpus.csv alias
        ("nvidia a10g", "NVIDIA A10G"),
        ("NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA GeForce RTX 3060 Laptop GPU"),
        ("NVIDIA GeForce RTX 3060 ...", None),  # the table cut it: 3060, 3060 Ti or Laptop?
        ("NVIDIA GeForce RTX 2080 …", None),
        ("NVIDIA L40", None),  # never the L40S nor anything loose
        ("NVIDIA A10G-8Q", None),
        ("NVIDIA GeForce RTX 3060 Ti", None),
        ("", None),
        (None, None),
    ],
)
def test_lookup_by_the_name_a_device_reports(name: str | None, expected: str | None) -> None:
    found = thermal_thresholds_for(name)
    assert (found.smi_name if found else None) == expected
