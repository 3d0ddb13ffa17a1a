"""A third held-out set of kernel logs (tests/data/xid_heldout3: real pastes from GitHub issues and
PRs, none in xid_public, xid_forum or shared/fixtures): the scanner finds exactly the Xids read by
hand, on the bus the line prints, with the catalog's severity (or the payload's); the other NVRM
message kinds; ``doctor --from`` exits as expected with the diagnosis.md codes, and nothing above
info on an excerpt without a GPU fault. A fuzz cuts and splices the excerpts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from tests.health.kernel_log_sets import (
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
    sources_cited,
    spliced,
)

SET = ExcerptSet("xid_heldout3")
ROWS = SET.rows
TEXTS = SET.texts()
EXCERPT = SET.excerpts()
FUZZ = fuzz(max_examples=120)


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    assert not {row["source"] for row in ROWS} & sources_cited(("xid_public", "xid_forum"))
    assert 20 <= len(ROWS) <= 40
    assert len({x["xid"] for row in ROWS for x in row["xids"]}) >= 9
    assert sum(not row["fault"] for row in ROWS) >= 3


test_scanner_finds_exactly_the_xids = scanner_check(SET, bus=printed_bus)

TIMED = [row for row in ROWS if any("lines" in x for x in row["xids"])]


@pytest.mark.parametrize("row", TIMED, ids=[SET.path(row).stem for row in TIMED])
def test_each_xid_is_placed_and_dated_as_the_lines_say(row: dict[str, Any]) -> None:
    """The group's first and last line, and its stamps: dmesg -T read as UTC (no zone given),
    the uptime of "[ 1234.567890]" prefixes, nothing where the line states no time."""
    assert_placed_and_dated(SET.scan(row), row)


test_severity_is_the_catalogs = severity_check(SET, PAYLOAD_DECIDED)
test_doctor_gives_the_diagnosis_code = doctor_check(SET)


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


@FUZZ
@given(text=spliced(TEXTS), sizes=feed_sizes())
def test_cut_and_spliced_excerpts_read_consistently(text: str, sizes: list[int]) -> None:
    report = assert_read_alike_in_pieces(text, sizes)
    assert report.lines_scanned == line_count(text)


@FUZZ
@given(order=excerpt_orders(len(ROWS)))
def test_whole_excerpts_joined_keep_every_xid(order: list[int]) -> None:
    """Whole excerpts one after another: as many Xid lines as the excerpts hold together, and
    each excerpt's message kinds are still there."""
    assert_joined_keep_every_xid(scan_kernel_log(joined(TEXTS, order)), ROWS, order)


def test_the_excerpts_are_as_pasted(fixtures: Path) -> None:
    """No excerpt is a copy of a shared fixture line, and none was cleaned of what the paste had
    (trailing spaces, indentation, a shell prompt, a blank first line)."""
    assert_no_line_is_shared_and_pastes_kept(TEXTS, fixtures)
    assert any(text.startswith("\n") for text in TEXTS)
