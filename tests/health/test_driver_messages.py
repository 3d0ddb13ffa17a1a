"""driver-probe-failed from the driver's own messages (held-out real logs, tests/data/xid_public):
one node-level finding with what the log said and how often, none for a log without them. The GSP
firmware's crash report (gsp-firmware-crash) and nvidia-modeset's display-engine timeouts
(display-engine-hang) on the real excerpts of tests/data/xid_heldout8: critical / warning, the
crash report of a log with an Xid 119/120 an info finding naming that Xid (one event, one alarm),
nothing on the healthy boot and the other drivers' look-alikes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.rules.codes import CODES
from gpuwarden.types.health import Confidence, Finding, KernelLogReport, Severity

DATA = Path(__file__).resolve().parents[1] / "data" / "xid_public"
HELDOUT8 = DATA.parent / "xid_heldout8"
NEW_CODES = ("gsp-firmware-crash", "display-engine-hang")


def _findings(prefix: str) -> tuple[object, ...]:
    [path] = DATA.glob(f"{prefix}__*")
    return driver_message_findings(scan_kernel_log(path.read_text()), source=f"kernel-log:{path}")


def test_rm_init_adapter_failed_is_a_critical_node_finding() -> None:
    [finding] = _findings("01")
    assert finding.code == "driver-probe-failed" and finding.severity is Severity.CRITICAL
    assert finding.device is None and finding.confidence is Confidence.MEDIUM
    assert "RmInitAdapter failed ×" in finding.title and finding.count
    assert all(e.source.startswith("kernel-log:") for e in finding.evidence)


def test_no_adapter_found_is_the_same_cause() -> None:
    [finding] = _findings("27")
    assert finding.title == "the driver could not take a GPU (no NVIDIA GPU probed ×1)"


def test_xids_alone_are_not_a_probe_failure() -> None:
    scanned = [scan_kernel_log(p.read_text()) for p in sorted(DATA.glob("*.log"))]
    quiet = [r for r in scanned if not any(k.endswith(("probed", "failed")) for k, _ in r.other)]
    assert quiet and all(driver_message_findings(r, source="x") == () for r in quiet)


def test_api_mismatch_is_the_version_mismatch() -> None:
    # a blog's paste of the module refusing a client of another version (tests/data/xid_forum)
    [path] = (DATA.parent / "xid_forum").glob("07__*")
    [finding] = driver_message_findings(scan_kernel_log(path.read_text()), source="kernel-log:x")
    assert finding.code == "nvml-driver-mismatch" and finding.severity is Severity.CRITICAL
    assert finding.confidence is Confidence.MEDIUM and finding.count == 1


def _heldout8(prefix: str) -> tuple[KernelLogReport, tuple[Finding, ...]]:
    [path] = HELDOUT8.glob(f"{prefix}__*.log")
    report = scan_kernel_log(path.read_text(encoding="utf-8"))
    return report, driver_message_findings(report, source=f"kernel-log:{path.name}")


def _of(findings: tuple[Finding, ...], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def test_a_gsp_crash_report_alone_is_a_critical_reset() -> None:
    """ogkm#1307 (610.57.04): a GSP-CrashCat report and its RISC-V dump, no Xid line."""
    _, findings = _heldout8("05")
    [finding] = findings
    assert (finding.code, finding.severity, finding.count) == (
        "gsp-firmware-crash",
        Severity.CRITICAL,
        1,
    )
    assert finding.action == "RESET_GPU" and finding.device is None
    assert finding.confidence is Confidence.MEDIUM
    assert finding.cause == CODES["gsp-firmware-crash"].cause
    assert "GSP Firmware Version" in finding.remedy and "nvidia-bug-report" in finding.remedy
    assert [e.value for e in finding.evidence] == ["GSP firmware crash report ×1"]


def test_a_crash_report_with_its_xid_120_is_that_xid_not_a_second_alarm() -> None:
    """ogkm#876: RmInitAdapter failed, then the CrashCat report that carries Xid 120 on
    0000:01:00: driver-probe-failed stays, the crash report is an info finding naming the Xid
    (the xid finding is the alarm), on the Xid's GPU."""
    report, findings = _heldout8("04")
    assert [f.code for f in findings] == ["driver-probe-failed", "gsp-firmware-crash"]
    [crash] = _of(findings, "gsp-firmware-crash")
    assert crash.severity is Severity.INFO and crash.action is None
    assert "Xid 120 (GPU 0000:01:00.0)" in crash.title and "Xid 120" in crash.remedy
    assert crash.device is not None and crash.device.pci_bus_id == "0000:01:00.0"
    assert crash.device.uuid == "GPU-29689fa2-005b-bfbd-b7ad-94fde3bc2b16"
    assert [(e.field, e.value) for e in crash.evidence] == [
        ("kernel-log", "GSP firmware crash report ×1"),
        ("xid", 120),
    ]
    # the same report without its Xid group: the crash is the alarm again
    alone = replace(report, groups=tuple(g for g in report.groups if g.xid != 120))
    [again] = _of(driver_message_findings(alone, source="x"), "gsp-firmware-crash")
    assert again.severity is Severity.CRITICAL and again.device is None


