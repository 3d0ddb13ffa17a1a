"""A tenth held-out set of kernel logs (tests/data/xid_heldout10: threads and files none of the
other kernel-log sets, the bug-report and AER sets, the explain sets or shared/fixtures cite), aimed
at the inputs of the scanner's fast paths (health/kernel_log.py: an ISO stamp of a second already
seen read from its fraction alone, plain dmesg's uptime, the Xid regexes skipped on lines without
"Xid", the repeated-record tally): Talos' ISO stamps with 8 or 9 fraction digits sharing one
second, one dmesg line in every stacked --time-format, journalctl short-iso(-precise) with '+0200'
and short-monotonic, journals in French, lower case or with their AEST header, look-alikes (ONC RPC
'xid=', i915, veth, mlx5), and the NVIDIA records still new: Xid 79 with SXid 20034 on three
NVSwitches, quoted in Markdown, and Xid 31 and 32. Each excerpt reads the same whole, in 1-, 97- and
4096-character chunks and line by line; the scanner folds exactly the Xids read by hand; ``doctor
--from`` gives the codes written down, refuses what is no kernel log, and gives nothing above info
on every excerpt without a fault."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.health.kernel_log import _Clock, scan_kernel_log
from gpuwarden.health.xid_repeats import XidRecordTally
from tests.health.kernel_log_sets import (
    OTHER_SOURCES,
    ExcerptSet,
    Row,
    chunks_check,
    fed,
    group_lines_check,
    joined_check,
    kernel_log_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout10")
ROWS = SET.rows
TEXTS = SET.texts()
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(10)
# a stamp the same-second short cut may answer: an ISO date, its time and a fraction
ISO_STAMPED = ("02", "03", "06")


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    SET.assert_cites_only_new_sources(EARLIER_SETS, OTHER_SOURCES)
    assert 12 <= len(ROWS) <= 20
    assert sum(not row["fault"] for row in ROWS) >= 5  # look-alikes and healthy loads
    assert sum(row["doctor_exit"] == 2 for row in ROWS) >= 2  # pastes that are no kernel log


(
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
) = kernel_log_set_checks(SET, EARLIER_SETS)


test_each_xid_group_spans_the_lines_read = group_lines_check(SET)


test_an_excerpt_fed_in_chunks_reads_as_it_does_whole = chunks_check(SET)


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_an_excerpt_fed_line_by_line_reads_as_it_does_whole(row: Row) -> None:
    text = EXCERPT[row["prefix"]]
    assert fed(text.splitlines(keepends=True)) == scan_kernel_log(text)


class _CountingClock(_Clock):
    """A clock that counts the stamps its same-second short cut answered."""

    hits = 0

    def _same_second(self, prefix: str) -> tuple[float | None, float | None] | None:
        seen = super()._same_second(prefix)
        self.hits += seen is not None
        return seen


def _iso_prefixes(text: str) -> list[str]:
    """Each line's text up to its ISO stamp's end (the next blank after the 'T')."""
    prefixes = []
    for line in text.splitlines():
        dash = line.find("-")
        at = line.find("T", dash) if dash >= 0 else -1
        end = line.find(" ", at)
        if at > 0 and end > at:
            prefixes.append(line[: end + 1])
    return prefixes


@pytest.mark.parametrize("prefix", ISO_STAMPED)
def test_iso_stamps_read_through_the_short_cut_as_a_fresh_clock_reads_them(prefix: str) -> None:
    prefixes = _iso_prefixes(EXCERPT[prefix])
    clock = _CountingClock(2026, 0.0)
    assert [clock.stamp(p) for p in prefixes] == [_Clock(2026, 0.0).stamp(p) for p in prefixes]
    assert prefixes and all(
        stamp[0] is not None for stamp in map(_Clock(2026, 0.0).stamp, prefixes)
    )


def test_talos_stamps_of_one_second_are_answered_by_the_short_cut() -> None:
    """Talos prints nanoseconds and drops trailing zeros ('.29087688Z' beside '.290880774Z'): the
    twelve stamps share 21:27:51, and all but the first are read from their fraction alone."""
    prefixes = _iso_prefixes(EXCERPT["02"])
    clock = _CountingClock(2026, 0.0)
    seconds = [clock.stamp(p)[0] for p in prefixes]
    assert clock.hits == len(prefixes) - 1 == 11
    assert seconds[0] == pytest.approx(1776893271.29087688)
    assert seconds[5] == pytest.approx(1776893271.29120365)
    assert seconds == sorted(seconds)


def test_a_stacked_dmesg_stamp_reads_its_wall_clock_and_its_uptime() -> None:
    """util-linux 2.40's dmesg stacks --time-format raw, ctime, reltime, iso: the uptime first,
    then the wall clock. The plain-dmesg short cut read the uptime and dropped the rest; the
    ISO stamp (with its -08:00 zone) and the ctime are the line's calendar time."""
    stacked = [p for p in _iso_prefixes(EXCERPT["03"]) if p.startswith("[17159596.699613] ")]
    assert [_Clock(2026, 0.0).stamp(p) for p in stacked] == [(1703276784.559615, 17159596.699613)]
    ctime = stacked[0][: stacked[0].index("2023] ") + 6]
    assert _Clock(2026, -8 * 3600.0).stamp(ctime) == (1703276784.0, 17159596.699613)
    reltime_iso = stacked[0][stacked[0].index("[  +") :]
    assert _Clock(2026, 0.0).stamp(reltime_iso) == (1703276784.559615, None)


