"""Issue 13, fifth hostile pass: the command line itself, over every verb's parser as it is
registered (introspected, not listed by hand).

* argparse's own messages repeated a value whole (`plan x --mode <5,000 z's>`: a 5 KB error; the
  same for every choices= option, sub-command and unrecognised argument): cut as errors.shown /
  errors.quoted cut the option types' own messages.
* An option with several spellings (`--file/-f`) was named by all of them: now by the one typed.
* Numbers in non-ASCII digits (`--tp ٣`, `--gpus ３`, `--interval ١٠`) were read as 3, 3, 10 by
  int()/float(): refused, with the rule said, for every numeric option of every verb.
* Thousands of option-like words took argparse quadratic time (10,000: 3.7 s): refused.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gpuwarden.cli.main import MAX_OPTION_WORDS, CommandParser, load_command
from gpuwarden.cli.registry import COMMANDS
from gpuwarden.errors import SHOWN_CHARS, GpuwardenError
from tests.cli.test_fuzz_verbs import Outcome, problem, run_in_process

LONG = "z" * 5_000
# the longest an argparse error may be once its values are cut: the longest choices list
# (plan --framework) and a 40-character value with its length
MAX_MESSAGE = 400


@dataclass(frozen=True)
class Option:
    path: tuple[str, ...]  # the verb and its sub-command: ("deploy", "grafana")
    action: argparse.Action

    @property
    def name(self) -> str:
        return " ".join(self.path) + " " + (self.action.option_strings or [self.action.dest])[0]


def _actions(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[Option]:
    for action in parser._actions:  # argparse keeps no public list
        yield Option(path, action)
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, (*path, name))


def every_option() -> list[Option]:
    options: list[Option] = []
    for verb in COMMANDS:
        parser = CommandParser(prog=f"gpuwarden {verb}")
        load_command(verb).register(parser)
        options.extend(_actions(parser, (verb,)))
    return options


OPTIONS = every_option()


def _id(value: object) -> str:
    return value.name if isinstance(value, Option) else str(value)


def _error(argv: list[str]) -> dict[str, str]:
    outcome = run_in_process([*argv, "--json"])
    assert problem(outcome) is None, problem(outcome)
    assert outcome.code == 2, (argv[:4], outcome.out[:300])
    document: dict[str, str] = json.loads(outcome.err)
    return document


# --- 1. argparse's messages cut the values they repeat ---------------------------------------


def _with_choices() -> list[Option]:
    return [o for o in OPTIONS if o.action.choices and o.action.help != argparse.SUPPRESS]


@pytest.mark.parametrize("option", _with_choices(), ids=lambda o: o.name)
def test_an_invalid_choice_is_repeated_cut(option: Option) -> None:
    """Before: 'invalid choice: 'zzz…' with all 5,000 z's (5,100-5,200 characters)."""
    flag = option.action.option_strings[:1]
    error = _error([*option.path, *flag, LONG])
    assert error["reference"] == "invalid-choice"
    assert f"'{'z' * SHOWN_CHARS}'… (5,000 characters)" in error["message"]
    assert len(error["message"]) < MAX_MESSAGE and "z" * (SHOWN_CHARS + 1) not in error["message"]


def test_every_kind_of_choice_is_probed() -> None:
    kinds = {type(o.action).__name__ for o in _with_choices()}
    assert {"_StoreAction", "_SubParsersAction"} <= kinds
    assert len(_with_choices()) >= 30  # plan alone has 20


def _parsers() -> list[tuple[str, ...]]:
    return sorted({o.path for o in OPTIONS})


@pytest.mark.parametrize("path", _parsers(), ids=" ".join)
def test_unrecognised_arguments_are_listed_cut(path: tuple[str, ...]) -> None:
    """An unknown option of 5,000 characters, and 2,000 stray words after it (a paste)."""
    extra = [f"--{LONG}", *(f"--w{i}" for i in range(900)), *(f"w{i}" for i in range(1_100))]
    error = _error([*path, *extra])
    assert error["reference"] in {"unknown-option", "missing-argument", "invalid-choice"}
    assert len(error["message"]) < MAX_MESSAGE, error["message"][:500]


def test_unrecognised_arguments_name_the_first_and_count_them() -> None:
    error = _error(["catalog", "gpus", f"--{LONG}", "a", "b", "c", "d", "e", "f"])
    assert error["message"] == (
        f"unrecognized arguments: --{'z' * (SHOWN_CHARS - 2)}… (5,002 characters) a b c d "
        "… (7 in all)"
    )


def test_did_you_mean_is_kept_once_per_option() -> None:
    error = _error(["plan", "x", "--modee=train", "--modee=lora", "--tpp", "2"])
    assert error["hint"] == "did you mean '--mode', '--tp'?"


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (["plan", "x", f"--grad-reduce-in-fp32={LONG}"], "ignored explicit argument 'zzz"),
        (["explain", "--plan", f"x --mode {LONG}", "oom"], "--plan: argument --mode: invalid"),
        (["explain", "--plan", f"x '{LONG}", "oom"], "--plan: cannot split"),
        ([LONG], "unknown command 'zzz"),
    ],
    ids=["explicit-argument", "explain-plan-choice", "explain-plan-quote", "command"],
)
def test_other_messages_repeating_a_value_cut_it(argv: list[str], value: str) -> None:
    outcome = run_in_process(argv)
    assert outcome.code == 2 and problem(outcome) is None
    assert value in outcome.err and "(5,0" in outcome.err
    assert len(outcome.err) < MAX_MESSAGE + 200


# --- 2. an option with several spellings is named as typed ----------------------------------


def _spelled_several_ways() -> list[tuple[Option, str]]:
    return [
        (o, spelling)
        for o in OPTIONS
        if len(o.action.option_strings) > 1 and not isinstance(o.action, argparse._HelpAction)
        for spelling in o.action.option_strings
    ]


@pytest.mark.parametrize(("option", "spelling"), _spelled_several_ways(), ids=_id)
def test_an_option_is_named_as_typed(option: Option, spelling: str) -> None:
    """Before: 'argument --file/-f: expected one argument' for `explain -f`."""
    # a value-less option given a value, or an option taking a value given none
    typed = f"{spelling}=1" if option.action.nargs == 0 else spelling
    error = _error([*option.path, typed])
    assert error["message"].startswith(f"argument {spelling}: "), error["message"]


def test_several_spellings_exist_to_probe() -> None:
    names = {s for _, s in _spelled_several_ways()}
    assert {"-f", "--file", "-o", "--output", "--no-grad-reduce-in-fp32"} <= names


@pytest.mark.parametrize(
    ("words", "named"),
    [(["--fil"], "--file"), (["-f", "a", "--file"], "--file/-f")],
    ids=["abbreviation", "both-typed"],
)
def test_a_spelling_is_told_as_argparse_reads_it(words: list[str], named: str) -> None:
    """An abbreviation argparse accepts names its option; when both spellings were typed, the
    one the error is about cannot be told: both are named, as before."""
    error = _error(["explain", *words])
    assert error["message"] == f"argument {named}: expected one argument"


# --- 3. numbers are written in ASCII digits, in every numeric option -------------------------

_DIGITS = {"arabic-indic": 0x0660, "fullwidth": 0xFF10, "devanagari": 0x0966}


def _numeric_probe(option: Option) -> str | None:
    """An ASCII value the option's type reads as a number, or None for a non-numeric option."""
    kind = option.action.type
    if not callable(kind):
        return None
    for text in ("3", "0.5", "600"):
        try:
            value = kind(text)
        except Exception:  # the probe value is not this option's
            continue
        numbers = value if isinstance(value, tuple) else (value,)
        if numbers and all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers):
            return text
    return None


