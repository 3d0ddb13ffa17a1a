"""doctor judges every driver the readings carry, not the first GPU's: a dcgm-exporter page of
two hosts (datadog-integrations-core's Tesla T4 page: driver 460.106.00 on one host, 470.182.03
on the other, both `gpu="0"`), a bundle of pages, any order of series."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.health.versions import evaluate_versions
from gpuwarden.telemetry.dcgm.scrape import parse_scrape
from gpuwarden.types.environment import NodeEnvironment, SmiStatus
from gpuwarden.types.health import Finding, Severity
from tests.conftest import PROJECT_ROOT

DATA = PROJECT_ROOT / "tests" / "data"
_T4_PAGE = "dcgm/datadog-integrations-core__tesla-t4__metrics.prom"
_T4_460 = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"
_T4_470 = "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"
# the month the end-of-life findings are judged in (R460 ended 2022-01, R535 2026-06)
_MONTH = "2026-11"
# a dcgm-exporter page is HELP, TYPE and one sample per metric here
_LINES_PER_METRIC = 3


def _codes(findings: tuple[Finding, ...], *codes: str) -> list[Finding]:
    return [f for f in findings if f.code in codes]


def _page_findings(text: str) -> tuple[Finding, ...]:
    snapshot = parse_scrape(text, "page.prom", 0.0).snapshot
    devices = [s.info for s in snapshot.samples]
    env = NodeEnvironment(platform="linux", smi=SmiStatus(present=True))
    return evaluate_versions(env, devices, snapshot.samples, this_month=_MONTH)[1]


def _metrics_reversed(text: str) -> str:
    lines = text.splitlines()
    blocks = [lines[i : i + _LINES_PER_METRIC] for i in range(0, len(lines), _LINES_PER_METRIC)]
    return "\n".join(line for block in reversed(blocks) for line in block) + "\n"


def test_the_order_of_a_pages_hosts_does_not_decide_the_verdict(fixtures: Path) -> None:
    """Before: the first GPU's driver was "the" driver: 460 first gave R460's end of life,
    470 first (R470 is not in the branch catalog) gave nothing."""
    text = (fixtures / _T4_PAGE).read_text(encoding="utf-8")
    as_served, reversed_ = _page_findings(text), _page_findings(_metrics_reversed(text))
    assert sorted(f.title for f in as_served) == sorted(f.title for f in reversed_)
    (eol,) = [f for f in _codes(as_served, "driver-branch-eol") if "460" in f.title]
    assert eol.title.startswith(f"driver 460.106.00 (on GPU 0 (Tesla T4, {_T4_460})) is on R460")
    assert eol.evidence[0].value == "460.106.00"


def test_a_page_of_two_drivers_says_which_gpus_carry_each(fixtures: Path) -> None:
    report = diagnose_captures([str(fixtures / _T4_PAGE)], DoctorOptions())
    (differ,) = _codes(report.findings, "driver-versions-differ")
    assert differ.severity is Severity.INFO
    assert differ.title.startswith(
        f"the GPU readings carry 2 driver versions (460.106.00 on GPU 0 (Tesla T4, {_T4_460}); "
        f"470.182.03 on GPU 0 (Tesla T4, {_T4_470}))"
    )
    assert [(e.value, e.detail) for e in differ.evidence] == [
        ("460.106.00", _T4_460),
        ("470.182.03", _T4_470),
    ]
    assert report.verdict is None  # information about the inputs, not a fault of a GPU
    (page,) = report.inputs
    assert "2 GPU(s) (Tesla T4), drivers 460.106.00, 470.182.03" in page.detail


def test_each_drivers_end_of_life_is_said_in_a_bundle(fixtures: Path) -> None:
    """The shared dcgm folder: the T4 page (460, 470) and an H100 excerpt on 535.129.03. Before:
    one end-of-life finding, the first driver's; now one per driver past its branch's end."""
    report = diagnose_captures([str(fixtures / "dcgm")], DoctorOptions())
    eol = _codes(report.findings, "driver-branch-eol")
    drivers = [str(f.evidence[0].value) for f in eol]
    assert {"460.106.00", "535.129.03"} <= set(drivers)
    assert len(drivers) == len(set(drivers))
    assert all(f.device is None for f in eol)


def test_a_single_driver_capture_gains_nothing() -> None:
    """Four T4s on one driver (a real page, tests/data/dcgm_public8): its end of life said as
    before, nothing about drivers differing."""
    name = "11__dcgm-filter-test__tesla-t4-x4-535.183.06-comments-help-without-type.prom"
    page = DATA / "dcgm_public8" / name
    report = diagnose_captures([str(page)], DoctorOptions())
    assert _codes(report.findings, "driver-versions-differ") == []
    (eol,) = _codes(report.findings, "driver-branch-eol")
    assert eol.title == (
        "driver 535.183.06 is on R535, a long-term support branch whose end of life was "
        "2026-06: it gets no security or bug fixes now"
    )


def test_the_loaded_module_is_compared_with_the_readings_that_agree(tmp_path: Path) -> None:
    """A bundle of real captures: an H200 table on 580.173.02 (another host), an H100 table on
    550.90.07 and /proc/driver/nvidia/version of 550.90.07. Before: the first reading's driver
    was "the" library, so the other host's table read first gave a critical
    nvml-driver-mismatch; the module agrees with the H100's readings, whatever came first."""
    copies = {
        "a_other_host.txt": "smi_testdata/table__nvidia-gpu-exporter__h200__580.173.02.idle.txt",
        "b_node.txt": "smi_public/table__gpu-burn-114__h100-80gb-hbm3__550.90.07.partial.txt",
        "c_proc_version.txt": "environment/proc-version.proprietary-550.90.07.txt",
    }
    for name, source in copies.items():
        (tmp_path / name).write_bytes((DATA / source).read_bytes())
    report = diagnose_captures([str(tmp_path)], DoctorOptions())
    assert _codes(report.findings, "nvml-driver-mismatch") == []
    (differ,) = _codes(report.findings, "driver-versions-differ")
    assert [e.value for e in differ.evidence] == ["550.90.07", "580.173.02"]
    assert report.verdict is None
