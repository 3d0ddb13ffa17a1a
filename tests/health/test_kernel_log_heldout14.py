"""A fourteenth held-out set of kernel logs (tests/data/xid_heldout14), sampled as the search gave
them: every kernel-log excerpt of desktop, gaming, media-server and virtualisation threads
(jellyfin's packaging, Bumblebee, Valve's repositories, vkd3d-proton, the zen kernel) that no
earlier set cites -- a frame outside the NVIDIA, ML and cluster projects of sets 12 and 13. What
came: Xid 31 MMU faults of a transcoder, Xid 32/39, 79, 109 and 8 of games and desktops, the
three-line "fallen off the bus" of an Optimus laptop without an Xid, two probe failures (no IRQ;
a 64-bit BAR without a prefetchable bridge window), a kernel BUG in the DRM core with the NVIDIA
module loaded, and a module load without an error. Measured before any change: the scanner and
``doctor --from`` gave all ten rows' Xids and codes, but 08's finding did not say why the probe
failed (a 64-bit BAR that no bridge window reaches): now it does (SOURCES.md)."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import PCI_BAR_UNBRIDGED_KIND, scan_kernel_log
from gpuwarden.types.health import Severity
from tests.health.kernel_log_sets import (
    ExcerptSet,
    group_lines_check,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout14")
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(14)


# the frame's threads are about failures: one excerpt without a fault came (04)
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

test_each_group_spans_the_lines_read_with_the_catalogs_name = group_lines_check(
    SET, with_mnemonic=True
)


def test_a_kernel_bug_in_the_drm_core_with_nvidia_loaded_is_no_driver_crash() -> None:
    """05: 'kernel BUG at drivers/gpu/drm/drm_gem.c:154!', RIP in drm_gem_private_object_init,
    the kernel tainted by the NVIDIA module: the crash's place is the DRM core and the trace is
    past the excerpt, so no driver-crashed (nothing names an NVIDIA module)."""
    report = scan_kernel_log(EXCERPT["05"])
    assert report.driver_crashes == ()
    assert driver_message_findings(report, source="kernel-log:05") == ()


def test_a_bar_the_bridge_cannot_map_is_a_probe_failure_that_says_so() -> None:
    """08: nv-pci.c's '64-bit BAR mapped above 4GB ... does not define a matching prefetchable
    memory window', the probe failing and no GPU initialised: one critical probe failure whose
    title names the BAR (once for the four-line message) and whose remedy names the BIOS's
    Above 4G decoding."""
    report = scan_kernel_log(EXCERPT["08"])
    assert (PCI_BAR_UNBRIDGED_KIND, 1) in report.other
    [finding] = driver_message_findings(report, source="kernel-log:08")
    assert (finding.code, finding.severity) == ("driver-probe-failed", Severity.CRITICAL)
    assert "a 64-bit BAR above 4 GB with no bridge window to it ×1" in finding.title
    assert "Above 4G decoding" in finding.remedy


def test_the_2008_drivers_64_bit_bar_message_is_not_the_bridge_kind() -> None:
    """The old drivers' first line is the same ("This is a 64-bit BAR mapped above 4GB by the
    system") but names no bridge window (xid_heldout6 row 15): still one invalid BAR, not two."""
    old = (
        "[  202.482526] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:\n"
        "[  202.482527] NVRM: BAR1 is 256M @ 0x00000000 (PCI:0001:00.0)\n"
        "[  202.482529] NVRM: This is a 64-bit BAR mapped above 4GB by the system BIOS or\n"
        "[  202.482530] NVRM: Linux kernel. The NVIDIA Linux graphics driver and other\n"
    )
    assert scan_kernel_log(old).other == (("pci-bar-invalid", 1),)