def _numeric_options() -> list[tuple[Option, str]]:
    found = [(o, _numeric_probe(o)) for o in OPTIONS]
    return [(o, probe) for o, probe in found if probe is not None]


def _in(script: str, text: str) -> str:
    return "".join(chr(_DIGITS[script] + int(c)) if c.isdigit() else c for c in text)


@pytest.mark.parametrize(("option", "ascii_value"), _numeric_options(), ids=_id)
@pytest.mark.parametrize("script", sorted(_DIGITS))
def test_a_number_in_other_digits_is_refused_saying_so(
    option: Option, ascii_value: str, script: str
) -> None:
    """Before: `plan --tp ٣` planned tp=3, `watch --interval ١٠` waited 10 s."""
    flag = option.action.option_strings[0]
    error = _error([*option.path, flag, _in(script, ascii_value)])
    assert "write numbers in ASCII digits (0-9)" in error["message"], error["message"]
    assert error["message"].startswith(f"argument {flag}: ")


def test_the_numeric_options_found_include_each_kind() -> None:
    """The introspection finds the options as registered: the shared types and the builtins
    int/float they replaced (--zero, --seed, --pid, --at, --lora-dropout)."""
    names = {f"{o.path[0]} {o.action.option_strings[0]}" for o, _ in _numeric_options()}
    assert {
        "plan --tp", "plan --gpus", "plan --seq-len", "plan --zero", "plan --lora-dropout",
        "plan --zero3-max-live", "plan --mamba-full-memory-ratio", "plan --max-mamba-cache-size",
        "watch --interval", "record --pid", "snapshot --seed", "snapshot --at",
        "trace --ranks", "fleet --timeout", "deploy --run-deadline", "history --run",
    } <= names  # fmt: skip
    assert len(names) >= 50


