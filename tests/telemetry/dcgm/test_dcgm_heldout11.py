"""An eleventh held-out set of dcgm-exporter pages (tests/data/dcgm_public11), sampled as the
searches gave them (find_string on the series the brief names and on their openings, then the
issues and pages corpora; any year; none in shared/fixtures nor the earlier sets): one GPU of a
Japanese OpenShift blog between ``...`` elisions, one GPU of a Chinese blog's dcgm-exporter
2.0.13 page (every HELP/TYPE first, then the series, labels joined by ``", "``), four A100s of a
DGX whose README lost the ``#`` of its HELP/TYPE lines, three Tesla K80s of an EKS autoscaling
guide. Every page is healthy; the frame ran dry at four.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json
(before any change: 4 of 4 right, on the committed tree and on the working tree alike);
``doctor --from FILE`` raises nothing above info on them; cut or spliced pages never give a
traceback. No gap was found, so no xfail.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.report.snapshot_document import snapshot_document
from gpuwarden.telemetry.dcgm import parse_scrape
from tests.telemetry.dcgm.heldout import load_pages, page_set_checks, run_cli

DATA, ROWS, PAGES = load_pages("dcgm_public11")

(
    test_snapshot_reads_the_values,
    test_doctor_raises_no_false_alarm,
    test_fuzz_cut_pages,
    test_fuzz_spliced_pages,
) = page_set_checks(DATA, ROWS, PAGES)


def _page(number: str) -> str:
    return PAGES[[row["file"][:2] for row in ROWS].index(number)]


def _devices(page: str) -> list[dict[str, Any]]:
    document = snapshot_document(parse_scrape(page, "page", 0.0).snapshot)
    return [{k: v for k, v in d.items() if k != "timestamp_s"} for d in document["devices"]]


def test_help_and_type_lines_that_lost_their_hash_are_prose() -> None:
    """The DGX README printed `` HELP ...`` / `` TYPE ...``: no series, so the page reads as
    the same page with its comment marks back."""
    lost = _page("03")
    restored = re.sub(r"^ (HELP|TYPE) ", r"# \1 ", lost, flags=re.MULTILINE)
    assert restored != lost
    assert _devices(lost) == _devices(restored)
    assert [d["index"] for d in _devices(lost)] == [0, 1, 2, 4]


# Values a GPU in trouble would have in the exporter 2.0.13 page's fault fields (the page
# itself is all zeros): the last Xid, volatile DBE, pages pending retirement and retired for
# DBE (≥ 60: the pre-Ampere RMA criterion), a hot GPU.
_IN_TROUBLE = {
    "DCGM_FI_DEV_XID_ERRORS": 79,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 2,
    "DCGM_FI_DEV_RETIRED_PENDING": 1,
    "DCGM_FI_DEV_RETIRED_DBE": 64,
    "DCGM_FI_DEV_GPU_TEMP": 92,
}


def _with_values(page: str, values: dict[str, int]) -> str:
    for name, value in values.items():
        page = re.sub(rf"^({name}\{{[^}}]*\}}) \S+$", rf"\g<1> {value}", page, flags=re.M)
    return page


def test_the_exporter_2_label_form_carries_faults_to_the_doctor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Labels joined by ``", "`` (dcgm-exporter 2.0) read the fault fields as any page does."""
    page = tmp_path / "page.prom"
    page.write_text(_with_values(_page("02"), _IN_TROUBLE), encoding="utf-8")
    document = run_cli(capsys, "doctor", "--from", str(page))
    codes = sorted(f["code"] for f in document["findings"] if f["severity"] != "info")
    assert codes == [
        "ecc-uncorrectable",
        "retired-pages-limit",
        "retired-pages-pending",
        "temperature-high",
        "xid",
    ]
