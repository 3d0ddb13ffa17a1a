"""A syslog date prints no year: a log holds no line later than when it was written, so its first
date is in the year the file was written, or the one before when that date comes later in the
year (rsyslog's and journalctl's reading)."""

from __future__ import annotations

import calendar
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwarden.health.kernel_log import scan_kernel_log
from tests.doctor.test_doctor import doctor_json

# journalctl -k of an A100 that fell off the bus (driver 550.107.02), dated "Dec 20 13:22:20"
LOG = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "bug_report_public3"
    / ("a100-550-xid79.journal-b0.cut.log")
)


def _written(path: Path, when: str) -> None:
    stamp = calendar.timegm(datetime.fromisoformat(when).timetuple())
    os.utime(path, (stamp, stamp))


def _first_seen(capsys: pytest.CaptureFixture[str], path: Path) -> datetime:
    _, doc = doctor_json(capsys, "--from", str(path))
    (lost,) = [f for f in doc["findings"] if f["code"] == "gpu-lost"]
    return datetime.fromtimestamp(lost["first_seen_s"], UTC)


@pytest.mark.parametrize(
    ("written", "year"),
    [
        ("2026-11-27T09:00:00", 2025),  # a December date read in November: last December
        ("2026-12-20T14:00:00", 2026),  # written the same day, after the line
        ("2027-01-03T08:00:00", 2026),  # a log saved early in January
    ],
)
def test_a_date_without_a_year_is_never_after_the_log_was_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, written: str, year: int
) -> None:
    copy = tmp_path / LOG.name
    shutil.copyfile(LOG, copy)
    _written(copy, written)
    seen = _first_seen(capsys, copy)
    assert (seen.year, seen.month, seen.day) == (year, 12, 20)


def test_a_log_across_new_year_keeps_counting_forward() -> None:
    text = (
        "Dec 31 23:59:58 node kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off "
        "the bus.\n"
        "Jan  1 00:00:05 node kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off "
        "the bus.\n"
    )
    written = calendar.timegm((2027, 1, 2, 0, 0, 0, 0, 0, 0))
    (group,) = scan_kernel_log(text, written_s=written).groups
    first = datetime.fromtimestamp(group.first_seen_s or 0, UTC)
    last = datetime.fromtimestamp(group.last_seen_s or 0, UTC)
    assert (first.year, last.year) == (2026, 2027)
