"""A nineteenth held-out set of kernel logs (tests/data/xid_heldout19), sampled as the search gave
them from the GitHub threads of cluster operators and cloud GPU nodes (2019-2026): the GPU Operator,
AKS, the ECS GPU AMI and the Kubernetes GPU CI. 60 searches gave 5 excerpts no earlier set holds
(SOURCES.md): the frame's threads paste operator, pod and plugin logs far more often than kernel
lines, and xid_heldout9 and 16 had already taken most of the kernel blocks of the same trackers.
What came: three healthy driver loads pasted among prompts, kubectl and lspci lines (a MIG node of
the GPU Operator, an AKS NC node, a GCE e2e node), four Xid 119 GSP RPC timeouts of an AKS node's
510 driver in the Hyper-V PCI domain 0001, and an EC2 console whose driver refuses a client of
another version. Measured before any change: every Xid, bus, count, severity, kind and verdict was
the row's (5/5 scanner, 5/5 doctor), so no code changed."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from tests.health.kernel_log_sets import (
    ExcerptSet,
    group_lines_check,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout19")
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(19)
# the excerpts that show only the driver loading: pasted while debugging what the log does not show
HEALTHY_LOADS = ("01", "02", "05")


# the frame's threads gave five excerpts, three of them healthy loads
(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 5)

test_each_group_spans_its_lines_with_the_catalogs_name = group_lines_check(SET, with_mnemonic=True)


def test_the_r510_gsp_timeouts_of_a_hyperv_gpu_are_one_critical_group() -> None:
    """03: four 'Xid (PCI:0001:00:00): 119, pid=3355, Timeout waiting for RPC from GSP!' lines
    (R510's form, no name=) are one group on the GPU in Hyper-V's PCI domain 0001, dated by their
    uptimes, and one critical xid finding."""
    report = scan_kernel_log(EXCERPT["03"])
    (group,) = report.groups
    assert (group.xid, group.pci_bus_id, group.count) == (119, "0001:00:00.0", 4)
    assert (group.first_uptime_s, group.last_uptime_s) == (549.998327, 568.10052)
    assert (group.first_seen_s, group.last_seen_s) == (None, None)
    (finding,) = xid_findings(report, source="kernel-log:03")
    assert (finding.code, finding.severity.value) == ("xid", "critical")


def test_the_api_mismatch_among_console_lines_is_one_message() -> None:
    """04: the four 'NVRM: API mismatch' lines sharing one stamp are one message among cloud-init,
    '...' and systemd '[  OK  ]' console lines, which are no kernel message; the finding is the
    driver/library mismatch."""
    report = scan_kernel_log(EXCERPT["04"])
    assert report.lines_scanned == 21
    assert report.groups == () and report.fallen_off_bus == ()
    assert report.other == (("api-mismatch", 1),)
    (finding,) = driver_message_findings(report, source="kernel-log:04")
    assert (finding.code, finding.severity.value) == ("nvml-driver-mismatch", "critical")


def test_a_healthy_load_among_prompts_and_commands_is_no_fault() -> None:
    """01, 02, 05: the NVRM load line (02's ending '(using threaded interrupts)') is the
    driver-loaded kind; the shell prompts, kubectl, lspci and nvidia-smi -L lines around it are no
    kernel message; nothing is found."""
    for prefix in HEALTHY_LOADS:
        report = scan_kernel_log(EXCERPT[prefix])
        assert report.other == (("driver-loaded", 1),), prefix
        assert report.groups == () and report.fallen_off_bus == (), prefix
        assert driver_message_findings(report, source=f"kernel-log:{prefix}") == (), prefix
