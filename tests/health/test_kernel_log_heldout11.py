"""An eleventh held-out set of kernel logs (tests/data/xid_heldout11: files and threads none of the
other kernel-log sets, the bug-report and AER sets, the explain sets or shared/fixtures cite), aimed
at the newest drivers' Xids (R570-R610): Xid 154 after another Xid in each of its spellings ('0x1
(GPU Reset Required)' after a GSP exception, '0x1 (PF FLR)' after Xid 51, '0x2 (Node Reboot
Required)' and '0x2 (OS Reboot)' after Xid 79), the same event in dmesg -T and journalctl -k, a GSP
RPC buffer line inside an event, a paste wrapped at 72 columns, an NVLink discovery failure without
an Xid, and prose quoting Xid records. Each excerpt's Xids are read, grouped, named as NVIDIA's
catalog names them and judged as its documented action says; ``doctor --from`` gives the codes
written down and refuses what is no kernel log."""

from __future__ import annotations

import pytest

from gpuwarden.catalog.xid import xid_info
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from gpuwarden.types.health import Confidence, Severity
from tests.health.kernel_log_sets import (
    OTHER_SOURCES,
    ExcerptSet,
    Row,
    chunks_check,
    group_lines_check,
    kernel_log_set_checks,
    printed_bus,
    sets_before,
)

SET = ExcerptSet("xid_heldout11")
ROWS = SET.rows
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(11)


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    SET.assert_cites_only_new_sources(EARLIER_SETS, OTHER_SOURCES)
    assert 10 <= len(ROWS) <= 20
    assert sum(row["doctor_exit"] == 2 for row in ROWS) >= 3  # prose and a unit journal
    recovery = {x["recovery_action"] for row in ROWS for x in row["xids"] if x["xid"] == 154}
    assert recovery == {"reset", "reboot"}  # four spellings of codes 1 and 2


(
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
) = kernel_log_set_checks(SET, EARLIER_SETS)


test_each_group_has_its_lines_and_the_catalogs_name = group_lines_check(SET, with_mnemonic=True)


@pytest.mark.parametrize("row", SET.scanner_params(), ids=SET.ids())
def test_xid_154_names_the_recovery_action_the_line_asks_for(row: Row) -> None:
    """'PF FLR' (R610) and 'OS Reboot' are other drivers' names of codes 1 and 2: the code
    decides, as NVML's nvmlDeviceGpuRecoveryAction_t numbers them."""
    found = {
        g.pci_bus_id: dict(g.decoded).get("recovery_action")
        for g in SET.scan(row).groups
        if g.xid == 154
    }
    assert found == {
        printed_bus(x["bus"]): x["recovery_action"] for x in row["xids"] if x["xid"] == 154
    }


test_an_excerpt_fed_in_chunks_reads_as_it_does_whole = chunks_check(SET)


def test_records_quoted_in_prose_are_examples_not_records() -> None:
    """A runbook's `NVRM: Xid (PCI:1001:...): 88, GPU has fallen off the bus` and "Look for
    `Xid (PCI:...): 79`" open a Markdown code span after other words: no GPU was lost. The same
    record pasted alone in a code span, or after a kernel prefix, is still read."""
    report = scan_kernel_log(EXCERPT["08"])
    assert (report.groups, report.fallen_off_bus, report.unparsed_xid_lines) == ((), (), 3)
    quoted = "`NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.`"
    prose = "The log said `NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.`"
    kernel = "[ 12.5] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus."
    assert [g.xid for g in scan_kernel_log(quoted).groups] == [79]
    assert scan_kernel_log(prose).groups == ()
    assert [g.xid for g in scan_kernel_log(kernel).groups] == [79]


def test_an_xid_the_catalog_lists_as_unused_is_named_but_not_judged() -> None:
    """Xid 51 ('BAD_TSG encountered on runlist' in R610) is 'Unused' in NVIDIA's catalog for
    Ampere and newer: the finding names its mnemonic and NVIDIA's bucket (contact support), and
    stays a low-confidence warning: the catalog gives no meaning to classify it by."""
    info = xid_info(51)
    assert info is not None and info.listed_unused
    report = scan_kernel_log(EXCERPT["02"].splitlines()[0])
    (finding,) = xid_findings(report, source="journal")
    assert (finding.severity, finding.confidence) == (Severity.WARNING, Confidence.LOW)
    assert "SILENT_RUNNING_STRESS_TEST_FAILURE" in finding.title
    assert "unused" in finding.cause and "support" in finding.remedy


def test_the_gsp_rpc_buffer_line_is_part_of_the_event() -> None:
    """R580's 'GSP RPC buffer contains function 78 (DUMP_PROTOBUF_COMPONENT) ...' between Xid 79
    and Xid 154 is the RPC in flight when the GPU went: no Xid, no event of its own."""
    report = scan_kernel_log(EXCERPT["04"])
    assert [(g.xid, g.count) for g in report.groups] == [(79, 1), (154, 1)]
    assert (report.xid_lines, report.other) == (2, ())
