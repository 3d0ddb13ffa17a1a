"""Issue 13, fourth hostile pass (b): `plan MODEL --tp <5,000 digits>` repeated the whole number
in its error, a 5 KB message (and int() refuses it past 4,300 digits: "is not an integer"). An
error now repeats a value's first 40 characters and says how long it is, in argparse's option
errors (cli/options.py) and in the planner's (planner/validate.py) alike."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_fuzz_verbs import problem, run_in_process

MODEL = "Meta-Llama-3-8B"
NINES = "9" * 40


def _error(*argv: str) -> dict[str, str]:
    outcome = run_in_process(["plan", MODEL, *argv, "--json"])
    assert problem(outcome) is None, problem(outcome)
    assert outcome.code == 2
    document: dict[str, str] = json.loads(outcome.err)
    return document


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # past int()'s 4,300 digits: argparse's type refuses it
        (
            ["--tp", "9" * 5_000],
            f"argument --tp: '{NINES}'… (5,000 characters) has too many digits",
        ),
        (["--tp", "-" + "9" * 5_000], "(5,001 characters) has too many digits"),
        (["--tp", "-" + "9" * 3_000], f"argument --tp: -{NINES[:39]}… (3,001 characters) must be"),
        (["--tp", "x" * 3_000], "'… (3,000 characters) is not an integer"),
        # a number int() reads: the planner refuses it, and so cuts it
        (["--tp", "9" * 4_000], f"tp={NINES}… (4,000 characters) does not divide the 32 "),
        (["--pp", "9" * 4_000], f"pp={NINES}… (4,000 characters) exceeds the 32 layers"),
        (["--zero", "9" * 4_000], f"got {NINES}… (4,000 characters)"),
        (["--tp", "7", "--gpus", "9" * 4_000], f"= 7 does not divide the {NINES}… (4,000 char"),
        (
            ["--kv-cache-dtype", "x" * 3_000],
            "dtype 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… (3,002",
        ),
        (["--torchtitan-version", "x" * 3_000], "… (3,000 characters) given with --framework hf"),
    ],
    ids=[
        "tp-5000",
        "tp-negative-5000",
        "tp-negative-3000",
        "tp-letters",
        "tp-4000",
        "pp",
        "zero",
        "gpus",
        "kv-dtype",
        "torchtitan",
    ],
)
def test_an_error_repeats_a_long_value_cut_with_its_length(argv: list[str], message: str) -> None:
    error = _error(*argv)
    assert message in error["message"]
    assert len(error["message"]) + len(error["hint"]) < 400  # before: 3,100 to 5,100 characters


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tp", "0"], "argument --tp: 0 must be at least 1"),
        (["--tp", "x"], "argument --tp: 'x' is not an integer"),
        (["--tp", "3"], "tp=3 does not divide the 32 attention heads of Meta-Llama-3-8B"),
        (["--kv-cache-dtype", "fp9"], "unknown KV-cache dtype 'fp9'"),
    ],
)
def test_a_short_value_is_repeated_whole(argv: list[str], message: str) -> None:
    assert _error(*argv)["message"].endswith(message)
