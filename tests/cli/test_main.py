from __future__ import annotations

import json
import os
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


@pytest.mark.parametrize(
    ("args", "reference", "hint"),
    [
        (("plan", "Llama-2-7b-hf", "--seq-len", "1e30"), "invalid-argument", "plan --help"),
        (("plan", "Llama-2-7b-hf", "--seqlen", "5"), "unknown-option", "'--seq-len'"),
        (("plan", "Llama-2-7b-hf", "--mode", "trian"), "invalid-choice", "plan --help"),
        (("trace", "analyzee", "x.json"), "invalid-choice", "trace --help"),
        (("snapshot", "--backend", "sim", "--gpus", "0"), "invalid-argument", "--help"),
        (("--bogus",), "unknown-option", "gpuwarden --help"),
    ],
)
def test_argument_errors_are_short_with_a_reference_and_a_hint(
    args: tuple[str, ...], reference: str, hint: str
) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {reference}\n")
    assert hint in proc.stderr
    assert "usage:" not in proc.stderr  # no 30-line usage dump
    assert len(proc.stderr.splitlines()) <= 4


def test_argument_errors_honour_json() -> None:
    proc = run_cli("plan", "Llama-2-7b-hf", "--seqlen", "5", "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stderr)
    assert error["schema"] == "gpuwarden.error/1"
    assert error["reference"] == "unknown-option"
    assert error["hint"] == "did you mean '--seq-len'?"


@pytest.mark.parametrize(
    "args",
    [
        ("snapshot", "--backend", "sim"),
        ("snapshot", "--backend", "sim", "--json"),
        ("plan", "Llama-2-7b-hf", "--fit"),
        ("catalog", "instances"),
    ],
)
def test_a_reader_that_goes_away_is_a_normal_end(args: tuple[str, ...]) -> None:
    """`gpuwarden ... | head -1` exits 0 (rich's own handler would exit 1). The pipe's reader
    is closed before the command writes, so every write meets a broken pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gpuwarden", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            check=False,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert b"Exception ignored" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (("plan", "Llama-2-7b-hf", "--mode", "trian"), "'train'"),
        (("trace", "analyzee", "x.json"), "'analyze'"),
        (("plan", "Llama-2-7b-hf", "--attention", "flsh"), "'flash'"),
    ],
)
def test_a_mistyped_choice_is_answered_with_the_nearest(args: tuple[str, ...], meant: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert f"hint: did you mean {meant}?" in proc.stderr


def test_a_choice_like_none_keeps_the_help_hint() -> None:
    proc = run_cli("plan", "Llama-2-7b-hf", "--mode", "zzzzzz")
    assert proc.returncode == 2
    assert "did you mean" not in proc.stderr and "plan --help" in proc.stderr
