"""An eighteenth held-out set of kernel logs (tests/data/xid_heldout18), sampled as the search gave
them from the GitHub threads of ML frameworks and serving stacks (2020-2026): PyTorch, llama.cpp,
tinygrad and a small LLM inference engine (ninfer). 83 searches gave 8 excerpts no earlier set
cites (SOURCES.md): the frame's threads paste tracebacks, engine logs and nvidia-smi far more often
than kernel lines. What came: MMU faults (Xid 31) of tinygrad's NV backend and of llama-server, an
Xid 109 of a PyTorch training run, an Xid 13 warp exception, the RC watchdog's Xid 8 on one and on
two RTX 5090s, a maintainer's quote of the driver waiting to remove a device still in use (no
fault), and a GSP-RM whose every RPC fails with status 0x0000000f. Measured before any change:
every Xid, bus, UUID, count, severity and verdict was the row's but for that last one --
0x0000000f is NV_ERR_GPU_IS_LOST ("GPU lost from the bus", nvstatuscodes.h), which gpuwarden does
not decode; xid_heldout3 labelled the same lines "nothing decidable". The lead then read the status
(NV_ERR_GPU_IS_LOST by name or number: a GPU lost without an Xid, medium confidence) and relabelled
xid_heldout3's row: from then on both rows are calibration, not validation."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from tests.health.kernel_log_sets import (
    ExcerptSet,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout18")
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(18)


# the frame's threads are about failures: one excerpt without a fault came (03)
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


def test_the_gpu_at_line_names_the_faults_gpu() -> None:
    """01: the "NVRM: GPU at PCI:0000:01:00: GPU-af4f89ae-..." line before the Xid 31 pair gives
    the group its UUID, and the "GPU Board Serial Number" line between them is no Xid."""
    (group,) = scan_kernel_log(EXCERPT["01"]).groups
    assert (group.xid, group.count, group.pci_bus_id) == (31, 2, "0000:01:00.0")
    assert group.uuid == "GPU-af4f89ae-d08b-1b53-9938-c9ed209a3513"
    assert (group.first_uptime_s, group.last_uptime_s) == (22859.08186, 23203.142515)


def test_the_watchdogs_xid_8_on_two_gpus_is_one_finding_each() -> None:
    """07: the RC watchdog's Xid 8 on 0000:c2:00 and on 0000:e2:00 (quoted journal lines) are two
    groups and two xid findings, one a GPU; the watchdog's own line is no Xid and no kind."""
    report = scan_kernel_log(EXCERPT["07"])
    assert [(g.xid, g.pci_bus_id, g.count) for g in report.groups] == [
        (8, "0000:c2:00.0", 1),
        (8, "0000:e2:00.0", 1),
    ]
    assert report.other == () and report.unparsed_xid_lines == 0
    findings = xid_findings(report, source="kernel-log:07")
    assert sorted((f.code, f.severity.value) for f in findings) == [
        ("xid", "warning"),
        ("xid", "warning"),
    ]


def test_removing_a_device_still_in_use_is_no_fault() -> None:
    """03: nv-pci.c's "Attempting to remove device 0000:41:00.0 with non-zero usage count" is an
    unbind while clients hold the GPU (the removal waits for them), not a GPU fault: the line is
    read, no kind, no finding."""
    report = scan_kernel_log(EXCERPT["03"])
    assert report.lines_scanned == 1
    assert report.groups == () and report.other == () and report.fallen_off_bus == ()
    assert driver_message_findings(report, source="kernel-log:03") == ()


def test_the_drivers_gpu_is_lost_status_is_a_gpu_lost_once() -> None:
    """Every RPC and free of the loss returns 0x0000000f: one lost GPU, medium confidence (the
    lines name the driver's instance, no bus); the call's own "paramsStatus=" is not the status."""
    report = scan_kernel_log(EXCERPT["02"])
    assert [(g.pci_bus_id, g.count) for g in report.fallen_off_bus] == [(None, 1)]
    (finding,) = xid_findings(report, source="kernel-log")
    assert (finding.code, finding.severity.value, finding.confidence.value) == (
        "gpu-lost",
        "critical",
        "medium",
    )
    assert "NV_ERR_GPU_IS_LOST" in finding.title
    named = "NVRM: nvCheckOkFailedNoLog: GPU lost from the bus [NV_ERR_GPU_IS_LOST]\n"
    assert [g.count for g in scan_kernel_log(named).fallen_off_bus] == [1]
    params_only = "NVRM: GPU0 rpcRmApiControl_GSP: paramsStatus=0x0000000f; status=0x00000000\n"
    assert scan_kernel_log(params_only).fallen_off_bus == ()


def test_after_the_lost_gpus_own_line_its_failed_calls_add_nothing() -> None:
    """An Xid 79 or "fallen off the bus" already says the loss: the calls that then fail with
    NV_ERR_GPU_IS_LOST are that loss said again (xid_heldout8 row 14 holds both)."""
    status = "NVRM: _issueRpcAndWait: rpcSendMessage failed with status 0x0000000f for fn 78!\n"
    xid79 = "NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
    fallen = "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.\n"
    assert scan_kernel_log(xid79 + status).fallen_off_bus == ()
    assert [g.pci_bus_id for g in scan_kernel_log(fallen + status).fallen_off_bus] == [
        "0000:01:00.0"
    ]


def test_explain_reads_the_status_as_a_lost_gpu_at_medium() -> None:
    """explain of the same lines: the lost GPU, medium as doctor says it (the paste holds neither
    "Xid" nor "fallen off", which gated the kernel log's votes)."""
    from gpuwarden.health.explain import explain_text

    first = explain_text(EXCERPT["02"]).diagnoses[0]
    assert (first.cause, first.confidence.value) == ("gpu-fallen-off-bus", "medium")
