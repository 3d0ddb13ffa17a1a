"""Faults written into copies of real captures the way nvidia-smi, dcgm-exporter and NVML print
them → the expected finding, on the right device, with the evidence read from the text."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest

from gpuwarden.health.evaluate import HealthResult, evaluate_snapshot, evaluate_window
from gpuwarden.telemetry.open import open_backend
from gpuwarden.telemetry.smi.detect import parse_smi_output
from gpuwarden.types.health import Confidence, Finding, Severity

H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
H100_Q = f"nvidia-smi/{H100}.load.q.txt"
H100_CSV = f"nvidia-smi/{H100}.load.query-gpu.csv"
P100_XML = "nvidia-smi/netdata__tesla-p100.xml"
T4_SCRAPE = "dcgm/datadog-integrations-core__tesla-t4__metrics.prom"
T4_FIRST = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"  # driver 460 scrape: no slowdown threshold
T4_SECOND = "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"  # driver 470 scrape: slowdown 93 °C


def edit(text: str, *edits: tuple[str, str]) -> str:
    for pattern, replacement in edits:
        text, n = re.subn(pattern, replacement, text, count=1, flags=re.M)
        assert n == 1, f"{pattern!r} is not in the capture"
    return text


def judge_smi(text: str) -> HealthResult:
    snapshots = parse_smi_output(text, "/captures/edited", 0.0)
    if len(snapshots) > 1:
        return evaluate_window(snapshots)
    return evaluate_snapshot(snapshots[-1])


def only(result: HealthResult) -> Finding:
    """The one finding above info (Linux persistence-off aside)."""
    (finding,) = [f for f in result.findings if f.severity is not Severity.INFO]
    return finding


def fields(finding: Finding) -> dict[str, object]:
    return {e.field: e.value for e in finding.evidence}


@pytest.fixture
def h100_q(fixtures: Path) -> str:
    return (fixtures / H100_Q).read_text()


# --- nvidia-smi -q (H100 under gpu_burn)


def test_remap_pending(h100_q: str) -> None:
    finding = only(judge_smi(edit(h100_q, (r"(Remapped Rows[\s\S]*?Pending\s*: )No", r"\1Yes"))))
    assert (finding.code, finding.severity, finding.action) == (
        "row-remap-pending",
        Severity.WARNING,
        "RESET_GPU",
    )
    assert finding.device is not None
    assert (finding.device.index, finding.device.pci_bus_id) == (0, "00000000:00:09.0")
    assert finding.evidence[0].source == "smi:/captures/edited"


def test_remap_failure_and_banks_without_spare_rows(h100_q: str) -> None:
    failed = only(judge_smi(edit(h100_q, (r"(Remapping Failure Occurred\s*: )No", r"\1Yes"))))
    assert (failed.code, failed.action) == ("row-remap-failure", "CONTACT_SUPPORT")
    exhausted = only(judge_smi(edit(h100_q, (r"(\n\s*None\s*: )0( bank)", r"\g<1>3\2"))))
    assert exhausted.code == "row-remap-failure"
    assert fields(exhausted) == {"remapped_rows_banks_exhausted": 3}


def test_volatile_uncorrectable_dram_error(h100_q: str) -> None:
    text = edit(h100_q, (r"(Volatile[\s\S]*?DRAM Uncorrectable\s*: )0", r"\g<1>2"))
    finding = only(judge_smi(text))
    assert (finding.code, finding.severity) == ("ecc-uncorrectable", Severity.CRITICAL)
    assert fields(finding)["ecc_errors_uncorrected_volatile"] == 2


def test_hw_thermal_slowdown(h100_q: str) -> None:
    text = edit(
        h100_q,
        (r"(HW Slowdown\s*: )Not Active", r"\1Active"),
        (r"(HW Thermal Slowdown\s*: )Not Active", r"\1Active"),
    )
    finding = only(judge_smi(text))
    assert finding.code == "thermal-slowdown"
    assert fields(finding)["clock_event_reasons"] == "hw_slowdown, hw_thermal_slowdown"
    assert "hw thermal slowdown at 59 °C" in finding.title


def test_hw_power_brake(h100_q: str) -> None:
    text = edit(
        h100_q,
        (r"(HW Slowdown\s*: )Not Active", r"\1Active"),
        (r"(HW Power Brake Slowdown\s*: )Not Active", r"\1Active"),
    )
    assert only(judge_smi(text)).code == "power-brake"


def test_sram_threshold(h100_q: str) -> None:
    finding = only(judge_smi(edit(h100_q, (r"(SRAM Threshold Exceeded\s*: )No", r"\1Yes"))))
    assert (finding.code, finding.action) == ("sram-threshold-exceeded", "CONTACT_SUPPORT")


def test_recovery_action_reset(h100_q: str) -> None:
    finding = only(judge_smi(edit(h100_q, (r"(GPU Recovery Action\s*: )None", r"\1Reset"))))
    assert (finding.code, finding.severity, finding.action) == (
        "recovery-action-pending",
        Severity.CRITICAL,
        "RESET_GPU",
    )


@pytest.mark.parametrize(
    ("state", "severity"), [("In Progress", Severity.WARNING), ("Not Started", Severity.CRITICAL)]
)
def test_fabric_not_registered(h100_q: str, state: str, severity: Severity) -> None:
    finding = only(judge_smi(edit(h100_q, (r"(Fabric\n\s*State\s*: )Completed", rf"\g<1>{state}"))))
    assert (finding.code, finding.severity) == ("fabric-manager-down", severity)


def test_pcie_gen_below_max_under_load(h100_q: str) -> None:
    text = edit(
        h100_q,
        (r"(PCIe Generation[\s\S]*?\n\s*Current\s*: )5", r"\g<1>3"),
        (r"(Device Current\s*: )5", r"\g<1>3"),
    )
    finding = only(judge_smi(text))
    assert finding.code == "pcie-link-degraded"
    assert finding.title == "GPU 0: PCIe link at Gen3 of Gen5 under load (100 % busy)"


def test_hot_by_its_tlimit_margin(h100_q: str) -> None:
    text = edit(
        h100_q,
        (r"(GPU Current Temp\s*: )59 C", r"\g<1>84 C"),
        (r"(GPU T.Limit Temp\s*: )26 C", r"\g<1>1 C"),
    )
    finding = only(judge_smi(text))
    assert finding.code == "temperature-high"
    assert fields(finding)["temperature_gpu_celsius"] == 84.0


def test_memory_nearly_full(h100_q: str) -> None:
    text = edit(h100_q, (r"(FB Memory Usage[\s\S]*?Used\s*: )19818 MiB", r"\g<1>78200 MiB"))
    finding = only(judge_smi(text))
    assert finding.code == "memory-nearly-full" and "(96 %)" in finding.title


# --- nvidia-smi -q -x (Tesla P100: page retirement)


def test_p100_pending_page_retirement_and_the_rma_line(fixtures: Path) -> None:
    xml = (fixtures / P100_XML).read_text()
    pending = only(judge_smi(edit(xml, (r"<pending_retirement>No<", "<pending_retirement>Yes<"))))
    assert (pending.code, pending.action) == ("retired-pages-pending", "RESET_GPU")
    full = edit(
        xml,
        (r"(<double_bit_retirement>\s*<retired_count>)0<", r"\g<1>61<"),
        (r"(<volatile>[\s\S]*?<double_bit>[\s\S]*?<total>)0<", r"\g<1>1<"),
    )
    codes = [f.code for f in judge_smi(full).findings if f.severity is Severity.CRITICAL]
    assert codes == ["ecc-uncorrectable", "retired-pages-limit"]


# --- nvidia-smi --query-gpu CSV, one reading and a `-l 1` series


def _csv(fixtures: Path) -> tuple[list[str], list[str]]:
    header, row = (fixtures / H100_CSV).read_text().splitlines()[:2]
    names = [c.strip() for c in header.split(",")]
    cells = next(csv.reader([row], skipinitialspace=True))
    assert len(names) == len(cells)
    return names, cells


def _row(names: list[str], cells: list[str], **changes: str) -> str:
    out = list(cells)
    for name, value in changes.items():
        out[names.index(name.replace("__", " "))] = value
    return ", ".join(out)


def test_csv_thermal_slowdown_and_slow_link(fixtures: Path) -> None:
    names, cells = _csv(fixtures)
    row = _row(
        names,
        cells,
        **{
            "clocks_event_reasons.active": "0x0000000000000020",
            "clocks_event_reasons.sw_thermal_slowdown": "Active",
            "pcie.link.gen.current": "2",
            "pcie.link.gen.gpucurrent": "2",
        },
    )
    result = judge_smi("\n".join([", ".join(names), row]) + "\n")
    found = sorted(f.code for f in result.findings)
    assert found == ["pcie-link-degraded", "thermal-slowdown"]


def _series(names: list[str], cells: list[str], seconds: int, **per_second: object) -> str:
    rows = [", ".join(names)]
    for t in range(seconds + 1):
        stamp = f"2026/07/14 08:13:{t:02d}.353"
        changes = {k: (v(t) if callable(v) else str(v)) for k, v in per_second.items()}
        rows.append(_row(names, cells, timestamp=stamp, **changes))
    return "\n".join(rows) + "\n"


def test_a_steady_series_of_the_real_reading_is_clean(fixtures: Path) -> None:
    names, cells = _csv(fixtures)
    result = judge_smi(_series(names, cells, 20))
    assert result.findings == ()
    utilization = next(c for c in result.checks if c.name == "utilization")
    assert "fake-load: judged 1 GPU(s) (nvml-fallback)" in utilization.detail


def test_a_series_busy_at_idle_power_is_fake_load(fixtures: Path) -> None:
    names, cells = _csv(fixtures)
    text = _series(
        names,
        cells,
        20,
        **{
            "power.draw [W]": "71.00 W",
            "power.draw.instant [W]": "71.00 W",
            "utilization.memory [%]": "0 %",
        },
    )
    finding = only(judge_smi(text))
    assert (finding.code, finding.method, finding.confidence) == (
        "fake-load",
        "nvml-fallback",
        Confidence.MEDIUM,
    )
    assert finding.title == "GPU 0: utilization 100 % with idle power for 20 s"


def test_a_series_with_corrected_errors_piling_up(fixtures: Path) -> None:
    names, cells = _csv(fixtures)
    text = _series(names, cells, 20, **{"ecc.errors.corrected.volatile.total": str})
    finding = only(judge_smi(text))
    assert finding.code == "ecc-correctable-storm"
    assert finding.first_seen_s is not None and finding.last_seen_s is not None
    assert finding.last_seen_s - finding.first_seen_s == pytest.approx(20.0)


# --- dcgm-exporter scrape (Tesla T4, two drivers)


def _scrape(fixtures: Path, tmp_path: Path, text: str) -> HealthResult:
    path = tmp_path / "edited.prom"
    path.write_text(text)
    return evaluate_snapshot(open_backend("dcgm", str(path)).read())


def _line(text: str, metric: str, uuid: str, value: str) -> str:
    """A series of ``metric`` with the labels dcgm-exporter gave this GPU's other series."""
    labels = re.search(rf'^DCGM_FI_\w+(\{{[^}}]*UUID="{uuid}"[^}}]*\}})', text, re.M)
    assert labels is not None
    return f"{metric}{labels.group(1)} {value}\n"


