"""`gpuwarden snapshot` on a dcgm-exporter scrape with per-Xid counts: events keep the Xid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.cli.main import main

T4 = "datadog-integrations-core__tesla-t4__metrics.prom"
T4_UUID = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"


def _scrape(fixtures: Path, tmp_path: Path) -> Path:
    """The real T4 scrape plus DCGM_EXP_XID_ERRORS_COUNT series as dcgm-exporter writes them
    (the device's labels + window_size_in_ms + xid; see tests/telemetry/dcgm/test_dcgm_xid.py)."""
    text = (fixtures / "dcgm" / T4).read_text()
    line = next(
        ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_XID_ERRORS{") and T4_UUID in ln
    )
    labels = line[line.index("{") + 1 : line.rindex("}")]
    window = 'window_size_in_ms="300000"'
    added = [
        f'DCGM_EXP_XID_ERRORS_COUNT{{{labels},{window},xid="13"}} 3',
        f'DCGM_EXP_XID_ERRORS_COUNT{{{labels},{window},xid="48"}} 1',
    ]
    path = tmp_path / "t4-xid.prom"
    path.write_text(text + "\n".join(added) + "\n")
    return path


def test_table_lists_each_xid_with_its_count(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    assert main(["snapshot", "--backend", "dcgm", "--from", str(_scrape(fixtures, tmp_path))]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("event xid")]
    assert lines == [
        "event xid 13 on GPU 0: Xid 13: 3 in the last 300 s (DCGM_EXP_XID_ERRORS_COUNT) (×3)",
        "event xid 48 on GPU 0: Xid 48: 1 in the last 300 s (DCGM_EXP_XID_ERRORS_COUNT)",
    ]


def test_json_has_one_event_per_xid_and_the_counts(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    path = _scrape(fixtures, tmp_path)
    assert main(["snapshot", "--backend", "dcgm", "--from", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(e["kind"], e["code"], e["uuid"]) for e in doc["events"]] == [
        ("xid", 13, T4_UUID),
        ("xid", 13, T4_UUID),
        ("xid", 13, T4_UUID),
        ("xid", 48, T4_UUID),
    ]
    device = next(d for d in doc["devices"] if d["uuid"] == T4_UUID)
    assert device["extra"]["dcgm_exp_xid_errors_count_xid_13"] == 3
    assert device["extra"]["dcgm_exp_xid_errors_count_xid_48"] == 1
