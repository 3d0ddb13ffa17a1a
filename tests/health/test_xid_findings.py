"""Findings from Xid groups (``xid``, ``gpu-lost``, ``rma-candidate``, the Xid 63/64 memory-repair
codes) on the real captures, and Xid events from NVML / dcgm-exporter classified like kernel-log
lines."""

from __future__ import annotations

import csv
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog.xid import PAGE_RETIREMENT, ROW_REMAPPING, memory_repair_of_architecture
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import groups_from_events, xid_findings
from gpuwarden.health.xid_decode import memory_repair_named
from gpuwarden.health.xid_groups import ESCALATE_APPLICATION, ESCALATE_SUPPORT, escalation_bucket
from gpuwarden.types.health import Confidence, Finding, KernelLogReport, Severity
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


# --- Xid 63/64: the memory repair they record (h25b) -------------------------------------------

DATA = Path(__file__).resolve().parents[1] / "data"


def _excerpt(folder: str, prefix: str) -> str:
    (path,) = (DATA / folder).glob(f"{prefix}__*.log")
    return path.read_text(encoding="utf-8")


def _by_code(findings: tuple[Finding, ...]) -> dict[str, Finding]:
    return {f.code: f for f in findings}


def test_row_remapper_message_is_a_pending_row_remap() -> None:
    """stas00/ml-engineering's Xid 63 line (xid_heldout4 #11): the message names the Row
    Remapper, so the row remap waits for a reset; the info ``xid`` finding stays."""
    report = scan_kernel_log(_excerpt("xid_heldout4", "11"))
    findings = xid_findings(report, source="kernel-log")
    assert [(f.code, f.severity) for f in findings] == [
        ("row-remap-pending", Severity.WARNING),
        ("xid", Severity.INFO),
    ]
    pending = findings[0]
    assert pending.confidence is Confidence.HIGH
    assert (pending.count, pending.action) == (1, "RESET_GPU")
    assert pending.device is not None and pending.device.pci_bus_id == "0000:10:1c.0"
    evidence = {e.field: e.value for e in pending.evidence}
    assert evidence["xid"] == 63
    assert evidence["memory_repair"] == "row remapping"
    assert str(evidence["line"]).startswith(
        "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper"
    )
    assert "names the row remapping" in pending.cause


def test_dynamic_page_retirement_message_is_a_pending_retirement() -> None:
    """nvidia-docker#849 (xid_public #37, driver 390, dmesg -T): a DBE (Xid 48) then Xid 63
    "Dynamic Page Retirement: New page retired, reboot to activate": pre-Ampere, a page waits
    for retirement; dated like its line."""
    report = scan_kernel_log(_excerpt("xid_public", "37"), year=2018)
    found = _by_code(xid_findings(report, source="kernel-log"))
    assert set(found) == {"xid", "retired-pages-pending"}
    pending = found["retired-pages-pending"]
    (xid63,) = (g for g in report.groups if g.xid == 63)
    assert (pending.severity, pending.confidence) == (Severity.WARNING, Confidence.HIGH)
    assert pending.first_seen_s is not None and pending.first_seen_s == xid63.first_seen_s
    assert pending.device is not None and pending.device.pci_bus_id == "0000:8a:00.0"
    assert dict(xid63.decoded) == {"memory_repair": "page retirement"}
    assert "Dynamic Page Retirement" in str({e.field: e.value for e in pending.evidence}["line"])


# The #11 line cut before its message (a log that keeps only the header, or an NVML event):
# the words no longer decide, the GPU's architecture does when known.
HEADER_63 = "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896"
HEADER_64 = "NVRM: Xid (PCI:0000:10:1c): 64, pid=1896"


def _gpu(architecture: str | None) -> DeviceInfo:
    return DeviceInfo(0, "GPU-x", "GPU", pci_bus_id="00000000:10:1C.0", architecture=architecture)


def _repair_codes(text: str, architecture: str | None) -> list[tuple[str, Severity, Confidence]]:
    findings = xid_findings(scan_kernel_log(text), source="k", devices=[_gpu(architecture)])
    return [(f.code, f.severity, f.confidence) for f in findings if f.code != "xid"]


