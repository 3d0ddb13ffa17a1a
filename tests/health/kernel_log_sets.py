"""The held-out kernel-log sets (tests/data/xid_public, xid_forum, xid_heldout3...): each a folder
of real excerpts named ``<prefix>__<what>.log`` with the Xids read by hand in ``expected.json``;
loading a set, the checks every set gets (as parametrized tests a module takes by name), and the
fuzz strategies that cut, splice and join a set's excerpts."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.catalog.xid import UNKNOWN_XID_SEVERITY, xid_info
from gpuwarden.cli.main import main
from gpuwarden.health.kernel_log import KernelLogScanner, scan_kernel_log
from gpuwarden.health.xid_groups import MAX_LINES_PER_GROUP
from gpuwarden.types.health import KernelLogReport, Severity
from tests.conftest import FIXTURES

DATA = Path(__file__).resolve().parents[1] / "data"
# Xids whose severity the payload decides (NVLink5 sub-unit, 154's new recovery action, 45's
# "caused by"): their expected severity is the one written per excerpt, not the catalog row's
PAYLOAD_DECIDED = frozenset({45, 154, *range(144, 151)})

# what the excerpts' pieces are joined with when spliced
JOINERS = ("", "\n", "\r\n", " ")
# the public bug reports' sources, which a new set must not cite again either
BUG_REPORT_SOURCES = DATA / "bug_report_public" / "SOURCES.md"
# the other held-out sets' sources a kernel-log set must not cite again (from xid_heldout10 on)
OTHER_SOURCES = (
    BUG_REPORT_SOURCES,
    *(
        DATA / name / "SOURCES.md"
        for name in ("pcie_aer_public", "pcie_aer_public2", "pcie_aer_public3", "explain")
    ),
)
# the sizes of the pieces a whole excerpt is fed in, as a reader of a pipe or a file gets them
CHUNK_SIZES = (1, 97, 4096)
# the words that mark a line as the driver's or the kernel's: such a line of an earlier set must
# not come again
DRIVER_LINE_MARKERS = ("NVRM", "nvidia", "Xid", "XID", "xid", "kernel")

Row = dict[str, Any]


class ExcerptSet:
    """One folder of excerpts and the rows of its ``expected.json``."""

    def __init__(self, folder: str) -> None:
        self.data = DATA / folder
        self.rows: list[Row] = json.loads((self.data / "expected.json").read_text(encoding="utf-8"))

    def path(self, row: Row) -> Path:
        (path,) = self.data.glob(f"{row['prefix']}__*.log")
        return path

    def ids(self) -> list[str]:
        return [self.path(row).stem for row in self.rows]

    def texts(self) -> list[str]:
        """Each row's excerpt, in the rows' order."""
        return [self.path(row).read_text(encoding="utf-8") for row in self.rows]

    def excerpts(self) -> dict[str, str]:
        """Each excerpt by its row's prefix."""
        return {row["prefix"]: text for row, text in zip(self.rows, self.texts(), strict=True)}

    def scan(self, row: Row) -> KernelLogReport:
        return scan_kernel_log(self.path(row).read_text(encoding="utf-8"))

    def doctor_params(self) -> list[Any]:
        """One case a row; a row with ``doctor_xfail`` is a strict xfail with that reason."""
        return [
            pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["doctor_xfail"]))
            if row["doctor_xfail"]
            else row
            for row in self.rows
        ]

    def scanner_params(self) -> list[Any]:
        """One case a row; a row with ``scanner_xfail`` is a strict xfail with that reason."""
        return [
            pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["scanner_xfail"]))
            if row.get("scanner_xfail")
            else row
            for row in self.rows
        ]

    def assert_names_its_sources(self) -> None:
        """The set's SOURCES.md names each excerpt's file and the source its row cites."""
        sources = (self.data / "SOURCES.md").read_text(encoding="utf-8")
        assert all(self.path(row).name in sources and row["source"] in sources for row in self.rows)

    def assert_cites_only_new_sources(
        self, earlier: Iterable[str], documents: Iterable[Path] = ()
    ) -> None:
        """Each row cites a source of its own, one no ``earlier`` set and none of ``documents``
        cites (see ``sources_cited``)."""
        sources = [row["source"] for row in self.rows]
        assert not set(sources) & sources_cited(earlier, documents)
        assert len(set(sources)) == len(sources)


