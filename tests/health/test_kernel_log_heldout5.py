"""A fifth held-out set of kernel logs (tests/data/xid_heldout5: real text from web pages -- a
Proxmox forum thread, wikis, blogs, a vendor's Xid guide, NVIDIA's README -- none cited by the
other kernel-log sets or shared/fixtures), aimed at what the others lack: a driver that cannot
initialise a GPU without the "probe routine failed" line (an invalid BAR, "None of the NVIDIA
devices were initialized"), Xid lines wrapped by hand or cut with "...", and above all text that
names Xids or NVIDIA driver pieces without being a kernel log (prose, Markdown tables, a format
template, another vendor's driver log, an Xorg log, lsmod). The scanner finds exactly what was
read by hand; ``doctor --from`` gives the diagnosis.md codes, refuses what is no capture, and
gives nothing above info on an excerpt without a GPU fault."""

from __future__ import annotations

from hypothesis import given

from gpuwarden.health.kernel_log import scan_kernel_log
from tests.health.kernel_log_sets import (
    BUG_REPORT_SOURCES,
    PAYLOAD_DECIDED,
    ExcerptSet,
    assert_joined_keep_every_xid,
    assert_no_line_of_earlier_sets,
    assert_read_alike_in_pieces,
    doctor_check,
    excerpt_orders,
    feed_sizes,
    fuzz,
    joined,
    printed_bus,
    scanner_check,
    sets_before,
    severity_check,
    spliced,
)

SET = ExcerptSet("xid_heldout5")
ROWS = SET.rows
TEXTS = SET.texts()
EXCERPT = SET.excerpts()
FUZZ = fuzz(max_examples=100)
EARLIER_SETS = sets_before(5)


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    SET.assert_cites_only_new_sources(EARLIER_SETS, [BUG_REPORT_SOURCES])
    assert 10 <= len(ROWS) <= 40
    assert sum(not row["fault"] for row in ROWS) >= 5
    assert sum(row["doctor_exit"] == 2 for row in ROWS) >= 3  # text that is no kernel log


def test_no_excerpt_repeats_a_line_of_another_set() -> None:
    assert_no_line_of_earlier_sets(TEXTS, EARLIER_SETS, ("NVRM", "Xid"))


# each row also gives its count of lines that say Xid without being a readable driver Xid line
test_scanner_finds_exactly_what_was_read = scanner_check(SET, bus=printed_bus)
test_severity_is_the_catalogs = severity_check(SET, PAYLOAD_DECIDED)
test_doctor_gives_the_diagnosis_code = doctor_check(SET)


def test_a_probe_failure_without_the_probe_routine_line_is_still_one() -> None:
    """nv.c prints "None of the NVIDIA devices were initialized" when no GPU it probed came up,
    and nv-pci.c "This PCI I/O region assigned to your NVIDIA device is invalid" when the
    firmware gave a BAR no address: each says the driver could not take the GPU, with or without
    "The NVIDIA probe routine failed" (absent in the forum's grep)."""
    report = scan_kernel_log(EXCERPT["01"])
    assert dict(report.other) == {"pci-bar-invalid": 1, "no-gpu-initialised": 1}
    assert report.groups == () and report.fallen_off_bus == ()


def test_prose_naming_a_lost_gpu_is_no_lost_gpu() -> None:
    """ "GPU fallen off bus ... Xid 79" in a glossary names the failure; no GPU was lost."""
    report = scan_kernel_log(EXCERPT["13"])
    assert report.groups == () and report.fallen_off_bus == () and report.other == ()


@FUZZ
@given(text=spliced(TEXTS), sizes=feed_sizes())
def test_cut_and_spliced_excerpts_read_consistently(text: str, sizes: list[int]) -> None:
    assert_read_alike_in_pieces(text, sizes)


@FUZZ
@given(order=excerpt_orders(len(ROWS)))
def test_whole_excerpts_joined_keep_every_xid_and_message(order: list[int]) -> None:
    report = scan_kernel_log(joined(TEXTS, order))
    assert_joined_keep_every_xid(report, ROWS, order)
    assert report.unparsed_xid_lines == sum(ROWS[i]["unparsed"] for i in order)
