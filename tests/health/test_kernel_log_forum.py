"""Held-out kernel logs from forums, Q&A sites and blogs (tests/data/xid_forum: real pastes, none
from GitHub, none in shared/fixtures): the scanner finds exactly the Xids read by hand, on the
bus the line prints (old drivers' "(bus:device)" form included), with the catalog's severity;
``doctor --from`` exits as expected with the diagnosis.md codes, and nothing above info on an
excerpt without a GPU fault."""

from __future__ import annotations

from tests.health.kernel_log_sets import (
    ExcerptSet,
    doctor_check,
    scanner_check,
    severity_check,
)

SET = ExcerptSet("xid_forum")
ROWS = SET.rows


def test_the_set_names_its_sources() -> None:
    SET.assert_names_its_sources()
    assert not any("github.com" in row["source"] for row in ROWS)
    assert sum(not row["fault"] for row in ROWS) >= 2


test_scanner_finds_exactly_the_xids = scanner_check(SET)
test_severity_is_the_catalogs = severity_check(SET)
test_doctor_gives_the_diagnosis_code = doctor_check(SET)
