"""The scanner's short cuts read exactly what the long way reads: the ISO stamp of a second already
seen (only the fraction's digits differ), the one-regex test for the markers between two standard
Xid lines, and the repeated-record tally answered from the scanner's own reading of each Xid
record (health/xid_repeats.py: a node's logs are each read once)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.bug_report import scanned_logs
from gpuwarden.health.kernel_log import (
    _ANY_MARKER,
    MARKERS,
    SHORT_GAP_CHARS,
    _Clock,
    _marker_finder,
    parse_xid_line,
    scan_kernel_log,
)
from gpuwarden.health.xid_repeats import XidRecordTally
from gpuwarden.types.health import KernelLogReport
from tests.conftest import FIXTURES

DATA = Path(__file__).resolve().parents[1] / "data"
CUT = DATA / "bug_report_public3" / "a100-550-xid79.scan-tail.cut.log"
ISO_DMESG = FIXTURES / "xid" / "gpud__dmesg-decode-iso-xid13-43.log"
JOURNAL = (
    "12月 20 13:22:20 ubuntu-Super-Server kernel: NVRM: Xid (PCI:0000:31:00): 79, "
    "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
)
SYSLOG = (
    "Dec 20 13:22:20 ubuntu-Super-Server kernel: [79280.638402] NVRM: Xid (PCI:0000:31:00): "
    "79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
)
DMESG = (
    "[79280.638402] NVRM: Xid (PCI:0000:31:00): 79, pid='<unknown>', name=<unknown>, GPU has "
    "fallen off the bus.\n"
)


class _CountingClock(_Clock):
    """A clock that counts the stamps its same-second short cut answered."""

    hits = 0

    def _same_second(self, prefix: str) -> tuple[float | None, float | None] | None:
        seen = super()._same_second(prefix)
        self.hits += seen is not None
        return seen


class _CutFirst:
    """The plain way the tally's reading once must match: each Xid line parsed on its own
    (``parse_xid_line``), the lines of records an earlier log held (as many copies as the log
    that held most) cut out, and what is left scanned."""

    def __init__(self) -> None:
        self._most: Counter[tuple[object, ...]] = Counter()

    def unseen(self, text: str) -> tuple[str, int]:
        kept: list[str] = []
        mine: Counter[tuple[object, ...]] = Counter()
        lines = text.splitlines(keepends=True)
        for line in lines:
            record = parse_xid_line(line, year=2024) if "Xid" in line else None
            keys = []
            if record is not None:
                what = (record.xid, record.pci_bus_id, record.message)
                if record.timestamp_s is not None:
                    keys.append(("calendar", record.timestamp_s, *what))
                if record.uptime_s is not None:
                    keys.append(("uptime", record.uptime_s, *what))
            mine.update(keys)
            if not any(mine[key] <= self._most[key] for key in keys):
                kept.append(line)
        self._most |= mine
        return "".join(kept), len(lines) - len(kept)


def _fresh(prefix: str) -> tuple[float | None, float | None]:
    return _Clock(2024, 3600.0).stamp(prefix)


def test_a_real_iso_dmesg_reads_the_same_through_the_same_second_short_cut() -> None:
    prefixes = [
        line.split("NVRM:", 1)[0] for line in ISO_DMESG.read_text().splitlines() if "NVRM:" in line
    ]
    clock = _CountingClock(2024, 3600.0)
    assert [clock.stamp(p) for p in prefixes] == [_fresh(p) for p in prefixes]
    assert clock.hits >= len(prefixes) // 2  # the short cut answered most of them


def test_the_short_cut_reads_the_fraction_and_keeps_the_uptime_and_zone() -> None:
    clock = _CountingClock(2024, 0.0)
    first = "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 [  12.5] "
    later = "kern  :warn  : 2025-01-21T04:41:44,9+00:00 [  12.5] "
    assert clock.stamp(first) == (1737434504.283302, 12.5)
    assert clock.stamp(later) == (1737434504.9, 12.5) == _fresh(later)
    # another zone after the fraction, or another second, is not that second
    for other in (later.replace("+00:00", "-05:00"), later.replace(":44,", ":45,")):
        assert clock.stamp(other) == _fresh(other)
    assert clock.hits == 1


_HEADS = st.sampled_from(
    [
        "kern  :warn  : ",
        "192.168.11.119: kern: warning: [",
        "6,1234,5678,-;",
        "1737434504.283302 ",
        "<4>",
        "[  100.5] ",
        "",
    ]
)
# the text after the fraction: zones, a closing bracket, an uptime, another date glued on
_TAILS = st.sampled_from(
    ["+00:00 ", "Z]: ", " ", "-05:00 ", "2025-01-01T00:00:00 ", ";", " [ 7.25] ", "+0530", ""]
)
_DIGITS = st.text(alphabet="0123456789\u0660\u0669", min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    stamps=st.lists(
        st.tuples(_HEADS, st.sampled_from(["2025-01-21T04:41:44", "1999-12-31 23:59:59"]))
        .flatmap(lambda hd: st.tuples(st.just(hd), st.sampled_from([".", ","]), _DIGITS, _TAILS))
        .map(lambda t: f"{t[0][0]}{t[0][1]}{t[1]}{t[2]}{t[3]}"),
        min_size=1,
        max_size=12,
    )
)
def test_any_iso_stamp_reads_as_a_fresh_clock_reads_it(stamps: list[str]) -> None:
    clock = _Clock(2024, 3600.0)
    for prefix in stamps:
        assert clock.stamp(prefix) == _fresh(prefix)


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(
        st.sampled_from([*MARKERS, "Xi", "NVR", "[DM", " ", "\n", "x", "AE", "[10de"])
    ).map("".join)
)
def test_the_one_regex_sees_a_marker_where_a_find_of_each_does(text: str) -> None:
    assert (_ANY_MARKER.search(text) is not None) == any(m in text for m in MARKERS)


def _counts(report: KernelLogReport) -> list[tuple[object, ...]]:
    return [
        (g.xid, g.pci_bus_id, g.count, g.first_seen_s, g.last_seen_s, g.first_uptime_s)
        for g in report.groups
    ]


def test_each_log_of_a_bug_report_is_read_once_and_each_event_counts_once() -> None:
    text = CUT.read_text()
    logs = scanned_logs(str(CUT), text)
    once, twice = XidRecordTally(), _CutFirst()
    read = [once.scan(log.body, year=2024) for log in logs]
    assert [repeated for _, repeated in read] == [0, 0, 1, 1, 0]
    assert sum(g.count for report, _ in read for g in report.groups) == 2  # Dec 19 and Dec 20
    for log, (report, repeated) in zip(logs, read, strict=True):
        fresh, removed = twice.unseen(log.body)
        assert removed == repeated
        assert _counts(report) == _counts(scan_kernel_log(fresh, year=2024))
        # the report names the log's own lines (nothing was cut out of it first)
        lines = log.body.split("\n")
        assert report.lines_scanned == len(lines) - log.body.endswith("\n")
        assert all("Xid" in lines[g.first_line - 1] for g in report.groups)


def test_a_log_of_copies_only_has_no_group() -> None:
    tally = XidRecordTally()
    assert tally.scan(SYSLOG, year=2024)[1] == 0
    report, repeated = tally.scan(JOURNAL + DMESG, year=2024)
    assert (report.groups, report.xid_lines, repeated) == ((), 0, 2)
    assert report.lines_scanned == 2


@settings(max_examples=60, deadline=None)
@given(
    logs=st.lists(
        st.lists(st.sampled_from([SYSLOG, JOURNAL, DMESG, JOURNAL.replace(":31:", ":b1:")])).map(
            "".join
        ),
        min_size=1,
        max_size=4,
    )
)
def test_reading_once_counts_as_cutting_the_copies_out_first(logs: list[str]) -> None:
    once, twice = XidRecordTally(), _CutFirst()
    for text in logs:
        report, repeated = once.scan(text, year=2024)
        fresh, removed = twice.unseen(text)
        assert repeated == removed
        assert _counts(report) == _counts(scan_kernel_log(fresh, year=2024))


# what may stand between a dmesg prefix's brackets: uptimes, dmesg -H's "+", printk caller ids,
# and what float() takes but _UPTIME does not (no fraction, exponents, nan, signs, "_")
_INSIDES = st.one_of(
    st.from_regex(r"\A {0,3}\+?[0-9\u0660-\u0669]{0,6}\.?[0-9]{0,6} ?\Z"),
    st.sampled_from(
        [" nan", " inf", " 1e3", "1_000.5", " -1.5", "  T511", "  C3", " 12", " .5", "  +0.000844"]
    ),
)
_AFTER_BRACKET = st.sampled_from(["", " ", " [  T511] ", " [ 7.25] ", " kernel "])


@settings(max_examples=200, deadline=None)
@given(inside=_INSIDES, after=_AFTER_BRACKET)
def test_the_dmesg_short_cut_takes_only_what_the_long_way_reads_as_an_uptime(
    inside: str, after: str
) -> None:
    # whole seconds ("[123]", NVSentinel's SXid stamps) are the short cut's own: below
    assume(not inside.strip().lstrip("+").isdecimal())
    prefix = f"[{inside}]{after}"
    assert _Clock(2024, 0.0).stamp(prefix) == _Clock(2024, 0.0)._read(prefix)


@pytest.mark.parametrize(
    ("prefix", "uptime"), [("[123] ", 123.0), ("[ 12]", 12.0), ("[  +3] ", None)]
)
def test_a_whole_second_uptime_is_read_by_the_short_cut(prefix: str, uptime: float | None) -> None:
    assert _Clock(2024, 0.0).stamp(prefix) == (None, uptime)


def _hits(text: str, begin: int, stop: int) -> list[int]:
    """Each next marker ``_scan_between`` is given, skipping to the line's end after each."""
    next_marker, hits = _marker_finder(text, begin, stop), []
    hit = next_marker(begin)
    while hit >= 0:
        hits.append(hit)
        end = text.find("\n", hit, stop)
        hit = -1 if end < 0 else next_marker(end + 1)
    return hits


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(
        st.sampled_from([*MARKERS, "Xi", "NVR", "[DM", " ", "\n", "x", "AE", "[10de"]), max_size=60
    ).map("".join)
)
def test_the_short_span_regex_gives_the_hits_the_long_span_finds_give(text: str) -> None:
    """A span under SHORT_GAP_CHARS is searched by one regex, a longer one by a find per
    marker: the same text, padded to be long, gives the same hits."""
    pad = "\n" * SHORT_GAP_CHARS  # no marker holds a line break
    short = _hits(text, 0, len(text))
    assert len(text) < SHORT_GAP_CHARS
    assert [hit - len(pad) for hit in _hits(pad + text, 0, len(pad) + len(text))] == short


# seconds the same-second short cut must not confuse: a leap second, a year's last and first,
# a date no calendar has, and a head or tail in terminal colours (never remembered)
_ODD_SECONDS = st.sampled_from(
    [
        "2016-12-31T23:59:60",
        "1999-12-31T23:59:59",
        "2000-01-01T00:00:00",
        "2024-13-01T00:00:00",
        "\x1b[32m2025-01-21T04:41:44",
    ]
)
_ODD_TAILS = st.sampled_from(["Z ", "+05:30 ", "-0800 ", " ", "\x1b[0m ", "Z]: "])


@settings(max_examples=150, deadline=None)
@given(
    stamps=st.lists(
        st.tuples(_ODD_SECONDS, st.sampled_from([".", ","]), _DIGITS, _ODD_TAILS).map("".join),
        min_size=1,
        max_size=10,
    )
)
def test_odd_seconds_read_through_the_short_cut_as_a_fresh_clock_reads_them(
    stamps: list[str],
) -> None:
    clock = _Clock(2024, 3600.0)
    for prefix in stamps:
        assert clock.stamp(prefix) == _fresh(prefix)
