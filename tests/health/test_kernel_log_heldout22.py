"""A twenty-second held-out set of kernel logs (tests/data/xid_heldout22), sampled as the search
gave them from the GitHub threads of HPC and scientific simulation codes on NVIDIA GPUs (2019-2026):
molecular dynamics, CFD and weather, quantum chemistry, lattice QCD and the HPC stacks around them.
31 searches (27 of the issues corpus, 4 of the pages corpus) gave one excerpt no earlier set holds
(SOURCES.md): the frame's trackers paste the code's own output -- CUDA error codes, backtraces,
solver logs, build logs -- and hardly ever the kernel's lines; the one kernel paste of a LAMMPS
thread was cut mid-line by the corpus, and the threads with kernel lines the searches brought were
of other repositories (the driver's, health tools', ML projects'). What came: OpenMM run from one
Python process over several GPUs, one Xid 31 MMU fault on each of three GPUs at the same second,
the driver's "GPU at PCI" line naming one of them, and two user-space abrt lines. Measured before
any change: the row's kinds, groups, UUID, findings and severity (1/1 scanner, 1/1 doctor). No
code was changed."""

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

SET = ExcerptSet("xid_heldout22")
EXCERPT = SET.excerpts()
ROWS = {row["prefix"]: row for row in SET.rows}
EARLIER_SETS = sets_before(22)


# the frame's threads gave one excerpt, with a fault: no healthy excerpt came
(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 1, min_healthy=0)


def test_one_process_faulting_on_three_gpus_is_one_group_a_gpu() -> None:
    """01: the three Xid 31 lines of pid 223309 are three groups, one on each printed bus, each
    spanning its own line, with the catalog's mnemonic, and one xid finding a GPU at the row's
    severity; every line of the paste is read and nothing else is found (the abrt lines are
    user space, the "GPU at PCI" line announces a device)."""
    text = EXCERPT["01"]
    report = scan_kernel_log(text)
    expected = ROWS["01"]["xids"]
    assert report.lines_scanned == line_count(text)
    assert (report.xid_lines, report.unparsed_xid_lines) == (len(expected), 0)
    assert [
        (g.xid, g.pci_bus_id, g.count, [g.first_line, g.last_line], g.mnemonic)
        for g in report.groups
    ] == [
        (x["xid"], printed_bus(x["bus"]), x["count"], x["lines"], x["mnemonic"]) for x in expected
    ]
    findings = xid_findings(report, source="kernel-log:01")
    assert [(f.code, f.severity.value, f.device.pci_bus_id) for f in findings] == [
        ("xid", x["severity"], printed_bus(x["bus"])) for x in expected
    ]
    assert report.other == () and report.fallen_off_bus == ()
    assert driver_message_findings(report, source="kernel-log:01") == ()


def test_the_announced_uuid_names_only_its_own_gpu() -> None:
    """01: the UUID the paste's 'NVRM: GPU at PCI:0000:86:00: GPU-...' line announces is that
    GPU's group's and finding's, and the two GPUs whose announcing lines are not in the paste get
    none (not a neighbour's)."""
    report = scan_kernel_log(EXCERPT["01"])
    expected = {printed_bus(x["bus"]): x["uuid"] for x in ROWS["01"]["xids"]}
    assert {g.pci_bus_id: g.uuid for g in report.groups} == expected
    assert dict(report.bus_to_uuid) == {bus: uuid for bus, uuid in expected.items() if uuid}
    findings = xid_findings(report, source="kernel-log:01")
    assert {f.device.pci_bus_id: f.device.uuid for f in findings} == expected


def test_each_finding_says_the_fault_spans_the_other_gpus() -> None:
    """01: the same Xid 31 on three GPUs of one log points at the application or a CUDA library,
    not one board (NVIDIA's Xid 31 workflow): each GPU's finding names the two others."""
    findings = xid_findings(scan_kernel_log(EXCERPT["01"]), source="kernel-log:01")
    others = len(ROWS["01"]["xids"]) - 1
    assert len(findings) == others + 1
    assert all(f"also on {others} other GPU(s)" in f.remedy for f in findings)
