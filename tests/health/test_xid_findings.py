"""Findings from Xid groups (``xid``, ``gpu-lost``, ``rma-candidate``) on the real captures, and
Xid events from NVML / dcgm-exporter classified like kernel-log lines."""

from __future__ import annotations

import csv
from pathlib import Path

from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import groups_from_events, xid_findings
from gpuwarden.health.xid_groups import ESCALATE_APPLICATION, ESCALATE_SUPPORT, escalation_bucket
from gpuwarden.types.health import Confidence, KernelLogReport, Severity
from gpuwarden.types.telemetry import DeviceEvent, DeviceInfo, EventKind

UUID_9B = "GPU-509665ad-b600-ac93-3616-d754b23d636d"
XID_119 = (
    "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting "
    "for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."
)


def _tsv_log(fixtures: Path) -> str:
    with (fixtures / "xid" / "xid_lines_from_issues.tsv").open(newline="") as f:
        return "\n".join(row["log_line"] for row in csv.DictReader(f, delimiter="\t"))


def test_gpud_xid_119(fixtures: Path) -> None:
    report = scan_kernel_log((fixtures / "xid" / "gpud__dmesg-with-xid-119.log").read_text())
    (finding,) = xid_findings(report, source="kernel-log:dmesg")
    assert (finding.code, finding.severity, finding.action) == (
        "xid",
        Severity.CRITICAL,
        "RESET_GPU",
    )
    assert finding.device is not None
    assert (finding.device.pci_bus_id, finding.device.uuid) == ("0000:9b:00.0", UUID_9B)
    assert finding.count == 5
    assert finding.first_seen_s == report.groups[0].first_seen_s
    assert finding.confidence is Confidence.HIGH
    assert "GSP_RPC_TIMEOUT" in finding.title
    assert finding.cause.startswith("GPU System Processor did not answer")
    assert finding.remedy.startswith("reset GPU")
    evidence = {e.field: e for e in finding.evidence}
    assert evidence["xid"].value == 119
    assert evidence["xid"].source == "kernel-log:dmesg"
    assert str(evidence["line"].value).startswith("[Sun Feb 23 16:24:18 2025] NVRM: Xid")
    assert evidence["first_seen_s"].value == report.groups[0].first_seen_s


def test_gpud_xid_13_burst_and_43(fixtures: Path) -> None:
    path = fixtures / "xid" / "gpud__dmesg-decode-iso-xid13-43.log"
    findings = xid_findings(scan_kernel_log(path.read_text()), source="kernel-log")
    assert [(f.code, f.severity, f.count) for f in findings] == [
        ("xid", Severity.WARNING, 16),
        ("xid", Severity.INFO, 1),
    ]
    assert findings[0].action == "RESTART_APP"


def test_gpus_lost_with_and_without_an_xid(fixtures: Path) -> None:
    findings = xid_findings(scan_kernel_log(_tsv_log(fixtures)), source="kernel-log")
    lost = {f.device.pci_bus_id: f for f in findings if f.code == "gpu-lost" and f.device}
    assert set(lost) == {"0000:44:00.0", "0000:b3:00.0", "0000:01:00.0"}
    assert all(f.severity is Severity.CRITICAL for f in lost.values())
    assert lost["0000:44:00.0"].action == "RESTART_BM"
    assert "no Xid printed" in lost["0000:b3:00.0"].title
    assert lost["0000:01:00.0"].count == 2
    assert findings[0].severity is Severity.CRITICAL  # most severe first


def test_xid_79_and_its_message_make_one_finding() -> None:
    text = "\n".join(
        [
            "[  49.261400] NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.",
            "[  49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
        ]
    )
    report = scan_kernel_log(text)
    assert len(report.groups) == len(report.fallen_off_bus) == 1
    (finding,) = xid_findings(report, source="dmesg")
    assert (finding.code, finding.count) == ("gpu-lost", 2)


def test_rma_candidate() -> None:
    lines = [f"[{100 + hour * 3600:12.6f}] {XID_119}" for hour in range(5)]
    findings = xid_findings(scan_kernel_log("\n".join(lines)), source="dmesg")
    codes = [f.code for f in findings]
    assert codes == ["xid", "rma-candidate"]
    rma = findings[1]
    assert (rma.severity, rma.action, rma.confidence) == (
        Severity.CRITICAL,
        ESCALATE_SUPPORT,
        Confidence.HIGH,
    )
    assert "5 separate incidents" in rma.cause
    assert findings[0].remedy.startswith("fatal Xid 119 in 5 separate incidents")
    untimed = xid_findings(scan_kernel_log("\n".join([XID_119] * 5)), source="paste")
    assert untimed[1].code == "rma-candidate"
    assert untimed[1].confidence is Confidence.LOW


