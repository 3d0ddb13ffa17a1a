"""Issue 13, fifth hostile pass: an attack on the command line of every verb, with hypothesis.

Each example is one command line built from a parser's own actions as registered (its options
in every spelling and abbreviated, joined ``--opt=VALUE`` or not, its choices, its positionals)
and values a hostile or careless user gives (blank, huge, non-ASCII digits, undecodable bytes as
surrogates, separators, negative numbers, IEEE edges), --json somewhere or not.

The promise checked: the exit code is one of README's table; never a traceback nor exit 70;
with --json (before `--`), a strict JSON document on stdout or the error on stderr; argparse's
refusals stay short (their values cut).

plan, catalog, explain, history and snapshot run for real (quick, nothing outside the test's
folder); the other verbs (live telemetry, servers, clusters, the job of `record`) are parsed
and their options' types and checks run, their ``run`` replaced by a stub.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli import main as cli_main
from tests.cli.test_fuzz_verbs import Outcome, problem, run_in_process
from tests.cli.test_hostile_r5_argv import OPTIONS

RUN_FOR_REAL = {"plan", "catalog", "explain", "history", "snapshot"}
EXIT_TABLE = {0, 1, 2, 3, 4, 126, 127}  # README "Errors and exit codes" (70: a bug)
ARGPARSE_REFUSALS = {
    "invalid-choice", "invalid-argument", "missing-argument", "unknown-option",
    "unknown-command", "too-many-options",
}  # fmt: skip
HOSTILE = [
    "", " ", "-", "--", "-1", "-0", "+3", " 3 ", "0", "1", "3", "2.5", "1e3", "1_000", "0x10",
    "1e309", "nan", "inf", "-inf", "٣", "３", "١٠", "²", "9" * 5_000, "z" * 5_000, "\n", "a\nb",
    "\udcff", "=", "'", '"', "/dev/null", ".", "/nonexistent/x", "\x1b[31m", "💥", "a=b",
    "H100", "A100 80GB", "Meta-Llama-3-8B", "gpt2", "1,2", "10m", "2026-07-14",
]  # fmt: skip
PARSERS: dict[tuple[str, ...], list[argparse.Action]] = {}
for _option in OPTIONS:
    if not isinstance(_option.action, argparse._HelpAction | argparse._SubParsersAction):
        PARSERS.setdefault(_option.path, []).append(_option.action)


def _value(action: argparse.Action) -> st.SearchStrategy[str]:
    hostile = st.sampled_from(HOSTILE)
    if action.choices:
        return st.sampled_from(sorted(map(str, action.choices))) | hostile
    return hostile


@st.composite
def _words_for(draw: st.DrawFn, action: argparse.Action) -> list[str]:
    if not action.option_strings:
        return [draw(_value(action))]
    flag = draw(st.sampled_from(action.option_strings))
    if len(flag) > 4 and draw(st.booleans()):  # argparse takes an unambiguous prefix
        flag = flag[: draw(st.integers(3, len(flag)))]
    if action.nargs == 0:
        joined = draw(st.sampled_from(["", "", "", "=1", "=", "=--"]))
        return [flag + joined]
    value = draw(_value(action))
    return [f"{flag}={value}"] if draw(st.booleans()) else [flag, value]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    path = draw(st.sampled_from(sorted(PARSERS)))
    words = list(path)
    for _ in range(draw(st.integers(0, 6))):
        words += draw(_words_for(draw(st.sampled_from(PARSERS[path]))))
        if draw(st.integers(0, 9)) == 0:
            words.append(draw(st.sampled_from(HOSTILE)))
    if draw(st.booleans()):
        words.insert(draw(st.integers(1, len(words))), "--json")
    return words


def _parse_only(name: str) -> object:
    module = REAL_LOAD(name)
    if name in RUN_FOR_REAL:
        return module
    return types.SimpleNamespace(register=module.register, run=lambda args: 0)


REAL_LOAD = cli_main.load_command


def _broken(outcome: Outcome) -> str | None:
    argv = outcome.argv
    before = argv[: argv.index("--")] if "--" in argv else argv
    if argv[0] not in RUN_FOR_REAL and outcome.code == 0:
        return None  # the stub printed nothing
    if "--json" not in before:  # a --json after `--` is a word of the text or of the job
        outcome = Outcome(tuple(w for w in argv if w != "--json"), outcome.code, "", outcome.err)
    found = problem(outcome)
    if found is None and outcome.code not in EXIT_TABLE:
        found = f"exit {outcome.code}: not in README's table"
    if found is None and "--json" in before and outcome.code != 0:
        error = json.loads(outcome.err)
        if error["reference"] in ARGPARSE_REFUSALS and len(error["message"]) > 600:
            found = f"a {len(error['message'])}-character {error['reference']} message"
    return found


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=command_lines())
def test_no_command_line_breaks_the_promise(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # what a verb writes (deploy -o, trace --html) stays here
    monkeypatch.setenv("GPUWARDEN_DB", str(tmp_path / "never-recorded.db"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(cli_main, "load_command", _parse_only)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8"))
    outcome = run_in_process(argv)
    assert _broken(outcome) is None, (argv[:12], _broken(outcome))


def test_the_attack_reaches_every_parser() -> None:
    verbs = {path[0] for path in PARSERS}
    assert verbs == {o.path[0] for o in OPTIONS} and len(PARSERS) >= 18
