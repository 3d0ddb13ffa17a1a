"""A twelfth held-out set of dcgm-exporter pages (tests/data/dcgm_public12), sampled as the
searches gave them (find_string on the series the brief names and on their openings, then the
code, issues and pages corpora; any year; none in shared/fixtures nor the earlier sets by content
hash or series line): two GPUs of a Korean install guide's pod-gpu-metrics-exporter page
(dcgm-exporter 1.4.6, two tabs before every line, a test pod on GPU 1 and
DCGM_INT64_NOT_SUPPORTED in its ECC, retired-page, NVLink and memory-temperature fields), five
profiling series of a dcgmproftester pod from gpu-monitoring-tools issue 138, and four series of
a Tesla T4 behind an exporter pod from gpu-operator issue 340. Every page is healthy; the frame
ran dry at three.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json
(before any change: 3 of 3 right); ``doctor --from FILE`` raises nothing above info on them; cut
or spliced pages never give a traceback. No gap was found, so no xfail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.telemetry.dcgm.heldout import load_pages, page_set_checks, run_cli

DATA, ROWS, PAGES = load_pages("dcgm_public12")

(
    test_snapshot_reads_the_values,
    test_doctor_raises_no_false_alarm,
    test_fuzz_cut_pages,
    test_fuzz_spliced_pages,
) = page_set_checks(DATA, ROWS, PAGES)


def _page(number: str) -> str:
    return PAGES[[row["file"][:2] for row in ROWS].index(number)]


# DCGM_INT64_NOT_SUPPORTED (DCGM_INT64_BLANK + 2, dcgmvalue.h): what the 1.x exporter printed for
# a field the GPU does not support.
_NOT_SUPPORTED = "9223372036854775794"


def _with_values(page: str, values: dict[str, int]) -> str:
    for name, value in values.items():
        page = re.sub(rf"^(\t*{name}\{{[^}}]*\}}) \S+$", rf"\g<1> {value}", page, flags=re.M)
    return page


def test_not_supported_fields_raise_nothing_while_a_real_fault_still_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The blank ECC / retired-page counts of the guide's page are no count (no finding); the
    same page with a real volatile DBE count and a last Xid on both GPUs is judged."""
    page = _page("01")
    assert page.count(_NOT_SUPPORTED) == 2 * 16  # 16 fields of each GPU
    faulty = tmp_path / "page.prom"
    faulty.write_text(
        _with_values(page, {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 2, "DCGM_FI_DEV_XID_ERRORS": 79}),
        encoding="utf-8",
    )
    document = run_cli(capsys, "doctor", "--from", str(faulty))
    codes = sorted({f["code"] for f in document["findings"] if f["severity"] != "info"})
    assert codes == ["ecc-uncorrectable", "xid"]
