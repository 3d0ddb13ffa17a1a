"""Kernel crash reports in an NVIDIA module (tests/data/driver_crash, sampled as they come from
NVIDIA's repositories' threads; and set 13's oopses): the scanner's crash reader finds the report's
RIP line in nvidia / nvidia_uvm / nvidia_modeset / ..., looks above it for the report's header
(an oops, a fault, a lockup: high; none in the log: medium; a WARN(): no crash) and below it for
the top frames when the RIP is in a kernel helper; driver_messages turns it into one critical
``driver-crashed`` finding with the RIP line as its evidence. A crash in another module with
nvidia merely loaded, a trace without its header and a WARN() are no crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import (
    KernelLogScanner,
    scan_kernel_log,
)
from gpuwarden.health.rules.codes import CODES
from gpuwarden.types.health import Confidence, Finding, KernelLogReport, Severity

DATA = Path(__file__).resolve().parents[1] / "data"
SET = DATA / "driver_crash"
ROWS: list[dict[str, Any]] = json.loads((SET / "expected.json").read_text())


def _path(row: dict[str, Any]) -> Path:
    [path] = SET.glob(f"{row['prefix']}__*.log")
    return path


def _crashes(report: KernelLogReport) -> list[Finding]:
    return [f for f in driver_message_findings(report, source="t") if f.code == "driver-crashed"]


def _ids() -> list[str]:
    return [_path(row).stem for row in ROWS]


def test_the_set_names_its_sources() -> None:
    sources = (SET / "SOURCES.md").read_text()
    assert 5 <= len(ROWS) <= 12
    for row in ROWS:
        assert _path(row).name in sources and row["source"] in sources
    assert sum(not row["crash"] for row in ROWS) >= 3  # sampled: excerpts without one came too


@pytest.mark.parametrize("row", ROWS, ids=_ids())
def test_the_crash_is_read_where_the_rip_says(row: dict[str, Any]) -> None:
    """The finding's confidence, module and place are the row's; none where the row has none
    (a bare trace, '? ' frames, a WARN(), a lockup cut before its RIP)."""
    report = scan_kernel_log(_path(row).read_text())
    assert sorted({g.xid for g in report.groups}) == sorted(row["xids"])
    findings = _crashes(report)
    if row["where"] is None:  # no crash, or one the excerpt cannot show (10)
        assert findings == []
        return
    [finding] = findings
    assert (finding.severity, finding.confidence.value) == (Severity.CRITICAL, row["confidence"])
    assert finding.title == (
        f"the kernel caught a crash in the NVIDIA module {row['module']} (RIP {row['where']})"
    )
    [evidence] = finding.evidence
    assert evidence.field == "kernel-log"
    assert str(evidence.value).startswith(f"RIP: 0010:{row['where']} [{row['module']}")
    assert evidence.value in _path(row).read_text()  # the RIP line as the log prints it


def _doctor_params() -> list[Any]:
    return [
        pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["doctor_xfail"]))
        if row["doctor_xfail"]
        else row
        for row in ROWS
    ]


@pytest.mark.parametrize("row", _doctor_params(), ids=_ids())
def test_doctor_gives_the_codes(row: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--from", str(_path(row)), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert {f["code"] for f in findings} == set(row["doctor_codes"])
    worst = {f["severity"] for f in findings}
    assert (max(worst, key=["info", "warning", "critical"].index) if worst else None) == (
        row["worst_severity"]
    )


@pytest.mark.parametrize("row", ROWS, ids=_ids())
@pytest.mark.parametrize("size", [1, 7, 64, 300])
def test_an_excerpt_fed_in_chunks_reads_as_it_does_whole(row: dict[str, Any], size: int) -> None:
    """The header above a RIP line may sit in an earlier chunk, the frames below it in a later
    one: the reader keeps the last lines and the frames still to read."""
    text = _path(row).read_text()
    scanner = KernelLogScanner()
    for at in range(0, len(text), size):
        scanner.feed(text[at : at + size])
    assert scanner.finish() == scan_kernel_log(text)


# Lines of real reports (the rows above, set 13, #916's WARN header) put together as the kernel
# prints a report, for what no sample here shows alone.
WARN_HEADER = "WARNING: CPU: 28 PID: 6705 at nvidia/nv.c:5039 nvidia_dev_put+0xb1/0xc0 [nvidia]\n"
OOPS_HEAD = (
    "[ 395.350871] BUG: unable to handle kernel NULL pointer dereference at 00000000000000b1\n"
    "[ 395.351068] Oops: 0000 [#1] SMP NOPTI\n"
    "[ 395.351153] CPU: 33 PID: 4564 Comm: sbatchd Kdump: loaded Tainted: P OE\n"
)
RIP_NVIDIA = "[ 395.351681] RIP: 0010:_nv031695rm+0x79/0x940 [nvidia]\n"
RIP_KERNEL = "[ 395.351681] RIP: 0010:native_queued_spin_lock_slowpath+0x6e/0x220\n"
REGISTERS = "[ 395.351908] RSP: 0018:ffff9bc6dd237950 EFLAGS: 00010202\n[ 395.35] Call Trace:\n"
FRAME_NVIDIA = "[ 395.36]  os_acquire_spinlock+0x12/0x20 [nvidia]\n"
FRAME_UNSURE = "[ 395.36]  ? os_acquire_spinlock+0x12/0x20 [nvidia]\n"
FRAME_KERNEL = "[ 395.36]  _raw_spin_lock_irqsave+0x3e/0x50\n"


def test_a_warn_in_the_driver_is_no_crash() -> None:
    """WARN() prints the same registers under 'WARNING: CPU: ...': the kernel goes on; an RCU
    stall's or sysrq's backtrace of every CPU shows where each was, the driver included."""
    assert _crashes(scan_kernel_log(WARN_HEADER + RIP_NVIDIA + REGISTERS)) == []
    nmi = "[ 395.3] NMI backtrace for cpu 33\n" + OOPS_HEAD.splitlines(True)[2]
    assert _crashes(scan_kernel_log(nmi + RIP_NVIDIA + REGISTERS)) == []
    # the same registers under a crash's header are one
    [crash] = _crashes(scan_kernel_log(OOPS_HEAD + RIP_NVIDIA + REGISTERS))
    assert crash.confidence == Confidence.HIGH


def test_a_crash_in_a_kernel_helper_under_the_driver_reads_its_top_frame() -> None:
    """A lock or copy helper the driver called faulted (or spun): the first frames the unwinder
    took name the module: medium, the frame in the evidence. '? ' frames are no frames, and a
    frame below the top ones is not where the CPU was."""
    report = scan_kernel_log(OOPS_HEAD + RIP_KERNEL + REGISTERS + FRAME_KERNEL + FRAME_NVIDIA)
    [finding] = _crashes(report)
    assert finding.confidence == Confidence.MEDIUM
    assert "top frame os_acquire_spinlock+0x12/0x20" in finding.title
    assert finding.evidence[0].detail == "top frame os_acquire_spinlock+0x12/0x20 [nvidia]"
    assert _crashes(scan_kernel_log(OOPS_HEAD + RIP_KERNEL + REGISTERS + FRAME_UNSURE)) == []
    deep = OOPS_HEAD + RIP_KERNEL + REGISTERS + FRAME_KERNEL * 4 + FRAME_NVIDIA
    assert _crashes(scan_kernel_log(deep)) == []


def test_one_report_counts_once_and_two_count_twice() -> None:
    """x86 prints the registers again after '---[ end trace ]---': one crash. A second oops
    (its own header) is a second."""
    again = "[ 395.4] ---[ end trace 0000000000000000 ]---\n" + RIP_NVIDIA
    [once] = _crashes(scan_kernel_log(OOPS_HEAD + RIP_NVIDIA + REGISTERS + again))
    assert once.count == 1 and once.confidence == Confidence.HIGH
    [twice] = _crashes(scan_kernel_log((OOPS_HEAD + RIP_NVIDIA + REGISTERS) * 2))
    assert twice.count == 2 and twice.title.endswith("×2 crash reports)")


@pytest.mark.parametrize(
    "path",
    [
        # amdgpu's oops on a host whose log also holds NVRM notices
        "xid_heldout4/08__rocm-hip-15__syslog-uptime-vga-console-notice-amdgpu-oops.log",
        # a kernel BUG in list_debug (RIP in the core kernel) on a laptop with the NVIDIA driver
        "xid_forum/04__ask-fedora-15757__journal-cyrillic-month-kernel-bug.log",
        # a soft lockup's module list naming nvidia(POE)
        "xid_heldout13/04__tensorflow-60900__syslog-soft-lockup-modules-linked-in-nvidia-wrapped"
        "-vmware.log",
    ],
)
def test_a_crash_elsewhere_with_nvidia_loaded_is_no_driver_crash(path: str) -> None:
    assert _crashes(scan_kernel_log((DATA / path).read_text())) == []


@pytest.mark.parametrize(("prefix", "confidence"), [("02", "medium"), ("03", "high")])
def test_set_13s_oopses_are_driver_crashes(prefix: str, confidence: str) -> None:
    [path] = (DATA / "xid_heldout13").glob(f"{prefix}__*.log")
    [finding] = _crashes(scan_kernel_log(path.read_text()))
    assert finding.confidence.value == confidence


def test_the_code_is_declared_critical_with_its_remedy() -> None:
    info = CODES["driver-crashed"]
    assert info.severity == Severity.CRITICAL
    assert "reboot" in info.remedy and "nvidia-bug-report" in info.remedy
    assert "kernel" in info.remedy  # the running kernel vs the driver's supported ones


TEXTS = [_path(row).read_text() for row in ROWS]


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(st.sampled_from([line for t in TEXTS for line in t.splitlines(True)])),
    size=st.integers(min_value=1, max_value=90),
)
def test_any_mix_of_report_lines_reads_alike_in_chunks(pieces: list[str], size: int) -> None:
    """Report lines in any order (headers, RIPs, frames, WARNs, end markers): never an error,
    at most one crash per RIP line, and the same report fed in chunks."""
    text = "".join(pieces)
    report = scan_kernel_log(text)
    crashes = sum(crash.count for crash in report.driver_crashes)
    assert crashes <= text.count("RIP: ")
    scanner = KernelLogScanner()
    for at in range(0, len(text), size):
        scanner.feed(text[at : at + size])
    assert scanner.finish() == report


def test_a_megabyte_of_crash_reports_stays_bounded() -> None:
    """Hostile input: thousands of distinct crash places, and a long line above each RIP: the
    kinds kept are bounded and the look-arounds stay linear."""
    reports = "".join(
        OOPS_HEAD + "x" * 200 + f"\n[ 1.0] RIP: 0010:_nv{i:06d}rm+0x1/0x2 [nvidia]\n"
        for i in range(4000)
    )
    report = scan_kernel_log(reports)
    assert len(report.driver_crashes) == 64  # _MAX_CRASH_KINDS: the first places, each counted
    [finding] = _crashes(report)
    assert len(finding.evidence) == 8 and finding.count == 64


# What doctor takes a bare call trace for: the x86 unwinder's " <TASK>" line once the paste's
# "Call Trace:" label and one-space indent are taken off starts with "<", but no nvidia-smi XML
# document opens so (row 01 was read as XML: exit 2, "XML is not well-formed").
TRACE_LINES = " nvidia_close+0x1a2/0x270 [nvidia]\n __fput+0xea/0x2d0\n"
SMI_XML = (DATA / "smi_xml_public" / "telegraf__gtx-1660-ti__418.43.xml").read_text()


@pytest.mark.parametrize(
    "trace",
    [
        "Call Trace:\n <TASK>\n" + TRACE_LINES + " </TASK>\n",  # x86 since 5.15 (row 01)
        "Call Trace:\n" + TRACE_LINES,  # before the <TASK> markers
        "Call trace:\n" + TRACE_LINES,  # arm64's dump_backtrace
        "  Call Trace:\n   <IRQ>\n" + TRACE_LINES,  # quoted with an indent
    ],
)
def test_a_bare_call_trace_is_a_kernel_log(trace: str) -> None:
    assert classify(trace) is CaptureKind.KERNEL_LOG


@pytest.mark.parametrize(
    "xml",
    [
        SMI_XML,
        SMI_XML.split("\n", 1)[1],  # the declaration cut: the root opens it
        "user@host:~$ nvidia-smi -q -x\n" + SMI_XML,
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        + SMI_XML.split("\n", 1)[1],
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n' + SMI_XML.split("\n", 1)[1],
    ],
)
def test_nvidia_smi_xml_is_still_read_as_nvidia_smi(xml: str) -> None:
    assert classify(xml) is CaptureKind.NVIDIA_SMI


def test_other_text_that_opens_with_a_tag_is_not_nvidia_smi_xml() -> None:
    """Not a document the XML reader takes (its root must be <nvidia_smi_log>): no capture."""
    assert classify("<TASK>\n" + TRACE_LINES) is None
    assert classify("<html><body>hello</body></html>\n") is None
