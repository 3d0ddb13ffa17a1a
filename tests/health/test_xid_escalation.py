"""Escalation rules over real Xid messages placed at chosen times: a fatal Xid 5 times in 24 h vs
spread over 3 days, Xid 13/31 repeating on one GPU vs across GPUs, time unknown, and Xid 45
following the Xid that caused it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid_groups import (
    ESCALATE_APPLICATION,
    ESCALATE_DIAGNOSTICS,
    ESCALATE_SUPPORT,
    escalation_bucket,
    escalation_time_unknown,
)
from gpuwarden.types.health import Severity, XidGroup

START = datetime(2025, 2, 23, 16, 24, 18, tzinfo=UTC)
# shared/fixtures/xid: gpud__dmesg-with-xid-119.log line 3 and the TSV's gpud PR 46 / akash rows
XID_119 = (
    "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting "
    "for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."
)
XID_13 = (
    "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception "
    "on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
)
XID_13_ELSEWHERE = XID_13.replace("GPC 7, TPC 7", "GPC 2, TPC 4")
XID_31 = (
    "NVRM: Xid (PCI:0000:00:07): 31, pid=2512125, name=python3.10, Ch 00000008, intr 00000000. "
    "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000. Fault is of type "
    "FAULT_PDE ACCESS_TYPE_VIRT_WRITE"
)
XID_45 = (
    "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous "
    "Xid 149"
)
# written from NVIDIA's documented NVLink5 format (see test_xid_decode.py): link-down reason 37
XID_149 = (
    "NVRM: Xid (PCI:0000:dc:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 "
    "0x00000000 0x00000000 0x00000000 0x00000000)"
)


def _at(hours: float, message: str) -> str:
    """``message`` as dmesg -T prints it, ``hours`` after START."""
    when = START + timedelta(hours=hours)
    return when.strftime("[%a %b %d %H:%M:%S %Y] ") + message


def _log(*lines: str) -> tuple[XidGroup, ...]:
    return scan_kernel_log("\n".join(lines)).groups


def _one(*lines: str) -> XidGroup:
    (group,) = _log(*lines)
    return group


def test_fatal_five_times_in_24_hours_is_an_rma_candidate() -> None:
    group = _one(*(_at(h, XID_119) for h in (0, 4, 8, 12, 16)))
    assert group.severity is Severity.CRITICAL
    assert escalation_bucket(group) == ESCALATE_SUPPORT
    assert group.escalation is not None
    assert "16.0 h" in group.escalation
    assert not escalation_time_unknown(group)


def test_fatal_five_times_over_three_days_is_not() -> None:
    group = _one(*(_at(h, XID_119) for h in (0, 18, 36, 54, 72)))
    assert group.count == 5
    assert group.escalation is None


def test_a_burst_is_one_incident() -> None:
    # five lines within a minute: the driver printing one fault, not five faults
    group = _one(*(_at(s / 3600, XID_119) for s in (0, 6, 12, 30, 50)))
    assert group.escalation is None


def test_fatal_on_uptime_clock() -> None:
    lines = [f"[{100 + h * 3600:12.6f}] {XID_119}" for h in (0, 1, 2, 3, 4)]
    group = _one(*lines)
    assert escalation_bucket(group) == ESCALATE_SUPPORT
    assert "(uptime)" in (group.escalation or "")


def test_fatal_without_time_says_so() -> None:
    group = _one(*([XID_119] * 5))
    assert escalation_bucket(group) == ESCALATE_SUPPORT
    assert escalation_time_unknown(group)
    assert _one(*([XID_119] * 4)).escalation is None


def test_xid_13_again_on_the_same_gpc_tpc_means_diagnostics() -> None:
    group = _one(_at(0, XID_13), _at(0, XID_13), _at(2, XID_13))
    assert escalation_bucket(group) == ESCALATE_DIAGNOSTICS
    assert "GPC 7 TPC 7" in (group.escalation or "")


def test_xid_13_elsewhere_on_the_chip_means_the_application() -> None:
    group = _one(_at(0, XID_13), _at(2, XID_13_ELSEWHERE))
    assert escalation_bucket(group) == ESCALATE_APPLICATION


def test_xid_13_once_is_left_to_the_catalog() -> None:
    assert _one(_at(0, XID_13), _at(0.001, XID_13_ELSEWHERE)).escalation is None


def test_xid_13_on_two_gpus_means_the_application() -> None:
    groups = _log(
        _at(0, XID_13), _at(2, XID_13), _at(3, XID_13.replace("0000:cb:00", "0000:ca:00"))
    )
    assert len(groups) == 2
    assert all(escalation_bucket(g) == ESCALATE_APPLICATION for g in groups)
    assert all("1 other GPU" in (g.escalation or "") for g in groups)


def test_xid_31_repeating_on_one_gpu_means_diagnostics() -> None:
    group = _one(_at(0, XID_31), _at(5, XID_31))
    assert escalation_bucket(group) == ESCALATE_DIAGNOSTICS
    assert "dcgmi diag -r 3" in (group.escalation or "")


def test_xid_31_on_two_gpus_means_the_application() -> None:
    groups = _log(_at(0, XID_31), _at(5, XID_31.replace("0000:00:07", "0000:00:08")))
    assert all(escalation_bucket(g) == ESCALATE_APPLICATION for g in groups)


def test_xid_31_repeating_without_time() -> None:
    group = _one(XID_31, XID_31)
    assert escalation_bucket(group) == ESCALATE_DIAGNOSTICS
    assert escalation_time_unknown(group)


def test_xid_45_follows_its_cause() -> None:
    solo = _one(_at(0, XID_45))
    assert solo.severity is Severity.WARNING  # alone: WORKFLOW_XID_45 (restart Fabric Manager)
    groups = {g.xid: g for g in _log(_at(0, XID_149), _at(0, XID_45))}
    assert groups[149].severity is Severity.CRITICAL  # decoded: link-down reason 37, RESET_GPU
    assert groups[45].severity is Severity.INFO  # "not solo: IGNORE (follow other Xid)"


def test_xid_45_with_another_xid_on_its_gpu() -> None:
    dbe = "NVRM: Xid (PCI:0000:dc:00): 48, pid=1, name=x, DBE (double bit error) ECC error"
    groups = {
        g.xid: g
        for g in _log(_at(0, dbe), _at(0, XID_45.replace(" caused by previous Xid 149", "")))
    }
    assert groups[45].severity is Severity.INFO
    assert groups[48].severity is Severity.CRITICAL
