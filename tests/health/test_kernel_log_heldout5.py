"""A fifth held-out set of kernel logs (tests/data/xid_heldout5: real text from web pages -- a
Proxmox forum thread, wikis, blogs, a vendor's Xid guide, NVIDIA's README -- none cited by the
other kernel-log sets or shared/fixtures), aimed at what the others lack: a driver that cannot
initialise a GPU without the "probe routine failed" line (an invalid BAR, "None of the NVIDIA
devices were initialized"), Xid lines wrapped by hand or cut with "...", and above all text that
names Xids or NVIDIA driver pieces without being a kernel log (prose, Markdown tables, a format
template, another vendor's driver log, an Xorg log, lsmod). The scanner finds exactly what was
read by hand; ``doctor --from`` gives the diagnosis.md codes, refuses what is no capture, and
gives nothing above info on an excerpt without a GPU fault."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.health.kernel_log import KernelLogScanner, scan_kernel_log
from gpuwarden.health.xid_groups import MAX_LINES_PER_GROUP
from gpuwarden.types.health import KernelLogReport
from tests.conftest import FIXTURES
from tests.health.kernel_log_sets import (
    PAYLOAD_DECIDED,
    ExcerptSet,
    assert_doctor_gives_the_codes,
    assert_severity_is_the_catalogs,
)

SET = ExcerptSet("xid_heldout5")
ROWS = SET.rows
TEXTS = [SET.path(row).read_text(encoding="utf-8") for row in ROWS]
EXCERPT = {row["prefix"]: text for row, text in zip(ROWS, TEXTS, strict=True)}
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EARLIER_SETS = ("xid_public", "xid_forum", "xid_heldout3", "xid_heldout4")


def _bus(printed: str | None) -> str | None:
    """ "0000:65:00" as printed in "Xid (PCI:0000:65:00)" → "0000:65:00.0"."""
    return None if printed is None else f"{printed.lower()}.0"


def _other_sets_sources() -> set[str]:
    """Every URL the earlier sets and the shared fixtures cite."""
    cited: set[str] = set()
    for folder in EARLIER_SETS:
        cited |= {row["source"] for row in ExcerptSet(folder).rows}
    texts = [(FIXTURES / "xid" / "SOURCES.md").read_text(encoding="utf-8")]
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
    assert 10 <= len(ROWS) <= 40
    assert sum(not row["fault"] for row in ROWS) >= 5
    assert sum(row["doctor_exit"] == 2 for row in ROWS) >= 3  # text that is no kernel log


def test_no_excerpt_repeats_a_line_of_another_set() -> None:
    held = {
        line.strip()
        for folder in EARLIER_SETS
        for path in (SET.data.parent / folder).glob("*.log")
        for line in path.read_text(encoding="utf-8").splitlines()
        if "NVRM" in line or "Xid" in line
    }
    shared = (FIXTURES / "xid" / "xid_lines_from_issues.tsv").read_text(encoding="utf-8")
    for text in TEXTS:
        for line in text.splitlines():
            assert line.strip() not in held
            assert not ("NVRM" in line and line.strip() in shared)


def _assert_scanned_exactly(report: KernelLogReport, row: dict[str, Any]) -> None:
    """The row's Xid groups, GPUs lost without an Xid, driver-message kinds, and its count of
    lines that say Xid without being a readable driver Xid line (prose, templates)."""
    found = sorted((g.xid, g.pci_bus_id, g.uuid, g.count, g.severity.value) for g in report.groups)
    expected = sorted(
        (x["xid"], _bus(x["bus"]), x["uuid"], x["count"], x["severity"]) for x in row["xids"]
    )
    assert found == expected
    assert report.unparsed_xid_lines == row["unparsed"]
    assert sorted(str(g.pci_bus_id) for g in report.fallen_off_bus) == row["lost_without_xid"]
    assert {kind for kind, _ in report.other} == set(row["other"])


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_scanner_finds_exactly_what_was_read(row: dict[str, Any]) -> None:
    _assert_scanned_exactly(SET.scan(row), row)


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_severity_is_the_catalogs(row: dict[str, Any]) -> None:
    assert_severity_is_the_catalogs(SET.scan(row), PAYLOAD_DECIDED)


@pytest.mark.parametrize("row", SET.doctor_params(), ids=SET.ids())
def test_doctor_gives_the_diagnosis_code(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert_doctor_gives_the_codes(SET.path(row), row, capsys)


def test_a_probe_failure_without_the_probe_routine_line_is_still_one() -> None:
    """nv.c prints "None of the NVIDIA devices were initialized" when no GPU it probed came up,
    and nv-pci.c "This PCI I/O region assigned to your NVIDIA device is invalid" when the
    firmware gave a BAR no address: each says the driver could not take the GPU, with or without
    "The NVIDIA probe routine failed" (absent in the forum's grep)."""
    report = scan_kernel_log(EXCERPT["01"])
    assert dict(report.other) == {"pci-bar-invalid": 1, "no-gpu-initialised": 1}
    assert report.groups == () and report.fallen_off_bus == ()


def test_prose_naming_a_lost_gpu_is_no_lost_gpu() -> None:
    """ "GPU fallen off bus ... Xid 79" in a glossary names the failure; no GPU was lost."""
    report = scan_kernel_log(EXCERPT["13"])
    assert report.groups == () and report.fallen_off_bus == () and report.other == ()


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
def test_whole_excerpts_joined_keep_every_xid_and_message(order: list[int]) -> None:
    joined = "".join(TEXTS[i] if TEXTS[i].endswith("\n") else TEXTS[i] + "\n" for i in order)
    report = scan_kernel_log(joined)
    assert sum(g.count for g in report.groups) == sum(
        x["count"] for i in order for x in ROWS[i]["xids"]
    )
    assert report.unparsed_xid_lines == sum(ROWS[i]["unparsed"] for i in order)
    assert {kind for kind, _ in report.other} == {k for i in order for k in ROWS[i]["other"]}
