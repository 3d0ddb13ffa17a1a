"""A twenty-first held-out set of kernel logs (tests/data/xid_heldout21), sampled as the search gave
them from the GitHub threads of Wayland compositors, desktops and game launchers on NVIDIA GPUs
(2019-2026): COSMIC's compositor, vkd3d-proton and DXVK. 31 searches gave 9 excerpts no earlier set
holds (SOURCES.md): the frame's trackers (Hyprland, sway, KWin, gamescope, niri, Steam, Lutris)
paste the compositor's own log, crash reports and screenshots far more often than kernel lines,
and xid_public and xid_heldout8/12/14 had already taken the kernel blocks the searches found in
Proton, vkd3d-proton and open-gpu-kernel-modules threads. What came: four games' Xids (32, 109 and
31 twice), the compositor's own Xid 13 pasted without its device, nvidia-drm failing to allocate a
PRIME fence event, the driver out of GPU virtual address space, and two logs without a fault (a
PRIME laptop's EDID and no-CRTC lines, the driver refusing an unvalidated mmap). Measured before
any change: every row's kinds, findings and severities but 01's (8/9 scanner, 8/9 doctor):
"NVRM: Xid 13, ..." without the "(PCI:<bus>)" the driver always prints is counted unparsed, a
miss the row records as strict xfails. No code was changed: the two driver failures without a
finding (06, 09) have no code in gpuwarden's vocabulary to give."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from tests.health.kernel_log_sets import (
    ExcerptSet,
    line_count,
    printed_bus,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout21")
EXCERPT = SET.excerpts()
ROWS = {row["prefix"]: row for row in SET.rows}
EARLIER_SETS = sets_before(21)
# the excerpts whose Xid lines the driver printed whole, with the device
PRINTED_XIDS = ("04", "05", "07", "08")
# the excerpts with a driver line and no finding: no fault (02, 03) or a fault no code names
# (06: nvidia-drm's fence allocation, 09: the driver out of GPU virtual address space)
NO_FINDING = ("02", "03", "06", "09")


# the frame's threads gave nine excerpts, two of them without a fault
(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 8, min_healthy=2)


def test_each_printed_xid_is_one_group_over_its_lines_with_the_catalogs_name() -> None:
    """04, 05, 07, 08: each excerpt's Xid lines are one group on the printed bus, spanning the
    lines read by hand, with the catalog's mnemonic, and one xid finding at the row's severity."""
    for prefix in PRINTED_XIDS:
        report = scan_kernel_log(EXCERPT[prefix])
        (expected,) = ROWS[prefix]["xids"]
        (group,) = report.groups
        assert (group.xid, group.pci_bus_id, group.count) == (
            expected["xid"],
            printed_bus(expected["bus"]),
            expected["count"],
        ), prefix
        assert [group.first_line, group.last_line] == expected["lines"], prefix
        assert group.mnemonic == expected["mnemonic"], prefix
        (finding,) = xid_findings(report, source=f"kernel-log:{prefix}")
        assert (finding.code, finding.severity.value) == ("xid", expected["severity"]), prefix


def test_an_xid_line_without_its_device_is_counted_unparsed_not_read() -> None:
    """01: 'NVRM: Xid 13, Graphics Exception: ...' and 'NVRM: Xid 13, pid=3057,
    name=cosmic-comp, ...' lack the '(PCI:<bus>)' the driver always prints (kernel_rc.c): both
    lines are counted as lines that say Xid without being the driver's Xid line, no group, no
    finding (the row's strict xfails record the Xid 13 an engineer reads)."""
    report = scan_kernel_log(EXCERPT["01"])
    assert (report.lines_scanned, report.xid_lines, report.unparsed_xid_lines) == (2, 2, 2)
    assert report.groups == () and report.other == () and report.fallen_off_bus == ()
    assert xid_findings(report, source="kernel-log:01") == ()


def test_the_driver_lines_without_a_code_give_no_finding() -> None:
    """02 (nvidia-modeset's EDID warning, nvidia-drm's 'Cannot find any crtc or sizes'), 03
    ('NVRM: VM: invalid mmap' ×10), 06 (nvidia-drm's 'Failed to allocate fence signaling event')
    and 09 (dmaAllocMapping's 'can't alloc VA space' ×2 and an NV_ERR_NO_MEMORY assertion): every
    line is read, no Xid, no lost GPU; 09's assertion is the one kind; nothing is found."""
    for prefix in NO_FINDING:
        report = scan_kernel_log(EXCERPT[prefix])
        source = f"kernel-log:{prefix}"
        assert report.lines_scanned == line_count(EXCERPT[prefix]), prefix
        assert report.groups == () and report.fallen_off_bus == (), prefix
        assert [kind for kind, _ in report.other] == ROWS[prefix]["other"], prefix
        assert xid_findings(report, source=source) == (), prefix
        assert driver_message_findings(report, source=source) == (), prefix
