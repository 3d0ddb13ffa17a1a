"""Held-out kernel logs from forums, Q&A sites and blogs (tests/data/xid_forum: real pastes, none
from GitHub, none in shared/fixtures): the scanner finds exactly the Xids read by hand, on the
bus the line prints (old drivers' "(bus:device)" form included), with the catalog's severity;
``doctor --from`` exits as expected with the diagnosis.md codes, and nothing above info on an
excerpt without a GPU fault."""

from __future__ import annotations

from typing import Any

import pytest

from tests.health.kernel_log_sets import (
    ExcerptSet,
    assert_doctor_gives_the_codes,
    assert_scanned_exactly,
    assert_severity_is_the_catalogs,
)

SET = ExcerptSet("xid_forum")
ROWS = SET.rows


def test_the_set_names_its_sources() -> None:
    sources = (SET.data / "SOURCES.md").read_text(encoding="utf-8")
    assert all(SET.path(row).name in sources and row["source"] in sources for row in ROWS)
    assert not any("github.com" in row["source"] for row in ROWS)
    assert sum(not row["fault"] for row in ROWS) >= 2


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_scanner_finds_exactly_the_xids(row: dict[str, Any]) -> None:
    assert_scanned_exactly(SET.scan(row), row)


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_severity_is_the_catalogs(row: dict[str, Any]) -> None:
    assert_severity_is_the_catalogs(SET.scan(row))


@pytest.mark.parametrize("row", SET.doctor_params(), ids=SET.ids())
def test_doctor_gives_the_diagnosis_code(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert_doctor_gives_the_codes(SET.path(row), row, capsys)
