"""A fourth held-out set of dcgm-exporter pages (tests/data/dcgm_public4: pasted in public
issues and NVIDIA's gpu-monitoring-tools README; none in shared/fixtures nor the earlier sets):
the DCGM not-supported sentinel on a 2.x page with `...` elisions and prompts, an A100 80GB
PCIe page starting mid-family, an A30 MIG paste of two scrapes between numbered steps and a
blockquote, five TITAN V, and two pages that are not a reading of any GPU (HELP/TYPE only; a
Prometheus query result without values).

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json
or refuses the page with the reference expected.json names; ``doctor --from FILE`` raises
nothing above info on the healthy pages it reads; cut or spliced pages never give a traceback.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.telemetry.dcgm import parse_scrape
from tests.telemetry.dcgm.heldout import (
    CUT,
    FUZZ,
    assert_snapshot_reads,
    cut_pages_fuzz,
    load_pages,
    marked,
    no_false_alarm_check,
    page_index,
    parse_or_error,
    short_ids,
    spliced,
)

DATA, ALL_ROWS, PAGES = load_pages("dcgm_public4")
READINGS = [row for row in ALL_ROWS if "refused" not in row]
REFUSED = [row for row in ALL_ROWS if "refused" in row]
UUID = "GPU-603a8873-0edd-c157-ce48-2078e8b1a935"


@pytest.mark.parametrize(
    "row", [marked(row, "snapshot_xfail") for row in READINGS], ids=short_ids(READINGS)
)
def test_snapshot_reads_the_values(row: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert_snapshot_reads(capsys, DATA, row, pod_form="triples")


test_doctor_raises_no_false_alarm = no_false_alarm_check(DATA, READINGS)


@pytest.mark.parametrize("command", [["snapshot", "--backend", "dcgm"], ["doctor"]])
@pytest.mark.parametrize("row", REFUSED, ids=short_ids(REFUSED))
def test_a_page_with_no_reading_is_refused_plainly(
    row: dict[str, Any], command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 with the scrape's own error naming what the page lacks; no device invented."""
    code = main([*command, "--from", str(DATA / row["file"]), "--json"])
    captured = capsys.readouterr()
    assert code == 2
    assert row["refused"] in captured.err
    assert row["refusal_says"] in captured.err


def test_blockquoted_lines_of_a_pasted_scrape_are_read() -> None:
    """A scrape quoted in a GitHub comment keeps ``> `` (or ``>`` nested) before its lines;
    no exposition line starts with ``>``, so the marker is dropped, not the line."""
    series = f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0",UUID="{UUID}",Hostname="h"}} 0.381124'
    page = f"> # TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n> {series}\n>> {series}\n"
    (sample,) = parse_scrape(page, "quoted", 0.0).snapshot.samples
    assert sample.graphics_engine_active_ratio == pytest.approx(0.381124)


test_fuzz_cut_pages = cut_pages_fuzz(PAGES)


@FUZZ
@given(
    first=page_index(PAGES),
    second=page_index(PAGES),
    cuts=st.tuples(CUT, CUT),
    quote=st.sampled_from(["", "> ", ">", ">> "]),
)
def test_fuzz_spliced_pages(first: int, second: int, cuts: tuple[float, float], quote: str) -> None:
    """The head of one page and the tail of another, joined mid-line or behind a blockquote
    marker."""
    parse_or_error(spliced(PAGES[first], PAGES[second], cuts, f"\n{quote}"))
