"""The held-out kernel-log sets (tests/data/xid_public, tests/data/xid_forum): each a folder of
real excerpts named ``<prefix>__<what>.log`` with the Xids read by hand in ``expected.json``;
loading a set, and the scanner checks every set gets."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog.xid import UNKNOWN_XID_SEVERITY, xid_info
from gpuwarden.cli.main import main
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.types.health import KernelLogReport

DATA = Path(__file__).resolve().parents[1] / "data"
# Xids whose severity the payload decides (NVLink5 sub-unit, 154's new recovery action, 45's
# "caused by"): their expected severity is the one written per excerpt, not the catalog row's
PAYLOAD_DECIDED = frozenset({45, 154, *range(144, 151)})

Row = dict[str, Any]


class ExcerptSet:
    """One folder of excerpts and the rows of its ``expected.json``."""

    def __init__(self, folder: str) -> None:
        self.data = DATA / folder
        self.rows: list[Row] = json.loads((self.data / "expected.json").read_text(encoding="utf-8"))

    def path(self, row: Row) -> Path:
        (path,) = self.data.glob(f"{row['prefix']}__*.log")
        return path

    def ids(self) -> list[str]:
        return [self.path(row).stem for row in self.rows]

    def scan(self, row: Row) -> KernelLogReport:
        return scan_kernel_log(self.path(row).read_text(encoding="utf-8"))

    def doctor_params(self) -> list[Any]:
        """One case a row; a row with ``doctor_xfail`` is a strict xfail with that reason."""
        return [
            pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["doctor_xfail"]))
            if row["doctor_xfail"]
            else row
            for row in self.rows
        ]


def assert_scanned_exactly(
    report: KernelLogReport, row: Row, bus: Callable[[str | None], str | None] = lambda b: b
) -> None:
    """The report holds exactly the row's Xid groups (``bus`` turns the bus as written in the
    row into the scanner's form), no unparsed Xid line, the GPUs lost without an Xid and the
    other driver messages the row lists."""
    found = sorted(
        ((g.xid, g.pci_bus_id, g.uuid, g.count, g.severity.value) for g in report.groups), key=repr
    )
    expected = sorted(
        ((x["xid"], bus(x["bus"]), x["uuid"], x["count"], x["severity"]) for x in row["xids"]),
        key=repr,
    )
    assert found == expected
    assert report.unparsed_xid_lines == 0
    assert sorted(str(g.pci_bus_id) for g in report.fallen_off_bus) == row["lost_without_xid"]
    assert {kind for kind, _ in report.other} == set(row["other"])


def assert_severity_is_the_catalogs(
    report: KernelLogReport, payload_decided: Collection[int] = ()
) -> None:
    """Each group's severity is the catalog's row (the default for an Xid it does not list),
    except the Xids whose payload decides it."""
    for group in report.groups:
        if group.xid in payload_decided:
            continue
        info = xid_info(group.xid)
        assert group.severity == (UNKNOWN_XID_SEVERITY if info is None else info.severity)


def assert_doctor_gives_the_codes(path: Path, row: Row, capsys: pytest.CaptureFixture[str]) -> None:
    """``doctor --from`` on the excerpt exits as written down; a refusal is a clear error document
    on stderr (never a traceback); otherwise the finding codes are the row's, and an excerpt
    without a fault gets nothing above info."""
    code = main(["doctor", "--from", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == row["doctor_exit"]
    if code != 0:
        error = json.loads(err)
        assert error["reference"] == "capture-not-recognised" and error["hint"]
        return
    document = json.loads(out)
    assert {f["code"] for f in document["findings"]} == set(row["doctor_codes"])
    if not row["fault"]:
        assert [f["code"] for f in document["findings"] if f["severity"] != "info"] == []
