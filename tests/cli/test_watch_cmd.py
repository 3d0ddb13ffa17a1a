"""`gpuwarden watch` end to end against the sim backend: in a pseudo-terminal (the live view), piped
(a log of findings as they appear), as JSON lines, and its errors.

The sim is the demo driver here, labelled simulated in every frame; the rules themselves are
tested on real captures in tests/health."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from gpuwarden.cli.main import main
from gpuwarden.doctor.watch import Watcher, finding_key
from gpuwarden.health.devices import MASKED_UUID
from gpuwarden.types.health import DeviceRef, Finding, Severity
from gpuwarden.types.telemetry import Snapshot
from tests.cli.test_snapshot_health import two_masked_gpus


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", "watch", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env=env,
    )


def test_live_view_in_a_pseudo_terminal_shows_the_fault_as_it_happens() -> None:
    # thermal-throttling: cooling fails at 10 s of simulated time; at 20x that is 0.5 s here.
    args = "-m gpuwarden watch --backend sim --scenario thermal-throttling --sim-speed 20"
    child = pexpect.spawn(
        sys.executable,
        [*args.split(), "--interval", "0.2", "--duration", "6"],
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"},
        encoding="utf-8",
        timeout=40,
        dimensions=(40, 160),
    )
    child.expect("SIMULATED")
    child.expect("thermal-slowdown")
    child.expect("NEW")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_piped_output_is_a_log_of_findings_as_they_appear() -> None:
    # gpu-fallen-off-bus: GPU 3 is lost at 30 s of simulated time (1.5 s at 20x).
    result = _run(
        "--backend", "sim", "--scenario", "gpu-fallen-off-bus", "--sim-speed", "20",
        "--interval", "0.2", "--count", "20",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "SIMULATED" in out
    first, _, _ = out.partition("findings")
    assert "GPU" in first  # the first frame is printed whole
    new_lines = [line for line in out.splitlines() if " NEW " in line]
    assert any("gpu-lost" in line and "GPU 3" in line for line in new_lines), out


def test_once_json_is_one_document_with_the_verdict() -> None:
    result = _run("--backend", "sim", "--scenario", "fake-load", "--once", "--json")
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["schema"] == "gpuwarden.watch/1"
    assert doc["snapshot"]["simulated"] is True
    assert doc["window_snapshots"] == 1
    for finding in doc["findings"]:
        assert {"code", "severity", "device", "evidence", "cause", "remedy", "action"} <= set(
            finding
        )
    assert all(c["status"] in {"pass", "warn", "fail", "skip"} for c in doc["checks"])


def test_json_stream_is_one_valid_document_per_reading() -> None:
    result = _run(
        "--backend", "sim", "--scenario", "healthy-training", "--interval", "0.1",
        "--count", "3", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    docs = [json.loads(line) for line in lines]
    assert [d["window_snapshots"] for d in docs] == [1, 2, 3]
    # healthy training: nothing above info, ever
    assert all(f["severity"] == "info" for d in docs for f in d["findings"])


@pytest.mark.parametrize(
    ("args", "reference"),
    [
        (("--backend", "smi", "--from", "x.xml", "--sim-speed", "5"), "sim-option-without-sim"),
        (("--backend", "sim", "--thresholds", "/nonexistent/t.toml"), "thresholds-unreadable"),
    ],
)
def test_bad_options_exit_2_with_a_reference(args: tuple[str, ...], reference: str) -> None:
    result = _run(*args, "--once")
    assert result.returncode == 2
    assert reference in result.stderr
    assert "Traceback" not in result.stderr


def test_interval_out_of_range_is_refused() -> None:
    result = _run("--backend", "sim", "--interval", "0", "--once")
    assert result.returncode == 2
    assert "between" in result.stderr


def _finding(code: str, index: int, severity: Severity = Severity.WARNING) -> Finding:
    return Finding(
        code=code,
        severity=severity,
        title=f"{code} on {index}",
        cause="",
        remedy="",
        device=DeviceRef(index=index, uuid=f"GPU-{index}"),
    )


def _snapshot(t: float) -> Snapshot:
    from gpuwarden.types.telemetry import DeviceInfo, DeviceSample

    info = DeviceInfo(index=0, uuid="GPU-0", name="x")
    return Snapshot(t, "h", "sim", True, (DeviceSample(info=info, timestamp_s=t),))


def test_watcher_marks_new_and_cleared_findings_and_bounds_the_window() -> None:
    verdicts = iter(
        [
            (_finding("thermal-slowdown", 0),),
            (_finding("thermal-slowdown", 0), _finding("gpu-lost", 1, Severity.CRITICAL)),
            (_finding("gpu-lost", 1, Severity.CRITICAL),),
        ]
    )
    seen: list[int] = []

    def judge(snapshots: Any) -> Any:
        seen.append(len(snapshots))
        return next(verdicts), ()

    watcher = Watcher(judge, window_s=1.5)
    a = watcher.update(_snapshot(0.0))
    b = watcher.update(_snapshot(1.0))
    c = watcher.update(_snapshot(2.0))
    assert [x.new for x in a.findings] == [True]
    # most severe first; the thermal finding keeps its first-seen time
    assert [x.finding.code for x in b.findings] == ["gpu-lost", "thermal-slowdown"]
    assert [x.new for x in b.findings] == [True, False]
    assert b.findings[1].first_seen_s == 0.0
    assert [x.finding.code for x in c.cleared] == ["thermal-slowdown"]
    assert c.cleared[0].cleared_s == 2.0
    assert seen == [1, 2, 2]  # the reading at 0 s left the 1.5 s window
    assert finding_key(_finding("x", 3)) == ("x", "GPU-3")


def test_findings_on_gpus_with_masked_uuids_stay_apart(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    masked = [
        Finding("ecc-sram", Severity.CRITICAL, "", "", "", DeviceRef(index=i, uuid=MASKED_UUID))
        for i in (0, 1)
    ]
    watcher = Watcher(lambda _: (tuple(masked), ()), window_s=10.0)
    assert [a.finding.device for a in watcher.update(_snapshot(0.0)).findings] == [
        f.device for f in masked
    ]
    path = two_masked_gpus(fixtures, tmp_path)
    assert main(["watch", "--backend", "smi", "--from", str(path), "--once"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if re.match(r"│\s+\d+ │ H100", ln)]
    assert len(rows) == 2
    assert rows[0].rstrip("│ ").endswith("ok")
    assert "CRIT" in rows[1]
