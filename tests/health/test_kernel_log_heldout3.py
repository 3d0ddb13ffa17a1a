"""A third held-out set of kernel logs (tests/data/xid_heldout3: real pastes from GitHub issues and
PRs, none in xid_public, xid_forum or shared/fixtures): the scanner finds exactly the Xids read by
hand, on the bus the line prints, with the catalog's severity (or the payload's); the other NVRM
message kinds; ``doctor --from`` exits as expected with the diagnosis.md codes, and nothing above
info on an excerpt without a GPU fault. A fuzz cuts and splices the excerpts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.health.kernel_log import KernelLogScanner, scan_kernel_log
from gpuwarden.health.xid import xid_findings
from gpuwarden.health.xid_groups import MAX_LINES_PER_GROUP
from tests.conftest import FIXTURES
from tests.health.kernel_log_sets import (
    PAYLOAD_DECIDED,
    ExcerptSet,
    assert_doctor_gives_the_codes,
    assert_scanned_exactly,
    assert_severity_is_the_catalogs,
)

SET = ExcerptSet("xid_heldout3")
ROWS = SET.rows
TEXTS = [SET.path(row).read_text(encoding="utf-8") for row in ROWS]
EXCERPT = {row["prefix"]: text for row, text in zip(ROWS, TEXTS, strict=True)}
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _bus(printed: str | None) -> str | None:
    """ "0000:41:00" as printed in "Xid (PCI:0000:41:00)" → "0000:41:00.0"."""
    return None if printed is None else f"{printed.lower()}.0"


def _other_sets_sources() -> set[str]:
    """Every URL the earlier sets and the shared fixtures cite."""
    cited: set[str] = set()
    for folder in ("xid_public", "xid_forum"):
        cited |= {row["source"] for row in ExcerptSet(folder).rows}
    fixtures = FIXTURES / "xid"
    for name in ("SOURCES.md", "xid_lines_from_issues.tsv"):
        text = (fixtures / name).read_text(encoding="utf-8")
        cited |= {word.strip("|()`") for word in text.split() if word.startswith("https://")}
    return cited


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    sources = (SET.data / "SOURCES.md").read_text(encoding="utf-8")
    assert all(SET.path(row).name in sources and row["source"] in sources for row in ROWS)
    assert not {row["source"] for row in ROWS} & _other_sets_sources()
    assert 20 <= len(ROWS) <= 40
    assert len({x["xid"] for row in ROWS for x in row["xids"]}) >= 9
    assert sum(not row["fault"] for row in ROWS) >= 3


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_scanner_finds_exactly_the_xids(row: dict[str, Any]) -> None:
    assert_scanned_exactly(SET.scan(row), row, bus=_bus)


def _utc(stamp: str | None) -> float | None:
    return None if stamp is None else datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()


TIMED = [row for row in ROWS if any("lines" in x for x in row["xids"])]


@pytest.mark.parametrize("row", TIMED, ids=[SET.path(row).stem for row in TIMED])
def test_each_xid_is_placed_and_dated_as_the_lines_say(row: dict[str, Any]) -> None:
    """The group's first and last line, and its stamps: dmesg -T read as UTC (no zone given),
    the uptime of "[ 1234.567890]" prefixes, nothing where the line states no time."""
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


def test_a_gpu_the_probe_finds_lost_is_a_lost_gpu() -> None:
    """nv_pci_probe's message when the GPU's state check says NV_ERR_GPU_IS_LOST, in the form
    NV_DEV_PRINTF gives every per-GPU message ("NVRM: GPU <domain:bus:dev.fn>: ..."), as the
    healthy boot of excerpt 17 would print it."""
    boot = EXCERPT["17"]
    lost = "[   14.000001] NVRM: GPU 0000:01:00.0: GPU is lost, skipping nv_pci_probe\n"
    report = scan_kernel_log(boot + lost)
    assert [(g.xid, g.pci_bus_id, g.count) for g in report.fallen_off_bus] == [
        (79, "0000:01:00.0", 1)
    ]
    assert dict(report.other)["gpu-lost"] == 1
    (finding,) = xid_findings(report, source="test")
    assert finding.code == "gpu-lost" and "is lost" in finding.title


def test_an_old_open_modules_message_without_the_colon_is_read() -> None:
    """Open kernel modules before R520 print "NVRM <function>: ..." (open-gpu-kernel-modules
    issue 120's title); its "Assertion failed" counts like the later "NVRM: <function>:" form."""
    title = "NVRM nvAssertOkFailedNoLog: Assertion failed: Generic operating system error\n"
    assert dict(scan_kernel_log(title).other) == {"assertion-failed": 1}
    # excerpt 16's "NVRM objClInitPcieChipset: *** Chipset Setup Function Error!" is no kind
    assert dict(scan_kernel_log(EXCERPT["16"]).other) == {"driver-loaded": 1}


def _spliced(draw: st.DrawFn) -> str:
    """Pieces of two or three excerpts, each cut at any character, joined end to end."""
    text = ""
    for _ in range(draw(st.integers(min_value=2, max_value=3))):
        excerpt = draw(st.sampled_from(TEXTS))
        start = draw(st.integers(min_value=0, max_value=len(excerpt)))
        end = draw(st.integers(min_value=start, max_value=len(excerpt)))
        text += excerpt[start:end] + draw(st.sampled_from(["", "\n", "\r\n", " "]))
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
    """Whole excerpts one after another: as many Xid lines as the excerpts hold together, and
    each excerpt's message kinds are still there."""
    joined = "".join(TEXTS[i] if TEXTS[i].endswith("\n") else TEXTS[i] + "\n" for i in order)
    report = scan_kernel_log(joined)
    assert sum(g.count for g in report.groups) == sum(
        x["count"] for i in order for x in ROWS[i]["xids"]
    )
    assert {kind for kind, _ in report.other} == {k for i in order for k in ROWS[i]["other"]}


def test_the_excerpts_are_as_pasted(fixtures: Path) -> None:
    """No excerpt is a copy of a shared fixture line, and none was cleaned of what the paste had
    (trailing spaces, indentation, a shell prompt, a blank first line)."""
    shared = (fixtures / "xid" / "xid_lines_from_issues.tsv").read_text(encoding="utf-8")
    for text in TEXTS:
        assert not any(line.strip() and line in shared for line in text.splitlines())
    assert any(line.endswith(" ") for text in TEXTS for line in text.splitlines())
    assert any(text.startswith("\n") for text in TEXTS)
