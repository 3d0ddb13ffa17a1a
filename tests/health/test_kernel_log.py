"""The kernel-log scanner on the real captures of shared/fixtures/xid, and on every prefix format
(a real fixture line's message under each kernel-log prefix a tool prints)."""

from __future__ import annotations

import csv
import random
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from gpuwarden.catalog.pci_bus import normalize_pci_bus_id
from gpuwarden.health.kernel_log import KernelLogScanner, parse_xid_line, scan_kernel_log
from gpuwarden.health.xid_groups import MAX_LINES_PER_GROUP
from gpuwarden.types.health import KernelLogReport, Severity, XidGroup

UUID_9B = "GPU-509665ad-b600-ac93-3616-d754b23d636d"
# the Xid 13 line of gpud PR 46 (shared/fixtures/xid/xid_lines_from_issues.tsv), without prefix
XID_13 = (
    "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
    "Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
)


def _tsv(fixtures: Path) -> list[dict[str, str]]:
    with (fixtures / "xid" / "xid_lines_from_issues.tsv").open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _all(report: KernelLogReport) -> tuple[XidGroup, ...]:
    return report.groups + report.fallen_off_bus


def _unix(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _pci_in(line: str) -> str | None:
    """The PCI id a line states, read independently of the scanner."""
    found = re.search(r"PCI:([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2})\)", line)
    if found:
        return found[1] + ".0"
    found = re.search(r"GPU at ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])", line)
    return found[1] if found else None


# --- the real captures ---------------------------------------------------------------------


def test_every_tsv_line_alone(fixtures: Path) -> None:
    """Each issue line scanned by itself: an Xid row gives that Xid (and its PCI id when the
    line names one); a context row gives none."""
    for row in _tsv(fixtures):
        report = scan_kernel_log(row["log_line"])
        groups = _all(report)
        if not row["xid"]:
            assert groups == (), row["log_line"]
            assert report.unparsed_xid_lines == 0
            continue
        assert [g.xid for g in groups] == [int(row["xid"])], row["log_line"]
        expected_pci = _pci_in(row["log_line"])
        if expected_pci is not None:
            assert groups[0].pci_bus_id == expected_pci, row["log_line"]


def test_the_tsv_as_one_log(fixtures: Path) -> None:
    rows = _tsv(fixtures)
    report = scan_kernel_log("\n".join(row["log_line"] for row in rows))
    assert report.lines_scanned == len(rows)
    assert report.unparsed_xid_lines == 0
    for number, row in enumerate(rows, 1):
        if row["xid"]:
            covering = [g for g in _all(report) if g.first_line <= number <= g.last_line]
            assert int(row["xid"]) in {g.xid for g in covering}, row["log_line"]
    assert report.xid_lines == sum(1 for row in rows if row["xid"] and "Xid" in row["log_line"])
    # the "GPU at PCI:..: GPU-<uuid>" lines name the GPUs of the Xids after them
    by_xid = {g.xid: g for g in report.groups}
    assert by_xid[43].uuid == "GPU-efbdfde9-5798-a6e7-4c46-12518fa15375"
    assert by_xid[94].uuid == "GPU-c24840ec-8de1-83d5-b126-08000173ae32"
    assert dict(report.bus_to_uuid)["0000:00:07.0"] == "GPU-3b6ec030-5adc-1847-e155-79f635584b4e"
    # the three-line "fallen off the bus" message (NVSentinel #155) has its bus on line 1
    lost = [g for g in report.fallen_off_bus if g.pci_bus_id == "0000:b3:00.0"]
    assert len(lost) == 1
    assert lost[0].xid == 79
    assert lost[0].severity is Severity.CRITICAL
    assert lost[0].first_uptime_s == pytest.approx(1843.308145)
    assert len(lost[0].lines) == 3
    assert "fallen off the bus" in lost[0].lines[-1]
    assert dict(report.other)["probe-failed"] == 1


def test_gpud_dmesg_with_xid_119(fixtures: Path) -> None:
    text = (fixtures / "xid" / "gpud__dmesg-with-xid-119.log").read_text()
    report = scan_kernel_log(text)
    assert report.lines_scanned == 43
    assert report.xid_lines == 5
    assert report.bus_to_uuid == (("0000:9b:00.0", UUID_9B),)
    (group,) = report.groups
    assert (group.xid, group.pci_bus_id, group.uuid) == (119, "0000:9b:00.0", UUID_9B)
    assert (group.count, group.first_line, group.last_line) == (5, 3, 43)
    # dmesg -T prints local time; with no offset given it is read as UTC
    assert group.first_seen_s == _unix("2025-02-23T16:24:18+00:00")
    assert group.last_seen_s == _unix("2025-02-23T16:30:13+00:00")
    assert group.mnemonic == "GSP_RPC_TIMEOUT"
    assert group.action == "RESET_GPU"
    assert group.severity is Severity.CRITICAL
    assert len(group.lines) == 5
    assert group.lines[0].startswith("[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119")
    # three incidents (16:24:18-30, 16:27:12, 16:30:13): not five within 24 h
    assert group.escalation is None
    other = dict(report.other)
    assert other["xid-prints-rate-limited"] == 1  # "printing 1 of every 30": a lower bound
    assert other["gpu-reset-required"] == 1
    shifted = scan_kernel_log(text, tz_offset_s=3600.0)  # the host ran at UTC+1
    assert shifted.groups[0].first_seen_s == _unix("2025-02-23T16:24:18+01:00")


def test_gpud_dmesg_iso_xid_13_burst_and_43(fixtures: Path) -> None:
    text = (fixtures / "xid" / "gpud__dmesg-decode-iso-xid13-43.log").read_text()
    report = scan_kernel_log(text)
    assert report.lines_scanned == 24
    assert report.xid_lines == 17
    xid13, xid43 = report.groups
    assert (xid13.xid, xid13.pci_bus_id, xid13.count) == (13, "0000:38:00.0", 16)
    assert (xid13.first_line, xid13.last_line) == (1, 16)
    assert xid13.first_seen_s == pytest.approx(_unix("2025-01-21T04:41:44.283302+00:00"))
    assert xid13.last_seen_s == pytest.approx(_unix("2025-01-21T04:41:44.285147+00:00"))
    assert xid13.severity is Severity.WARNING
    assert xid13.escalation is None  # one burst on one GPU: the application
    assert (
        "sm_locations",
        "GPC 8 TPC 5 SM 1; GPC 9 TPC 1 SM 1; GPC 9 TPC 2 SM 0; GPC 9 TPC 5 SM 0",
    ) in xid13.decoded
    assert len(xid13.lines) == MAX_LINES_PER_GROUP
    assert (xid43.xid, xid43.count, xid43.first_line) == (43, 1, 17)
    assert xid43.severity is Severity.INFO
    assert report.other == ()  # the OOM-killer lines are not NVRM messages


# --- prefixes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "timestamp", "uptime"),
    [
        ("[ 1234.567890] ", None, 1234.56789),  # dmesg
        ("[Wed Jul 31 23:14:18 2024] ", "2024-07-31T23:14:18+00:00", None),  # dmesg -T
        ("[Mon Aug  5 03:54:13 2024] ", "2024-08-05T03:54:13+00:00", None),
        (
            "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 ",
            "2025-01-21T04:41:44.283302+00:00",
            None,
        ),
        ("kern  :warn  : [ 99.500000] ", None, 99.5),  # dmesg -x
        ("2024-02-15T17:37:45+0000 gpu-node kernel: ", "2024-02-15T17:37:45+00:00", None),
        (
            "2024-02-15T17:37:45.250000+01:00 gpu-node kernel: ",
            "2024-02-15T17:37:45.25+01:00",
            None,
        ),
        ("Thu 2024-02-15 17:37:45 UTC gpu-node kernel: ", "2024-02-15T17:37:45+00:00", None),
        (
            "192.168.11.119: kern: warning: [2026-04-22T21:30:51.870495804Z]: ",
            "2026-04-22T21:30:51.870496+00:00",
            None,
        ),
        ("kernel: ", None, None),  # journalctl -o cat
        ("Feb 15 17:37:45.250000 gpu-node kernel: ", None, None),  # short-precise, no year
        ("[ 4711.123456] gpu-node kernel: ", None, 4711.123456),  # journalctl -o short-monotonic
        ("1708018665.250000 gpu-node kernel: ", "2024-02-15T17:37:45.25+00:00", None),  # short-unix
        ("4,1234,4711123456,-;", None, 4711.123456),  # /dev/kmsg
        ("<4>[ 12.500000] ", None, 12.5),  # dmesg -r
        ("", None, None),
        ("\x1b[32m[ 17.250000]\x1b[0m ", None, 17.25),  # dmesg --color=always
    ],
)
def test_prefix_formats(prefix: str, timestamp: str | None, uptime: float | None) -> None:
    report = scan_kernel_log(prefix + XID_13)
    (group,) = report.groups
    assert (group.xid, group.pci_bus_id) == (13, "0000:cb:00.0")
    if timestamp is None:
        assert group.first_seen_s is None
    else:
        assert group.first_seen_s == pytest.approx(_unix(timestamp), abs=1e-6)
    assert group.first_uptime_s == uptime


