"""explain_text over whole dcgm-exporter /metrics pages pasted as an error (every real page of
tests/data/dcgm_public*/ and of the shared fixtures' dcgm/ folder): the exposition's HELP, TYPE
and UNIT lines describe a family ("Total number of double-bit volatile ECC errors.") and report
nothing; a series line is a reading and still speaks (a non-zero DCGM_FI_DEV_XID_ERRORS)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuwarden.doctor.explain import explain
from gpuwarden.health.explain import explain_text
from tests.health.explain_sets import cause_readings

TEST_DATA = Path(__file__).resolve().parent.parent / "data"
# The last Xid the exporter saw: its err_code label, else its value (0 = none)
LAST_XID = re.compile(
    r'DCGM_FI_DEV_XID_ERRORS\{[^}]*?(?:err_code="(?P<code>\d+)"[^}]*)?\}(?:[ \t]+(?P<value>\d+))?'
)


def _pages(fixtures: Path) -> list[Path]:
    return sorted(TEST_DATA.glob("dcgm_public*/*.prom")) + sorted(
        (fixtures / "dcgm").glob("*.prom")
    )


def _page_text(page: Path) -> str:
    return page.read_text(encoding="utf-8", errors="replace")


def _reports_an_xid(text: str) -> bool:
    return any(
        int(series["code"] or series["value"] or 0) != 0 for series in LAST_XID.finditer(text)
    )


def test_a_healthy_page_pasted_whole_reads_nothing(fixtures: Path) -> None:
    # Before: two healthy pages (an exporter 2.0.13 page from a blog, one indented in a Korean
    # install guide) read ecc-uncorrectable at medium from the HELP line of
    # DCGM_FI_DEV_RETIRED_DBE ("... retired pages due to double-bit errors.")
    healthy = [page for page in _pages(fixtures) if not _reports_an_xid(_page_text(page))]
    assert len(healthy) >= 70
    read = {
        page.name: cause_readings(_page_text(page))
        for page in healthy
        if explain_text(_page_text(page)).diagnoses
    }
    assert read == {}


def test_a_page_whose_last_xid_is_not_zero_still_reads_the_xid(fixtures: Path) -> None:
    # NVIDIA/DCGM#235's page: its one series carries err_code="45" beside the catalog's err_msg
    faulty = [page for page in _pages(fixtures) if _reports_an_xid(_page_text(page))]
    assert [page.parent.name for page in faulty] == ["dcgm_public6"]
    for page in faulty:
        assert cause_readings(_page_text(page))[0][0] == "xid"


def test_the_doctor_pipeline_reads_no_healthy_page_either(fixtures: Path) -> None:
    for page in _pages(fixtures):
        text = _page_text(page)
        if not _reports_an_xid(text):
            assert explain(text).explanation.diagnoses == (), page.name


# The ECC families of a dcgm-exporter 2.0.13 page (dcgm_public11/02) as Markdown renders them
# when the page is pasted outside a code block: "# " makes a heading, the "#" is lost
HASH_LOST_HELP = """\
HELP DCGM_FI_DEV_ECC_DBE_VOL_TOTAL Total number of double-bit volatile ECC errors.
TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
HELP DCGM_FI_DEV_RETIRED_DBE Total number of retired pages due to double-bit errors.
TYPE DCGM_FI_DEV_RETIRED_DBE counter
"""


@pytest.mark.parametrize("quoted", ["", "> ", "# "])
def test_metadata_lines_read_nothing_with_the_hash_lost_or_quoted(quoted: str) -> None:
    text = "".join(quoted + line + "\n" for line in HASH_LOST_HELP.splitlines())
    assert explain_text(text).diagnoses == ()


def test_the_same_words_outside_a_metadata_line_still_read() -> None:
    # A HELP line whose family the paste does not type is prose, and so is an error line that
    # happens to start with the word
    for text in (
        "HELP DCGM_FI_DEV_RETIRED_DBE Total number of retired pages due to double-bit errors.",
        "Xid 48: double-bit ECC error on GPU 0",
    ):
        assert cause_readings(text)[0][0] == "ecc-uncorrectable", text
