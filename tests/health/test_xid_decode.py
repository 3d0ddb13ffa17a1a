"""Payload decoding of Xid messages, against what NVIDIA documents.

The NVLink5 lines (Xid 144-150) are written as the driver prints them. The format is NVIDIA's
(Xid catalog, WORKFLOW_NVLINK5_ERR: "Xid (PCI:0000:BB:DF): <Xid> <sub component> <fatal vs
nonfatal> <Crosscontain> <injected> <link> (<intrInfo> <errorStatus> <errorDebugData[0..4]>)"),
with the spacing of the lines quoted in leptonai/gpud's NVLink tests ("149, NETIR_LINK_EVT Fatal
XC0 i0 Link 00 (0x026001c6 0x00000000 ...)"). The expected unit / action / severity of each come
from NVIDIA's "XID 144-150 Decode" sheet: V1 (< R575) keeps the sub-unit in IntrInfo[9:5], V2
(>= R575) in IntrInfo[6:0]; NETIR_LINK_EVT's link-down reason is IntrInfo[25:20].
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.xid_decode import (
    decode_caused_by,
    decode_nvlink5,
    decode_payload,
    decode_recovery_action,
    sm_location,
)
from gpuwarden.types.health import Severity

_TAIL = " 0x00000000 0x00000000 0x00000000 0x00000000)"


def _nvlink(unit: str, fatal: str, intrinfo: int, status: int) -> str:
    return f"{unit} {fatal} XC0 i0 Link 03 (0x{intrinfo:08x} 0x{status:08x}{_TAIL}"


def _pairs(xid: int, message: str) -> dict[str, str]:
    return dict(decode_nvlink5(xid, message).pairs)


def test_v1_link_down_reason_37_is_a_peer_device() -> None:
    # V1: IntrInfo[9:0] = 0111000110 (NETIR_LINK_EVT), [25:20] = 100101 (37)
    decode = decode_nvlink5(149, _nvlink("NETIR_LINK_EVT", "Fatal", 0x025001C6, 0))
    pairs = dict(decode.pairs)
    assert pairs["unit"] == "NETIR_LINK_EVT/NETIR_LINK_DOWN"
    assert pairs["layout"] == "V1"
    assert pairs["link_down_reason"] == "37"
    assert pairs["investigate"] == "INVESTIGATE_PEER_DEVICE"
    assert pairs["link"] == "03"
    assert decode.action == "RESET_GPU"
    assert decode.severity is Severity.CRITICAL


def test_v1_link_down_reason_38_is_software_and_needs_no_reset() -> None:
    decode = decode_nvlink5(149, _nvlink("NETIR_LINK_EVT", "Fatal", 0x026001C6, 0))
    assert decode.action == "IGNORE"
    assert dict(decode.pairs)["investigate"] == "INVESTIGATE_SW/USER"
    # "Link Fatal" although the action is IGNORE: a link went down, so never below a warning
    assert decode.severity is Severity.WARNING


def test_v2_link_down() -> None:
    # V2: IntrInfo[6:0] = 0010001 (NETIR_LINK_EVT), reason 0 → sympathetic, reset the GPU
    decode = decode_nvlink5(149, _nvlink("NETIR_LINK_EVT", "Fatal", 0x00000011, 0))
    assert dict(decode.pairs)["layout"] == "V2"
    assert dict(decode.pairs)["investigate"] == "SYMPATHETIC_REPORT_SOLO"
    assert decode.severity is Severity.CRITICAL


@pytest.mark.parametrize(
    ("status", "action", "severity"),
    [
        (0x1, "IGNORE", Severity.INFO),
        (0x2, "RESET_GPU", Severity.CRITICAL),
        (0x4, "IGNORE", Severity.INFO),
        (0x8, "IGNORE", Severity.INFO),
        (0x10, "RESET_GPU", Severity.CRITICAL),
    ],
)
def test_saw_mvb_error_status_decides(status: int, action: str, severity: Severity) -> None:
    for intrinfo in (0x21, 0x01):  # V1 0000100001, V2 0000001
        decode = decode_nvlink5(144, _nvlink("SAW_MVB", "Nonfatal", intrinfo, status))
        assert decode.action == action
        assert decode.severity is severity


def test_rlw_remap_waits_for_xid_154() -> None:
    decode = decode_nvlink5(145, _nvlink("RLW_REMAP", "Nonfatal", 0x04, 0x1))
    assert decode.action == "XID_154_EVAL"
    assert decode.severity is Severity.WARNING


def test_several_error_status_bits_take_the_worst() -> None:
    decode = decode_nvlink5(145, _nvlink("RLW_REMAP", "Fatal", 0x04, 0x41))  # 0x1 | 0x40
    assert decode.action == "RESET_GPU"
    assert decode.severity is Severity.CRITICAL


def test_action_2_promotes_rxpipe() -> None:
    # V1 RLW_RXPIPE: IntrInfo[10:0] = 00011000010; with bit 10 set the sheet's action 2 applies
    plain = decode_nvlink5(145, _nvlink("RLW_RXPIPE", "Nonfatal", 0b00011000010, 0x1))
    promoted = decode_nvlink5(145, _nvlink("RLW_RXPIPE", "Nonfatal", 0b10011000010, 0x1))
    assert plain.action == "IGNORE"
    assert plain.severity is Severity.INFO
    assert promoted.action == "RESET_GPU"
    assert promoted.severity is Severity.CRITICAL


def test_mse_watchdog() -> None:
    decode = decode_nvlink5(150, _nvlink("MSE_WATCHDOG", "Fatal", 0, 0))
    assert dict(decode.pairs)["unit"] == "MSE_WATCHDOG"
    assert decode.severity is Severity.CRITICAL


def test_printed_unit_picks_the_row() -> None:
    # V2 IntrInfo 0001011 is TLW_RX_PIPE1; its V1 twin (TLW_RX) is shared by both pipes
    assert _pairs(146, _nvlink("TLW_RX_PIPE1", "Fatal", 0x0B, 0x4))["unit"] == (
        "TLW_RX/TLW_RX_PIPE1"
    )


@pytest.mark.parametrize(
    "message",
    [
        _nvlink("SAW_MVB", "Nonfatal", 0x3FF, 0x1),  # no row has this IntrInfo
        _nvlink("SAW_MVB", "Nonfatal", 0x01, 0x40),  # no SAW_MVB row has errorStatus 0x40
        "SAW_MVB Nonfatal XC0 i0 Link 03",  # no register words
    ],
)
def test_what_the_sheet_does_not_cover_stays_undecoded(message: str) -> None:
    decode = decode_nvlink5(144, message)
    assert decode.severity is None
    assert decode.action is None
    assert any(value.startswith("undecoded") for _, value in decode.pairs)


@pytest.mark.parametrize(
    ("message", "action", "severity", "bucket"),
    [
        # the fixture's Talos line (open-gpu-kernel-modules #446)
        (
            "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
            "reset",
            Severity.CRITICAL,
            "RESET_GPU",
        ),
        # NVIDIA's catalog example for Xid 154
        (
            "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
            "reboot",
            Severity.CRITICAL,
            "RESTART_BM",
        ),
        (
            "GPU recovery action changed from 0x0 (None) to 0x1 (Reset)",
            "reset",
            Severity.CRITICAL,
            "RESET_GPU",
        ),
        (
            "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)",
            "drain-p2p",
            Severity.WARNING,
            None,
        ),
        (
            "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
            "none",
            Severity.INFO,
            "IGNORE",
        ),
        (
            "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
            "drain-and-reset",
            Severity.CRITICAL,
            "RESET_GPU",
        ),
    ],
)
def test_xid_154_recovery_action(
    message: str, action: str, severity: Severity, bucket: str | None
) -> None:
    decode = decode_payload(154, message)
    assert decode is not None
    assert ("recovery_action", action) in decode.pairs
    assert decode.severity is severity
    assert decode.action == bucket


def test_xid_154_unknown_code_and_text() -> None:
    message = "GPU recovery action changed from 0x0 (None) to 0x9 (Recalibrate)"
    # a code newer than NVML's table keeps the driver's own word, as DeviceSample does
    assert decode_recovery_action(message) == ("none", "recalibrate")
    decode = decode_payload(154, "GPU recovery action changed from 0x0 (None) to 0x9 (Recalibrate)")
    assert decode is not None
    # an action gpuwarden does not know is still a request for action: a warning, as the
    # recovery-action rule treats it
    assert decode.severity is Severity.WARNING
    assert decode_payload(154, "something else") is not None


def test_xid_45_caused_by() -> None:
    line = "pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149"
    assert decode_caused_by(line) == 149
    decode = decode_payload(45, line)
    assert decode is not None
    assert decode.pairs == (("caused_by", "149"),)
    assert decode_payload(45, "pid=1, name=x, Ch 00000001") is None


def test_xid_13_location() -> None:
    message = "Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address"
    assert sm_location(message) == (9, 1, 1)
    assert sm_location("Graphics Exception: ESR 0x546fb0=0x11f000e") is None
    assert decode_payload(13, message) is None  # 13's location feeds the escalation, not a decode


@settings(max_examples=200, deadline=None)
@given(
    xid=st.integers(min_value=144, max_value=150),
    unit=st.sampled_from(
        ["SAW_MVB", "RLW_REMAP", "NETIR_LINK_EVT", "TLW_RX_PIPE0", "MSE", "", "?"]
    ),
    intrinfo=st.integers(min_value=0, max_value=0xFFFFFFFF),
    status=st.integers(min_value=0, max_value=0xFFFFFFFF),
)
def test_any_register_pair_decodes_or_says_undecoded(
    xid: int, unit: str, intrinfo: int, status: int
) -> None:
    decode = decode_nvlink5(xid, _nvlink(unit, "Fatal", intrinfo, status))
    undecoded = any(value.startswith("undecoded") for _, value in decode.pairs)
    assert undecoded == (decode.severity is None) == (decode.action is None)


@pytest.mark.parametrize(
    ("change", "informational"),
    [("to 0x2 (Node Reboot Required)", False), ("to 0x0 (None)", True)],
)
def test_an_xid_154_asking_for_action_is_not_called_informational(
    change: str, informational: bool
) -> None:
    """NVIDIA's catalog words Xid 154 "Informational: ..."; a change to a reset or a reboot is a
    critical finding, whose cause must not open with that word (a new user read it as one)."""
    from gpuwarden.health.kernel_log import scan_kernel_log
    from gpuwarden.health.xid import xid_findings

    line = "NVRM: Xid (PCI:0000:02:00): 154, GPU recovery action changed from 0x0 (None) " + change
    [finding] = xid_findings(scan_kernel_log(line), source="kernel-log")
    assert finding.cause.startswith("Informational") is informational
    assert (finding.severity is Severity.INFO) is informational