@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("when", ["١٠m", "１７００００００００", "２０２６-07-14"])
def test_a_time_in_other_digits_is_refused_saying_so(option: str, when: str) -> None:
    """Before: `history --since ١٠m` read ten minutes ago (float() and re's \\d)."""
    error = _error(["history", "--db", "/nonexistent/never.db", option, when])
    assert error["reference"] == "invalid-time"
    assert "write numbers in ASCII digits (0-9)" in error["message"]


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "Meta-Llama-3-8B", "--gpu", "H100", "--tp", "2", "--lora-dropout", "0.1"],
        ["snapshot", "--backend", "sim", "--seed", "7", "--at", "120.5"],
        ["plan", "Meta-Llama-3-8B", "--gpu", "H100", "--zero3-max-live", "1e9", "--zero", "3"],
    ],
)
def test_ascii_numbers_still_read(argv: list[str]) -> None:
    outcome = run_in_process([*argv, "--json"])
    assert outcome.code == 0 and problem(outcome) is None, outcome.err


# --- 4. thousands of option-like words -------------------------------------------------------


def test_thousands_of_option_words_are_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """argparse on 10,000 '--wN' took 3.7 s (100,000: five minutes): quadratic. Checked without
    a clock (a wall-clock bound fails under load): the words are counted and refused before
    argparse is given them; MAX_OPTION_WORDS of them still go to argparse (an unknown option)."""
    given: list[int] = []
    parse_known_args = argparse.ArgumentParser.parse_known_args

    def counting(parser: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        given.append(sum(1 for word in args or () if word.startswith("--w")))
        return parse_known_args(parser, args, namespace)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", counting)
    below_the_cap = MAX_OPTION_WORDS - 1  # and --json
    at_the_cap = _error(["explain", *(f"--w{i}" for i in range(below_the_cap))])
    assert at_the_cap["reference"] == "unknown-option" and max(given) == below_the_cap
    given.clear()
    error = _error(["explain", *(f"--w{i}" for i in range(20_000))])
    assert given == []
    assert error["reference"] == "too-many-options"
    assert error["message"].startswith("20,001 words that read as options")  # and --json


@pytest.mark.parametrize(
    "words",
    [["--", *["--w"] * 1_500], ["-1"] * 1_500, ["-.5"] * 1_500],
    ids=["after--", "-1", "-.5"],
)
def test_words_after_the_separator_and_negative_numbers_are_no_options(words: list[str]) -> None:
    """As argparse reads them: text, not options (and not quadratic)."""
    outcome: Outcome = run_in_process(["explain", "--json", *words])
    assert outcome.code == 0 and json.loads(outcome.out)["matched"] is False


# --- found by the attack (test_hostile_r5_attack) ----------------------------------------------


def _takes_one_value() -> list[Option]:
    return [o for o in OPTIONS if o.action.option_strings and o.action.nargs in (None, "?")]


@pytest.mark.parametrize("option", _takes_one_value(), ids=_id)
def test_a_joined_double_dash_is_the_value_not_an_empty_list(option: Option) -> None:
    """Python 3.11 read `--db=--` as [] past the option's type and choices: `history --db=--`
    and `catalog --gpu=--` ended in exit 70 on a list. "--" is now the value, typed and checked
    as any other."""
    parser = CommandParser(prog="gpuwarden")
    load_command(option.path[0]).register(parser)
    try:
        value = parser._get_values(option.action, ["--"])
    except (argparse.ArgumentError, argparse.ArgumentTypeError, GpuwardenError, ValueError):
        return  # refused, as "--" is for every option that takes no such text
    assert not isinstance(value, list)


@pytest.mark.parametrize(
    "argv",
    [
        ["catalog", "--gpu=--", "instances"],
        ["history", "--db=--"],
        ["history", "--resolution=--"],
        ["plan", "Meta-Llama-3-8B", "--tp=--"],
        ["explain", "--plan", "Meta-Llama-3-8B --mode=--", "oom"],
    ],
)
def test_a_joined_double_dash_is_refused_as_a_value(argv: list[str]) -> None:
    error = _error(argv)
    assert "'--'" in error["message"] or "at --" in error["message"], error["message"]


def test_json_after_the_separator_is_the_jobs_not_ours() -> None:
    """`record -- cmd --json`: the job's option; the error was printed as JSON all the same."""
    outcome = run_in_process(
        ["record", "--backend", "sim", "--duration", "1", "--", "/nonexistent/job", "--json"]
    )
    assert outcome.code == 127 and outcome.err.startswith("error: command-not-runnable")


def test_an_unknown_option_of_a_sub_command_gets_its_did_you_mean() -> None:
    assert _error(["deploy", "grafana", "--outptu", "x"])["hint"] == "did you mean '--output'?"


def test_blank_or_unprintable_unknown_arguments_are_quoted() -> None:
    """Before: 'unrecognized arguments:  a b' for `plan x "" "a b"`; an undecodable byte of
    argv (a lone surrogate) went into the --json error as one (strict JSON readers refuse it),
    a terminal's escape code to the terminal."""
    outcome = run_in_process(["plan", "x", "", "a b", "\udcff", "\x1b[2J", "--json"])
    assert outcome.code == 2
    message = json.loads(outcome.err)["message"]
    assert not [c for c in message if "\ud800" <= c <= "\udfff" or c == "\x1b"]
    assert message == "unrecognized arguments: '' 'a b' '\\udcff' '\\x1b[2J'"


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        ([LONG], "unknown model 'zzz"),
        (["Meta-Llama-3-8B", "--peft-version", LONG], "--peft-version 'zzz"),
        (["Meta-Llama-3-8B", "--cuda-version", LONG], "--cuda-version 'zzz"),
    ],
    ids=["model", "peft-version", "cuda-version"],
)
def test_a_long_name_or_version_is_repeated_cut(argv: list[str], start: str) -> None:
    message = _error(["plan", *argv, "--gpu", "H100"])["message"]
    assert message.startswith(start) and "… (5,000 characters)" in message
    assert len(message) < MAX_MESSAGE


def test_a_long_prometheus_url_is_repeated_cut() -> None:
    error = _error(["fleet", "report", "--range", "1h", "--prometheus", "ftp://" + LONG])
    assert error["reference"] == "fleet-prometheus-url"
    assert "… (5,006 characters) is not an http(s) base URL" in error["message"]
