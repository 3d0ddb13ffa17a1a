"""A fifteenth held-out set of kernel logs (tests/data/xid_heldout15), sampled as the search gave
them from a frame outside GitHub: kernel-log excerpts pasted in blog posts, forum and Q&A threads
and vendor knowledge-base pages, as the `pages` corpus holds them. 82 searches gave one excerpt no
earlier set cites (the in-frame pages whose stored beginning holds a verbatim log are mostly cited
already; see SOURCES.md): a 340.96 module loading on a Kubuntu desktop, tainting the kernel and
printing the driver's five-line VGA-console notice. Measured before any change: the scanner and
``doctor --from`` gave the row's reading (no Xid, the load, no finding); nothing changed."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from tests.health.kernel_log_sets import (
    ExcerptSet,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout15")
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(15)


# the frame gave one excerpt in 82 searches (SOURCES.md), and it shows no fault
(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 1, min_healthy=1)


def test_the_vga_console_notice_of_a_module_that_loaded_is_no_fault() -> None:
    """01: the driver's notice that the console is not a text-mode VGA console (vesafb and the
    like are unsupported) follows a load that worked: one driver-loaded message and nothing a
    finding is made of, so a healthy boot gets no warning."""
    report = scan_kernel_log(EXCERPT["01"])
    assert (report.other, report.groups, report.driver_crashes) == ((("driver-loaded", 1),), (), ())
    assert driver_message_findings(report, source="kernel-log:01") == ()
