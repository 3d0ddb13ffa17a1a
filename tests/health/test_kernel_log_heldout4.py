"""A fourth held-out set of kernel logs (tests/data/xid_heldout4: real text from GitHub issues,
PRs and repository files, none cited by the other kernel-log sets or shared/fixtures), aimed at
what the others lack: Xid 74/94/95/63/120 with the ``pid='<unknown>'`` field, a MIG
``GPU-I:`` device, Xid 79 without text, WSL2 kernel logs, JSON health events and node
conditions quoting kernel records (NVSentinel), ``dmesg -x`` / ``--time-format=iso`` prefixes,
an NVSwitch SXid that is no Xid, non-English journal months. The scanner finds exactly the Xids
read by hand; ``doctor --from`` gives the diagnosis.md codes, nothing above info on an excerpt
without a GPU fault. The same excerpts coloured as ``dmesg --color=always`` prints them, or
with Windows line ends, read the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.health.kernel_log import scan_kernel_log
from tests.health.kernel_log_sets import (
    BUG_REPORT_SOURCES,
    JOINERS,
    PAYLOAD_DECIDED,
    ExcerptSet,
    assert_joined_keep_every_xid,
    assert_no_line_is_shared_and_pastes_kept,
    assert_placed_and_dated,
    assert_read_alike_in_pieces,
    doctor_check,
    excerpt_orders,
    feed_sizes,
    fuzz,
    joined,
    line_count,
    printed_bus,
    scanner_check,
    severity_check,
    spliced,
)

SET = ExcerptSet("xid_heldout4")
ROWS = SET.rows
TEXTS = SET.texts()
EXCERPT = SET.excerpts()
FUZZ = fuzz(max_examples=100)
# util-linux dmesg --color=always (lib/colors, dmesg.c): the timestamp green, the subsystem
# prefix ("NVRM: ") brown, an error-level message red; each switched off with SGR 0.
TIME_COLOUR, SUBSYS_COLOUR, ERROR_COLOUR, RESET = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[0m"


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    earlier = ("xid_public", "xid_forum", "xid_heldout3")
    SET.assert_cites_only_new_sources(earlier, [BUG_REPORT_SOURCES])
    assert 15 <= len(ROWS) <= 40
    assert len({x["xid"] for row in ROWS for x in row["xids"]}) >= 8
    assert sum(not row["fault"] for row in ROWS) >= 5


test_scanner_finds_exactly_the_xids = scanner_check(SET, bus=printed_bus)

TIMED = [row for row in ROWS if row["xids"] and all("lines" in x for x in row["xids"])]


@pytest.mark.parametrize("row", TIMED, ids=[SET.path(row).stem for row in TIMED])
def test_each_xid_is_placed_and_dated_as_the_lines_say(row: dict[str, Any]) -> None:
    """The group's first and last line, and its stamps: an ISO stamp with its zone, the uptime
    of "[ 1234.567890]", nothing where the line states no time (a journal date has no year)."""
    assert_placed_and_dated(SET.scan(row), row)


test_severity_is_the_catalogs = severity_check(SET, PAYLOAD_DECIDED)
test_doctor_gives_the_diagnosis_code = doctor_check(SET)


def _coloured_line(line: str) -> str:
    """One line as ``dmesg --color=always`` prints it: the "[uptime]" stamp, the "NVRM: "
    subsystem prefix and the rest of an NVRM message each in their own colour."""
    if line.startswith("[") and "] " in line:
        stamp, rest = line.split("] ", 1)
        line = f"{TIME_COLOUR}{stamp}] {RESET}{rest}"
    if "NVRM: " not in line:
        return line
    head, message = line.split("NVRM: ", 1)
    return f"{head}{SUBSYS_COLOUR}NVRM: {RESET}{ERROR_COLOUR}{message.rstrip()}{RESET}\n"


def _coloured(text: str) -> str:
    return "".join(_coloured_line(line) for line in text.splitlines(keepends=True))


def _group_keys(text: str) -> list[tuple[int, str | None, int]]:
    return sorted((g.xid, g.pci_bus_id, g.count) for g in scan_kernel_log(text).groups)


@pytest.mark.parametrize("prefix", ["09", "10", "11"])
def test_dmesg_colours_do_not_hide_an_xid(prefix: str) -> None:
    """SGR sequences split "NVRM: " from "Xid (": the Xids, their uptime and doctor's
    recognition of the text stay those of the plain excerpt."""
    plain, coloured = EXCERPT[prefix], _coloured(EXCERPT[prefix])
    assert "\x1b[" in coloured and _group_keys(coloured) == _group_keys(plain)
    assert [g.first_uptime_s for g in scan_kernel_log(coloured).groups] == [
        g.first_uptime_s for g in scan_kernel_log(plain).groups
    ]
    assert classify(coloured) is CaptureKind.KERNEL_LOG


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_windows_line_ends_read_the_same(row: dict[str, Any]) -> None:
    text = EXCERPT[row["prefix"]]
    assert _group_keys(text.replace("\n", "\r\n")) == _group_keys(text)


def test_a_tool_joining_two_kernel_records_on_one_line_counts_both() -> None:
    """NVSentinel's node condition strings its events together with ';': each quoted
    "NVRM: Xid (" is one message the driver printed (it prints one Xid per message)."""
    report = scan_kernel_log(EXCERPT["12"])
    assert report.xid_lines == 2 and {g.first_line for g in report.groups} == {1}


@FUZZ
@given(text=spliced(TEXTS, [*JOINERS, RESET]), sizes=feed_sizes())
def test_cut_and_spliced_excerpts_read_consistently(text: str, sizes: list[int]) -> None:
    report = assert_read_alike_in_pieces(text, sizes)
    assert report.lines_scanned == line_count(text)


@FUZZ
@given(order=excerpt_orders(len(ROWS)))
def test_whole_excerpts_joined_keep_every_xid(order: list[int]) -> None:
    assert_joined_keep_every_xid(scan_kernel_log(joined(TEXTS, order)), ROWS, order)


def test_the_excerpts_are_as_pasted(fixtures: Path) -> None:
    """No excerpt line is a shared fixture line, and none was cleaned of what the paste had
    (trailing spaces, the reporter's own annotations, elision marks)."""
    assert_no_line_is_shared_and_pastes_kept(TEXTS, fixtures)
    assert "[...snip...]" in EXCERPT["02"] and "x17" in EXCERPT["06"]
