"""temperature-high on captures that state no threshold (dcgm-exporter scrapes, dmon, CSV): the
thresholds real captures of the same model print (catalog/data/gpu_thermal.csv), said to come
from the catalog; the 83 °C fallback only for a model the catalog does not know."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog.thermal import thermal_thresholds_for
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import GpuwardenError
from gpuwarden.health.evaluate import HealthResult, evaluate_snapshot
from gpuwarden.telemetry.dcgm.scrape import parse_scrape
from gpuwarden.telemetry.open import open_backend
from gpuwarden.telemetry.smi.detect import parse_smi_output
from gpuwarden.types.health import Finding
from gpuwarden.types.telemetry import DeviceSample, Snapshot
from tests.conftest import PROJECT_ROOT

T4_SCRAPE = "dcgm/datadog-integrations-core__tesla-t4__metrics.prom"
H100_TABLE = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.table.txt"
P100_XML = "nvidia-smi/netdata__tesla-p100.xml"
NO_THRESHOLD: dict[str, Any] = {
    "temperature_slowdown_celsius": None,
    "temperature_margin_celsius": None,
    "temperature_gpu_max_celsius": None,
}


@pytest.fixture(scope="module")
def read(fixtures: Path) -> Any:
    cache: dict[str, DeviceSample] = {}

    def sample(name: str, **changes: Any) -> DeviceSample:
        if name not in cache:
            backend = "dcgm" if name.startswith("dcgm/") else "smi"
            cache[name] = open_backend(backend, str(fixtures / name)).read().samples[0]
        return dataclasses.replace(cache[name], **changes)

    return sample


def judge(sample: DeviceSample) -> HealthResult:
    snapshot = Snapshot(sample.timestamp_s, "host-a", "dcgm", False, (sample,), source="/x/m.prom")
    return evaluate_snapshot(snapshot)


def hot(result: HealthResult) -> Finding | None:
    return next((f for f in result.findings if f.code == "temperature-high"), None)


def test_a_t4_scrape_is_judged_by_the_t4s_own_max_operating_temperature(read: Any) -> None:
    """The scrape states no threshold; T4 boards print max operating 85 °C (SW thermal slowdown
    starts there), so 81 °C is within 5 °C of it, below the 83 °C fallback."""
    t4 = read(T4_SCRAPE, temperature_gpu_celsius=81.0)
    assert t4.info.name == "Tesla T4" and t4.temperature_slowdown_celsius is None
    finding = hot(judge(t4))
    assert (
        finding is not None
        and finding.title == "GPU 0: GPU at 81 °C (max operating 85 °C for its model)"
    )
    measured, catalog = finding.evidence
    assert measured.detail == (
        "81 °C ≥ 80 °C = max operating 85 − 5 (the capture states no threshold: the catalog's "
        "for a Tesla T4)"
    )
    assert (catalog.field, catalog.value, catalog.source) == (
        "catalog.gpu_thermal",
        "Tesla T4: slowdown 93 °C, max operating 85 °C",
        "catalog:gpu_thermal.csv",
    )
    assert "telegraf__tesla-t4-aws__v11__515.105.01.xml" in catalog.detail
    assert "515.105.01" in catalog.detail
    assert hot(judge(read(T4_SCRAPE, temperature_gpu_celsius=79.0))) is None


def test_a_p100_is_hot_below_83_c_by_its_own_slowdown_threshold(read: Any) -> None:
    """Tesla P100-PCIE-16GB boards slow down at 82 °C (and print no max operating temperature):
    the catalog's line (77 °C) is stricter than the fallback."""
    finding = hot(judge(read(P100_XML, temperature_gpu_celsius=78.0, **NO_THRESHOLD)))
    assert finding is not None
    assert finding.evidence[0].detail.startswith("78 °C ≥ 77 °C = slowdown 82 − 5 ")
    assert finding.evidence[1].value == "Tesla P100-PCIE-16GB: slowdown 82 °C"
    assert hot(judge(read(P100_XML, temperature_gpu_celsius=76.0, **NO_THRESHOLD))) is None


def test_an_h100_table_is_judged_by_the_max_operating_temperature_derived_from_t_limit(
    read: Any,
) -> None:
    """The default table of an H100 under load (59 °C) states no threshold; its -q prints only
    T.Limit-relative ones, from which the catalog derived max operating 87 °C (T.Limit), so
    82 °C is within 5 °C of it, where the 83 °C fallback would say nothing."""
    h100 = read(H100_TABLE)
    assert h100.info.name == "NVIDIA H100 80GB HBM3" and h100.temperature_gpu_celsius == 59.0
    assert hot(judge(h100)) is None
    finding = hot(judge(read(H100_TABLE, temperature_gpu_celsius=82.0)))
    assert finding is not None
    assert finding.title == "GPU 0: GPU at 82 °C (max operating 87 °C for its model)"
    assert finding.evidence[1].value == (
        "NVIDIA H100 80GB HBM3: slowdown 89 °C, max operating 87 °C"
    )
    assert hot(judge(read(H100_TABLE, temperature_gpu_celsius=81.0))) is None


def test_the_threshold_a_board_states_wins_over_the_catalog(read: Any) -> None:
    stated = read(P100_XML, temperature_gpu_celsius=84.0, temperature_slowdown_celsius=90.0)
    assert hot(judge(stated)) is None


@pytest.mark.parametrize(
    "name", ["NVIDIA L40S", "NVIDIA GeForce RTX 3060 ...", "NVIDIA H100 NVL", ""]
)
def test_a_model_the_catalog_does_not_know_falls_back_to_83_c(read: Any, name: str) -> None:
    info = dataclasses.replace(read(T4_SCRAPE).info, name=name)
    assert thermal_thresholds_for(name) is None
    finding = hot(judge(read(T4_SCRAPE, info=info, temperature_gpu_celsius=83.0)))
    assert finding is not None and len(finding.evidence) == 1
    assert finding.evidence[0].detail == (
        "83 °C ≥ 83 °C (the board states no slowdown threshold or margin)"
    )
    assert hot(judge(read(T4_SCRAPE, info=info, temperature_gpu_celsius=82.0))) is None


def _judged_by_the_catalog(path: Path) -> bool:
    """Whether a GPU of this capture has a temperature, states no threshold and is a model the
    catalog holds thresholds for."""
    text = path.read_text(errors="replace")
    try:
        if "DCGM_FI_" in text:
            snapshots = [parse_scrape(text, str(path), 0.0).snapshot]
        else:
            snapshots = parse_smi_output(text, str(path), 0.0)
    except GpuwardenError:  # not a capture of either kind: not in this set
        return False
    return any(
        s.temperature_gpu_celsius is not None
        and s.temperature_slowdown_celsius is None
        and s.temperature_margin_celsius is None
        and s.temperature_gpu_max_celsius is None
        and thermal_thresholds_for(s.info.name) is not None
        for snap in snapshots
        for s in snap.samples
    )


def test_no_false_alarm_on_the_real_captures_the_catalog_now_judges(fixtures: Path) -> None:
    """Every held capture of a model on record that states no threshold itself: healthy GPUs
    (idle to busy, 25-80 °C) get no temperature-high."""
    roots = [PROJECT_ROOT / "tests" / "data", fixtures / "nvidia-smi", fixtures / "dcgm"]
    paths = [
        p
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and p.suffix not in {".md", ".json", ".jsonl", ".py"}
        and _judged_by_the_catalog(p)
    ]
    assert len(paths) >= 10
    for path in paths:
        report = diagnose_captures([str(path)], DoctorOptions())
        assert [f.code for f in report.findings if f.code == "temperature-high"] == [], path