_TAILS_AFTER_UPTIME = st.sampled_from(
    [
        "",
        "[  T511] ",
        "[    C3] ",
        "kernel: ",
        "[Fri Dec 22 12:26:24 2023] ",
        "[  +0.000000] ",
        "2023-12-22T12:26:24,559615-08:00 ",
        "[Fri Dec 22 12:26:24 2023] [  +0.000000] 2023-12-22T12:26:24,559613-08:00 ",
    ]
)


@settings(max_examples=150, deadline=None)
@given(stamp=st.from_regex(r"\A\[ {0,5}\+?\d{1,8}\.\d{1,6}\] \Z"), tail=_TAILS_AFTER_UPTIME)
def test_the_dmesg_short_cut_reads_what_the_long_way_reads(stamp: str, tail: str) -> None:
    prefix = stamp + tail
    assert _Clock(2026, 3600.0).stamp(prefix) == _Clock(2026, 3600.0)._read(prefix)


@pytest.mark.parametrize("prefix", ["01", "13"])
def test_a_log_read_twice_through_the_tally_counts_each_record_once(prefix: str) -> None:
    """The same log saved twice on a node (kern.log and syslog hold the same records): the tally
    reads the first copy as the scanner does and each Xid record of the second -- dated by its
    uptime (01) or its syslog second (13) -- as a copy."""
    text = EXCERPT[prefix]
    tally = XidRecordTally()
    first, repeated = tally.scan(text, year=2026)
    assert repeated == 0 and first.groups == scan_kernel_log(text, year=2026).groups
    second, repeated = tally.scan(text, year=2026)
    assert second.groups == () and repeated == 1


def test_an_undated_record_read_twice_is_not_taken_for_a_copy() -> None:
    """vkd3d-proton#1652's bare Xid 31 line has no stamp: nothing tells a second copy from the
    same fault happening again, so the tally keeps it (the records' keys are their times)."""
    tally = XidRecordTally()
    reports = [tally.scan(EXCERPT["14"], year=2026) for _ in range(2)]
    assert [(r.groups[0].xid, r.groups[0].count, repeated) for r, repeated in reports] == [
        (31, 1, 0),
        (31, 1, 0),
    ]


def test_the_excerpts_read_in_one_tally_keep_every_xid() -> None:
    """Unrelated logs through one tally: no record is taken for another log's copy."""
    tally = XidRecordTally()
    for row, text in zip(ROWS, TEXTS, strict=True):
        report, repeated = tally.scan(text, year=2026)
        assert repeated == 0
        assert sum(g.count for g in report.groups) == sum(x["count"] for x in row["xids"])


def test_sxids_of_three_switches_give_one_alarm_each_with_its_links(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """gpud's SXid README: SXid 20034 'LTSSM Fault Up' (Fatal) on nvswitch0 links 63 and 62,
    nvswitch1 link 48 and nvswitch2 link 37, the 'Severity'/'Data' lines being the same records'
    follow-ups; Xid 79 on 0000:91:00 is the GPU's own alarm."""
    assert main(["doctor", "--from", str(SET.path(ROWS[0])), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    switches = {
        f["device"]["pci_bus_id"]: f["title"] for f in findings if f["code"] == "nvswitch-error"
    }
    assert sorted(switches) == ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0"]
    assert "links 62, 63" in switches["0000:05:00.0"] and "×2" in switches["0000:05:00.0"]
    assert "links 48" in switches["0000:06:00.0"] and "links 37" in switches["0000:07:00.0"]
    assert all(f["severity"] == "critical" for f in findings)


def test_rpc_transaction_ids_are_no_xids() -> None:
    """nfs-ganesha's 'has xid=4160802247' is an ONC RPC transaction id: no Xid line, read or not."""
    report = scan_kernel_log(EXCERPT["08"])
    assert (report.xid_lines, report.unparsed_xid_lines, report.groups) == (0, 0, ())


test_whole_excerpts_joined_keep_every_xid = joined_check(SET)
