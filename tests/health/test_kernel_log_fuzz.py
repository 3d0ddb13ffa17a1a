"""Fuzz: arbitrary text, kernel-log-shaped fragments and mutated real lines never raise, always give
a consistent report, and read the same whether fed at once or in chunks."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.health.kernel_log import KernelLogScanner, parse_xid_line, scan_kernel_log
from gpuwarden.health.xid import xid_findings
from gpuwarden.health.xid_groups import MAX_LINES_PER_GROUP
from gpuwarden.types.health import KernelLogReport, Severity
from tests.conftest import FIXTURES


def _real_lines() -> list[str]:
    lines: list[str] = []
    for name in ("gpud__dmesg-with-xid-119.log", "gpud__dmesg-decode-iso-xid13-43.log"):
        lines += (FIXTURES / "xid" / name).read_text().splitlines()
    with (FIXTURES / "xid" / "xid_lines_from_issues.tsv").open(newline="") as f:
        lines += [row["log_line"] for row in csv.DictReader(f, delimiter="\t")]
    return lines


REAL = _real_lines()
# what a kernel log's Xid and SXid records can give: the Xid itself, a lost GPU, the RMA escalation,
# the memory state Xid 63/64 imply, an NVSwitch error
XID_FINDING_CODES = {
    "xid",
    "gpu-lost",
    "rma-candidate",
    "row-remap-pending",
    "row-remap-failure",
    "retired-pages-pending",
    "retired-pages-limit",
    "nvswitch-error",
    "pcie-errors",
    "iommu-fault",
}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FRAGMENTS = st.sampled_from(
    [
        "NVRM: ",
        "NVRM:",
        "Xid (",
        "Xid",
        "SXid (",
        "PCI:0000:3b:00",
        "PCI:...",
        "00000000:3B:00.0",
        "): ",
        ")",
        ", ",
        "13",
        "79",
        "149",
        "154",
        "45",
        "999999999999999999999",
        "[ 12.5] ",
        "[Wed Jul 31 23:14:18 2024] ",
        "[Feb 31 99:99:99 2024] ",
        "2025-13-45T25:61:61,1+99:99 ",
        "Feb 15 17:37:45 host kernel: ",
        "GPU at PCI:0000:3b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d",
        "The NVIDIA GPU 0000:b3:00.0",
        "fallen off the bus",
        "caused by previous Xid 145",
        "GPU recovery action changed from 0x0 (None) to 0x1 (Reset)",
        "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0xffffffff)",
        "(GPC 7, TPC 7, SM 0)",
        "\n",
        "\r\n",
        "\x1b[31m",
        "\x00",
        " ",
    ]
)


def _check(text: str, report: KernelLogReport) -> None:
    assert report.lines_scanned == text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    assert report.xid_lines == sum(g.count for g in report.groups) + report.unparsed_xid_lines
    for group in report.groups + report.fallen_off_bus:
        assert group.count >= 1
        assert 1 <= group.first_line <= group.last_line <= report.lines_scanned
        assert len(group.lines) <= MAX_LINES_PER_GROUP
        assert isinstance(group.severity, Severity)
        assert group.first_seen_s is None or group.first_seen_s == group.first_seen_s  # no NaN
    assert all(g.xid == 79 for g in report.fallen_off_bus)
    for finding in xid_findings(report, source="fuzz"):
        assert finding.code in XID_FINDING_CODES


def _chunked(text: str, sizes: list[int]) -> KernelLogReport:
    scanner = KernelLogScanner(year=2024)
    pos = 0
    for size in sizes or [len(text) + 1]:
        scanner.feed(text[pos : pos + size])
        pos += size
    scanner.feed(text[pos:])
    return scanner.finish()


@SETTINGS
@given(text=st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    _check(text, scan_kernel_log(text))


@SETTINGS
@given(
    pieces=st.lists(FRAGMENTS, max_size=60),
    sizes=st.lists(st.integers(min_value=1, max_value=40), max_size=20),
)
def test_log_shaped_fragments(pieces: list[str], sizes: list[int]) -> None:
    text = "".join(pieces)
    report = scan_kernel_log(text, year=2024)
    _check(text, report)
    assert _chunked(text, sizes) == report


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.sampled_from(REAL), min_size=1, max_size=8))
    text = "\n".join(lines)
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=len(text)))
        kind = draw(st.sampled_from(["cut", "insert", "digit", "dup"]))
        if kind == "cut":
            text = text[:at] + text[at + draw(st.integers(min_value=1, max_value=12)) :]
        elif kind == "insert":
            text = text[:at] + draw(st.one_of(FRAGMENTS, st.text(max_size=6))) + text[at:]
        elif kind == "digit":
            text = text[:at] + draw(st.sampled_from("0123456789xX:)(")) + text[at + 1 :]
        else:
            text = text[:at] + text[at : at + 40] + text[at:]
    return text


@SETTINGS
@given(text=_mutated(), sizes=st.lists(st.integers(min_value=1, max_value=80), max_size=10))
def test_mutated_real_lines(text: str, sizes: list[int]) -> None:
    report = scan_kernel_log(text, year=2024, tz_offset_s=3600.0)
    _check(text, report)
    assert _chunked(text, sizes) == scan_kernel_log(text, year=2024)


# A run of thousands of digits where a line states a number (int() refuses more than 4300)
_HUGE = "9" * 5000


@pytest.mark.parametrize(
    "line",
    [
        f"[ 1.0] NVRM: Xid (PCI:0000:3b:00): {_HUGE}, pid=1, name=x",  # the standard form
        f"kernel: NVRM:  Xid  (PCI:0000:3b:00) {_HUGE}",  # the other forms
        f"6,1,{_HUGE},-;NVRM: Xid (PCI:0000:3b:00): 13, x",  # /dev/kmsg microseconds
        f"NVRM: Xid (PCI:0000:3b:00): 45, pid=1, Ch 00000001 caused by previous Xid {_HUGE}",
        f"NVRM: Xid (PCI:0000:3b:00): 13, Graphics SM Warp Exception on (GPC {_HUGE}, TPC 1, SM 0)",
        f"NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to {_HUGE}",
    ],
)
def test_a_number_of_thousands_of_digits_is_no_number(line: str) -> None:
    report = scan_kernel_log(line + "\n")
    _check(line + "\n", report)
    assert all(len(str(g.xid)) <= 3 for g in report.groups)
    assert parse_xid_line(line) is None or parse_xid_line(line).xid == report.groups[0].xid


def test_fixture_path_is_real(fixtures: Path) -> None:
    assert fixtures == FIXTURES
    assert len(REAL) > 100
