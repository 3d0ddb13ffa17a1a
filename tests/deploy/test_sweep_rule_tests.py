"""`gpuwarden deploy prometheus-rules --thresholds FILE --tests FILE`: the promtool unit tests
written for the user's thresholds pass under `promtool test rules` (README: "--thresholds FILE
applies the same TOML ... Every alert has promtool unit tests, firing and quiet")."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.deploy.yaml_text import from_yaml, to_yaml

PROMTOOL = shutil.which("promtool")


def _alert_tests(tmp_path: Path, thresholds: str, alert: str) -> tuple[Path, int]:
    """The tests of ``alert`` for ``thresholds`` (the whole file takes promtool minutes), and
    how many of its evaluations on dcgm-exporter's readings alone expect it to fire."""
    (tmp_path / "mine.toml").write_text(thresholds)
    rules, tests = tmp_path / "rules.yml", tmp_path / "all.test.yml"
    args = ["deploy", "prometheus-rules", "--thresholds", str(tmp_path / "mine.toml")]
    assert main([*args, "-o", str(rules), "--tests", str(tests)]) == 0
    document = from_yaml(tests.read_text())
    mine = [
        t
        for t in document["tests"]
        if any(a["alertname"] == alert for a in t.get("alert_rule_test", []))
    ]
    firing = sum(  # on dcgm-exporter's readings alone (gpuwarden's finding fires it anyway)
        1
        for t in mine
        if not any("gpuwarden_finding" in s["series"] for s in t["input_series"])
        for a in t["alert_rule_test"]
        if a["alertname"] == alert and a.get("exp_alerts")
    )
    cut = tmp_path / "alert.test.yml"
    cut.write_text(to_yaml({**document, "tests": mine}))
    return cut, firing


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian's prometheus) is not installed")
@pytest.mark.parametrize(("ratio", "fires"), [(0.5, True), (0.95, True), (1.0, False)])
def test_memory_cases_follow_the_threshold(tmp_path: Path, ratio: float, fires: bool) -> None:
    """Before: the cases were 97 % and 88 % used whatever the threshold: at 0.5 the quiet case
    fired and `promtool test rules` failed; at 1.0 (never) the firing case could not fire."""
    tests, firing = _alert_tests(
        tmp_path, f"memory_used_max_ratio = {ratio}\n", "GpuMemoryNearlyFull"
    )
    assert (firing > 0) == fires
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "test", "rules", tests.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
