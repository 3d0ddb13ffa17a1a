"""The kernel's PCIe AER lines: read per device and severity, judged as ``pcie-errors`` on a GPU's
link only (tests/data/pcie_aer_public, xid_heldout6 01/02, the explain set's gpu-burn paste)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.catalog.xid import GPU_LOST_XID, xid_info
from gpuwarden.health.kernel_log import KernelLogScanner, scan_kernel_log
from gpuwarden.health.pcie_aer import MAX_DEVICES
from gpuwarden.health.pcie_aer_findings import REPLAY_LIMIT_PER_MINUTE, pcie_aer_findings
from gpuwarden.health.xid import xid_findings
from gpuwarden.health.xid_groups import MAX_LINE_CHARS
from gpuwarden.types.health import Confidence, Finding, KernelLogReport, Severity
from tests.health.kernel_log_sets import (
    DATA,
    ExcerptSet,
    Row,
    assert_read_alike_in_pieces,
    doctor_check,
    feed_sizes,
    fuzz,
    spliced,
)

EXCERPTS = ExcerptSet("pcie_aer_public")
TEXTS = EXCERPTS.texts()
HELDOUT6 = ExcerptSet("xid_heldout6")


def _pcie(report: KernelLogReport) -> list[Finding]:
    return [f for f in xid_findings(report, source="test") if f.code == "pcie-errors"]


def _scan_params() -> list[object]:
    return [
        pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["scan_xfail"]))
        if row["scan_xfail"]
        else row
        for row in EXCERPTS.rows
    ]


@pytest.mark.parametrize("row", _scan_params(), ids=EXCERPTS.ids())
def test_groups_are_the_rows(row: Row) -> None:
    """Each excerpt's AER groups: the device, the severity, how the log ties it to NVIDIA (None:
    it does not) and the errors, as read by hand."""
    report = EXCERPTS.scan(row)
    found = sorted((g.pci_bus_id, g.severity, g.nvidia, g.count) for g in report.pcie_errors)
    expected = sorted((g["bus"], g["severity"], g["nvidia"], g["count"]) for g in row["aer"])
    assert found == expected


@pytest.mark.parametrize("row", _scan_params(), ids=EXCERPTS.ids())
def test_findings_only_on_a_gpus_link(row: Row) -> None:
    """One ``pcie-errors`` finding per group on an NVIDIA device, with the row's severity; a root
    port, a NIC or an NVMe drive gives none; an excerpt without a fault nothing above info."""
    findings = _pcie(EXCERPTS.scan(row))
    found = sorted((f.device.pci_bus_id if f.device else None, f.severity.value) for f in findings)
    expected = sorted((g["bus"], g["finding"]) for g in row["aer"] if g["finding"])
    assert found == expected
    if not row["fault"]:
        assert all(f.severity is Severity.INFO for f in findings)
    for finding in findings:
        assert any(e.field == "line" for e in finding.evidence)


test_doctor_reads_the_excerpt = doctor_check(EXCERPTS)


def test_the_set_names_its_sources() -> None:
    EXCERPTS.assert_names_its_sources()


def test_no_source_is_held_elsewhere() -> None:
    """No excerpt's source is cited by another set or the shared fixtures."""
    ours = {
        row["source"].split(" ")[0] for row in EXCERPTS.rows if row["source"].startswith("http")
    }
    others = [p for p in DATA.rglob("*") if p.is_file() and "pcie_aer_public" not in p.parts]
    for path in others:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not any(source in text for source in ours), path


def test_fatal_recovery_on_the_gpu_is_critical() -> None:
    """xid_heldout6/01: the root port's Uncorrected (Fatal) record and the GPU's "can't recover"
    lines (one before the record, where the paste starts mid-recovery): critical on the GPU,
    RESTART_BM like Xid 79; the HDA function and the root port, not tied to NVIDIA, give none."""
    row = next(r for r in HELDOUT6.rows if r["prefix"] == "01")
    report = HELDOUT6.scan(row)
    (finding,) = _pcie(report)
    assert finding.device is not None and finding.device.pci_bus_id == "0000:03:00.0"
    assert finding.severity is Severity.CRITICAL and finding.count == 2
    lost = xid_info(GPU_LOST_XID)
    assert lost is not None and finding.action == lost.immediate_action
    # dmesg -H prints the time since the line before, not an uptime
    assert all(g.first_uptime_s is None for g in report.pcie_errors)


def test_a_root_port_alone_names_no_gpu() -> None:
    """xid_heldout6/02: corrected Receiver Errors of a root port (a laptop with a GeForce 930M):
    a group, no finding."""
    row = next(r for r in HELDOUT6.rows if r["prefix"] == "02")
    report = HELDOUT6.scan(row)
    assert [(g.pci_bus_id, g.nvidia) for g in report.pcie_errors] == [("0000:00:1c.5", None)]
    assert _pcie(report) == []