def test_t4_hot_without_a_threshold_is_judged_by_the_catalogs_t4_line(
    fixtures: Path, tmp_path: Path
) -> None:
    """A scrape states no threshold: the T4's own max operating temperature (85 °C, as real T4
    captures print it) decides, not the 83 °C for a board nothing is known of."""
    text = (fixtures / T4_SCRAPE).read_text()
    hot = edit(text, (rf"^(DCGM_FI_DEV_GPU_TEMP\{{[^}}]*{T4_FIRST}[^}}]*\}}) 25$", r"\1 86"))
    finding = only(_scrape(fixtures, tmp_path, hot))
    assert finding.code == "temperature-high" and finding.device is not None
    assert finding.device.uuid == T4_FIRST
    assert finding.evidence[0].detail == (
        "86 °C ≥ 80 °C = max operating 85 − 5 (the capture states no threshold: the catalog's "
        "for a Tesla T4)"
    )
    assert finding.evidence[1].field == "catalog.gpu_thermal"


def test_t4_hot_against_its_slowdown_threshold(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / T4_SCRAPE).read_text()
    text += _line(text, "DCGM_FI_DEV_GPU_TEMP", T4_SECOND, "88")
    finding = only(_scrape(fixtures, tmp_path, text))
    assert finding.evidence[0].detail == "88 °C ≥ 88 °C = slowdown 93 − 5"
    assert finding.device is not None and finding.device.uuid == T4_SECOND