def test_syslog_dates_need_the_year() -> None:
    line = "Feb 15 17:37:45 gpu-node kernel: [ 4711.123456] " + XID_13
    without = scan_kernel_log(line).groups[0]
    assert without.first_seen_s is None
    assert without.first_uptime_s == pytest.approx(4711.123456)
    with_year = scan_kernel_log(line, year=2024).groups[0]
    assert with_year.first_seen_s == _unix("2024-02-15T17:37:45+00:00")
    pacific = scan_kernel_log(line, year=2024, tz_offset_s=-8 * 3600.0).groups[0]
    assert pacific.first_seen_s == _unix("2024-02-15T17:37:45-08:00")


def test_syslog_year_rolls_over_in_january() -> None:
    text = "\n".join(
        [
            "Dec 31 23:59:30 gpu-node kernel: " + XID_13,
            "Jan  1 00:00:30 gpu-node kernel: " + XID_13,
        ]
    )
    group = scan_kernel_log(text, year=2024).groups[0]
    assert group.first_seen_s == _unix("2024-12-31T23:59:30+00:00")
    assert group.last_seen_s == _unix("2025-01-01T00:00:30+00:00")


def test_crlf_and_no_trailing_newline() -> None:
    text = "[ 1.000000] " + XID_13 + "\r\n[ 2.000000] " + XID_13
    report = scan_kernel_log(text)
    assert report.lines_scanned == 2
    assert report.groups[0].count == 2
    assert not report.groups[0].lines[0].endswith("\r")
    assert report.groups[0].last_uptime_s == 2.0


