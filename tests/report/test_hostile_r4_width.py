"""Issue 13, a hostile user's fourth pass: the terminal size a shell exports.

rich reads COLUMNS and LINES itself and takes to ``int`` whatever ``str.isdigit`` takes: "²⁰⁰"
(ValueError) and 5,000 digits (past int()'s 4,300-digit limit) were internal errors (exit 70),
piped or not, and COLUMNS=0 on a terminal printed nothing at all with exit 0. "٣٠" was taken as
30 columns. A size that is not ASCII digits (POSIX: a decimal integer) or is 0 is no size: the
piped default, or the terminal measured.
"""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from gpuwarden.report.output import console
from tests.cli.test_fuzz_verbs import problem, run_in_process

PLAN = ["plan", "Llama-2-7b-hf", "--gpu", "L4", "--mode", "lora"]
NO_SIZES = ["²⁰⁰", "9" * 5000, "٣٠", "３０", "0"]
PIPED_WIDTH = 120  # docs/snapshot.md: piped, a verb's tables are 120 columns wide


@pytest.fixture(scope="module")
def default_plan() -> str:
    """The plan report piped with no terminal size in the environment. It drops COLUMNS and
    LINES itself: a module fixture is set up before tests/conftest.py's autouse one that drops
    them for each test, and a pytest-xdist worker starts with COLUMNS=80 and LINES=24 (the
    controller's pytest imports readline, whose initialisation writes them into the process
    environment its workers inherit), so a worker's first test drew this report 80 wide."""
    with pytest.MonkeyPatch.context() as environment:
        for name in ("COLUMNS", "LINES"):
            environment.delenv(name, raising=False)
        outcome = run_in_process(PLAN)
    assert outcome.code == 0, outcome.err
    assert max(len(line) for line in outcome.out.splitlines()) == PIPED_WIDTH
    return outcome.out


@pytest.mark.parametrize("variable", ["COLUMNS", "LINES"])
@pytest.mark.parametrize(
    "value", NO_SIZES, ids=["superscript", "5000-digits", "arabic", "fullwidth", "zero"]
)
def test_a_size_that_is_no_number_leaves_the_piped_report_at_its_default(
    monkeypatch: pytest.MonkeyPatch, default_plan: str, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    outcome = run_in_process(PLAN)
    assert problem(outcome) is None
    assert outcome.code == 0
    assert outcome.out == default_plan


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("variable", ["COLUMNS", "LINES"])
@pytest.mark.parametrize(
    "value", NO_SIZES, ids=["superscript", "5000-digits", "arabic", "fullwidth", "zero"]
)
def test_a_terminal_with_a_size_that_is_no_number_still_draws_the_table(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    screen = _Terminal()
    monkeypatch.setattr("sys.stdout", screen)
    monkeypatch.setenv(variable, value)
    table = Table("component", "GiB")
    table.add_row("weights", "12.55")
    console().print(table)
    drawn = screen.getvalue()
    assert "weights" in drawn and "12.55" in drawn


def test_a_usable_size_is_still_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", " 90 ")
    monkeypatch.setenv("LINES", "40")
    outcome = run_in_process(PLAN)
    assert outcome.code == 0
    assert max(len(line) for line in outcome.out.splitlines()) == 90
