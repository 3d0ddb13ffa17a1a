"""A ninth held-out set of kernel logs (tests/data/xid_heldout9: threads none of the other
kernel-log sets, the bug-report and AER sets or shared/fixtures cite), aimed at what cloud and
cluster operators paste: a dmesg -T of 2026 whose Realtek lines say 'XID 641', an Xid 145/137
pair of a B200 with the PCI ids redacted, a GB200's NV_ERR_RESET_REQUIRED without an Xid, healthy
driver loads (a NAS, a k8s node, a short-precise journal of 580 open), and look-alikes: amdgpu
resets (RFC 3339 syslog, journal), Intel in-band ECC, a `kubectl describe node` condition row, a
Talos fabric-manager service log and an operator's Markdown summary of Xids. The scanner folds
exactly the Xids read by hand; ``doctor --from`` gives the codes written down, refuses what is no
kernel log, and gives nothing above info on every look-alike and healthy load."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.types.health import Severity
from tests.health.kernel_log_sets import (
    BUG_REPORT_SOURCES,
    ExcerptSet,
    group_lines_check,
    joined_check,
    kernel_log_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout9")
ROWS = SET.rows
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(9)
PCIE_AER_SOURCES = [
    SET.data.parent / name / "SOURCES.md" for name in ("pcie_aer_public", "pcie_aer_public2")
]


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    SET.assert_cites_only_new_sources(EARLIER_SETS, [BUG_REPORT_SOURCES, *PCIE_AER_SOURCES])
    assert 12 <= len(ROWS) <= 20
    assert sum(not row["fault"] for row in ROWS) >= 5  # look-alikes and healthy loads
    assert sum(row["doctor_exit"] == 2 for row in ROWS) >= 2  # pastes that are no kernel log


(
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
) = kernel_log_set_checks(SET, EARLIER_SETS, ("NVRM", "nvidia", "amdgpu", "Xid", "XID"))


test_each_xid_group_spans_the_lines_read = group_lines_check(SET)


def test_a_network_chips_xid_is_no_nvidia_xid() -> None:
    """club-3090#751: r8169's 'RTL8125B, <mac>, XID 641, IRQ 51' names the NIC's chip: only the
    eight NVRM lines are Xids, and no line is counted as an unreadable Xid line."""
    report = scan_kernel_log(EXCERPT["01"])
    assert [(g.xid, g.count) for g in report.groups] == [(13, 8)]
    assert report.unparsed_xid_lines == 0


def test_redacted_pci_ids_give_groups_without_a_bus() -> None:
    """nccl#2241: 'Xid (PCI:...): 145, RLW_RXPIPE Nonfatal' -- the reporter hid the bus: the Xid
    is read, its severity from the payload (Nonfatal), the group names no GPU."""
    groups = {g.xid: g for g in scan_kernel_log(EXCERPT["08"]).groups}
    assert groups[145].pci_bus_id is None and groups[145].severity is Severity.WARNING
    assert groups[137].severity is Severity.INFO


# nv_pci_probe (nv-pci.c) when the GPU's boot registers read all ones: the three-line message,
# NV_ERR_GPU_IS_LOST, and nvidia_init_module's count of the failed probe
_LOST_AT_PROBE = (
    "[   12.000001] NVRM: The NVIDIA GPU 0000:{bus}:00.0\n"
    "               NVRM: (PCI ID: 10de:2330) installed in this system has\n"
    "               NVRM: fallen off the bus and is not responding to commands.\n"
    "[   12.100002] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
)


def test_a_probe_that_failed_for_a_lost_gpu_is_the_lost_gpus_alarm() -> None:
    """The probe failure that follows the driver's own 'fallen off the bus' message is that
    GPU's event: an info finding that names the lost GPU, not a second critical alarm whose
    remedy (nouveau, BIOS) does not apply."""
    report = scan_kernel_log(_LOST_AT_PROBE.format(bus="b3"))
    [finding] = driver_message_findings(report, source="dmesg")
    assert finding.code == "driver-probe-failed" and finding.severity is Severity.INFO
    assert "0000:b3:00.0" in finding.title and "gpu-lost" in finding.title


def test_a_probe_failure_with_a_reason_of_its_own_stays_critical() -> None:
    """RmInitAdapter failing on another GPU is a failure of its own, lost GPU or not."""
    text = _LOST_AT_PROBE.format(bus="b3") + (
        "[   13.000003] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n"
    )
    [finding] = driver_message_findings(scan_kernel_log(text), source="dmesg")
    assert finding.severity is Severity.CRITICAL


test_whole_excerpts_joined_keep_every_xid = joined_check(SET)
