"""Held-out kernel logs from forums, Q&A sites and blogs (tests/data/xid_forum: real pastes, none
from GitHub, none in shared/fixtures): the scanner finds exactly the Xids read by hand, on the
bus the line prints (old drivers' "(bus:device)" form included), with the catalog's severity;
``doctor --from`` exits as expected with the diagnosis.md codes, and nothing above info on an
excerpt without a GPU fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog.xid import UNKNOWN_XID_SEVERITY, xid_info
from gpuwarden.cli.main import main
from gpuwarden.health.kernel_log import scan_kernel_log

DATA = Path(__file__).resolve().parents[1] / "data" / "xid_forum"
ROWS: list[dict[str, Any]] = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))


def _path(row: dict[str, Any]) -> Path:
    (path,) = DATA.glob(f"{row['prefix']}__*.log")
    return path


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [_path(row).stem for row in rows]


def test_the_set_names_its_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text(encoding="utf-8")
    assert all(_path(row).name in sources and row["source"] in sources for row in ROWS)
    assert not any("github.com" in row["source"] for row in ROWS)
    assert sum(not row["fault"] for row in ROWS) >= 2


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_scanner_finds_exactly_the_xids(row: dict[str, Any]) -> None:
    report = scan_kernel_log(_path(row).read_text(encoding="utf-8"))
    found = sorted(
        ((g.xid, g.pci_bus_id, g.uuid, g.count, g.severity.value) for g in report.groups), key=repr
    )
    expected = sorted(
        ((x["xid"], x["bus"], x["uuid"], x["count"], x["severity"]) for x in row["xids"]),
        key=repr,
    )
    assert found == expected
    assert report.unparsed_xid_lines == 0
    assert sorted(str(g.pci_bus_id) for g in report.fallen_off_bus) == row["lost_without_xid"]
    assert {kind for kind, _ in report.other} == set(row["other"])


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_severity_is_the_catalogs(row: dict[str, Any]) -> None:
    for group in scan_kernel_log(_path(row).read_text(encoding="utf-8")).groups:
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
    out, err = capsys.readouterr()
    assert code == row["doctor_exit"]
    if code != 0:  # refused: a clear error document on stderr, never a traceback
        error = json.loads(err)
        assert error["reference"] == "capture-not-recognised" and error["hint"]
        return
    document = json.loads(out)
    assert {f["code"] for f in document["findings"]} == set(row["doctor_codes"])
    if not row["fault"]:
        assert [f["code"] for f in document["findings"] if f["severity"] != "info"] == []