def test_display_engine_timeouts_are_a_warning_counted() -> None:
    """ogkm#484 (dmesg, 5 'Idling display engine timed out'), #419 (journal, 2), PR#1252
    (indented, one 'Error while waiting for GPU progress'; its 'Failed to query display engine
    channel state' and 'Lost display notification' lines are not timeouts)."""
    counts = {}
    for prefix in ("06", "07", "08"):
        _, findings = _heldout8(prefix)
        [finding] = findings
        assert finding.code == "display-engine-hang" and finding.severity is Severity.WARNING
        assert finding.device is None and finding.action is None
        assert finding.remedy == CODES["display-engine-hang"].remedy
        counts[prefix] = finding.count
    assert counts == {"06": 5, "07": 2, "08": 1}


def test_no_gsp_or_display_finding_without_their_messages() -> None:
    """Every other excerpt of the set -- Xid 45/74/154 and the _kgspLogXid119 banner, Xid
    109/62/45, Xid 32, RmInitAdapter in a VM, Xid 79, the healthy 595 boot, the amdgpu, i915
    and nouveau look-alikes -- gives neither code."""
    others = sorted({p.name[:2] for p in HELDOUT8.glob("*.log")} - {"04", "05", "06", "07", "08"})
    assert len(others) == 10
    for prefix in others:
        _, findings = _heldout8(prefix)
        assert not [f for f in findings if f.code in NEW_CODES], prefix
    for prefix in ("09", "11", "12", "13", "15"):  # healthy or not NVIDIA's: nothing at all
        assert _heldout8(prefix)[1] == ()


_KINDS = st.sampled_from(["gsp-crash", "display-engine-timeout", "api-mismatch", "driver-loaded"])


@settings(max_examples=80, deadline=None)
@given(
    other=st.lists(st.tuples(_KINDS, st.integers(0, 5)), max_size=6),
    xid=st.sampled_from([None, 79, 119, 120]),
)
def test_one_finding_a_code_and_a_gsp_crash_is_critical_only_without_its_xid(
    other: list[tuple[str, int]], xid: int | None
) -> None:
    [path] = HELDOUT8.glob("04__*.log")
    groups = scan_kernel_log(path.read_text(encoding="utf-8")).groups
    made = (replace(groups[0], xid=xid),) if xid is not None else ()
    findings = driver_message_findings(KernelLogReport(made, other=tuple(other)), source="x")
    codes = [f.code for f in findings]
    assert len(codes) == len(set(codes))
    for code, kind in (("gsp-firmware-crash", "gsp-crash"), ("display-engine-hang", "display")):
        said = sum(n for k, n in other if k.startswith(kind))
        assert [f.count for f in findings if f.code == code] == ([said] if said else [])
    crash = _of(findings, "gsp-firmware-crash")
    tied = xid in (119, 120)
    assert all(f.severity is (Severity.INFO if tied else Severity.CRITICAL) for f in crash)


def test_a_task_watchdog_report_is_a_timeout_not_a_crash() -> None:
    # kgspHealthCheck prints a watchdog's CrashCat report under its own banner and leaves GSP-RM
    # healthy (no GspFirmwareFault): counted as its own kind, no finding
    text = (
        "[  812.000001] NVRM: GPU0 kgspHealthCheck_TU102: ****************************"
        "*** LibOS Task Watchdog Report ***************************\n"
    )
    report = scan_kernel_log(text)
    assert dict(report.other).get("gsp-watchdog") == 1
    assert "gsp-crash" not in dict(report.other)
    assert driver_message_findings(report, source="k.log") == ()


def test_a_reset_the_driver_requires_is_a_recovery_action_without_an_xid_154() -> None:
    # sichek#51 (xid_heldout3 row 20): 'Assertion failed: Reset required [NV_ERR_RESET_REQUIRED]'
    log = next((DATA.parent / "xid_heldout3").glob("20__*.log")).read_text()
    [found] = [
        f
        for f in driver_message_findings(scan_kernel_log(log), source="k.log")
        if f.code == "recovery-action-pending"
    ]
    assert (found.severity, found.confidence) == (Severity.CRITICAL, Confidence.MEDIUM)
    assert "reset" in found.title and found.count == 1
    # an Xid 154 of the same log already says the recovery action: no second finding
    xid154 = (
        "[Sun Jan 11 09:52:02 2026] NVRM: Xid (PCI:0000:1b:00): 154, GPU recovery action "
        "changed from 0x0 (None) to 0x1 (GPU Reset Required)\n"
    )
    report = scan_kernel_log(log + xid154)
    assert not [
        f
        for f in driver_message_findings(report, source="k.log")
        if f.code == "recovery-action-pending"
    ]
