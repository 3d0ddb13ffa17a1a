"""PCIe AER held-out set 3 (tests/data/pcie_aer_public3): 10 real excerpts sampled as the searches
gave them, read per device and severity, judged as ``pcie-errors`` on an NVIDIA GPU's link only.
None names an NVIDIA device: root ports reporting themselves (a wiki's Debian syslog, a dmesg -H
paste above a GPU nvidia-smi lost, a boot burst, a CI log with printk caller ids) and kernel commit
messages whose log lines the author wrapped or indented - a no-false-alarm set."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.health.kernel_log import KernelLogScanner
from gpuwarden.health.pcie_aer import AER_MARKERS
from gpuwarden.health.xid import xid_findings
from gpuwarden.types.health import Finding, KernelLogReport, Severity
from tests.conftest import FIXTURES
from tests.health.kernel_log_sets import (
    DATA,
    ExcerptSet,
    Row,
    assert_no_line_of_earlier_sets,
    assert_read_alike_in_pieces,
    doctor_check,
    feed_sizes,
    fuzz,
    spliced,
)

FOLDER = "pcie_aer_public3"
EXCERPTS = ExcerptSet(FOLDER)
TEXTS = EXCERPTS.texts()


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
    """Each excerpt's AER groups as read by hand: the device, the severity, how the log ties it to
    NVIDIA (None: it does not), the errors counted and the status bits printed."""
    report = EXCERPTS.scan(row)
    found = sorted(
        (g.pci_bus_id, g.severity, g.nvidia, g.count, list(g.error_types))
        for g in report.pcie_errors
    )
    expected = sorted(
        (g["bus"], g["severity"], g["nvidia"], g["count"], g["errors"]) for g in row["aer"]
    )
    assert found == expected


@pytest.mark.parametrize("row", EXCERPTS.rows, ids=EXCERPTS.ids())
def test_findings_only_on_a_gpus_link(row: Row) -> None:
    """No group here is tied to NVIDIA: no ``pcie-errors`` finding, and nothing above info on an
    excerpt without a GPU fault."""
    findings = _pcie(EXCERPTS.scan(row))
    found = sorted((f.device.pci_bus_id if f.device else None, f.severity.value) for f in findings)
    expected = sorted((g["bus"], g["finding"]) for g in row["aer"] if g["finding"])
    assert found == expected
    if not row["fault"]:
        assert all(f.severity is Severity.INFO for f in findings)


test_doctor_reads_the_excerpt = doctor_check(EXCERPTS)


def test_the_set_names_its_sources() -> None:
    EXCERPTS.assert_names_its_sources()


def test_no_source_is_held_elsewhere() -> None:
    """No row's source is cited by another set's files or the shared fixtures, and each row
    cites its own."""
    ours = [row["source"] for row in EXCERPTS.rows]
    assert len(set(ours)) == len(ours)
    others = [p for p in DATA.rglob("*") if p.is_file() and FOLDER not in p.parts]
    others += [p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in {".md", ".tsv"}]
    for path in others:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not any(source in text for source in ours), path


def test_no_aer_line_of_the_earlier_sets() -> None:
    assert_no_line_of_earlier_sets(
        TEXTS, ["pcie_aer_public", "pcie_aer_public2", "xid_heldout6"], AER_MARKERS
    )


def test_a_message_naming_another_port_counts_there_not_at_the_printer() -> None:
    """08: port 00:1c.7 prints 'Corrected error received: id=00e5' ('can't find device of
    ID00e5'): the requester id names 00:1c.5 (bus << 8 | device << 3 | function), so the
    messages count there; the record counts at the device before its colon."""
    (row,) = [row for row in EXCERPTS.rows if row["prefix"] == "08"]
    groups = {g.pci_bus_id: (g.records, g.messages) for g in EXCERPTS.scan(row).pcie_errors}
    assert groups == {"0000:00:1c.7": (1, 0), "0000:00:1c.5": (0, 2)}


@fuzz(40)
@given(st.sampled_from(TEXTS), feed_sizes())
def test_fed_in_chunks_reads_as_whole(text: str, sizes: list[int]) -> None:
    assert_read_alike_in_pieces(text, sizes)


@fuzz(40)
@given(spliced(TEXTS))
def test_spliced_excerpts_never_fail(text: str) -> None:
    scanner = KernelLogScanner()
    scanner.feed(text)
    report = scanner.finish()
    for group in report.pcie_errors:
        assert 1 <= group.first_line <= group.last_line <= report.lines_scanned
    assert len(_pcie(report)) <= len(report.pcie_errors)