def sets_before(n: int) -> tuple[str, ...]:
    """The held-out kernel-log sets before ``xid_heldout{n}``: its new-source and new-line
    checks compare with all of them."""
    return ("xid_public", "xid_forum", *(f"xid_heldout{k}" for k in range(3, n)))


def printed_bus(printed: str | None) -> str | None:
    """ "0000:41:00" as printed in "Xid (PCI:0000:41:00)" → "0000:41:00.0"."""
    return None if printed is None else f"{printed.lower()}.0"


def utc_seconds(stamp: str | None) -> float | None:
    """A row's ISO stamp without a zone, read as UTC (as dmesg -T prints none)."""
    return None if stamp is None else datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()


def sources_cited(folders: Iterable[str], documents: Iterable[Path] = ()) -> set[str]:
    """Every source the rows of the sets in ``folders`` cite, and every URL the shared fixtures'
    Xid SOURCES.md and xid_lines_from_issues.tsv and the given ``documents`` name."""
    cited: set[str] = set()
    for folder in folders:
        cited |= {row["source"] for row in ExcerptSet(folder).rows}
    shared = [FIXTURES / "xid" / name for name in ("SOURCES.md", "xid_lines_from_issues.tsv")]
    for document in [*shared, *documents]:
        words = document.read_text(encoding="utf-8").split()
        cited |= {word.strip("|()`<>") for word in words if word.startswith("https://")}
    return cited


