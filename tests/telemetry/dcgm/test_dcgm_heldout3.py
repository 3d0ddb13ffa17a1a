"""A third held-out set of dcgm-exporter pages (tests/data/dcgm_public3: pasted in public issues,
Kubernetes AI-conformance evidence and the Kubernetes website; none in shared/fixtures,
tests/data/dcgm_public or dcgm_public2): profiling fields (SM active/occupancy, tensor, DRAM,
PCIe bytes), pages without HELP/TYPE, vGPU profiles (GRID A100-40C, H100-20C) on 580.x, a
GH200 with DRA labels, H100 NVL and A100 MIG excerpts (GI 0), prompt/curl lines in the paste.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json;
``doctor --from FILE`` raises nothing above info on these healthy pages; cut or spliced pages
never give a traceback.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.errors import GpuwardenError
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

DATA, ROWS, PAGES = load_pages("dcgm_public3")
IDS = short_ids(ROWS)
UUID = "GPU-84412445-5790-0b3f-f714-da8aa3b2c0b0"


@pytest.mark.parametrize("row", [marked(row, "snapshot_xfail") for row in ROWS], ids=IDS)
def test_snapshot_reads_the_values(row: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert_snapshot_reads(capsys, DATA, row, pod_form="triples")


test_doctor_raises_no_false_alarm = no_false_alarm_check(DATA, ROWS)


def test_openmetrics_timestamps_in_seconds_and_eof() -> None:
    """OpenMetrics (what a scraper asking for application/openmetrics-text gets, and what some
    pipelines re-serve) stamps samples in seconds with a fraction ("timestamp = realnumber" in
    its ABNF), may declare a UNIT and ends with "# EOF"; the Prometheus text format stamps
    integer milliseconds. Both are the same reading."""
    series = f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{UUID}",Hostname="n1"}} 45'
    openmetrics = (
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n# UNIT DCGM_FI_DEV_GPU_TEMP celsius\n"
        f"{series} 1520430000.123\n# EOF\n"
    )
    prometheus = f"{series} 1520430000123\r\n"  # and Windows line ends
    for page in (openmetrics, prometheus):
        (sample,) = parse_scrape(page, "stamped", 0.0).snapshot.samples
        assert sample.temperature_gpu_celsius == 45.0


def test_a_page_grepped_to_one_family_is_read_despite_its_prompt() -> None:
    """`curl .../metrics | grep FAMILY` on a one-GPU node pastes as the prompt line, HELP, TYPE
    and one sample: the HELP/TYPE lines are exposition, so the prompt is the minority."""
    page = (
        "$ curl -s localhost:9400/metrics | grep DCGM_FI_DEV_GPU_TEMP\n"
        "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{UUID}",Hostname="n1"}} 45\n'
    )
    (sample,) = parse_scrape(page, "grepped", 0.0).snapshot.samples
    assert sample.temperature_gpu_celsius == 45.0


def test_text_mostly_not_exposition_is_still_refused() -> None:
    """Metadata lines count as exposition, prose does not: a note quoting one series is not
    a scrape."""
    page = "".join(f"note line {n}: see the dashboard\n" for n in range(3)) + (
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{UUID}"}} 45\n'
    )
    with pytest.raises(GpuwardenError) as caught:
        parse_scrape(page, "note", 0.0)
    assert caught.value.reference == "dcgm-scrape-unreadable"


test_fuzz_cut_pages = cut_pages_fuzz(PAGES)


@FUZZ
@given(
    first=page_index(PAGES),
    second=page_index(PAGES),
    cuts=st.tuples(CUT, CUT),
    stamp=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True).map(repr)),
)
def test_fuzz_spliced_pages(
    first: int, second: int, cuts: tuple[float, float], stamp: str | None
) -> None:
    """The head of one page and the tail of another, joined mid-line or not; a timestamp of
    any float text after the head's last value."""
    parse_or_error(spliced(PAGES[first], PAGES[second], cuts, f" {stamp}" if stamp else ""))
