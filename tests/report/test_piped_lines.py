"""Piped or redirected, a log-like report writes one line per item (a finding, an event, a file
read), as journalctl and dmesg do: `grep` and `awk` see each whole. They were hard-wrapped at the
piped console's 120 columns ("... since the" / "last reset")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_main import run_cli
from tests.conftest import FIXTURES


def _run(*args: str) -> str:
    return run_cli(*args).stdout


def test_watch_events_are_one_line_each_when_piped() -> None:
    out = _run(
        "watch", "--backend", "sim", "--scenario", "ecc-double-bit", "--sim-speed", "20",
        "--duration", "4",
    )  # fmt: skip
    events = [line for line in out.splitlines() if " NEW " in line]
    assert events, out
    ecc = [line for line in events if "ecc-uncorrectable" in line]
    assert ecc and ecc[0].endswith("since the last reset"), ecc


def test_doctor_findings_and_inputs_are_one_line_each_when_piped(tmp_path: Path) -> None:
    source = next(p for p in sorted((FIXTURES / "xid").iterdir()) if p.suffix == ".log")
    path = tmp_path / ("captures-of-node-" + "x" * 90) / source.name  # a line past 120 columns
    path.parent.mkdir()
    path.write_bytes(source.read_bytes())
    out = _run("doctor", "--from", str(path))
    read = [line for line in out.splitlines() if line.startswith("read ")]
    assert read and all(str(path) in line and line.endswith(")") for line in read), out
    findings = [line for line in out.splitlines() if line.startswith(("CRITICAL ", "WARNING "))]
    assert findings and all(" · " in line for line in findings)


def test_a_piped_table_takes_the_width_the_user_exported() -> None:
    """`COLUMNS=200 gpuwarden plan ... | less -S` drew 120 columns and cut the detail cells;
    an unusable value keeps the default."""
    widths = {}
    for columns in ("200", "90", "abc", None):
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        if columns is not None:
            env["COLUMNS"] = columns
        plan = ["plan", "Llama-2-7b-hf", "--gpu", "L4", "--mode", "lora"]
        out = subprocess.run(
            [sys.executable, "-m", "gpuwarden", *plan],
            capture_output=True, text=True, check=True, env=env,
        ).stdout  # fmt: skip
        widths[columns] = max(len(line) for line in out.splitlines())
    assert widths == {"200": 200, "90": 90, "abc": 120, None: 120}
