"""Held-out kernel logs (tests/data/xid_public: real pastes from public issues, forums and NVIDIA
docs, none of them in shared/fixtures): the scanner finds exactly the Xids read by hand in each
excerpt, on the bus the line prints, with the severity the catalog gives; ``doctor --from`` gives
the diagnosis.md code, and nothing above info on an excerpt without a fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog.xid import UNKNOWN_XID_SEVERITY, xid_info
from gpuwarden.cli.main import main
from gpuwarden.health.kernel_log import scan_kernel_log

DATA = Path(__file__).resolve().parents[1] / "data" / "xid_public"
ROWS: list[dict[str, Any]] = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))
# Xids whose severity the payload decides (NVLink5 sub-unit, 154's new recovery action, 45's
# "caused by"): their expected severity is the one written per excerpt, not the catalog row's
PAYLOAD_DECIDED = frozenset({45, 154, *range(144, 151)})


def _path(row: dict[str, Any]) -> Path:
    (path,) = DATA.glob(f"{row['prefix']}__*.log")
    return path


def _bus(printed: str | None) -> str | None:
    """ "0000:06:00" as printed in "Xid (PCI:0000:06:00)" → "0000:06:00.0"."""
    return None if printed is None else f"{printed.lower()}.0"


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [_path(row).stem for row in rows]


def test_the_set_is_varied_enough() -> None:
    assert len(ROWS) >= 40
    assert len({x["xid"] for row in ROWS for x in row["xids"]}) >= 15
    assert sum(not row["fault"] for row in ROWS) >= 3


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_scanner_finds_exactly_the_xids(row: dict[str, Any]) -> None:
    report = scan_kernel_log(_path(row).read_text(encoding="utf-8"))
    found = sorted(
        ((g.xid, g.pci_bus_id, g.uuid, g.count, g.severity.value) for g in report.groups), key=repr
    )
    expected = sorted(
        ((x["xid"], _bus(x["bus"]), x["uuid"], x["count"], x["severity"]) for x in row["xids"]),
        key=repr,
    )
    assert found == expected
    assert report.unparsed_xid_lines == 0
    assert sorted(str(g.pci_bus_id) for g in report.fallen_off_bus) == row["lost_without_xid"]
    assert {kind for kind, _ in report.other} == set(row["other"])


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_severity_is_the_catalogs(row: dict[str, Any]) -> None:
    for group in scan_kernel_log(_path(row).read_text(encoding="utf-8")).groups:
        if group.xid in PAYLOAD_DECIDED:
            continue
        info = xid_info(group.xid)
        assert group.severity == (UNKNOWN_XID_SEVERITY if info is None else info.severity)


def _doctor_param(row: dict[str, Any]) -> Any:
    if row["doctor_xfail"]:
        return pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["doctor_xfail"]))
    return row


@pytest.mark.parametrize("row", [_doctor_param(row) for row in ROWS], ids=_ids(ROWS))
def test_doctor_gives_the_diagnosis_code(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--from", str(_path(row)), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {f["code"] for f in document["findings"]} == set(row["doctor_codes"])
    if not row["fault"]:
        assert [f["code"] for f in document["findings"] if f["severity"] != "info"] == []
