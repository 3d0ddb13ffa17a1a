"""Instance catalog against fixtures/catalog/instances.csv (vendor lists, skypilot-catalog)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpuwarden.catalog import instance_catalog, instances_for_gpu, resolve_gpu
from gpuwarden.errors import UnknownNameError


@pytest.fixture(scope="module")
def fixture_rows(fixtures: Path) -> dict[str, dict[str, str]]:
    with (fixtures / "catalog" / "instances.csv").open() as handle:
        return {row["instance_type"]: row for row in csv.DictReader(handle)}


def test_every_fixture_instance_is_in_the_catalog(fixture_rows: dict[str, dict[str, str]]) -> None:
    ours = {spec.instance_type: spec for spec in instance_catalog()}
    assert set(ours) == set(fixture_rows)
    for name, row in fixture_rows.items():
        spec = ours[name]
        assert spec.provider == row["provider"]
        assert spec.gpu_count == int(row["gpu_count"])
        assert spec.vcpus == int(row["vcpus"])
        assert spec.memory_gib == float(row["memory_gib"])
        assert spec.region == row["region"]
        assert spec.price_basis == row["price_basis"]
        price = row["on_demand_usd_per_hour"]
        assert spec.usd_per_hour == (float(price) if price else None), name
        # The instance's GPU is the fixture's GPU and variant.
        assert spec.gpu_key == resolve_gpu(f"{row['gpu']} {row['gpu_variant']}").key, name


def test_unknown_prices_are_none_never_zero() -> None:
    specs = instance_catalog()
    unpriced = [s for s in specs if s.usd_per_hour is None]
    assert unpriced, "the fixture has instances without a public price"
    assert all(s.usd_per_gpu_hour is None and not s.price_date for s in unpriced)
    assert all(s.usd_per_hour > 0 and s.price_date for s in specs if s.usd_per_hour is not None)


def test_every_row_names_its_source_and_gpu() -> None:
    for spec in instance_catalog():
        assert spec.source and spec.price_basis, spec.instance_type
        assert resolve_gpu(spec.gpu_key).key == spec.gpu_key
        assert spec.extra["verified"] in {"yes", "no", "partial"}


def test_price_per_gpu_hour() -> None:
    p5 = next(s for s in instance_catalog() if s.instance_type == "p5.48xlarge")
    assert p5.usd_per_hour is not None
    assert p5.usd_per_gpu_hour == pytest.approx(p5.usd_per_hour / 8)


def test_instances_for_gpu_by_key_or_name(fixture_rows: dict[str, dict[str, str]]) -> None:
    expected = {
        name
        for name, row in fixture_rows.items()
        if (row["gpu"], row["gpu_variant"]) == ("H100", "SXM5-80GB")
    }
    assert {s.instance_type for s in instances_for_gpu("h100-sxm5-80gb")} == expected
    assert {s.instance_type for s in instances_for_gpu("H100")} == expected
    assert instances_for_gpu("RTX 4090") == []
    with pytest.raises(UnknownNameError):
        instances_for_gpu("no such gpu")
