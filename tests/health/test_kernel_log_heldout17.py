"""A seventeenth held-out set of kernel logs (tests/data/xid_heldout17), sampled as the search gave
them from the packaging and desktop side of the driver (2020-2026): NVIDIA's open kernel modules,
the distributions (Pop!_OS and COSMIC, Universal Blue's Bluefin, elementary OS, Omarchy) and
Proton. 40 searches gave 11 excerpts no earlier set cites (SOURCES.md). What came: Xid 109, 31, 13
and 79 of games, browsers and a resume; the open module refusing a GPU without a GSP; an API
mismatch after an upgrade; a GSP that would not boot (WPR2 left up); a healthy boot's EDID
notices; a PTIMER error and an assertion; and two failed suspend/resume cycles. Measured before
any change: every Xid, lost GPU and verdict was the row's but for the two suspend/resume rows --
the scanner had no kind for mem_mgr's refused resume ("Calling Resume on an active GPU or the
previous Suspend call might have failed"), and nv.c's WARN() in nv_set_system_power_state never
reaches it. Now the refused resume is the kind suspend-resume-failed and the code of the same
name (a warning); the WARN stays a strict scanner xfail."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import SUSPEND_RESUME_KIND, scan_kernel_log
from gpuwarden.types.health import Confidence, Severity
from tests.health.kernel_log_sets import (
    ExcerptSet,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout17")
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(17)


# the frame's threads are about failures: one healthy boot came (02)
(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 8, min_healthy=1)


def test_a_refused_resume_is_one_suspend_resume_failure() -> None:
    """08: memmgrRestorePowerMgmtState_KERNEL's two lines ("Calling Resume on an active GPU or
    the previous Suspend call might have failed", "So ignoring the resume request") are one
    suspend-resume-failed message and nothing else. Failed before: the scanner had no kind for
    them and the report held nothing."""
    report = scan_kernel_log(EXCERPT["08"])
    assert report.lines_scanned == 2
    assert report.other == ((SUSPEND_RESUME_KIND, 1),)
    assert report.groups == () and report.fallen_off_bus == ()


def test_the_refused_resume_is_a_suspend_resume_failed_warning() -> None:
    """08: the refused resume is the suspend-resume-failed finding, a warning at medium (the
    log's time; the line names no GPU), and no other finding stands in for it."""
    findings = driver_message_findings(scan_kernel_log(EXCERPT["08"]), source="kernel-log:08")
    assert [(f.code, f.severity, f.confidence, f.count) for f in findings] == [
        ("suspend-resume-failed", Severity.WARNING, Confidence.MEDIUM, 1)
    ]
    assert "NVreg_PreserveVideoMemoryAllocations" in findings[0].remedy


def test_a_healthy_boots_edid_notices_are_no_fault() -> None:
    """02: the 610.57.04 open module loads and nvidia-modeset cannot read a monitor's EDID (a
    WARNING, not an ERROR): the driver's banner only, no Xid, no finding."""
    report = scan_kernel_log(EXCERPT["02"])
    assert report.other == (("driver-loaded", 1),)
    assert report.groups == () and driver_message_findings(report, source="kernel-log:02") == ()
