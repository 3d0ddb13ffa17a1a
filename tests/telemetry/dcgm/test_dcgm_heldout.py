"""Held-out dcgm-exporter scrapes (tests/data/dcgm_public: pasted in public issues, none of them
in shared/fixtures): ``snapshot --backend dcgm --from FILE`` reads the values written down by
hand per GPU or MIG instance, and ``doctor --from FILE`` raises nothing above info on a healthy
one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "data" / "dcgm_public"
ROWS: list[dict[str, Any]] = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))
MIB = 1 << 20
# expected.json keys that are not snapshot fields as such
_POD_KEYS = ("pod", "namespace", "container")


def _param(row: dict[str, Any]) -> Any:
    if row.get("xfail"):
        return pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["xfail"]))
    return row


PARAMS = [_param(row) for row in ROWS]
IDS = [row["file"].removesuffix(".prom") for row in ROWS]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main([*args, "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, document
    return document


def _check(device: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        if key == "memory_free_mib":
            assert device["memory_free_bytes"] == value * MIB
        elif key in _POD_KEYS:
            assert [p[key] for p in device["pods"]] == [value]
        else:
            assert device[key] == (pytest.approx(value) if isinstance(value, float) else value)


@pytest.mark.parametrize("row", PARAMS, ids=IDS)
def test_snapshot_reads_the_values(row: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    snap = _run(capsys, "snapshot", "--backend", "dcgm", "--from", str(DATA / row["file"]))
    assert snap["host"] == row["host"]
    devices = {d["uuid"]: d for d in snap["devices"]}
    if "device_count" in row:  # GPUs and MIG instances, none merged or lost
        assert len(snap["devices"]) == row["device_count"]
    for uuid, expected in row["gpus"].items():
        _check(devices[uuid], expected)
    if "xid_events" in row:
        xids = [[e["code"], e["uuid"]] for e in snap["events"] if e["kind"] == "xid"]
        assert xids == row["xid_events"]


def _doctor_param(row: dict[str, Any]) -> Any:
    if row.get("doctor_xfail"):
        return pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row["doctor_xfail"]))
    return row


HEALTHY = [row for row in ROWS if row["healthy"]]


@pytest.mark.parametrize(
    "row", [_doctor_param(row) for row in HEALTHY], ids=[r["file"][:40] for r in HEALTHY]
)
def test_doctor_raises_no_false_alarm(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _run(capsys, "doctor", "--from", str(DATA / row["file"]))
    assert [(f["code"], f["title"]) for f in doc["findings"] if f["severity"] != "info"] == []
