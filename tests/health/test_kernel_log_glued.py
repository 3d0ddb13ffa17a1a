"""Kernel logs pasted without their line breaks: records glued on one line (a web page, a mail, a
chat), and the command line pasted with its output. The scanner cuts a line before each record
stamp after the first (``kernel_records``); doctor takes a prompt followed by records for a kernel
log. Real excerpts of the held-out sets, their lines joined, read as the lines do."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.health.kernel_log import (
    KERNEL_RECORD_PREFIX,
    KERNEL_RECORD_STAMP,
    MAX_RECORDS_PER_LINE,
    kernel_records,
    scan_kernel_log,
)
from gpuwarden.types.health import KernelLogReport
from tests.health.kernel_log_sets import DATA, fuzz

# a line that is one kernel record, as the scanner's cutting knows them
_RECORD_LINE = re.compile(f"{KERNEL_RECORD_STAMP}{KERNEL_RECORD_PREFIX}")
KERNEL_SETS = sorted(
    path
    for folder in DATA.iterdir()
    if folder.name.startswith(("xid_", "pcie_aer_public"))
    for path in folder.glob("*.log")
)


def _record_lines(path: str) -> list[str]:
    text = (DATA / path).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if _RECORD_LINE.match(line)]


def _readings(report: KernelLogReport) -> dict[str, object]:
    """What a report says, without the line numbers and lines a joined paste changes."""
    return {
        "xid": sorted((g.xid, g.pci_bus_id, g.count, g.first_uptime_s) for g in report.groups),
        "lost": sorted((g.pci_bus_id or "", g.count) for g in report.fallen_off_bus),
        "aer": sorted(
            (g.pci_bus_id, g.severity, g.nvidia, g.count, g.error_types) for g in report.pcie_errors
        ),
        "sxid": sorted((g.sxid, g.pci_bus_id, g.count) for g in report.nvswitch_errors),
        "iommu": sorted((f.pci_bus_id, f.nvidia, f.faults, f.reasons) for f in report.iommu_faults),
        "other": report.other,
        "uuids": report.bus_to_uuid,
    }


# real excerpts whose every record line starts with a dmesg stamp: Xid and NVRM messages, AER
# records with their status bits, NVSwitch SXids
XID_EXCERPT = "xid_heldout6/05__nvtrust-124__dmesg-open-banner-sxid-22013-nonfatal-nvswitch.log"
EXCERPTS = [
    XID_EXCERPT,
    *(
        str(path.relative_to(DATA))
        for path in KERNEL_SETS
        if len(_record_lines(str(path.relative_to(DATA)))) >= 3
    ),
]


def _joined_reads_alike(lines: list[str], joiner: str) -> None:
    apart = scan_kernel_log("\n".join(lines) + "\n")
    glued = scan_kernel_log(joiner.join(lines) + "\n")
    assert _readings(glued) == _readings(apart)
    assert glued.lines_scanned == 1


def test_glued_xid_and_nvrm_records_read_as_lines() -> None:
    lines = [
        "[ 3046.481331] NVRM: GPU at PCI:0000:3b:00: GPU-4f5a6c1e-1111-2222-3333-444455556666",
        "[ 3046.481335] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
        "[ 3046.481340] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
        "[ 3050.100000] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
    ]
    report = scan_kernel_log(" ".join(lines))
    (group,) = report.groups
    assert (group.xid, group.count, group.pci_bus_id) == (79, 2, "0000:3b:00.0")
    # each record keeps its own stamp, not the first one of the line
    assert (group.first_uptime_s, group.last_uptime_s) == (3046.481335, 3050.1)
    assert group.uuid == "GPU-4f5a6c1e-1111-2222-3333-444455556666"
    _joined_reads_alike(lines, " ")


def test_glued_aer_records_count_each() -> None:
    (path,) = (DATA / "pcie_aer_public2").glob("03__*.log")
    (group,) = scan_kernel_log(path.read_text(encoding="utf-8")).pcie_errors
    assert (group.pci_bus_id, group.count, group.error_types) == ("0000:01:00.0", 5, ("Timeout",))
    assert group.nvidia == "nvidia driver"


def test_glued_sxid_records_count_each() -> None:
    lines = _record_lines(XID_EXCERPT)
    report = scan_kernel_log(" ".join(lines))
    # three link events (links 44, 45, 46), each printed as Data / Non-fatal / Severity records
    assert sorted((g.sxid, g.count) for g in report.nvswitch_errors) == [(22013, 3)]
    _joined_reads_alike(lines, "")


def test_a_stamp_quoted_in_a_record_is_no_cut() -> None:
    """A stamp not followed by a record prefix (a message's words, a status bit "[12]", a sudo
    prompt "[sudo]", a device id "[10de:2d04]") leaves the line whole."""
    for line in (
        "[  12.345678] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x26:0x56:1474) [  12.1] x",
        "[  12.345678] nvidia 0000:01:00.0: device [10de:2d04] error status/mask=00001000/0000e000",
        "[  12.345678] nvidia 0000:01:00.0:    [12] Timeout [ 9.5] retried",
        "$ sudo dmesg [sudo] password for me: [  12.345678] NVRM: loading NVIDIA UNIX x86_64",
        "[Mon Aug 25 16:20:28 2025] NVRM: see [Mon Aug 25 16:20:27 2025] above",
    ):
        assert kernel_records(line) == [line]


def test_the_text_before_the_first_record_stays_with_it() -> None:
    line = (
        "user@host:~$ dmesg | grep -i nvidia[  12.300000] NVRM: loading NVIDIA UNIX"
        " [  12.400000] [  T511] nvidia 0000:01:00.0: enabling device (0000 -> 0003)"
    )
    first, second = kernel_records(line)
    assert first.startswith("user@host:~$ dmesg") and first.endswith("NVRM: loading NVIDIA UNIX")
    assert second.startswith("[  12.400000] [  T511] nvidia 0000:01:00.0: ")


def test_a_huge_glued_line_is_read_in_one_pass() -> None:
    """8 MiB of glued Xid records (no newline): cut into at most MAX_RECORDS_PER_LINE pieces, the
    rest read as joined records; every record counts. (Before, each joined record re-read the
    whole text before it: tens of seconds.)"""
    record = "[ 1.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception "
    copies = (8 << 20) // len(record)
    started = time.process_time()
    (group,) = scan_kernel_log(record * copies).groups
    elapsed = time.process_time() - started
    assert (group.xid, group.count, group.first_uptime_s) == (13, copies, 1.0)
    assert len(kernel_records(record * (MAX_RECORDS_PER_LINE + 5))) == MAX_RECORDS_PER_LINE
    assert elapsed < 30  # not a benchmark: a quadratic read takes minutes here


@pytest.mark.parametrize(
    "text",
    [
        "user@host:~$ dmesg | grep -i nvidia[  12.3] NVRM: Xid (PCI:0000:01:00): 79, pid=0, GPU",
        "root@node7:/var/log# dmesg -T | grep -i aer [Mon Aug 25 16:20:28 2025] nvidia "
        "0000:01:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer",
        "[me@box ~]$ sudo dmesg | grep -i nvswitch [ 38.1] nvidia-nvswitch3: SXid (PCI:0000:04:00"
        ".0): 22013, Non-fatal",
    ],
)
def test_a_prompt_followed_by_records_is_a_kernel_log(text: str) -> None:
    assert classify(text + "\n") is CaptureKind.KERNEL_LOG


@pytest.mark.parametrize(
    "text",
    [
        # prose, a prompt with no record after it, Markdown code, a table row, a record stamp
        # without a record prefix
        "user@host:~$ dmesg | grep -i nvidia\nnothing was printed, the driver is not loaded\n",
        "I ran `user@host:~$ dmesg | grep -i nvidia [ 12.3] nvidia 0000:01:00.0: probe` today\n",
        "user@host:~$ echo `[ 12.3] nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected`\n",
        "| user@host:~$ dmesg | [ 12.3] nvidia 0000:01:00.0: PCIe Bus Error: x |\n",
        "user@host:~$ uptime [ 12.3] load average: 0.1, 0.2, 0.3\n",
        "user@host:~$ cat notes.txt\nSee [ 12.3] in the log: the GPU reset then.\n",
    ],
)
def test_prose_and_quoted_prompts_are_no_kernel_log(text: str) -> None:
    assert classify(text) is None


@fuzz(60)
@given(
    st.sampled_from(EXCERPTS),
    st.sampled_from([" ", "", "  ", "\t", " \u00a0"]),
    st.integers(0, 40),
    st.integers(1, 80),
)
def test_joined_lines_of_a_real_excerpt_read_the_same_groups(
    path: str, joiner: str, start: int, length: int
) -> None:
    """A run of record lines of a real excerpt, joined with spaces (or nothing, a tab) as a page
    that lost its breaks shows them, reads the same groups, counts, uptimes and ties."""
    lines = _record_lines(path)[start : start + length]
    if len(lines) >= 2:
        _joined_reads_alike(lines, joiner)


@pytest.mark.parametrize("path", EXCERPTS)
def test_every_record_line_of_an_excerpt_joined_reads_alike(path: str) -> None:
    _joined_reads_alike(_record_lines(path), " ")