def test_unknown_xid_is_a_warning_never_dropped() -> None:
    line = "[ 10.000000] NVRM: Xid (PCI:0000:3b:00): 201, pid=1, name=x, something new"
    (finding,) = xid_findings(scan_kernel_log(line), source="dmesg")
    assert (finding.code, finding.severity, finding.confidence) == (
        "xid",
        Severity.WARNING,
        Confidence.LOW,
    )
    assert "not in NVIDIA's Xid catalog" in finding.title
    assert "not in NVIDIA's Xid catalog" in finding.cause


def test_nvlink5_decoded_and_undecoded() -> None:
    # NVIDIA's documented NVLink5 format (see test_xid_decode.py)
    decoded = (
        "NVRM: Xid (PCI:0000:dc:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 "
        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"
    )
    undecoded = decoded.replace("0x025001c6", "0x000003ff").replace("149,", "144,")
    by_xid = {
        f.title.split()[1]: f
        for f in xid_findings(scan_kernel_log(decoded + "\n" + undecoded), source="x")
    }
    assert (by_xid["149"].severity, by_xid["149"].action) == (Severity.CRITICAL, "RESET_GPU")
    assert by_xid["149"].remedy.startswith("RESET_GPU: drain the GPU")
    assert by_xid["149"].confidence is Confidence.HIGH
    assert (by_xid["144"].severity, by_xid["144"].confidence) == (
        Severity.WARNING,
        Confidence.MEDIUM,
    )


def test_a_healthy_log_gives_nothing_above_info(fixtures: Path) -> None:
    # the ordinary kernel lines of the gpud captures (call traces, OOM killer, clocksource)
    noise = "\n".join(
        line
        for name in ("gpud__dmesg-with-xid-119.log", "gpud__dmesg-decode-iso-xid13-43.log")
        for line in (fixtures / "xid" / name).read_text().splitlines()
        if "NVRM" not in line
    )
    assert xid_findings(scan_kernel_log(noise), source="dmesg") == ()
    sympathetic = (
        "[ 1.0] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008"
    )
    findings = xid_findings(scan_kernel_log(noise + "\n" + sympathetic), source="dmesg")
    assert [f.severity for f in findings] == [Severity.INFO]
    assert xid_findings(KernelLogReport(groups=()), source="dmesg") == ()


def _xid_event(hour: float, code: int, uuid: str | None, index: int | None = 0) -> DeviceEvent:
    return DeviceEvent(
        kind=EventKind.XID,
        timestamp_s=1_740_000_000.0 + hour * 3600,
        uuid=uuid,
        index=index,
        code=code,
        message=f"Xid {code}",
    )


def test_events_are_classified_like_lines() -> None:
    device = DeviceInfo(
        index=4, uuid=UUID_9B, name="NVIDIA H100 80GB HBM3", pci_bus_id="00000000:9B:00.0"
    )
    events = [_xid_event(h, 119, UUID_9B) for h in (0, 3, 6, 9, 12)]
    events.append(DeviceEvent(kind=EventKind.GPU_LOST, timestamp_s=0.0, uuid=UUID_9B, index=4))
    (group,) = groups_from_events(reversed(events), devices=[device])
    assert (group.xid, group.count, group.uuid, group.pci_bus_id) == (
        119,
        5,
        UUID_9B,
        "0000:9b:00.0",
    )
    assert (group.first_line, group.last_line) == (1, 5)
    assert group.lines == ()
    assert group.first_seen_s == 1_740_000_000.0
    assert group.severity is Severity.CRITICAL
    assert escalation_bucket(group) == ESCALATE_SUPPORT
    codes = [f.code for f in xid_findings(KernelLogReport(groups=(group,)), source="nvml")]
    assert codes == ["xid", "rma-candidate"]


def test_events_without_uuid_use_the_index() -> None:
    device = DeviceInfo(index=2, uuid="GPU-2", name="A100", pci_bus_id="00000000:3B:00.0")
    events = [_xid_event(0, 13, None, index=2), _xid_event(1, 13, "GPU-7", index=7)]
    groups = groups_from_events(events, devices=[device])
    assert {(g.uuid, g.pci_bus_id) for g in groups} == {("GPU-2", "0000:3b:00.0"), ("GPU-7", None)}
    assert all(escalation_bucket(g) == ESCALATE_APPLICATION for g in groups)  # 13 on two GPUs
