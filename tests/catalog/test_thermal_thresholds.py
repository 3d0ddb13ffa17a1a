"""The catalog's per-model thermal thresholds (catalog/data/gpu_thermal.csv): re-harvested from
every nvidia-smi -q / -q -x capture gpuwarden holds and checked against the file (absolute
thresholds as printed; T.Limit-relative ones derived from readings at rest), validated on public
captures the rows were not derived from, and the lookup by the name a device reports."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuwarden.catalog.gpu_names import words
from gpuwarden.catalog.gpus import gpu_catalog
from gpuwarden.catalog.thermal import ThermalThresholds, thermal_catalog, thermal_thresholds_for
from gpuwarden.errors import GpuwardenError
from gpuwarden.telemetry.smi.detect import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample
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
    """The rows whose degrees held captures print (not public pastes, not derived from T.Limit)."""
    return [
        t
        for t in thermal_catalog()
        if not t.source.startswith("public") and not t.derived_from_tlimit
    ]


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
    """Max operating (SW slowdown) ≤ HW slowdown < shutdown on every board on record, but for
    notebooks whose platform prints a max operating temperature above their slowdown (a GTX
    1650 laptop on R575: 102 °C, its shutdown; slowdown 97 °C; an RTX A5000 Laptop on R575:
    105 °C, above its 98 °C shutdown): the rows' notes say so."""
    above = []
    for row in thermal_catalog():
        assert row.slowdown_celsius is not None and row.shutdown_celsius is not None
        assert row.slowdown_celsius < row.shutdown_celsius
        if row.max_operating_celsius is None:
            continue
        if row.max_operating_celsius > row.slowdown_celsius:
            assert "the platform sets it" in row.notes, row.smi_name
            above.append(row.smi_name)
        else:
            assert row.max_operating_celsius <= row.shutdown_celsius
    assert above == ["NVIDIA GeForce GTX 1650", "NVIDIA RTX A5000 Laptop GPU"]


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


# --- rows derived from T.Limit margins (R535+ Ada / Hopper / Blackwell print no absolute degrees)

# At rest the sensor the T.Limit margin is taken at reads what "GPU Current Temp" reads; under
# load it runs hotter (an H100 at 629 W: 59 °C + 26 = 85, at rest 41 + 46 = 87), so only readings
# at rest measure T.Limit. A board at or below this share of its power limit is at rest.
_REST_POWER_SHARE = 0.25
_AGREE_CELSIUS = 1.0  # readings at rest of one model that differ more give no row


@dataclass(frozen=True)
class TLimitReading:
    """One GPU of a capture that printed its T.Limit margin: T.Limit = current + margin; the
    parser derived the absolute slowdown / shutdown from the printed relative thresholds."""

    capture: str
    driver: str
    tlimit: float
    slowdown: float | None
    shutdown: float | None
    at_rest: bool


def _at_rest(sample: DeviceSample) -> bool:
    draw, limit = sample.power_draw_watts, sample.power_limit_watts
    if draw is not None and limit:
        return draw <= _REST_POWER_SHARE * limit
    return "gpu_idle" in (sample.clock_event_reasons or ())


def _tlimit_reading(path: Path, sample: DeviceSample) -> TLimitReading | None:
    current, margin = sample.temperature_gpu_celsius, sample.temperature_margin_celsius
    if current is None or margin is None:
        return None
    return TLimitReading(
        capture=path.name,
        driver=sample.info.driver_version or "",
        tlimit=current + margin,
        slowdown=sample.temperature_slowdown_celsius,
        shutdown=sample.temperature_shutdown_celsius,
        at_rest=_at_rest(sample),
    )


def harvest_tlimit(roots: list[Path]) -> dict[frozenset[str], list[TLimitReading]]:
    """Per model (its name's words): each GPU reading of a held capture that printed a margin."""
    seen: dict[frozenset[str], list[TLimitReading]] = defaultdict(list)
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if path.suffix in {".json", ".md", ".py", ".jsonl"}:
                continue
            text = path.read_text(errors="replace")
            if "T.Limit Temp" not in text and "tlimit" not in text:
                continue
            try:
                snapshots = parse_smi_output(text, str(path), 0.0)
            except GpuwardenError:  # not an nvidia-smi capture
                continue
            for sample in (s for snap in snapshots for s in snap.samples):
                reading = _tlimit_reading(path, sample)
                if reading is not None and sample.info.name:
                    seen[words(sample.info.name)].append(reading)
    return seen


def _spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0


@pytest.fixture(scope="module")
def tlimit_readings(fixtures: Path) -> dict[frozenset[str], list[TLimitReading]]:
    return harvest_tlimit([DATA, fixtures])