def test_older_kernels_no_aer_aware_driver_before_xid79() -> None:
    """The explain set's gpu-burn paste (Linux 4.x): "Surprise Down Error" at the root port, then
    "nvidia 0000:02:00.0: device has no AER-aware driver", then Xid 79: critical on the GPU; the
    corrected Replay Timer Timeout of the root port before it gives nothing."""
    lines = (DATA / "explain" / "heldout6.jsonl").read_text(encoding="utf-8").splitlines()
    (case,) = [json.loads(x) for x in lines if "gpu-burn/issues/1" in x]
    report = scan_kernel_log(case["error_text"])
    (finding,) = _pcie(report)
    assert finding.device is not None and finding.device.pci_bus_id == "0000:02:00.0"
    assert finding.severity is Severity.CRITICAL


def _restamped(lines: list[str], seconds: list[float]) -> str:
    """The record's real lines (excerpt 03) printed again at each of ``seconds`` (uptime)."""
    out = []
    for at in seconds:
        out += [f"[{at:12.6f}]" + line[line.index("]") + 1 :] for line in lines]
    return "\n".join(out) + "\n"


def _record_lines() -> list[str]:
    text = EXCERPTS.excerpts()["03"]
    return [line for line in text.splitlines() if "0000:03:00.0" in line]


@pytest.mark.parametrize(
    ("seconds", "severity", "confidence"),
    [
        # the limit and one more within a minute: a rate above DCGM's 8 a minute
        ([100.0 + 6 * i for i in range(int(REPLAY_LIMIT_PER_MINUTE) + 1)], "warning", "high"),
        # the limit exactly within a minute: info
        ([100.0 + 7 * i for i in range(int(REPLAY_LIMIT_PER_MINUTE))], "info", "high"),
        # as many as the first case, spread over hours: never more than 1 a minute
        ([100.0 + 3600 * i for i in range(int(REPLAY_LIMIT_PER_MINUTE) + 1)], "info", "high"),
    ],
)
def test_corrected_errors_are_judged_by_their_rate(
    seconds: list[float], severity: str, confidence: str
) -> None:
    report = scan_kernel_log(_restamped(_record_lines(), seconds))
    (finding,) = _pcie(report)
    assert (finding.severity.value, finding.confidence.value) == (severity, confidence)
    assert finding.count == len(seconds)


def test_corrected_errors_without_times_say_what_decides() -> None:
    """More records than the limit but no time on the lines: one burst or a steady rate cannot be
    told: info, low confidence, with the evidence that decides."""
    lines = [line[line.index("]") + 2 :] for line in _record_lines()]
    text = "\n".join(lines * (int(REPLAY_LIMIT_PER_MINUTE) + 1)) + "\n"
    (finding,) = _pcie(scan_kernel_log(text))
    assert finding.severity is Severity.INFO and finding.confidence is Confidence.LOW
    assert any(e.field == "decides" for e in finding.evidence)


def test_groups_stay_bounded() -> None:
    """A record for ever more devices keeps at most ``MAX_DEVICES`` groups."""
    (line,) = [x for x in _record_lines() if "PCIe Bus Error" in x]
    text = "".join(
        line.replace("0000:03:00.0", f"0000:{bus:02x}:{device:02x}.0") + "\n"
        for bus in range(256)
        for device in range(2)
    )
    report = scan_kernel_log(text)
    assert len(report.pcie_errors) == MAX_DEVICES
    assert len(pcie_aer_findings(report.pcie_errors, source="test")) == MAX_DEVICES


@fuzz(60)
@given(st.sampled_from(TEXTS), feed_sizes())
def test_fed_in_chunks_reads_as_whole(text: str, sizes: list[int]) -> None:
    assert_read_alike_in_pieces(text, sizes)


@fuzz(60)
@given(spliced(TEXTS))
def test_spliced_excerpts_never_fail(text: str) -> None:
    scanner = KernelLogScanner()
    scanner.feed(text)
    report = scanner.finish()
    for group in report.pcie_errors:
        assert 1 <= group.first_line <= group.last_line <= report.lines_scanned
    assert len(_pcie(report)) <= len(report.pcie_errors)


def test_other_sets_give_no_gpu_aer_but_the_known_one() -> None:
    """Every kernel-log excerpt of the other sets and the shared fixtures: AER groups tied to a
    GPU only in xid_heldout6/01 (no false alarm from other devices' AER lines)."""
    tied: list[str] = []
    folders = [p for p in DATA.glob("xid_*") if p.is_dir()]
    fixtures = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "xid"
    for path in [p for f in [*folders, fixtures] for p in f.rglob("*.log")]:
        report = scan_kernel_log(path.read_text(encoding="utf-8", errors="replace"))
        tied += [path.name for g in report.pcie_errors if g.nvidia is not None]
    assert [name[:2] for name in tied] == ["01"]
    assert all("returnn-1500" in name for name in tied)


def test_a_huge_aer_line_is_kept_at_the_line_bound() -> None:
    """Evidence lines are bounded like the Xid groups' (MAX_LINE_CHARS): a 100,000-character
    "line" is no kernel message, and five of them per device must not hold the whole input."""
    line = (
        "[ 5.1] nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
        + "x" * 100_000
    )
    (group,) = scan_kernel_log(line + "\n").pcie_errors
    assert len(group.lines) == 1 and len(group.lines[0]) == MAX_LINE_CHARS
