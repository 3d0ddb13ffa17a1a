"""The checks every PCIe AER held-out set (tests/data/pcie_aer_public*) runs on its excerpts:
each module names its folder and earlier sets and adds what is its own; these are the shared ones
(as kernel_log_sets.py's are for the Xid sets)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.health.kernel_log import KernelLogScanner
from gpuwarden.health.xid import xid_findings
from gpuwarden.types.health import Finding, KernelLogReport, Severity
from tests.conftest import FIXTURES
from tests.health.kernel_log_sets import (
    DATA,
    ExcerptSet,
    Row,
    assert_read_alike_in_pieces,
    feed_sizes,
    fuzz,
    spliced,
)


def pcie_findings(report: KernelLogReport) -> list[Finding]:
    return [f for f in xid_findings(report, source="test") if f.code == "pcie-errors"]


def _scan_params(excerpts: ExcerptSet) -> list[object]:
    return [
        pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["scan_xfail"]))
        if row["scan_xfail"]
        else row
        for row in excerpts.rows
    ]


def groups_check(excerpts: ExcerptSet) -> Callable[[Row], None]:
    """Each excerpt's AER groups as read by hand: the device, the severity, how the log ties it
    to NVIDIA (None: it does not), the errors counted and the status bits printed."""

    @pytest.mark.parametrize("row", _scan_params(excerpts), ids=excerpts.ids())
    def check(row: Row) -> None:
        report = excerpts.scan(row)
        found = sorted(
            (g.pci_bus_id, g.severity, g.nvidia, g.count, list(g.error_types))
            for g in report.pcie_errors
        )
        expected = sorted(
            (g["bus"], g["severity"], g["nvidia"], g["count"], g["errors"]) for g in row["aer"]
        )
        assert found == expected

    return check


def gpu_link_findings_check(excerpts: ExcerptSet) -> Callable[[Row], None]:
    """One ``pcie-errors`` finding per group tied to NVIDIA, with the row's severity; other
    devices give none; an excerpt without a GPU fault nothing above info."""

    @pytest.mark.parametrize("row", excerpts.rows, ids=excerpts.ids())
    def check(row: Row) -> None:
        findings = pcie_findings(excerpts.scan(row))
        found = sorted(
            (f.device.pci_bus_id if f.device else None, f.severity.value) for f in findings
        )
        expected = sorted((g["bus"], g["finding"]) for g in row["aer"] if g["finding"])
        assert found == expected
        if not row["fault"]:
            assert all(f.severity is Severity.INFO for f in findings)

    return check


def sources_check(
    excerpts: ExcerptSet, folder: str, cited: Callable[[str], str] = str
) -> Callable[[], None]:
    """No row's source (``cited``: the part of its source field another file would quote) is
    cited by another set's files or the shared fixtures, and each row cites its own."""

    def check() -> None:
        ours = [cited(row["source"]) for row in excerpts.rows]
        assert len(set(ours)) == len(ours)
        others = [p for p in DATA.rglob("*") if p.is_file() and folder not in p.parts]
        others += [p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in {".md", ".tsv"}]
        for path in others:
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not any(source in text for source in ours), path

    return check


def chunks_check(texts: list[str]) -> Callable[..., None]:
    """Fed in chunks of any sizes, an excerpt reads as it does whole."""

    @fuzz(40)
    @given(st.sampled_from(texts), feed_sizes())
    def check(text: str, sizes: list[int]) -> None:
        assert_read_alike_in_pieces(text, sizes)

    return check


def spliced_check(texts: list[str]) -> Callable[..., None]:
    """Pieces of excerpts joined never fail the scanner, and its groups stay within the lines."""

    @fuzz(40)
    @given(spliced(texts))
    def check(text: str) -> None:
        scanner = KernelLogScanner()
        scanner.feed(text)
        report = scanner.finish()
        for group in report.pcie_errors:
            assert 1 <= group.first_line <= group.last_line <= report.lines_scanned
        assert len(pcie_findings(report)) <= len(report.pcie_errors)

    return check