# --- GPUs: bus ids and UUIDs ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["0000:3b:00", "00000000:3B:00.0", "3b:00.0", "PCI:0000:3b:00", "3B:00", "0000:3b:00.0"],
)
def test_bus_id_spellings_agree(text: str) -> None:
    assert normalize_pci_bus_id(text) == "0000:3b:00.0"


@pytest.mark.parametrize("text", ["PCI:...", "PCI:0000:xx:00", "", "GPU-509665ad-b600", None])
def test_redacted_bus_ids_are_none(text: str | None) -> None:
    assert normalize_pci_bus_id(text) is None


def test_spellings_of_one_gpu_share_a_group() -> None:
    text = "\n".join(
        [
            "NVRM: GPU at PCI:0000:3b:00: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375",
            "NVRM: Xid (PCI:0000:3b:00): 43, pid=1045242, name=pt_main_thread, Ch 00000008",
            "NVRM: Xid (PCI:0000:3B:00): 43, pid=1045243, name=pt_main_thread, Ch 00000008",
            "NVRM: Xid (0000:3b:00): 43, Channel 00000001",  # the older driver's form
        ]
    )
    (group,) = scan_kernel_log(text).groups
    assert group.count == 3
    assert group.uuid == "GPU-efbdfde9-5798-a6e7-4c46-12518fa15375"


