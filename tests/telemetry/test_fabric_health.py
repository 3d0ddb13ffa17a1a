"""NVLink fabric health (R550+ NVML healthMask, R570+ healthSummary; nvidia-smi "Fabric /
Health"): read the same by -q text, XML and NVML, kept by the store, judged only when a GPU
registered with the fabric reports it unhealthy.

Real inputs: the H100 -q capture (registration "Completed / Success", every health row N/A),
a real R590 XML with its <fabric><health> block, the real dra-driver-nvidia-gpu#626 fragment
(Summary "Unhealthy", Bandwidth "Full") and the healthMask 0xaa of NVIDIA/nccl#2186 (GB200
NVL72, every yes/no condition "false": healthy, not "4 of 8 paths down" as the issue read it).
The faults are the same real text with the printed values the driver uses changed.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog.nvml_enums import fabric_health_issues
from gpuwarden.health.evaluate import HealthResult, evaluate_snapshot
from gpuwarden.telemetry.nvml import NvmlBackend
from gpuwarden.telemetry.open import open_backend
from gpuwarden.telemetry.smi import cells
from gpuwarden.telemetry.smi.q_text import parse_q_text
from gpuwarden.telemetry.smi.xml_format import parse_xml
from gpuwarden.telemetry.store import Store
from gpuwarden.telemetry.store.schema import V6_COLUMNS
from gpuwarden.types.health import Confidence, Severity
from gpuwarden.types.telemetry import DeviceSample, FabricHealthIssue, Snapshot
from tests.fakes.fake_pynvml import fake_host as build_host
from tests.fakes.fake_pynvml.captures import H100
from tests.telemetry.store import legacy

PROJECT = Path(__file__).resolve().parents[2]
H100_IDLE_Q = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.idle.q.txt"
R590_XML = (
    PROJECT / "tests/data/smi_xml_public/telegraf__rtx-pro-6000-blackwell-maxq__v13__590.44.01.xml"
)
DRA_626 = (
    PROJECT
    / "tests/data/smi_heldout6/q-grep__dra-driver-nvidia-gpu-626__fabric-unhealthy.fragment.txt"
)
ISAAC_R580_Q = (
    PROJECT / "tests/data/smi_heldout6/q__isaac-sim-guidance-kr__rtx-5080-laptop__580.173.02.txt"
)
# Every real -q / XML capture held: none may raise a fabric-health finding (no health reported)
_CAPTURE_DIRS = ("smi_heldout6", "smi_public", "smi_xml_public", "smi_testdata", "smi_new_gpus")


def _health_row(text: str, key: str, value: str) -> str:
    """The real -q text with one "Fabric / Health" row printing ``value`` (column kept)."""
    pattern = re.compile(rf"^(\s+{re.escape(key)}\s+: )N/A$", re.MULTILINE)
    changed, count = pattern.subn(lambda m: m.group(1) + value, text)
    assert count == 1, key
    return changed


def _q(text: str) -> DeviceSample:
    return parse_q_text(text, "h100.q.txt", 0.0).samples[0]


def _judge(sample: DeviceSample) -> HealthResult:
    snap = Snapshot(sample.timestamp_s, "host-a", "smi", False, (sample,), source="/x/q.txt")
    return evaluate_snapshot(snap)


def _fabric_findings(result: HealthResult) -> list[Any]:
    return [f for f in result.findings if any(e.field.startswith("fabric") for e in f.evidence)]


@pytest.fixture
def fake_host(fixtures: Path) -> Any:
    def build(*names: str, **module_kwargs: Any) -> Any:
        return build_host(fixtures, *names, state="load", **module_kwargs)

    return build


@pytest.fixture(scope="module")
def h100_text(fixtures: Path) -> str:
    return (fixtures / H100_IDLE_Q).read_text()


# --- nvidia-smi -q ------------------------------------------------------------------------------


def test_real_capture_with_every_row_na_reports_no_health(h100_text: str) -> None:
    s = _q(h100_text)
    assert (s.fabric_state, s.fabric_status) == ("completed", "success")
    assert (s.fabric_health_summary, s.fabric_health_issues) == (None, None)
    assert _fabric_findings(_judge(s)) == []


def test_r580_block_with_partition_row_reports_no_health() -> None:
    # R580 adds "Partition Assigned"; a laptop GPU has no fabric: every row N/A
    s = parse_q_text(ISAAC_R580_Q.read_text(), str(ISAAC_R580_Q), 0.0).samples[0]
    assert (s.fabric_state, s.fabric_health_summary, s.fabric_health_issues) == (None, None, None)


def test_healthy_fabric_is_read_and_judged_healthy(h100_text: str) -> None:
    text = _health_row(h100_text, "Summary", "Healthy")
    text = _health_row(text, "Bandwidth", "Full")
    for key in ("Route Recovery in progress", "Route Unhealthy", "Access Timeout Recovery"):
        text = _health_row(text, key, "False")
    text = _health_row(text, "Incorrect Configuration", "None")
    s = _q(text)
    assert (s.fabric_health_summary, s.fabric_health_issues) == ("healthy", ())
    assert _fabric_findings(_judge(s)) == []


def test_unhealthy_summary_as_dra_driver_626_printed_it(h100_text: str) -> None:
    """The real fragment: Summary "Unhealthy", Bandwidth "Full", the rest cut by grep."""
    fragment = DRA_626.read_text()
    assert re.search(r"Summary\s+: Unhealthy", fragment)
    assert re.search(r"Bandwidth\s+: Full", fragment)
    text = _health_row(_health_row(h100_text, "Summary", "Unhealthy"), "Bandwidth", "Full")
    s = _q(text)
    assert (s.fabric_health_summary, s.fabric_health_issues) == ("unhealthy", ())
    (finding,) = _fabric_findings(_judge(s))
    # lost fabric paths, not a Fabric Manager that is down: the GPU registered
    assert (finding.code, finding.severity) == ("nvlink-down", Severity.CRITICAL)
    assert finding.confidence is Confidence.MEDIUM  # no condition says which paths
    proof = {e.field: e.value for e in finding.evidence}
    assert proof["fabric_health_summary"] == "unhealthy"
    assert proof["fabric_state"] == "completed"


def test_route_unhealthy_is_links_lost(h100_text: str) -> None:
    text = _health_row(h100_text, "Summary", "Unhealthy")
    text = _health_row(text, "Bandwidth", "Degraded")
    text = _health_row(text, "Route Unhealthy", "True")
    text = _health_row(text, "Route Recovery in progress", "False")
    s = _q(text)
    assert s.fabric_health_issues == ("degraded-bandwidth", "route-unhealthy")
    (finding,) = _fabric_findings(_judge(s))
    assert (finding.code, finding.severity, finding.confidence) == (
        "nvlink-down",
        Severity.CRITICAL,
        Confidence.HIGH,
    )
    assert {e.field: e.value for e in finding.evidence}["fabric_health_issues"] == (
        "degraded-bandwidth, route-unhealthy"
    )
    assert "NVLink fabric reports" in finding.cause and "fabricmanager" in finding.remedy


def test_degraded_bandwidth_alone_is_limited_capacity_a_warning(h100_text: str) -> None:
    text = _health_row(h100_text, "Summary", "Limited Capacity")
    s = _q(_health_row(text, "Bandwidth", "Degraded"))
    assert (s.fabric_health_summary, s.fabric_health_issues) == (
        "limited-capacity",
        ("degraded-bandwidth",),
    )
    (finding,) = _fabric_findings(_judge(s))
    assert (finding.code, finding.severity) == ("nvlink-down", Severity.WARNING)


def test_recovery_in_progress_is_a_warning_of_errors(h100_text: str) -> None:
    text = _health_row(h100_text, "Summary", "Limited Capacity")
    s = _q(_health_row(text, "Route Recovery in progress", "True"))
    assert s.fabric_health_issues == ("route-recovery",)
    (finding,) = _fabric_findings(_judge(s))
    assert (finding.code, finding.severity) == ("nvlink-errors", Severity.WARNING)


@pytest.mark.parametrize(
    ("printed", "issue"),
    [
        ("Insufficient NVLinks", "insufficient-nvlinks"),
        ("Incorrect SysGUID", "incorrect-sysguid"),
        ("No Partition", "no-partition"),
        ("Incompatible GPU Firmware", "incompatible-gpu-fw"),
        ("Something New", "incorrect-configuration"),
    ],
)
def test_incorrect_configuration_kinds(h100_text: str, printed: str, issue: str) -> None:
    text = _health_row(h100_text, "Summary", "Unhealthy")
    s = _q(_health_row(text, "Incorrect Configuration", printed))
    assert s.fabric_health_issues == (issue,)
    (finding,) = _fabric_findings(_judge(s))
    # too few NVLinks is links lost; the other kinds are the NVLink domain's configuration
    expected = "nvlink-down" if issue == "insufficient-nvlinks" else "fabric-manager-down"
    assert (finding.code, finding.severity) == (expected, Severity.CRITICAL)


def test_health_of_an_unregistered_gpu_is_left_to_the_registration_finding(
    h100_text: str,
) -> None:
    text = _health_row(h100_text, "Summary", "Unhealthy")
    s = dataclasses.replace(_q(text), fabric_state="in-progress", fabric_status=None)
    (finding,) = _fabric_findings(_judge(s))
    assert finding.code == "fabric-manager-down"


# --- XML ----------------------------------------------------------------------------------------


def _xml_health(text: str, tag: str, value: str) -> str:
    changed, count = re.subn(rf"<{tag}>N/A</{tag}>", f"<{tag}>{value}</{tag}>", text, count=1)
    assert count == 1, tag
    return changed


def test_xml_health_block_reads_as_the_text_does() -> None:
    text = R590_XML.read_text()
    real = parse_xml(text, str(R590_XML), 0.0).samples[0]
    assert (real.fabric_health_summary, real.fabric_health_issues) == (None, None)
    text = _xml_health(text, "summary", "Unhealthy")
    text = _xml_health(text, "bandwidth", "Full")
    text = _xml_health(text, "route_unhealthy", "True")
    text = _xml_health(text, "incorrect_configuration", "None")
    s = parse_xml(text, str(R590_XML), 0.0).samples[0]
    assert (s.fabric_health_summary, s.fabric_health_issues) == ("unhealthy", ("route-unhealthy",))


# --- NVML (real nvidia-ml-py over the fake library) ---------------------------------------------


def _mask(**fields: int) -> int:
    shifts = {"bw": 0, "route_recovery": 2, "route_unhealthy": 4, "timeout": 6, "config": 8}
    return sum(value << shifts[name] for name, value in fields.items())


def _nvml(host: Any) -> DeviceSample:
    backend = NvmlBackend(host.module, clock=host.clock)
    sample = backend.read().samples[0]
    backend.close()
    return sample


def _change(host: Any, **values: Any) -> None:
    gpu = host.gpus[0]
    gpu.capture = dataclasses.replace(gpu.capture, **values)


def test_nvml_matches_the_capture_no_health(fake_host: Any) -> None:
    s = _nvml(fake_host(H100))
    assert (s.fabric_state, s.fabric_status) == ("completed", "success")
    assert (s.fabric_health_summary, s.fabric_health_issues) == (None, None)


def test_nvml_v3_summary_and_mask(fake_host: Any) -> None:
    host = fake_host(H100)
    _change(host, fabric_health=(_mask(bw=1, route_recovery=2, route_unhealthy=1, config=1), 2))
    s = _nvml(host)
    assert (s.fabric_health_summary, s.fabric_health_issues) == (
        "unhealthy",
        ("degraded-bandwidth", "route-unhealthy"),
    )


def test_nvml_summary_not_supported_hides_the_mask_as_smi_does(fake_host: Any) -> None:
    host = fake_host(H100)
    _change(host, fabric_health=(_mask(route_unhealthy=1), 0))
    s = _nvml(host)
    assert (s.fabric_health_summary, s.fabric_health_issues) == (None, None)


def test_nvml_v2_on_a_driver_without_v3_reads_the_mask_only(fake_host: Any) -> None:
    host = fake_host(H100, driver_version="550.54.15")
    _change(host, fabric_health=(_mask(bw=1, route_recovery=2, route_unhealthy=2, timeout=2), 3))
    s = _nvml(host)
    assert (s.fabric_health_summary, s.fabric_health_issues) == (None, ("degraded-bandwidth",))


def test_nvml_old_driver_has_no_health(fake_host: Any) -> None:
    s = _nvml(fake_host(H100, driver_version="535.183.01"))  # v1 call: no mask, no summary
    assert s.fabric_state == "completed"
    assert (s.fabric_health_summary, s.fabric_health_issues) == (None, None)


def test_mask_0xaa_of_nccl_2186_is_every_condition_false() -> None:
    # four 2-bit fields = 2 (FALSE), the configuration code 0 (not supported)
    assert fabric_health_issues(0xAA) == ()
    assert fabric_health_issues(0) is None
    assert fabric_health_issues(_mask(config=1)) == ()
    assert fabric_health_issues(_mask(config=5)) == ("insufficient-nvlinks",)
    assert fabric_health_issues(_mask(config=15)) == ("incorrect-configuration",)


@settings(max_examples=200, deadline=None)
@given(mask=st.integers(0, 2**32 - 1))
def test_any_mask_decodes_to_known_issues(mask: int) -> None:
    issues = fabric_health_issues(mask)
    known = {i.value for i in FabricHealthIssue}
    assert issues is None or (set(issues) <= known and len(set(issues)) == len(issues))


@settings(max_examples=200, deadline=None)
@given(summary=st.text(max_size=20), rows=st.lists(st.text(max_size=12), min_size=5, max_size=5))
def test_any_printed_health_reads_without_error(summary: str, rows: list[str]) -> None:
    cells.to_fabric_health_summary(summary)
    flags = [issue for _key, _tag, issue in cells.FABRIC_HEALTH_ROWS]
    issues = cells.fabric_health_issues(list(zip(flags, rows[:-1], strict=True)), rows[-1])
    assert issues is None or set(issues) <= {i.value for i in FabricHealthIssue}


# --- store --------------------------------------------------------------------------------------


def _snapshot(sample: DeviceSample, t: float) -> Snapshot:
    return Snapshot(t, "host-a", "smi", False, (dataclasses.replace(sample, timestamp_s=t),))


def test_store_keeps_the_health(tmp_path: Path, h100_text: str) -> None:
    sample = _q(
        _health_row(_health_row(h100_text, "Summary", "Unhealthy"), "Bandwidth", "Degraded")
    )
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        store.write(_snapshot(sample, 1_700_000_000.0))
    with Store.open(path, readonly=True) as store:
        (back,) = store.samples()
    assert (back.fabric_health_summary, back.fabric_health_issues) == (
        "unhealthy",
        ("degraded-bandwidth",),
    )


def test_v4_file_without_the_health_columns_is_migrated(tmp_path: Path, h100_text: str) -> None:
    """A file of the release before: no v6 columns in any sample table; every row kept, the
    new fields None, and the file writable with them."""
    sample = _q(h100_text)
    path = tmp_path / "v4.db"
    legacy.write_v4(path, [_snapshot(sample, 1_700_000_000.0 + k) for k in range(3)], command=["j"])
    conn = sqlite3.connect(path)
    for table in ("samples", "samples_1m", "samples_1h"):
        for column in V6_COLUMNS:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.commit()
    conn.close()
    unhealthy = dataclasses.replace(sample, fabric_health_summary="unhealthy")
    with Store.open(path) as store:
        assert len(store.samples()) == 3
        store.write(_snapshot(unhealthy, 1_700_000_010.0))
        back = store.samples()
    assert [s.fabric_health_summary for s in back] == [None, None, None, "unhealthy"]
    assert [s.fabric_state for s in back] == ["completed"] * 4


# --- no false alarm on any real capture held ------------------------------------------------------


def _captures(fixtures: Path) -> list[Path]:
    found = sorted((fixtures / "nvidia-smi").glob("*.q.txt"))
    found += sorted((fixtures / "nvidia-smi").glob("*.xml"))
    for name in _CAPTURE_DIRS:
        folder = PROJECT / "tests/data" / name
        found += sorted(p for p in folder.glob("*") if p.suffix in (".txt", ".xml"))
    return found


def test_no_real_capture_raises_a_fabric_health_finding(fixtures: Path) -> None:
    read = 0
    for path in _captures(fixtures):
        try:
            snap = open_backend("smi", str(path)).read()
        except Exception:  # not a format this test is about (tables, errors): others test them
            continue
        read += 1
        for s in snap.samples:
            assert s.fabric_health_summary in (None, "healthy"), path.name
            assert not s.fabric_health_issues, path.name
            assert not [
                f for f in _fabric_findings(_judge(s)) if f.code in ("nvlink-down", "nvlink-errors")
            ], path.name
    assert read >= 40


# --- dcgm-exporter: DCGM fields 174 (DCGM_FI_DEV_FABRIC_HEALTH_MASK) and 175 (_SUMMARY) carry
# NVML's codes. No real page with them was found; they are added to the real GB200 excerpt with
# each GPU's own label set, as the exporter writes any field.
GB200_PAGE = "dcgm/issue-dcgm-exporter-581__gb200__excerpt.prom"


def _gb200_with(fixtures: Path, summary: int, mask: int, gpu: str = "1") -> str:
    text = (fixtures / GB200_PAGE).read_text()
    labels = next(
        line[line.index("{") + 1 : line.index("}")]
        for line in text.splitlines()
        if line.startswith("DCGM_FI_") and f'gpu="{gpu}"' in line
    )
    added = (
        f"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY{{{labels}}} {summary}\n"
        f"DCGM_FI_DEV_FABRIC_HEALTH_MASK{{{labels}}} {mask}\n"
    )
    return text + added


def _dcgm_sample(text: str, gpu: int) -> DeviceSample:
    from gpuwarden.telemetry.dcgm import parse_scrape

    snap = parse_scrape(text, "gb200.prom", 1_700_000_000.0).snapshot
    return next(s for s in snap.samples if s.info.index == gpu)


def test_dcgm_fields_174_175_read_as_nvml_s(fixtures: Path) -> None:
    # 0xaa: every yes/no condition "false" (nccl#2186's GB200 mask), configuration 0: healthy
    healthy = _dcgm_sample(_gb200_with(fixtures, 1, 0xAA), 1)
    assert (healthy.fabric_health_summary, healthy.fabric_health_issues) == ("healthy", ())
    # degraded bandwidth TRUE (bits 0-1 = 1), route recovery FALSE (2-3 = 2), route unhealthy
    # TRUE (4-5 = 1), access timeout recovery FALSE (6-7 = 2)
    sick = _gb200_with(fixtures, 2, 1 | 2 << 2 | 1 << 4 | 2 << 6)
    sample = _dcgm_sample(sick, 1)
    assert sample.fabric_health_summary == "unhealthy"
    assert sample.fabric_health_issues == ("degraded-bandwidth", "route-unhealthy")
    from gpuwarden.telemetry.dcgm import parse_scrape

    result = evaluate_snapshot(parse_scrape(sick, "gb200.prom", 1_700_000_000.0).snapshot)
    (finding,) = [f for f in result.findings if f.code == "nvlink-down"]
    assert finding.severity is Severity.CRITICAL and finding.device is not None
    assert finding.device.index == 1
    # the other GPUs of the page report no health: nothing said of them
    assert _dcgm_sample(sick, 0).fabric_health_summary is None


def test_dcgm_health_not_supported_or_blank_is_no_health(fixtures: Path) -> None:
    assert _dcgm_sample(_gb200_with(fixtures, 0, 0xAA), 1).fabric_health_issues is None
    blank = _dcgm_sample(_gb200_with(fixtures, 9223372036854775794, -1), 1)  # DCGM blanks
    assert (blank.fabric_health_summary, blank.fabric_health_issues) == (None, None)
