"""No false alarms: every real capture of a healthy machine, through the real parsers, yields no
finding above info — idle PCIe downtraining, T.Limit margins, GeForce cards without ECC, MIG
layouts, Windows/WDDM, P8 at idle, a SW power cap at idle, gpu_burn at 630 W — and the checks say
what each input could and could not tell."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuwarden.health.evaluate import HealthResult, evaluate_snapshot, evaluate_window
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.health import CheckStatus, Severity
from gpuwarden.types.telemetry import Snapshot

EXPORTER_CAPTURES = (
    "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05",
    "linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04",
    "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05",
    "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01",
    "linux-x86_64__nvidia-h100-mig__590.48.01",
    "windows-x86_64__nvidia-geforce-rtx-2080-super__591.86",
    "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62",
)
STATES = ("idle", "load")
XMLS = (
    "netdata__a100-sxm4-mig.xml",
    "netdata__rtx-3060.xml",
    "netdata__tesla-p100.xml",
    "netdata__rtx-2080-win.xml",
)
SCRAPES = (
    "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom",
    "datadog-integrations-core__tesla-t4__metrics.prom",
    "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom",
    "issue-dcgm-exporter-581__gb200__excerpt.prom",
)


def readings(kind: str, path: Path) -> tuple[Snapshot, ...]:
    backend = open_backend(kind, str(path))
    series = getattr(backend, "snapshots", lambda: ())()
    return tuple(series) or (backend.read(),)


def judge(kind: str, path: Path) -> HealthResult:
    snaps = readings(kind, path)
    return evaluate_window(snaps) if len(snaps) > 1 else evaluate_snapshot(snaps[0])


def above_info(result: HealthResult) -> list[str]:
    return [f"{f.code}: {f.title}" for f in result.findings if f.severity is not Severity.INFO]


def status(result: HealthResult, name: str) -> CheckStatus:
    return next(c.status for c in result.checks if c.name == name)


def expected_info(stem: str) -> list[str]:
    """Linux GeForce drivers run without persistence mode (the captures say so): information."""
    return ["persistence-off"] if stem.startswith("linux") and "geforce" in stem else []


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("stem", EXPORTER_CAPTURES)
@pytest.mark.parametrize("fmt", ["q.txt", "query-gpu.csv", "table.txt"])
def test_nvidia_smi_screens_are_clean(fixtures: Path, stem: str, state: str, fmt: str) -> None:
    result = judge("smi", fixtures / "nvidia-smi" / f"{stem}.{state}.{fmt}")
    assert above_info(result) == []
    assert [f.code for f in result.findings] == expected_info(stem)
    assert status(result, "devices") is CheckStatus.PASS
    assert status(result, "temperature") is CheckStatus.PASS


@pytest.mark.parametrize("stem", EXPORTER_CAPTURES)
def test_q_text_checks_say_what_each_gpu_could_tell(fixtures: Path, stem: str) -> None:
    result = judge("smi", fixtures / "nvidia-smi" / f"{stem}.load.q.txt")
    datacenter, mig = "h100" in stem, "mig" in stem
    assert status(result, "ecc") is (CheckStatus.PASS if datacenter else CheckStatus.SKIP)
    # NVML: row remapping cannot be queried on a MIG GPU with instances; GeForce has none
    remap = CheckStatus.PASS if datacenter and not mig else CheckStatus.SKIP
    assert status(result, "row-remap") is remap
    assert status(result, "mig") is (CheckStatus.PASS if datacenter else CheckStatus.SKIP)
    windows = stem.startswith("windows")
    assert status(result, "persistence") is (CheckStatus.SKIP if windows else CheckStatus.PASS)
    # under load the links run at their max: judged, and fine
    assert status(result, "pcie") is CheckStatus.PASS
    assert status(result, "utilization") is CheckStatus.SKIP  # one reading


def test_idle_gen1_at_p8_is_read_and_not_flagged(fixtures: Path) -> None:
    path = fixtures / "nvidia-smi" / f"{EXPORTER_CAPTURES[2]}.idle.q.txt"
    (sample,) = readings("smi", path)[0].samples
    assert (sample.pcie_link_gen_current, sample.pcie_link_gen_max, sample.pstate) == (1, 4, "P8")
    assert status(judge("smi", path), "pcie") is CheckStatus.PASS


@pytest.mark.parametrize("name", XMLS)
def test_nvidia_smi_xml_is_clean(fixtures: Path, name: str) -> None:
    result = judge("smi", fixtures / "nvidia-smi" / name)
    assert above_info(result) == []
    windows = "win" in name
    assert [f.code for f in result.findings] == ([] if windows else ["persistence-off"])


def test_the_a100_mig_xml_judges_mig_ecc_and_memory_temperature(fixtures: Path) -> None:
    result = judge("smi", fixtures / "nvidia-smi" / "netdata__a100-sxm4-mig.xml")
    for name in ("mig", "ecc", "temperature", "memory"):
        assert status(result, name) is CheckStatus.PASS, name


def test_the_p100_csv_is_clean(fixtures: Path) -> None:
    result = judge("smi", fixtures / "nvidia-smi" / "netdata__tesla-p100.csv")
    assert result.findings == ()


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("stem", EXPORTER_CAPTURES)
def test_dmon_series_are_clean_and_too_short_for_windowed_verdicts(
    fixtures: Path, stem: str, state: str
) -> None:
    path = fixtures / "nvidia-smi" / f"{stem}.{state}.dmon.txt"
    assert len(readings("smi", path)) == 5  # five 1-second rows
    result = judge("smi", path)
    assert result.findings == ()
    utilization = next(c for c in result.checks if c.name == "utilization")
    assert utilization.status is CheckStatus.SKIP
    # under MIG, dmon prints no utilization ("-"): nothing to judge even with more readings
    why = "utilization not reported" if "mig" in stem else "not enough data (5 readings over 4 s"
    assert f"fake-load: {why}" in utilization.detail


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("stem", EXPORTER_CAPTURES)
def test_dmon_series_judged_with_a_short_window_stay_clean(
    fixtures: Path, stem: str, state: str
) -> None:
    """The real 4-second series, judged as if 4 s were enough: gpu_burn at 100 % and 630 W is not
    fake load, an NVENC job at 8 % GPU and 100 % encoder is not starved or idle."""
    short = dataclasses.replace(DEFAULT_THRESHOLDS, window_min_span_s=4.0)
    snaps = readings("smi", fixtures / "nvidia-smi" / f"{stem}.{state}.dmon.txt")
    result = evaluate_window(snaps, thresholds=short)
    assert result.findings == ()
    utilization = next(c for c in result.checks if c.name == "utilization")
    judged = "fake-load: utilization not reported" if "mig" in stem else "fake-load: judged 1"
    assert judged in utilization.detail


@pytest.mark.parametrize("name", SCRAPES)
def test_dcgm_exporter_scrapes_are_clean(fixtures: Path, name: str) -> None:
    result = judge("dcgm", fixtures / "dcgm" / name)
    assert result.findings == ()
    assert status(result, "devices") is CheckStatus.PASS


def test_the_t4_scrape_judges_its_slowdown_threshold_and_idle_clock_reason(fixtures: Path) -> None:
    result = judge("dcgm", fixtures / "dcgm" / SCRAPES[1])
    assert status(result, "clock-events") is CheckStatus.PASS  # "GPU idle" only
    assert status(result, "memory") is CheckStatus.PASS  # 0 of 15109 MiB


def test_the_h100_through_nvml_has_its_18_links_up(fixtures: Path) -> None:
    """The H100 capture behind the fake NVML (tests/fakes: values from the same capture, links
    from its `nvidia-smi nvlink -s`): 18 links active = the catalog's H100 SXM5 count."""
    from gpuwarden.telemetry.nvml import NvmlBackend
    from tests.fakes.fake_pynvml import fake_host
    from tests.fakes.fake_pynvml.captures import H100, RTX_4080

    snapshot = NvmlBackend(fake_host(fixtures, H100, RTX_4080, migs=False).module).read()
    h100 = snapshot.samples[0]
    assert h100.nvlinks is not None and len(h100.nvlinks) == 18
    result = evaluate_snapshot(snapshot)
    assert above_info(result) == []
    assert status(result, "nvlink") is CheckStatus.PASS
