"""`doctor --from` on nvidia-bug-report logs, set 4 (tests/data/bug_report_public4).

Set 4 holds no report: sampled as the searches returned them, every R470+ report the stored
index has (committed `nvidia-bug-report.log` files, pasted parts in issues and forum pages) is
already in sets 1-3 (SOURCES.md counts each one and why it was skipped). What reading the newest
script text the index holds showed instead is tested here, on the real kernel-log lines of set
3's A100 report (one healthy boot, then the Xid 79 "GPU has fallen off the bus" of Dec 20):

- the Bottlerocket admin container's copy of nvidia-bug-report.sh ($Change: 37062940) greps the
  host's logs under ``${HOST_ROOT}`` ("/.bottlerocket/rootfs", or what the caller sets), so its
  kernel-log scan names "  /.bottlerocket/rootfs/var/log/kern.log:" -- doctor read that as no
  part of a kind it knows and missed the fault;
- that copy's layout otherwise (the versions table printed into the prologue, "NVIDIA Driver
  Type Detection:", `report_skip`'s "Skipping:" part inside another part, the summary tables
  printed with no separator before the epilogue) reads as before."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwarden.doctor.bug_report import read_bug_report, report_time, section_kind, split_bug_report
from gpuwarden.doctor.captures import CaptureKind, read_capture
from gpuwarden.doctor.node import DoctorOptions, DoctorReport, diagnose_captures
from tests.doctor.judged import assert_judged_or_refused

DATA = Path(__file__).resolve().parents[1] / "data"
SET = DATA / "bug_report_public4"
SEPARATOR = "_" * 44
# set 3's cut of the A100's kernel-log scan: its kern.log lines come before "  /var/log/dmesg:"
SCAN_CUT = DATA / "bug_report_public3" / "a100-550-xid79.scan-tail.cut.log"
HOST_ROOTS = ("", "/.bottlerocket/rootfs", "/host")


def _kern_log_lines() -> list[str]:
    lines = SCAN_CUT.read_text().splitlines()
    return lines[: lines.index("  /var/log/dmesg:")]


def _healthy_boot_lines() -> list[str]:
    """The lines of the boot before the fault (Dec 18: the modules load, nothing else)."""
    return [line for line in _kern_log_lines() if line.startswith("Dec 18 ")]


# The script's parts, as its functions print them (bottlerocket-admin-container
# nvidia-bug-report.sh, $Change: 37062940); it echoes "command line flags: $SAVED_FLAGS".
SAVED_FLAGS = ""
PROLOGUE_AND_VERSIONS = f"""Start of NVIDIA bug report log file.  Please include this file, along
with a detailed description of your problem, when reporting a graphics
driver bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)
or by sending email to 'linux-bugs@nvidia.com'.

nvidia-bug-report.sh Version: 37062940

Date: Fri Dec 20 18:35:26 UTC 2024
uname: Linux ubuntu-Super-Server 6.8.0-40-generic #40~22.04.3-Ubuntu SMP x86_64 GNU/Linux
command line flags: {SAVED_FLAGS}

Component                           | Details
================================================================================
Vulkan Info                         | None
--------------------------------------------------------------------------------
NVIDIA SMI                          | None
--------------------------------------------------------------------------------
NVIDIA GPU Details                  | None
--------------------------------------------------------------------------------"""
DRIVER_TYPE = """NVIDIA Driver Type Detection:

Detected driver type: Running RM Driver on GPUs
Standard RM driver detected."""
# report_skip inside the nvidia-smi subshell, which printed its own separator first
SMI_SKIPPED = f"""{SEPARATOR}

Skipping: nvidia-smi output
nvidia-smi not found"""
# print_skips_table / print_errors_table: columns of 35 (and 60, 20) characters
SKIPS_HEADER = f"{'Skipped Component':<35} | Details"
ERRORS_HEADER = f"{'Error Component':<35} | {'Details':<60} | {'Resolution':<20}"
SUMMARY = f"""Summary of Skipped Sections:

{SKIPS_HEADER}
{"=" * 80}
{"nvidia-smi output":<35} | nvidia-smi not found
{"-" * 80}

Summary of Errors:

