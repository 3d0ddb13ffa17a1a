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

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.health.kernel_log import KernelLogScanner, scan_kernel_log
from gpuwarden.health.xid_groups import MAX_LINES_PER_GROUP
from tests.conftest import FIXTURES
from tests.health.kernel_log_sets import (
    PAYLOAD_DECIDED,
    ExcerptSet,
    assert_doctor_gives_the_codes,
    assert_scanned_exactly,
    assert_severity_is_the_catalogs,
)

SET = ExcerptSet("xid_heldout4")
ROWS = SET.rows
TEXTS = [SET.path(row).read_text(encoding="utf-8") for row in ROWS]
EXCERPT = {row["prefix"]: text for row, text in zip(ROWS, TEXTS, strict=True)}
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# util-linux dmesg --color=always (lib/colors, dmesg.c): the timestamp green, the subsystem
# prefix ("NVRM: ") brown, an error-level message red; each switched off with SGR 0.
TIME_COLOUR, SUBSYS_COLOUR, ERROR_COLOUR, RESET = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[0m"


def _bus(printed: str | None) -> str | None:
    """ "0000:41:00" as printed in "Xid (PCI:0000:41:00)" → "0000:41:00.0"."""
    return None if printed is None else f"{printed.lower()}.0"


def _other_sets_sources() -> set[str]:
    """Every URL the earlier sets and the shared fixtures cite."""
    cited: set[str] = set()
    for folder in ("xid_public", "xid_forum", "xid_heldout3"):
        cited |= {row["source"] for row in ExcerptSet(folder).rows}
    texts = [(FIXTURES / "xid" / n).read_text(encoding="utf-8") for n in ("SOURCES.md",)]
    texts.append((FIXTURES / "xid" / "xid_lines_from_issues.tsv").read_text(encoding="utf-8"))
    texts.append((SET.data.parent / "bug_report_public" / "SOURCES.md").read_text("utf-8"))
    for text in texts:
        cited |= {word.strip("|()`<>") for word in text.split() if word.startswith("https://")}
    return cited


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    sources = (SET.data / "SOURCES.md").read_text(encoding="utf-8")
    assert all(SET.path(row).name in sources and row["source"] in sources for row in ROWS)
    assert not {row["source"] for row in ROWS} & _other_sets_sources()
    assert len({row["source"] for row in ROWS}) == len(ROWS)
    assert 15 <= len(ROWS) <= 40
    assert len({x["xid"] for row in ROWS for x in row["xids"]}) >= 8
    assert sum(not row["fault"] for row in ROWS) >= 5


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_scanner_finds_exactly_the_xids(row: dict[str, Any]) -> None:
    assert_scanned_exactly(SET.scan(row), row, bus=_bus)


def _utc(stamp: str | None) -> float | None:
    return None if stamp is None else datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()


TIMED = [row for row in ROWS if row["xids"] and all("lines" in x for x in row["xids"])]


@pytest.mark.parametrize("row", TIMED, ids=[SET.path(row).stem for row in TIMED])
def test_each_xid_is_placed_and_dated_as_the_lines_say(row: dict[str, Any]) -> None:
    """The group's first and last line, and its stamps: an ISO stamp with its zone, the uptime
    of "[ 1234.567890]", nothing where the line states no time (a journal date has no year)."""
    groups = {g.xid: g for g in SET.scan(row).groups}
    for x in row["xids"]:
        group = groups[x["xid"]]
        assert [group.first_line, group.last_line] == x["lines"]
        assert (group.first_seen_s, group.last_seen_s) == (
            _utc(x["first_seen_utc"]),
            _utc(x["last_seen_utc"]),
        )
        assert (group.first_uptime_s, group.last_uptime_s) == (
            x["first_uptime_s"],
            x["last_uptime_s"],
        )


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_severity_is_the_catalogs(row: dict[str, Any]) -> None:
    assert_severity_is_the_catalogs(SET.scan(row), PAYLOAD_DECIDED)


@pytest.mark.parametrize("row", SET.doctor_params(), ids=SET.ids())
def test_doctor_gives_the_diagnosis_code(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert_doctor_gives_the_codes(SET.path(row), row, capsys)


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


def _spliced(draw: st.DrawFn) -> str:
    """Pieces of two or three excerpts, each cut at any character, joined end to end."""
    text = ""
    for _ in range(draw(st.integers(min_value=2, max_value=3))):
        excerpt = draw(st.sampled_from(TEXTS))
        start = draw(st.integers(min_value=0, max_value=len(excerpt)))
        end = draw(st.integers(min_value=start, max_value=len(excerpt)))
        text += excerpt[start:end] + draw(st.sampled_from(["", "\n", "\r\n", " ", "\x1b[0m"]))
    return text


@FUZZ
@given(
    text=st.composite(_spliced)(),
    sizes=st.lists(st.integers(min_value=1, max_value=120), max_size=12),
)
def test_cut_and_spliced_excerpts_read_consistently(text: str, sizes: list[int]) -> None:
    report = scan_kernel_log(text)
    assert report.lines_scanned == text.count("\n") + (1 if text and text[-1] != "\n" else 0)
    assert report.xid_lines == sum(g.count for g in report.groups) + report.unparsed_xid_lines
    for group in report.groups + report.fallen_off_bus:
        assert 1 <= group.first_line <= group.last_line <= report.lines_scanned
        assert len(group.lines) <= MAX_LINES_PER_GROUP
    scanner = KernelLogScanner()
    at = 0
    for size in sizes:
        scanner.feed(text[at : at + size])
        at += size
    scanner.feed(text[at:])
    assert scanner.finish() == report


@FUZZ
@given(order=st.permutations(range(len(ROWS))).map(lambda p: p[:4]))
def test_whole_excerpts_joined_keep_every_xid(order: list[int]) -> None:
    joined = "".join(TEXTS[i] if TEXTS[i].endswith("\n") else TEXTS[i] + "\n" for i in order)
    report = scan_kernel_log(joined)
    assert sum(g.count for g in report.groups) == sum(
        x["count"] for i in order for x in ROWS[i]["xids"]
    )
    assert {kind for kind, _ in report.other} == {k for i in order for k in ROWS[i]["other"]}


def test_the_excerpts_are_as_pasted(fixtures: Path) -> None:
    """No excerpt line is a shared fixture line, and none was cleaned of what the paste had
    (trailing spaces, the reporter's own annotations, elision marks)."""
    shared = (fixtures / "xid" / "xid_lines_from_issues.tsv").read_text(encoding="utf-8")
    for text in TEXTS:
        assert not any(line.strip() and line in shared for line in text.splitlines())
    assert any(line.endswith(" ") for text in TEXTS for line in text.splitlines())
    assert "[...snip...]" in EXCERPT["02"] and "x17" in EXCERPT["06"]
