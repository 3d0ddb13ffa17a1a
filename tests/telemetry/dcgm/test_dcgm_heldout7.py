"""A seventh held-out set of dcgm-exporter pages (tests/data/dcgm_public7), sampled as the
searches gave them (none in shared/fixtures nor the earlier sets): an H100 series listed without
a value (refused), three MIG instances of an A100 and a Quadro T2000 page both cut mid-label where
the paste ends, an RTX 3090 page cut inside a HELP line, a dcgm-exporter 1.x ``dcgm_power_usage``
series quoted with ``> `` above the reporter's sentence, a GPU Operator 1.5 page between dashed
rules without modelName or Hostname, and a pod-gpu-metrics-exporter page indented by two tabs
under a Markdown list item.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json;
a page that is no scrape is refused with exit 2; ``doctor --from FILE`` raises nothing above
info on these healthy pages; cut or spliced pages never give a traceback.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.telemetry.dcgm.exposition import Tally, read_exposition
from tests.telemetry.dcgm.heldout import (
    FUZZ,
    load_pages,
    page_set_checks,
    refused_check,
    short_ids,
)

DATA, ROWS, PAGES = load_pages("dcgm_public7")
READ = [row for row in ROWS if not row.get("refused")]
CUT_PAGES = [row for row in READ if row.get("cut_line")]
GPU = 'gpu="0",UUID="GPU-08533397-8c65-7a0b-003b-c4bd120e67c1",Hostname="h"'


(
    test_snapshot_reads_the_values,
    test_doctor_raises_no_false_alarm,
    test_fuzz_cut_pages,
    test_fuzz_spliced_pages,
) = page_set_checks(DATA, ROWS, PAGES)


test_a_page_that_is_no_scrape_is_refused = refused_check(DATA, ROWS)


@pytest.mark.parametrize("row", CUT_PAGES, ids=short_ids(CUT_PAGES))
def test_the_cut_last_line_is_said(row: dict[str, Any]) -> None:
    scrape = parse_scrape((DATA / row["file"]).read_text(encoding="utf-8"), "page", 0.0)
    said = [e.message for e in scrape.snapshot.events if "cut short" in e.message]
    assert len(said) == 1 and f"line {row['cut_line']}:" in said[0]


@pytest.mark.parametrize(
    "tail",
    [
        f"DCGM_FI_DEV_POWER_USAGE{{{GPU[:20]}",  # inside a label value
        f"DCGM_FI_DEV_POWER_USAGE{{{GPU}}}",  # after the labels, before the value
        f'DCGM_FI_DEV_POWER_USAGE{{{GPU},pod="a"',  # after a value, before , or }
    ],
)
@pytest.mark.parametrize("after", ["", "\n", "\n```\n\n"])
def test_a_page_cut_mid_sample_reads_the_lines_before(tail: str, after: str) -> None:
    """Only blank lines and a closing fence may follow the cut: the lines before it are whole."""
    page = f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 60\n{tail}{after}"
    scrape = parse_scrape(page, "cut", 0.0)
    (sample,) = scrape.snapshot.samples
    assert (sample.temperature_gpu_celsius, sample.power_draw_watts) == (60.0, None)
    assert any("line 2:" in e.message and "cut short" in e.message for e in scrape.snapshot.events)


@pytest.mark.parametrize("after", ['DCGM_FI_DEV_SM_CLOCK{gpu="0"} 300', "# HELP x y", "prose"])
def test_a_damaged_line_with_more_after_it_is_still_an_error(after: str) -> None:
    """A damaged sample that is not the page's last line is corruption, named by its line."""
    page = f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 60\nDCGM_FI_DEV_POWER_USAGE{{{GPU}}}\n{after}\n"
    with pytest.raises(CorruptInputError, match=r"line 2: DCGM_FI_DEV_POWER_USAGE"):
        parse_scrape(page, "damaged", 0.0)


def test_one_series_and_one_sentence_read_more_sentences_do_not() -> None:
    """A tie between whole samples and prose reads (the series a reporter quotes above the one
    sentence about it); more prose than samples is still refused."""
    series = '> dcgm_power_usage{gpu="3",uuid="GPU-807436aXXXYYYZZZZZZZ0547d1624eae"} 24.196'
    (sample,) = parse_scrape(f"{series}\n\nWhy is this?\n", "tie", 0.0).snapshot.samples
    assert sample.power_draw_watts == 24.196
    with pytest.raises(CorruptInputError, match="not a metric line"):
        parse_scrape(f"{series}\nWhy is this?\nAny help?\n", "prose", 0.0)


_LAST = 'DCGM_FI_DEV_POWER_USAGE{gpu="0",modelName="A \\"x}\\" 100",Hostname="h"} 24.5'


@FUZZ
@given(at=st.integers(1, _LAST.rindex(" ")))
def test_fuzz_a_cut_anywhere_before_the_last_value(at: int) -> None:
    """Cut anywhere in the last sample's name or labels (an escaped quote and a '}' inside a
    value included), the page reads as the lines before it and says where it was cut."""
    whole = f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 60\nDCGM_FI_DEV_SM_CLOCK{{{GPU}}} 1410\n"
    tally = Tally()
    samples = list(read_exposition(whole + _LAST[:at] + "\n", tally))
    assert [(s.name, s.value) for s in samples] == [
        ("DCGM_FI_DEV_GPU_TEMP", 60.0),
        ("DCGM_FI_DEV_SM_CLOCK", 1410.0),
    ]
    assert tally.cut == (3, _LAST[:at].rstrip())