{ERRORS_HEADER}
{"=" * 121}"""


def _scan(root: str, lines: list[str]) -> str:
    """`search_string_in_logs ${HOST_ROOT}/var/log/kern.log`: a blank line, "  <path>:", the
    lines grep found."""
    return "\n".join(
        [
            "Scanning kernel log files for NVIDIA kernel messages:",
            "",
            f"  {root}/var/log/kern.log:",
            *lines,
        ]
    )


def _report(root: str, lines: list[str]) -> str:
    parts = [PROLOGUE_AND_VERSIONS, DRIVER_TYPE, _scan(root, lines), SMI_SKIPPED + "\n" + SUMMARY]
    blocks = [*parts, "End of NVIDIA bug report log file."]
    return "".join(f"{SEPARATOR}\n\n{block}\n\n" for block in blocks)


def _above_info(report: DoctorReport) -> list[str]:
    return sorted({f.code for f in report.findings if f.severity.rank > 0})


def _diagnosed(tmp_path: Path, text: str) -> DoctorReport:
    path = tmp_path / "nvidia-bug-report.log"
    path.write_text(text)
    assert read_capture(str(path)).kind is CaptureKind.BUG_REPORT  # type: ignore[union-attr]
    return diagnose_captures([str(path)], DoctorOptions())


def test_the_set_holds_no_report_and_says_why() -> None:
    assert json.loads((SET / "expected.json").read_text()) == []
    assert "0 kept" in (SET / "SOURCES.md").read_text()


@pytest.mark.parametrize("root", HOST_ROOTS, ids=lambda r: r or "no-host-root")
def test_a_scan_of_the_host_logs_under_a_root_is_read(root: str, tmp_path: Path) -> None:
    text = _report(root, _kern_log_lines())
    names = [s.name for s in split_bug_report(text)]
    assert names == [
        "prologue",
        "NVIDIA Driver Type Detection",
        f"{root}/var/log/kern.log",
        "Skipping: nvidia-smi output",
        "epilogue",
    ]
    reading = read_bug_report("nvidia-bug-report.log", text, 0.0)
    assert reading.script_version == "37062940"
    assert datetime.fromtimestamp(report_time(text) or 0.0, UTC).isoformat() == (
        "2024-12-20T18:35:26+00:00"
    )
    assert [c.kind for c in reading.captures] == [CaptureKind.KERNEL_LOG]
    assert reading.unread == ()
    report = _diagnosed(tmp_path, text)
    groups = [g for k in report.kernel_logs for g in k.report.groups]
    assert sorted({g.xid for g in groups}) == [79]
    assert sorted({g.pci_bus_id for g in groups if g.pci_bus_id}) == ["0000:31:00.0"]
    assert _above_info(report) == ["gpu-lost"]


@pytest.mark.parametrize("root", HOST_ROOTS, ids=lambda r: r or "no-host-root")
def test_a_healthy_boot_under_a_root_gives_no_alarm(root: str, tmp_path: Path) -> None:
    report = _diagnosed(tmp_path, _report(root, _healthy_boot_lines()))
    assert [len(k.report.groups) for k in report.kernel_logs] == [0]  # read, and no Xid
    assert _above_info(report) == []


def test_only_the_kernel_logs_count_under_a_root() -> None:
    for root in HOST_ROOTS:
        for log in ("messages", "kern.log", "kernel.log", "syslog", "dmesg"):
            assert section_kind(f"{root}/var/log/{log}") is CaptureKind.KERNEL_LOG
        # the script appends these under the same root: not kernel logs
        for other in ("fabricmanager.log", "nvidia-installer.log", "Xorg.0.log", "kern.log.1"):
            assert section_kind(f"{root}/var/log/{other}") is None
    assert section_kind("/.bottlerocket/rootfs/var/log/journal/kern.log") is None
    assert section_kind("var/log/kern.log") is None


def test_cuts_of_the_layout_never_give_a_traceback() -> None:
    text = _report("/.bottlerocket/rootfs", _kern_log_lines())
    scan = text.index("  /.bottlerocket")
    for cut in (scan - 3, scan + 5, text.index("Summary of"), len(text) // 2, len(text) - 7):
        assert_judged_or_refused(text[:cut], "nvidia-bug-report.log")
        assert_judged_or_refused(text[cut:], "nvidia-bug-report.log")
