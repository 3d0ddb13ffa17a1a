"""Issue 13, round 7: an nvidia-bug-report log whose kernel-log scan names the host's log under a
root (bug_report.py ``_LOG_UNDER_A_ROOT``, this stop), with the roots a hostile caller sets. The
report is the layout of the Bottlerocket copy of the script and bug-report set 3's real A100
kern.log lines (an Xid 79), as test_bug_report_public4 builds it.

Measured before the fix: a root of "/" (HOST_ROOT=/, so the scan names "//var/log/kern.log": a
leading "//" stays, as POSIX allows) was not read as a kernel log, and said nowhere: the Xid 79
there was missed. 4 KB roots, unicode, nested /var/log/ and non-paths were read as they should."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.doctor.bug_report import read_bug_report, section_kind
from gpuwarden.doctor.captures import CaptureKind
from tests.doctor.judged import assert_judged_or_refused
from tests.doctor.test_bug_report_public4 import (
    _above_info,
    _diagnosed,
    _healthy_boot_lines,
    _kern_log_lines,
    _report,
)


@pytest.mark.parametrize(
    "root",
    [
        "/",
        "//",
        "/host/",
        "/" + "h" * 4096,
        "/hôte/racine",
        "/a/var/log/b",
        "/.bottlerocket/rootfs",
    ],
    ids=[
        "slash",
        "two-slashes",
        "trailing-slash",
        "4k",
        "unicode",
        "nested-var-log",
        "bottlerocket",
    ],
)
def test_the_host_s_kern_log_under_any_root_is_read(root: str, tmp_path: Path) -> None:
    """Failed before for "/" (the scan was no kernel log; its Xid 79 was missed)."""
    text = _report(root, _kern_log_lines())
    reading = read_bug_report("nvidia-bug-report.log", text, 0.0)
    assert [c.kind for c in reading.captures] == [CaptureKind.KERNEL_LOG]
    assert _above_info(_diagnosed(tmp_path, text)) == ["gpu-lost"]


@pytest.mark.parametrize("root", ["/", "/" + "h" * 4096])
def test_a_healthy_boot_under_such_a_root_gives_no_alarm(root: str, tmp_path: Path) -> None:
    report = _diagnosed(tmp_path, _report(root, _healthy_boot_lines()))
    assert [len(k.report.groups) for k in report.kernel_logs] == [0]
    assert _above_info(report) == []


@pytest.mark.parametrize(
    "header",
    [
        "/host/var/log/",  # a directory
        "/host/var/log/journal/kern.log",  # a log below /var/log/, not the kernel's
        "/var/log/nested/kern.log",
        "/host/var/log/kern.log.1",  # a rotated copy: not what the script scans
        "Scanning /var/log/kern.log failed",  # words, not a path
        "var/log/kern.log",  # relative
        "/a b/var/log/kern.log",  # a blank: no path the script names
    ],
)
def test_what_is_not_the_host_s_kernel_log_is_not_read_as_one(header: str) -> None:
    assert section_kind(header) is None


@pytest.mark.parametrize(
    ("header", "kind"),
    [
        # the log is the path's last name, after its last /var/log/: a log name that ran on
        # through the slashes below it read "/var/log/x/var/log/kern.log", no kernel log
        ("/host/var/log/x/var/log/kern.log", CaptureKind.KERNEL_LOG),
        # the root starts the line: words before it are no path the script names
        ("Scanning /host/var/log/kern.log", None),
    ],
)
def test_the_log_under_a_root_is_the_path_s_last_name(
    header: str, kind: CaptureKind | None
) -> None:
    """What keeps a root of a megabyte linear, checked without a clock (a wall-clock bound fails
    under load): the pattern is anchored at the line's start, so it is tried from one place,
    and the log's name holds no "/", so each /var/log/ in the root is read up to its next "/"
    only. A log name that ran on through the slashes ("\\S+") read the rest of the root from
    each /var/log/ in it, and a pattern tried from every place read the rest of the line from
    each (both quadratic); each reads one of these headers otherwise."""
    assert section_kind(header) == kind


def test_a_root_of_a_megabyte_is_judged() -> None:
    for root in ("/" + "var/log/" * 125_000, "/" + "a/var/log/x" * 90_000 + "/"):
        assert section_kind(root + "/var/log/kern.log") == CaptureKind.KERNEL_LOG
    text = _report("/" + "var/log/" * 125_000, _kern_log_lines())
    assert_judged_or_refused(text, "nvidia-bug-report.log")
