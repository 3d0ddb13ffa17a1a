"""One event copied into several logs of a node counts once (health/xid_repeats.py), on the real
nvidia-bug-report of an A100 whose Xid 79 stands in its syslog, its dmesg-stamped syslog copy and
journalctl -b of two boots (tests/data/bug_report_public3, a100-550-xid79.scan-tail.cut.log)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.bug_report import scanned_logs
from gpuwarden.health.kernel_log import parse_xid_line, scan_kernel_log
from gpuwarden.health.xid_repeats import XidRecordTally

DATA = Path(__file__).resolve().parents[1] / "data"
CUT = DATA / "bug_report_public3" / "a100-550-xid79.scan-tail.cut.log"
# the same event, in the syslog (calendar second and dmesg stamp) and in journalctl -b -0 of a
# zh_CN host (its month printed "12月"), as the report holds them
SYSLOG = (
    "Dec 20 13:22:20 ubuntu-Super-Server kernel: [79280.638402] NVRM: Xid (PCI:0000:31:00): "
    "79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
)
JOURNAL = (
    "12月 20 13:22:20 ubuntu-Super-Server kernel: NVRM: Xid (PCI:0000:31:00): 79, "
    "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
)
DMESG = (
    "[79280.638402] NVRM: Xid (PCI:0000:31:00): 79, pid='<unknown>', name=<unknown>, GPU has "
    "fallen off the bus.\n"
)


def _xids(text: str) -> int:
    return sum(g.count for g in scan_kernel_log(text, year=2024).groups)


def _read(tally: XidRecordTally, text: str) -> tuple[int, int]:
    """The Xid records of ``text`` the tally counts, and the lines it leaves out as copies."""
    report, repeated = tally.scan(text, year=2024)
    return sum(g.count for g in report.groups), repeated


def test_a_cjk_syslog_month_is_a_calendar_time() -> None:
    english = parse_xid_line(SYSLOG, year=2024)
    chinese = parse_xid_line(JOURNAL, year=2024)
    assert english is not None and chinese is not None
    assert chinese.timestamp_s == english.timestamp_s == 1734700940.0
    assert parse_xid_line(JOURNAL.replace("12月", "13月"), year=2024).timestamp_s is None  # type: ignore[union-attr]


def test_a_copy_in_a_later_log_is_left_out_by_its_calendar_second_or_its_uptime() -> None:
    tally = XidRecordTally()
    assert _read(tally, SYSLOG) == (1, 0)
    assert _read(tally, JOURNAL) == (0, 1)  # the calendar second
    assert _read(tally, DMESG) == (0, 1)  # the uptime


def test_a_burst_stays_a_burst_and_more_copies_add_the_difference() -> None:
    tally = XidRecordTally()
    assert _read(tally, JOURNAL * 3) == (3, 0)
    assert _read(tally, JOURNAL * 2) == (0, 2)
    assert _read(tally, JOURNAL * 5) == (2, 3)
    # another GPU, another message or another second is another event
    other = JOURNAL.replace("0000:31:00", "0000:b1:00")
    assert _read(tally, other) == (1, 0)


def test_the_scan_paste_is_read_as_its_logs_and_each_event_counts_once() -> None:
    text = CUT.read_text()
    logs = scanned_logs(str(CUT), text)
    assert [log.name for log in logs] == [
        str(CUT),
        "/var/log/dmesg",
        "journalctl -b -0",
        "journalctl -b -1",
        "journalctl -b -2",
    ]
    assert sum(_xids(log.body) for log in logs) == 4  # two events, each in two logs
    tally = XidRecordTally()
    kept = [_read(tally, log.body) for log in logs]
    assert sum(xids for xids, _ in kept) == 2  # Dec 19 and Dec 20
    assert [repeated for _, repeated in kept] == [0, 0, 1, 1, 0]
    assert scanned_logs("x", "NVRM: Xid (PCI:0000:31:00): 79, GPU has fallen off the bus.") == ()


@settings(max_examples=60, deadline=None)
@given(order=st.permutations([SYSLOG, JOURNAL, SYSLOG + SYSLOG]))
def test_in_any_order_the_most_copies_of_one_log_are_counted(order: list[str]) -> None:
    tally = XidRecordTally()
    total = sum(_read(tally, text)[0] for text in order)
    assert total == 2
