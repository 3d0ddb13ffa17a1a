"""A twelfth held-out set of kernel logs (tests/data/xid_heldout12), not chosen for a kind we lacked
but sampled as the search gave them: every kernel-log excerpt of 2024-2026 threads of the GPU
projects (open-gpu-kernel-modules, nvidia-container-toolkit, sglang) that no earlier set cites.
What came: two Xids in the R570+ 'channel 0x...' form (109, 31 with an unrecognized client), the
GSP firmware failing to boot (FWSEC data from the VBIOS, GSP-FMC errors, the host out of memory
for its image), the GSP timeout's falcon core dump in Talos's forwarded form, and four excerpts
without a fault (nvidia-drm's allocation errors, a healthy boot, a fuzzing run). Each excerpt's
Xids are read and judged as the catalog says; ``doctor --from`` gives the codes written down and
nothing above info where the thread shows no fault. The GSP boot failure and timeout dump need
kernel_log.py to read them (strict xfails; h73b_report.md): driver_messages already turns the
kinds into findings."""

from __future__ import annotations

from dataclasses import replace

from gpuwarden.health.driver_messages import (
    GSP_INIT_KIND,
    GSP_TIMEOUT_KIND,
    driver_message_findings,
)
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.types.health import Confidence, KernelLogReport, Severity
from tests.health.kernel_log_sets import (
    ExcerptSet,
    group_lines_check,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout12")
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(12)


(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 10)


test_each_group_has_its_lines_and_the_catalogs_name = group_lines_check(SET, with_mnemonic=True)


def _with(prefix: str, *kinds: tuple[str, int]) -> KernelLogReport:
    """The excerpt's report with other kinds beside the ones the scanner reads in it."""
    report = scan_kernel_log(EXCERPT[prefix])
    return replace(report, other=(*report.other, *kinds))


def test_a_gsp_boot_failure_is_a_probe_failure_with_the_gsps_causes() -> None:
    """06: GSP-FMC boot errors, 'Max GSP-RM boot attempts exceeded', 'Cannot initialize GSP
    firmware RM' (6 lines) and no RmInitAdapter-failed line: the driver could not take the GPU,
    because its GSP firmware did not boot; the cause and remedy are the GSP's (a power cycle,
    the firmware files, the VBIOS), not nouveau's or the BIOS's BAR settings."""
    report = scan_kernel_log(EXCERPT["06"])
    assert (GSP_INIT_KIND, 6) in report.other
    [finding] = driver_message_findings(report, source="kernel-log:06")
    assert (finding.code, finding.severity, finding.confidence) == (
        "driver-probe-failed",
        Severity.CRITICAL,
        Confidence.MEDIUM,
    )
    assert finding.title == "the driver could not take a GPU (the GSP firmware did not boot ×6)"
    assert "GSP firmware" in finding.cause and "WPR2" in finding.cause
    assert "power-cycle" in finding.remedy and "nouveau" not in finding.remedy


def test_a_probe_failure_without_the_gsp_keeps_the_general_causes() -> None:
    report = scan_kernel_log(EXCERPT["07"])
    [gsp] = driver_message_findings(report, source="kernel-log:07")
    assert gsp.code == "driver-probe-failed" and "power-cycle" in gsp.remedy
    without = replace(report, other=tuple(k for k in report.other if k[0] != GSP_INIT_KIND))
    [finding] = driver_message_findings(without, source="kernel-log:07")
    assert finding.code == "driver-probe-failed" and "nouveau" in finding.remedy


def test_a_gsp_timeout_dump_without_its_xid_is_critical() -> None:
    """10: the falcon core dump the GSP timeout path prints, the Xid 119 line not in the paste:
    the GSP stopped answering, critical as Xid 119 is, at medium confidence (a reset since would
    have cured it)."""
    report = scan_kernel_log(EXCERPT["10"])
    assert (GSP_TIMEOUT_KIND, 9) in report.other
    [finding] = driver_message_findings(report, source="kernel-log:10")
    assert (finding.code, finding.severity, finding.confidence) == (
        "gsp-firmware-crash",
        Severity.CRITICAL,
        Confidence.MEDIUM,
    )
    assert "×9" in finding.title and "Xid 119" in finding.cause


def test_a_gsp_timeout_with_its_xid_is_the_xids_event() -> None:
    """The same timeout lines beside an Xid 119 (or a crash report): the Xid finding, or the
    gsp-firmware-crash finding of the report, is the alarm; no second one."""
    xid119 = scan_kernel_log(
        "NVRM: Xid (PCI:0000:01:00): 119, pid=1, name=python, Timeout after 6s of waiting for RPC "
        "response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801702 0x4).\n"
    )
    with_xid = replace(xid119, other=(*xid119.other, (GSP_TIMEOUT_KIND, 3)))
    assert driver_message_findings(with_xid, source="x") == ()
    with_report = _with("10", ("gsp-crash", 1))
    assert [f.code for f in driver_message_findings(with_report, source="x")] == [
        "gsp-firmware-crash"
    ]