def test_t4_ecc_and_thermal_clock_event(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / T4_SCRAPE).read_text()
    text += _line(text, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", T4_FIRST, "1")
    # clock-event mask 0x48 = HW slowdown + HW thermal slowdown (NVML bits 0x8, 0x40)
    text = edit(
        text, (rf"^(DCGM_FI_DEV_CLOCK_THROTTLE_REASONS\{{[^}}]*{T4_SECOND}[^}}]*\}}) 1$", r"\1 72")
    )
    result = _scrape(fixtures, tmp_path, text)
    found = [(f.code, f.device.uuid if f.device else None) for f in result.findings]
    assert found == [("ecc-uncorrectable", T4_FIRST), ("thermal-slowdown", T4_SECOND)]


def test_t4_memory_nearly_full(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / T4_SCRAPE).read_text()
    text = edit(
        text,
        (rf"^(DCGM_FI_DEV_FB_FREE\{{[^}}]*{T4_FIRST}[^}}]*\}}) 15109$", r"\1 109"),
        (rf"^(DCGM_FI_DEV_FB_USED\{{[^}}]*{T4_FIRST}[^}}]*\}}) 0$", r"\1 15000"),
    )
    finding = only(_scrape(fixtures, tmp_path, text))
    assert finding.code == "memory-nearly-full" and "(99 %)" in finding.title


# --- NVML (the fake library built from the captures: tests/fakes/fake_pynvml)


def _nvml_host(
    fixtures: Path, tmp_path: Path, nvlink_text: str | None, facts: bool
) -> HealthResult:
    from gpuwarden.telemetry.nvml import NvmlBackend
    from tests.fakes.fake_pynvml import FACTS, fake_host

    root = tmp_path / "fixtures"
    (root / "nvidia-smi").mkdir(parents=True)
    (root / "topo").mkdir()
    stem = H100 if nvlink_text is not None else "linux-x86_64__nvidia-h100-mig__590.48.01"
    for path in (fixtures / "nvidia-smi").glob(f"{stem}.*"):
        shutil.copy(path, root / "nvidia-smi" / path.name)
    if nvlink_text is not None:
        (root / "topo" / f"{stem}.nvlink-s.txt").write_text(nvlink_text)
    host = fake_host(root, stem, facts=fixtures / FACTS, migs=facts)
    return evaluate_snapshot(NvmlBackend(host.module).read())


def test_nvlink_inactive_in_nvlink_status(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / "topo" / f"{H100}.nvlink-s.txt").read_text()
    down = edit(text, (r"Link 7: 26.562 GB/s", "Link 7: <inactive>"))
    finding = only(_nvml_host(fixtures, tmp_path, down, facts=False))
    # the fake lists only the links nvlink -s gives a speed: 17 of the SKU's 18
    assert (finding.code, finding.severity, finding.confidence) == (
        "nvlink-down",
        Severity.CRITICAL,
        Confidence.MEDIUM,
    )
    assert finding.title == "GPU 0: 17 of 18 NVLinks reported active"


def test_mig_enabled_without_instances(fixtures: Path, tmp_path: Path) -> None:
    # the H100 MIG capture (MIG on) with no GPU instance created
    finding = only(_nvml_host(fixtures, tmp_path, None, facts=False))
    assert finding.code == "mig-no-instances"
    # the same GPU with the capture's four instances (the go-nvml facts) is fine
    with_instances = _nvml_host(fixtures, tmp_path / "b", None, facts=True)
    assert [f for f in with_instances.findings if f.severity is not Severity.INFO] == []