def _derived_rows() -> dict[frozenset[str], ThermalThresholds]:
    return {words(t.smi_name): t for t in thermal_catalog() if t.derived_from_tlimit}


def test_every_derived_row_is_what_the_readings_at_rest_give(
    tlimit_readings: dict[frozenset[str], list[TLimitReading]],
) -> None:
    """A row for each model whose readings at rest agree within 1 °C, with the highest of them
    (current + margin only falls below T.Limit); none for a model with a row of printed degrees
    or with no reading at rest (the L40S's only capture runs at 41 % of its power limit)."""
    printed = {words(t.smi_name) for t in _held_rows()}
    expected = {}
    for model, readings in tlimit_readings.items():
        rest = [r for r in readings if r.at_rest]
        if model in printed or not rest:
            continue
        for kind in ("tlimit", "slowdown", "shutdown"):
            values = [v for r in rest if (v := getattr(r, kind)) is not None]
            assert _spread(values) <= _AGREE_CELSIUS, (model, kind, values)
        expected[model] = rest
    rows = _derived_rows()
    assert set(rows) == set(expected)
    assert words("NVIDIA L40S") in tlimit_readings and words("NVIDIA L40S") not in rows
    for model, rest in expected.items():
        row = rows[model]
        assert row.max_operating_celsius == max(r.tlimit for r in rest), row.smi_name
        assert row.slowdown_celsius == max(r.slowdown for r in rest if r.slowdown is not None)
        assert row.shutdown_celsius == max(r.shutdown for r in rest if r.shutdown is not None)
        assert row.gpu_readings == len(rest)
        assert set(row.drivers) == {r.driver for r in rest}
        assert {Path(c).name for c in row.captures} == {r.capture for r in rest}


def test_readings_under_load_stay_at_or_below_the_derived_t_limit(
    tlimit_readings: dict[frozenset[str], list[TLimitReading]],
) -> None:
    """The readings left out (under load) agree with the rows as lower bounds: the H100 at 629 W
    and 432 W gives 85 and 77 °C against its 87 °C."""
    rows = _derived_rows()
    loaded = [(model, r) for model, rs in tlimit_readings.items() for r in rs if not r.at_rest]
    h100 = sorted(r.tlimit for m, r in loaded if m == words("NVIDIA H100 80GB HBM3"))
    assert h100 == [77.0, 77.0, 77.0, 85.0, 85.0, 85.0]
    for model, reading in loaded:
        if model in rows:
            assert reading.tlimit <= (rows[model].max_operating_celsius or 0.0), reading


# Public `nvidia-smi -q` captures at rest that no row was derived from, found with gpuwarden's
# code search (2026-11): (product name, driver, GPU Current Temp, GPU T.Limit Temp, Slowdown and
# Shutdown T.Limit Temp).
_PUBLIC_AT_REST = [
    ("NVIDIA H100 80GB HBM3", "545.23.08", 33, 54, -2, -8),  # a cluster's node notes, -a
    ("NVIDIA H100 80GB HBM3", "560.35.03", 34, 53, -2, -8),  # same notes, another node
    ("NVIDIA H200", "550.90.12", 28, 59, -2, -8),  # an nvidia-smi simulator script's -a
]


@pytest.mark.parametrize(
    ("name", "driver", "current", "margin", "slowdown", "shutdown"), _PUBLIC_AT_REST
)
def test_public_captures_at_rest_agree_with_the_derived_rows(
    name: str, driver: str, current: int, margin: int, slowdown: int, shutdown: int
) -> None:
    row = thermal_thresholds_for(name)
    assert row is not None and row.derived_from_tlimit and driver not in row.drivers
    tlimit = current + margin
    assert abs(tlimit - (row.max_operating_celsius or 0.0)) <= _AGREE_CELSIUS
    assert abs(tlimit - slowdown - (row.slowdown_celsius or 0.0)) <= _AGREE_CELSIUS
    assert abs(tlimit - shutdown - (row.shutdown_celsius or 0.0)) <= _AGREE_CELSIUS


def test_the_h800_prints_both_forms_and_they_agree_on_the_sign() -> None:
    """The H800 -q (R525) prints the margin and the absolute degrees: current + margin = 35 + 51
    = 86 is within 1 °C of its max operating 87 (T.Limit), and slowdown 89 is 2 °C past it, as
    Hopper's "GPU Slowdown T.Limit Temp : -2 C" says (absolute = T.Limit − relative)."""
    h800 = thermal_thresholds_for("NVIDIA H800")
    assert h800 is not None and not h800.derived_from_tlimit
    assert h800.max_operating_celsius is not None and h800.slowdown_celsius is not None
    assert abs(35 + 51 - h800.max_operating_celsius) <= _AGREE_CELSIUS
    assert h800.max_operating_celsius - (-2) == h800.slowdown_celsius