def test_redacted_ids_group_as_unknown_gpu() -> None:
    text = "\n".join(
        [
            "NVRM: Xid (PCI:...): 79, pid=1, name=x, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:xx:00): 79, pid=1, name=x, GPU has fallen off the bus.",
        ]
    )
    (group,) = scan_kernel_log(text).groups
    assert (group.xid, group.pci_bus_id, group.uuid, group.count) == (79, None, None, 2)


def test_uuid_line_after_the_first_xid_still_names_the_gpu() -> None:
    text = "\n".join(
        [
            "[Sun Feb 23 16:24:18 2025] " + XID_13,
            "[Sun Feb 23 16:24:19 2025] NVRM: GPU at PCI:0000:cb:00: " + UUID_9B,
        ]
    )
    assert scan_kernel_log(text).groups[0].uuid == UUID_9B


# --- what is and is not an Xid ---------------------------------------------------------------


def test_unreadable_xids_are_counted_never_raised() -> None:
    text = "\n".join(
        [
            "NVRM: Xid (PCI:0000:3b:00): pid=1, name=x",  # no number
            "NVRM: Xid (PCI:0000:3b",  # cut short
            "an Xid happened somewhere",  # prose that says Xid
            "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32",  # NVSwitch
            "[ 5.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01",
        ]
    )
    report = scan_kernel_log(text)
    assert report.groups == ()
    assert report.unparsed_xid_lines == 3
    assert report.xid_lines == 3
    assert report.other == (("driver-loaded", 1),)


def test_parse_one_line() -> None:
    line = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 13, pid=1234, name=python, Ch 00000008"
    occurrence = parse_xid_line(line)
    assert occurrence is not None
    assert (occurrence.xid, occurrence.pci_bus_id) == (13, "0000:3b:00.0")
    assert (occurrence.pid, occurrence.process) == (1234, "python")
    assert occurrence.uptime_s == pytest.approx(1234.56789)
    assert occurrence.message == "pid=1234, name=python, Ch 00000008"
    unknown = parse_xid_line(XID_13)
    assert unknown is not None
    assert (unknown.pid, unknown.process) == (None, None)
    assert parse_xid_line("[ 1.0] NVRM: GPU at PCI:0000:3b:00: " + UUID_9B) is None


def test_payloads_through_the_scanner(fixtures: Path) -> None:
    rows = _tsv(fixtures)
    text = "\n".join(row["log_line"] for row in rows if row["xid"] in ("45", "154"))
    report = scan_kernel_log(text)
    xid154 = next(g for g in report.groups if g.xid == 154)
    assert ("recovery_action", "reset") in xid154.decoded
    assert xid154.severity is Severity.CRITICAL
    assert xid154.action == "RESET_GPU"
    causes = {g.pci_bus_id: dict(g.decoded)["caused_by"] for g in report.groups if g.xid == 45}
    assert causes == {
        "0000:dc:00.0": "149",
        "0000:ed:00.0": "145",
        "0000:ba:00.0": "145",
        "0000:97:00.0": "145",
    }


# --- size: bursts and chunks -----------------------------------------------------------------


def _iso_burst(fixtures: Path, n_lines: int) -> str:
    """The iso fixture's Xid lines, repeated n times over two GPUs, the clock running on."""
    source = (fixtures / "xid" / "gpud__dmesg-decode-iso-xid13-43.log").read_text()
    bodies = [line.split(" NVRM: ", 1)[1] for line in source.splitlines() if "Xid" in line]
    start = datetime(2025, 1, 21, 4, 41, 44, tzinfo=UTC)
    lines = []
    for i in range(n_lines):
        stamp = (start + timedelta(milliseconds=i)).strftime("%Y-%m-%dT%H:%M:%S,%f+00:00")
        body = bodies[i % len(bodies)]
        if i % 2:
            body = body.replace("PCI:0000:38:00", "PCI:0000:39:00")
        lines.append(f"kern  :warn  : {stamp} NVRM: {body}")
    return "\n".join(lines) + "\n"