def fuzz(max_examples: int) -> settings:
    """Hypothesis settings for the fuzz tests over a set's excerpts."""
    return settings(
        max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


def spliced(texts: Sequence[str], joiners: Sequence[str] = JOINERS) -> st.SearchStrategy[str]:
    """Pieces of two or three excerpts, each cut at any character, joined end to end."""

    @st.composite
    def pieces(draw: st.DrawFn) -> str:
        text = ""
        for _ in range(draw(st.integers(min_value=2, max_value=3))):
            excerpt = draw(st.sampled_from(texts))
            start = draw(st.integers(min_value=0, max_value=len(excerpt)))
            end = draw(st.integers(min_value=start, max_value=len(excerpt)))
            text += excerpt[start:end] + draw(st.sampled_from(joiners))
        return text

    return pieces()


def feed_sizes() -> st.SearchStrategy[list[int]]:
    """The sizes of the chunks a text is fed to the scanner in (the rest in one last chunk)."""
    return st.lists(st.integers(min_value=1, max_value=120), max_size=12)


def excerpt_orders(count: int) -> st.SearchStrategy[list[int]]:
    """Up to four of ``count`` excerpts' indices, in any order."""
    return st.permutations(range(count)).map(lambda order: order[:4])


def joined(texts: Sequence[str], order: Iterable[int]) -> str:
    """The excerpts in ``order``, whole, one after another, each ending its last line."""
    return "".join(texts[i] if texts[i].endswith("\n") else texts[i] + "\n" for i in order)


def line_count(text: str) -> int:
    """Lines in ``text``, the last one counted even without its line end."""
    return text.count("\n") + (1 if text and text[-1] != "\n" else 0)


def fed(pieces: Iterable[str]) -> KernelLogReport:
    """The scanner's report on ``pieces`` fed one after another."""
    scanner = KernelLogScanner()
    for piece in pieces:
        scanner.feed(piece)
    return scanner.finish()


def assert_read_alike_in_pieces(text: str, sizes: Sequence[int]) -> KernelLogReport:
    """Every Xid line is grouped or counted unparsed, each group sits within the text and keeps
    at most its share of lines, and the text fed in chunks of ``sizes`` reads as it does whole;
    the whole text's report, for the caller's own checks."""
    report = scan_kernel_log(text)
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
    return report


def assert_joined_keep_every_xid(
    report: KernelLogReport, rows: Sequence[Row], order: Sequence[int]
) -> None:
    """Whole excerpts joined: as many Xid lines as the excerpts hold together, and each
    excerpt's message kinds are still there."""
    assert sum(g.count for g in report.groups) == sum(
        x["count"] for i in order for x in rows[i]["xids"]
    )
    assert {kind for kind, _ in report.other} == {k for i in order for k in rows[i]["other"]}


def assert_placed_and_dated(report: KernelLogReport, row: Row) -> None:
    """Each of the row's Xids: its group's first and last line, its wall-clock stamps (UTC) and
    its uptimes are the row's."""
    groups = {g.xid: g for g in report.groups}
    for x in row["xids"]:
        group = groups[x["xid"]]
        assert [group.first_line, group.last_line] == x["lines"]
        assert (group.first_seen_s, group.last_seen_s) == (
            utc_seconds(x["first_seen_utc"]),
            utc_seconds(x["last_seen_utc"]),
        )
        assert (group.first_uptime_s, group.last_uptime_s) == (
            x["first_uptime_s"],
            x["last_uptime_s"],
        )


def assert_no_line_is_shared_and_pastes_kept(texts: Iterable[str], fixtures: Path) -> None:
    """No excerpt line is a line of the shared fixtures' Xid lines, and some line kept the
    trailing space its paste had."""
    shared = (fixtures / "xid" / "xid_lines_from_issues.tsv").read_text(encoding="utf-8")
    texts = list(texts)
    for text in texts:
        assert not any(line.strip() and line in shared for line in text.splitlines())
    assert any(line.endswith(" ") for text in texts for line in text.splitlines())


def assert_no_line_of_earlier_sets(
    texts: Iterable[str], earlier: Iterable[str], markers: Sequence[str]
) -> None:
    """No excerpt line is a line holding any of ``markers`` in an ``earlier`` set's excerpts, nor
    an NVRM line of the shared fixtures' Xid lines. A line without a digit names no time, device
    or number: it is the driver's fixed words ("NVRM: fallen off the bus and is not responding
    to commands.", the third line of nv-pci.c's message), which every log printing it holds."""
    held = {
        line.strip()
        for folder in earlier
        for path in (DATA / folder).glob("*.log")
        for line in path.read_text(encoding="utf-8").splitlines()
        if any(marker in line for marker in markers)
    }
    shared = (FIXTURES / "xid" / "xid_lines_from_issues.tsv").read_text(encoding="utf-8")
    for text in texts:
        for line in filter(_names_something, text.splitlines()):
            assert line.strip() not in held
            assert not ("NVRM" in line and line.strip() in shared)


def _names_something(line: str) -> bool:
    """A line that states a time, a device or a number (a digit), not only a message's words."""
    return any(char.isdigit() for char in line)


def assert_scanned_exactly(
    report: KernelLogReport, row: Row, bus: Callable[[str | None], str | None] = lambda b: b
) -> None:
    """The report holds exactly the row's Xid groups (``bus`` turns the bus as written in the
    row into the scanner's form), the row's count of lines that say Xid without being a
    readable driver Xid line (prose, templates; none where the row gives no ``unparsed``), the
    GPUs lost without an Xid and the other driver messages the row lists."""
    found = sorted(
        ((g.xid, g.pci_bus_id, g.uuid, g.count, g.severity.value) for g in report.groups), key=repr
    )
    expected = sorted(
        ((x["xid"], bus(x["bus"]), x["uuid"], x["count"], x["severity"]) for x in row["xids"]),
        key=repr,
    )
    assert found == expected
    assert report.unparsed_xid_lines == row.get("unparsed", 0)
    assert sorted(str(g.pci_bus_id) for g in report.fallen_off_bus) == row["lost_without_xid"]
    assert {kind for kind, _ in report.other} == set(row["other"])


def assert_severity_is_the_catalogs(
    report: KernelLogReport, payload_decided: Collection[int] = ()
) -> None:
    """Each group's severity is the catalog's row (the default for an Xid it does not list),
    except the Xids whose payload decides it."""
    for group in report.groups:
        if group.xid in payload_decided:
            continue
        info = xid_info(group.xid)
        assert group.severity == (UNKNOWN_XID_SEVERITY if info is None else info.severity)


def assert_doctor_gives_the_codes(path: Path, row: Row, capsys: pytest.CaptureFixture[str]) -> None:
    """``doctor --from`` on the excerpt exits as written down; a refusal is a clear error document
    on stderr (never a traceback); otherwise the finding codes are the row's, and an excerpt
    without a fault gets nothing above info."""
    code = main(["doctor", "--from", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == row["doctor_exit"]
    if code != 0:
        error = json.loads(err)
        assert error["reference"] == "capture-not-recognised" and error["hint"]
        return
    document = json.loads(out)
    assert {f["code"] for f in document["findings"]} == set(row["doctor_codes"])
    if not row["fault"]:
        assert [f["code"] for f in document["findings"] if f["severity"] != "info"] == []


# The parametrized checks each set gets, the same but for the set: a module takes them by
# assigning them to its test names (pytest collects a test under the name it is assigned to).


def scanner_check(
    excerpts: ExcerptSet, bus: Callable[[str | None], str | None] = lambda b: b
) -> Callable[[Row], None]:
    """Each excerpt's report holds exactly its row's Xids (see ``assert_scanned_exactly``); a row
    with a ``scanner_xfail`` is a strict xfail."""

    @pytest.mark.parametrize("row", excerpts.scanner_params(), ids=excerpts.ids())
    def check(row: Row) -> None:
        assert_scanned_exactly(excerpts.scan(row), row, bus=bus)

    return check


def severity_check(
    excerpts: ExcerptSet, payload_decided: Collection[int] = ()
) -> Callable[[Row], None]:
    """Each excerpt's groups have the catalog's severity but those of ``payload_decided``."""

    @pytest.mark.parametrize("row", excerpts.rows, ids=excerpts.ids())
    def check(row: Row) -> None:
        assert_severity_is_the_catalogs(excerpts.scan(row), payload_decided)

    return check


def doctor_check(excerpts: ExcerptSet) -> Callable[[Row, pytest.CaptureFixture[str]], None]:
    """``doctor --from`` on each excerpt (see ``assert_doctor_gives_the_codes``)."""

    @pytest.mark.parametrize("row", excerpts.doctor_params(), ids=excerpts.ids())
    def check(row: Row, capsys: pytest.CaptureFixture[str]) -> None:
        assert_doctor_gives_the_codes(excerpts.path(row), row, capsys)

    return check


def new_lines_check(
    excerpts: ExcerptSet, earlier: Iterable[str], markers: Sequence[str] = DRIVER_LINE_MARKERS
) -> Callable[[], None]:
    """No excerpt repeats a line of an ``earlier`` set (see ``assert_no_line_of_earlier_sets``)."""
    texts, earlier = excerpts.texts(), tuple(earlier)

    def check() -> None:
        assert_no_line_of_earlier_sets(texts, earlier, markers)

    return check


def group_lines_check(excerpts: ExcerptSet, with_mnemonic: bool = False) -> Callable[[Row], None]:
    """Each of a row's Xid groups (by Xid and printed bus) spans the lines read by hand, and
    ``with_mnemonic`` carries the catalog's name the row gives."""

    @pytest.mark.parametrize("row", excerpts.rows, ids=excerpts.ids())
    def check(row: Row) -> None:
        groups = {(g.xid, g.pci_bus_id): g for g in excerpts.scan(row).groups}
        if with_mnemonic:
            assert {k: ([g.first_line, g.last_line], g.mnemonic) for k, g in groups.items()} == {
                (x["xid"], printed_bus(x["bus"])): (x["lines"], x["mnemonic"]) for x in row["xids"]
            }
        else:
            assert {key: [g.first_line, g.last_line] for key, g in groups.items()} == {
                (x["xid"], printed_bus(x["bus"])): x["lines"] for x in row["xids"]
            }

    return check


def worst_severity_check(
    excerpts: ExcerptSet,
) -> Callable[[Row, pytest.CaptureFixture[str]], None]:
    """``doctor --from`` on each excerpt exits as written down, prints nothing when it refuses,
    and otherwise its worst finding's severity is the row's (None for no finding)."""

    @pytest.mark.parametrize("row", excerpts.doctor_params(), ids=excerpts.ids())
    def check(row: Row, capsys: pytest.CaptureFixture[str]) -> None:
        code = main(["doctor", "--from", str(excerpts.path(row)), "--json"])
        out = capsys.readouterr().out
        assert code == row["doctor_exit"]
        if code != 0:
            assert out == ""
            return
        findings = json.loads(out)["findings"]
        ranks = {s.value: s.rank for s in Severity}
        worst = max((f["severity"] for f in findings), key=ranks.__getitem__, default=None)
        assert worst == row["worst_severity"]

    return check


def chunks_check(excerpts: ExcerptSet) -> Callable[[Row, int], None]:
    """Each excerpt fed in pieces of each of ``CHUNK_SIZES`` reads as it does whole."""
    excerpt = excerpts.excerpts()

    @pytest.mark.parametrize("size", CHUNK_SIZES)
    @pytest.mark.parametrize("row", excerpts.rows, ids=excerpts.ids())
    def check(row: Row, size: int) -> None:
        text = excerpt[row["prefix"]]
        assert fed(text[at : at + size] for at in range(0, len(text), size)) == scan_kernel_log(
            text
        )

    return check


def spliced_check(excerpts: ExcerptSet, max_examples: int = 60) -> Callable[..., None]:
    """Pieces of the set's excerpts spliced read consistently (``assert_read_alike_in_pieces``)."""

    @fuzz(max_examples)
    @given(text=spliced(excerpts.texts()), sizes=feed_sizes())
    def check(text: str, sizes: list[int]) -> None:
        assert_read_alike_in_pieces(text, sizes)

    return check


def joined_check(excerpts: ExcerptSet, max_examples: int = 60) -> Callable[..., None]:
    """Whole excerpts joined keep every Xid (``assert_joined_keep_every_xid``)."""
    texts = excerpts.texts()

    @fuzz(max_examples)
    @given(order=excerpt_orders(len(excerpts.rows)))
    def check(order: list[int]) -> None:
        assert_joined_keep_every_xid(scan_kernel_log(joined(texts, order)), excerpts.rows, order)

    return check


TestFn = Callable[..., None]


def sampled_set_check(
    excerpts: ExcerptSet, earlier: Iterable[str], min_rows: int, min_healthy: int = 3
) -> TestFn:
    """A set sampled as the search gave it (from xid_heldout12 on): it names its sources and
    cites only new ones (none of ``earlier`` nor ``OTHER_SOURCES``), holds ``min_rows`` to 25
    excerpts, ``min_healthy`` healthy ones among them (what its frame's threads gave), and every
    one is a kernel log; a test its module binds under a ``test_*`` name."""

    def check() -> None:
        rows = excerpts.rows
        excerpts.assert_names_its_sources()
        excerpts.assert_cites_only_new_sources(earlier, OTHER_SOURCES)
        assert min_rows <= len(rows) <= 25
        # sampled: healthy excerpts come too
        assert sum(not row["fault"] for row in rows) >= min_healthy
        assert all(row["doctor_exit"] == 0 for row in rows)  # every one is a kernel log

    return check


def kernel_log_set_checks(
    excerpts: ExcerptSet, earlier: Iterable[str], markers: Sequence[str] = DRIVER_LINE_MARKERS
) -> tuple[TestFn, TestFn, TestFn, TestFn, TestFn, TestFn]:
    """The six checks every held-out set from xid_heldout9 on runs, as test functions for its
    module: no line of an ``earlier`` set again (``new_lines_check``), the Xids read by hand with
    the printed bus (``scanner_check``), the catalog's severities but the payload-decided Xids
    (``severity_check``), ``doctor_check``, ``worst_severity_check`` and ``spliced_check``."""
    return (
        new_lines_check(excerpts, earlier, markers),
        scanner_check(excerpts, bus=printed_bus),
        severity_check(excerpts, PAYLOAD_DECIDED),
        doctor_check(excerpts),
        worst_severity_check(excerpts),
        spliced_check(excerpts),
    )


def sampled_set_checks(
    excerpts: ExcerptSet, earlier: Sequence[str], min_rows: int, min_healthy: int = 3
) -> tuple[TestFn, TestFn, TestFn, TestFn, TestFn, TestFn, TestFn, TestFn]:
    """Every check a sampled set (from xid_heldout12 on) runs, as test functions for its module:
    ``sampled_set_check``, the six of ``kernel_log_set_checks`` and ``chunks_check``."""
    return (
        sampled_set_check(excerpts, earlier, min_rows, min_healthy),
        *kernel_log_set_checks(excerpts, earlier),
        chunks_check(excerpts),
    )