def test_without_the_message_the_architecture_decides() -> None:
    text = f"{HEADER_63}\n{HEADER_64}"
    assert _repair_codes(text, "Volta") == [
        ("retired-pages-limit", Severity.CRITICAL, Confidence.HIGH),
        ("retired-pages-pending", Severity.WARNING, Confidence.HIGH),
    ]
    assert _repair_codes(text, "Hopper") == [
        ("row-remap-failure", Severity.CRITICAL, Confidence.HIGH),
        ("row-remap-pending", Severity.WARNING, Confidence.HIGH),
    ]


def test_without_message_nor_architecture_both_are_named_at_medium_confidence() -> None:
    findings = xid_findings(scan_kernel_log(f"{HEADER_63}\n{HEADER_64}"), source="k")
    found = _by_code(findings)
    failure, pending = found["row-remap-failure"], found["row-remap-pending"]
    assert (failure.severity, failure.confidence) == (Severity.CRITICAL, Confidence.MEDIUM)
    assert (pending.severity, pending.confidence) == (Severity.WARNING, Confidence.MEDIUM)
    assert "retired-pages-limit" in failure.cause and "ROW_REMAPPER" in failure.cause
    assert "retired-pages-pending" in pending.cause
    assert [f.code for f in findings].count("xid") == 2


def test_the_message_outranks_the_architecture() -> None:
    """A message that names the repair is the driver's own word; the device list may be stale."""
    line = _excerpt("xid_heldout4", "11")
    assert _repair_codes(line, "Volta") == [
        ("row-remap-pending", Severity.WARNING, Confidence.HIGH)
    ]


def test_an_nvml_xid_63_event_is_judged_by_the_gpus_architecture() -> None:
    info = DeviceInfo(1, "GPU-h", "H100", pci_bus_id="00000000:8A:00.0", architecture="Hopper")
    events = [DeviceEvent(EventKind.XID, 5.0, uuid="GPU-h", index=1, code=63)]
    groups = groups_from_events(events, devices=[info])
    found = _by_code(xid_findings(KernelLogReport(groups=groups), source="nvml", devices=[info]))
    assert found["row-remap-pending"].confidence is Confidence.HIGH
    assert found["row-remap-pending"].first_seen_s == 5.0
    assert found["xid"].severity is Severity.INFO


def test_the_memory_repair_words() -> None:
    assert memory_repair_named(" Row Remapper: New row marked for remapping") == ROW_REMAPPING
    assert memory_repair_named("Dynamic Page Retirement: New page retired") == PAGE_RETIREMENT
    assert memory_repair_named("unable to retire page (0x3fdf5e)") == PAGE_RETIREMENT
    assert memory_repair_named("pid=1896") is None
    assert memory_repair_named("row remap and page retirement") is None  # both: undecided
    assert memory_repair_of_architecture("Ada Lovelace") == ROW_REMAPPING
    assert memory_repair_of_architecture("Blackwell (RTX)") == ROW_REMAPPING
    assert memory_repair_of_architecture("Turing") == PAGE_RETIREMENT
    assert memory_repair_of_architecture("") is None
    assert memory_repair_of_architecture("Unknown") is None


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200), st.sampled_from([63, 64]))
def test_any_xid_63_64_message_gives_one_memory_finding(message: str, xid: int) -> None:
    line = f"NVRM: Xid (PCI:0000:10:1c): {xid}, {message}".replace("\n", " ").replace("\r", " ")
    findings = xid_findings(scan_kernel_log(line), source="k")
    codes = [f.code for f in findings if f.code != "xid"]
    assert len(codes) <= 1  # an unreadable line is no Xid; a read one gives exactly one
    assert len(codes) == len([f for f in findings if f.code == "xid"])


def test_an_architecture_the_table_does_not_know_falls_back_to_the_catalog() -> None:
    """NVML reports "Unknown" for an architecture newer than the library: the GPU's name says."""
    info = DeviceInfo(
        1, "GPU-h", "NVIDIA H100 80GB HBM3", pci_bus_id="00000000:8A:00.0", architecture="Unknown"
    )
    events = [DeviceEvent(EventKind.XID, 5.0, uuid="GPU-h", index=1, code=63)]
    groups = groups_from_events(events, devices=[info])
    found = _by_code(xid_findings(KernelLogReport(groups=groups), source="nvml", devices=[info]))
    assert found["row-remap-pending"].confidence is Confidence.HIGH
    (arch,) = [e for e in found["row-remap-pending"].evidence if e.field == "architecture"]
    assert arch.value == "Hopper" and arch.source.startswith("catalog")
