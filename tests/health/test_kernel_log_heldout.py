"""Held-out kernel logs (tests/data/xid_public: real pastes from public issues, forums and NVIDIA
docs, none of them in shared/fixtures): the scanner finds exactly the Xids read by hand in each
excerpt, on the bus the line prints, with the severity the catalog gives; ``doctor --from`` gives
the diagnosis.md code, and nothing above info on an excerpt without a fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuwarden.cli.main import main
from tests.health.kernel_log_sets import (
    PAYLOAD_DECIDED,
    ExcerptSet,
    printed_bus,
    scanner_check,
    severity_check,
)

SET = ExcerptSet("xid_public")
ROWS = SET.rows


def test_the_set_is_varied_enough() -> None:
    assert len(ROWS) >= 40
    assert len({x["xid"] for row in ROWS for x in row["xids"]}) >= 15
    assert sum(not row["fault"] for row in ROWS) >= 3


test_scanner_finds_exactly_the_xids = scanner_check(SET, bus=printed_bus)
test_severity_is_the_catalogs = severity_check(SET, PAYLOAD_DECIDED)


@pytest.mark.parametrize("row", SET.doctor_params(), ids=SET.ids())
def test_doctor_gives_the_diagnosis_code(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--from", str(SET.path(row)), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {f["code"] for f in document["findings"]} == set(row["doctor_codes"])
    if not row["fault"]:
        assert [f["code"] for f in document["findings"] if f["severity"] != "info"] == []