def test_a_200k_line_burst_is_a_few_bounded_groups(fixtures: Path) -> None:
    text = _iso_burst(fixtures, 200_000)
    report = scan_kernel_log(text)
    assert report.lines_scanned == 200_000
    assert report.xid_lines == 200_000
    assert {(g.xid, g.pci_bus_id) for g in report.groups} == {
        (13, "0000:38:00.0"),
        (13, "0000:39:00.0"),
        (43, "0000:38:00.0"),
        (43, "0000:39:00.0"),
    }
    assert sum(g.count for g in report.groups) == 200_000
    assert all(len(g.lines) <= MAX_LINES_PER_GROUP for g in report.groups)
    assert all(len(g.decoded) <= 5 for g in report.groups)
    # 200 s of lines 1 ms apart is one incident per group: no escalation from the burst alone,
    # but the same Xid 13 on two GPUs points at the application
    assert all(
        g.escalation and g.escalation.startswith("CHECK_APP/CUDA")
        for g in report.groups
        if g.xid == 13
    )


def test_chunks_of_any_size_give_the_same_report(fixtures: Path) -> None:
    text = "".join(
        (fixtures / "xid" / name).read_text() + "\n"
        for name in ("gpud__dmesg-with-xid-119.log", "gpud__dmesg-decode-iso-xid13-43.log")
    ) + "\n".join(row["log_line"] for row in _tsv(fixtures))
    whole = scan_kernel_log(text)
    rng = random.Random(7)
    for size in (1, 3, 64, 4096, None):
        scanner = KernelLogScanner()
        pos = 0
        while pos < len(text):
            step = size or rng.randint(1, 300)
            scanner.feed(text[pos : pos + step])
            pos += step
        assert scanner.finish() == whole, size


def test_a_line_without_end_is_bounded() -> None:
    scanner = KernelLogScanner()
    for _ in range(40):
        scanner.feed("x" * 50_000)  # 2 MB and no newline
    scanner.feed("\n" + XID_13 + "\n")
    report = scanner.finish()
    assert [g.xid for g in report.groups] == [13]


def test_dmesg_t_offsets_are_zone_independent() -> None:
    # the same instant written in two zones reads the same
    here = datetime(2024, 7, 31, 23, 14, 18, tzinfo=timezone(timedelta(hours=-7)))
    ctime = here.strftime("[%a %b %d %H:%M:%S %Y] ")
    group = scan_kernel_log(ctime + XID_13, tz_offset_s=-7 * 3600.0).groups[0]
    assert group.first_seen_s == here.timestamp()


def test_xid_154_speaks_for_its_latest_change(fixtures: Path) -> None:
    (talos,) = [row["log_line"] for row in _tsv(fixtures) if row["xid"] == "154"]
    back = talos.replace(
        "from 0x0 (None) to 0x1 (GPU Reset Required)", "from 0x1 (GPU Reset Required) to 0x0 (None)"
    )
    recovered = scan_kernel_log(talos + "\n" + back).groups[0]
    assert recovered.count == 2
    assert recovered.severity is Severity.INFO
    assert recovered.decoded == (("recovery_action", "none"), ("recovery_action_from", "reset"))
    assert scan_kernel_log(back + "\n" + talos).groups[0].severity is Severity.CRITICAL


def test_nvlink5_group_takes_its_worst_line() -> None:
    # NVIDIA's documented NVLink5 format (see test_xid_decode.py); SAW_MVB V2 IntrInfo 0x1
    line = "NVRM: Xid (PCI:0000:dc:00): 144, SAW_MVB {} XC0 i0 Link 01 (0x00000001 0x{:08x} 0x0)"
    info, fatal = line.format("Nonfatal", 0x4), line.format("Fatal", 0x2)
    undecoded = line.format("Nonfatal", 0x40)
    assert scan_kernel_log(info).groups[0].severity is Severity.INFO
    group = scan_kernel_log("\n".join([info, fatal, info])).groups[0]
    assert (group.severity, group.action) == (Severity.CRITICAL, "RESET_GPU")
    # a line the sheet does not cover keeps the catalog's warning as the floor
    floor = scan_kernel_log(info + "\n" + undecoded).groups[0]
    assert (floor.severity, floor.action) == (Severity.WARNING, "WORKFLOW_NVLINK5_ERR")
