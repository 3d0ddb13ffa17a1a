"""A fifth held-out set of dcgm-exporter pages (tests/data/dcgm_public5: documentation, a book,
a workshop and conformance evidence; none in shared/fixtures nor the earlier sets): L4, H100
80GB HBM3, L40S, Tesla T4 and four GB200 behind port-forward/curl prompts and elisions, a page
whose pod labels a terminal wrapped inside their values, a page serving DCGM_FI_DEV_NAME as
text, and a page whose labels the author elided with ``...``.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json;
``doctor --from FILE`` raises nothing above info on these healthy pages; cut or spliced pages
never give a traceback.
"""

from __future__ import annotations

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.dcgm import parse_scrape
from tests.telemetry.dcgm.heldout import (
    load_pages,
    page_set_checks,
)

DATA, ROWS, PAGES = load_pages("dcgm_public5")
LABELS = 'gpu="0",UUID="GPU-916b8073-39e4-200a-f89a-45fa79439232",Hostname="h"'


(
    test_snapshot_reads_the_values,
    test_doctor_raises_no_false_alarm,
    test_fuzz_cut_pages,
    test_fuzz_spliced_pages,
) = page_set_checks(DATA, ROWS, PAGES)


def test_a_label_value_wrapped_onto_the_next_line_is_joined() -> None:
    """A terminal wraps a long pod name inside its quotes; the pieces join as they are."""
    page = f'DCGM_FI_DEV_GPU_TEMP{{{LABELS},pod="vllm-0-54\nd8d5c67d"}} 54\n'
    (sample,) = parse_scrape(page, "wrapped", 0.0).snapshot.samples
    assert sample.temperature_gpu_celsius == 54.0
    assert [p.pod for p in sample.pods or ()] == ["vllm-0-54d8d5c67d"]


def test_a_wrapped_line_that_never_closes_is_still_an_error() -> None:
    """Joining is bounded: a value that never closes stays a damaged line."""
    page = f'DCGM_FI_DEV_GPU_TEMP{{{LABELS},pod="never\n' + "x\n" * 20
    with pytest.raises(CorruptInputError, match=r"not closed|not a metric line"):
        parse_scrape(page, "open", 0.0)


def test_a_dcgm_string_field_served_as_text_is_skipped_and_said() -> None:
    """dcgm-exporter serves a DCGM_FT_STRING field (DCGM_FI_DEV_NAME) with its text as the
    value; the sample is skipped and the reading says so. Any other family's text is damage."""
    page = (
        f"DCGM_FI_DEV_NAME{{{LABELS}}} NVIDIA H100 80GB HBM3\n"
        f"DCGM_FI_DEV_SM_CLOCK{{{LABELS}}} 300\n"
    )
    scrape = parse_scrape(page, "text", 0.0)
    assert [s.clock_sm_mhz for s in scrape.snapshot.samples] == [300.0]
    assert any("DCGM_FI_DEV_NAME as text" in e.message for e in scrape.snapshot.events)
    with pytest.raises(CorruptInputError, match="not a number"):
        parse_scrape(f"DCGM_FI_DEV_SM_CLOCK{{{LABELS}}} Tesla T4\n", "bad", 0.0)
