"""Clock events dcgm-exporter counted (DCGM_EXP_CLOCK_EVENTS_COUNT, dcgm-exporter PR 261's page in
tests/data/dcgm_public2): thermal slowdown and power brake become findings that say they were
counted, not seen now; a reason the GPU's own mask shows active now is the point rule's finding;
the benign reasons (idle, application or display clocks) and the power cap are none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main

PAGE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "dcgm_public2"
    / "06__dcgm-exporter-pr261__t400-clock-events-count-thermal.prom"
)


def _doctor(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    page = tmp_path / "metrics.prom"
    page.write_text(text)
    assert main(["doctor", "--from", str(page), "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def _with_reasons(*reasons: str) -> str:
    """The page with its counted reasons replaced by ``reasons`` (one count each)."""
    lines = PAGE.read_text().splitlines()
    series = lines[1].rsplit(" ", 1)[0]
    counted = [
        series.replace('clock_event="gpu_idle"', f'clock_event="{r}"') + " 1" for r in reasons
    ]
    return "\n".join([lines[0], *counted]) + "\n"


def _findings(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The clock findings: the page's driver (545.29.02, R545) is also past its end of life, an
    info tests/health/test_versions.py checks."""
    return [
        (f["code"], f["severity"], f["confidence"])
        for f in document["findings"]
        if f["code"] != "driver-branch-eol"
    ]


def test_the_real_page_gives_one_thermal_finding_for_both_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _doctor(tmp_path, PAGE.read_text(), capsys)
    assert _findings(document) == [("thermal-slowdown", "warning", "medium")]
    (finding,) = [f for f in document["findings"] if f["code"] == "thermal-slowdown"]
    assert "sw thermal slowdown and hw thermal slowdown counted" in finding["title"]
    assert [e["field"] for e in finding["evidence"]] == ["clock_event_count"] * 2
    (check,) = [c for c in document["checks"] if c["name"] == "clock-events"]
    assert check["status"] == "warn"


def test_a_counted_power_brake_is_a_power_brake_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _doctor(tmp_path, _with_reasons("hw_power_brake"), capsys)
    assert _findings(document) == [("power-brake", "warning", "medium")]


@pytest.mark.parametrize("benign", ["gpu_idle", "clocks_setting", "display_clocks", "power_cap"])
def test_benign_reasons_and_the_power_cap_are_no_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], benign: str
) -> None:
    assert _findings(_doctor(tmp_path, _with_reasons(benign), capsys)) == []


def test_a_reason_active_now_is_the_point_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same GPU's clock-event mask (64: hw thermal slowdown now) is read by the point rule,
    with high confidence; the counted hw thermal stretch adds no second finding."""
    text = _with_reasons("hw_thermal")
    label = text.splitlines()[1]
    labels = label[label.index("{") : label.index(",clock_event=")] + "}"
    text += f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{labels} 64\n"
    document = _doctor(tmp_path, text, capsys)
    assert _findings(document) == [("thermal-slowdown", "warning", "high")]
