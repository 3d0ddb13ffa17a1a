from __future__ import annotations

import subprocess
import sys

import pytest

from gpuwarden.cli.main import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", *args], capture_output=True, text=True, check=False
    )


def test_help_lists_every_verb_and_imports_nothing_heavy() -> None:
    code = (
        "import sys; from gpuwarden.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('rich', 'torch', 'numpy', 'gpuwarden.planner', 'gpuwarden.catalog')"
        " if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "plan" in out.stdout and "catalog" in out.stdout
    assert "HEAVY []" in out.stdout


def test_unknown_command_suggests_the_closest_verb(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plna"]) == 2
    err = capsys.readouterr().err
    assert "unknown-command" in err and "'plan'" in err


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "commands:" in capsys.readouterr().out


def test_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("gpuwarden ")
