"""Argument helpers shared by the verbs."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# an argument error repeats enough of a value to recognise it, never the whole of a 5,000-digit
# --tp (argparse puts the message in the usage error as it is)
from gpuwarden.errors import SHOWN_CHARS, quoted, shown

# argparse names an option by all its spellings joined ("argument --file/-f: expected one
# argument", "not allowed with argument --output/-o")
_SPELLINGS = re.compile(r"(?<=argument )-[^\s:/]*(?:/-[^\s:/]*)+")


def before_separator(words: Sequence[str]) -> Sequence[str]:
    """The words of a command line argparse may read as options: those before `--`."""
    return words[: words.index("--")] if "--" in words else words


def as_typed(message: str, words: Sequence[str]) -> str:
    """argparse's ``message`` about the command line ``words`` as the user reads it: an option
    with several spellings named as typed (when one of them was), and a long value cut as
    errors.shown / errors.quoted cut it (argparse repeats a value whole: 5,000 z's of an invalid
    --mode choice, of an unrecognised argument)."""
    options = before_separator(words)
    message = _SPELLINGS.sub(lambda m: _spelling_typed(m[0].split("/"), options), message)
    for value in sorted(_long_values(words), key=len, reverse=True):
        if value in message:  # as argparse repeats it: repr'd (a choice, a type), or as given
            message = message.replace(repr(value), quoted(value)).replace(value, shown(value))
    return message


def _spelling_typed(spellings: list[str], words: Sequence[str]) -> str:
    typed = {s for s in spellings if any(_spells(word, s) for word in words)}
    return typed.pop() if len(typed) == 1 else "/".join(spellings)


def _spells(word: str, spelling: str) -> bool:
    """Whether ``word`` is ``spelling`` as argparse reads it: whole, with ``=VALUE``, a short
    option with its value joined (``-fLOG``), a long option abbreviated (``--fil``)."""
    flag = word.partition("=")[0]
    if flag == spelling:
        return True
    if spelling.startswith("--"):
        return len(flag) > 2 and flag.startswith("--") and spelling.startswith(flag)
    return not word.startswith("--") and word.startswith(spelling)


def _long_values(words: Sequence[str]) -> set[str]:
    """The texts of ``words`` argparse may repeat that are too long to repeat: a word, the
    value of ``--opt=VALUE``, of a short option's ``-fVALUE``."""
    return {piece for word in set(words) for piece in _pieces(word) if len(piece) > SHOWN_CHARS}


def _pieces(word: str) -> Iterator[str]:
    yield word
    yield word.partition("=")[2]
    if word.startswith("-") and not word.startswith("--"):
        yield word[2:]


class ExplicitValueParser(argparse.ArgumentParser):
    """argparse, reading ``--db=--`` as the value "--". Python 3.11 drops an explicit "--" as if
    it were the separator and sets the option to ``[]``, past its type and its choices
    (`history --db=--`, `catalog --gpu=--`: exit 70 on a list where a text was due)."""

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # an option's one value "--" can only have been given joined (`--db --` is refused as
        # "expected one argument"); a positional's "--" is the separator, as argparse reads it
        one_value = action.nargs in (None, argparse.OPTIONAL)
        if action.option_strings and one_value and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print machine-readable JSON (schema in README)"
    )


def naming(what: str, example: str = "") -> Callable[[str], str]:
    """argparse type: a value that names ``what`` ("a model", "a file or directory"). An empty
    one is refused: it is mostly an unset shell variable (`plan "$MODEL"`), and "" would be read
    as "." (the working directory's files) or as no filter at all (the whole catalog)."""

    def parse(text: str) -> str:
        if not text.strip():
            also = f": {example}" if example else ""
            raise argparse.ArgumentTypeError(
                f"{quoted(text)} names no {what} (an unset shell variable?){also}"
            )
        return text

    return parse


# A number on our command line is written in ASCII digits. int() and float() also read every
# Unicode decimal digit ("٣", "３", "१०") and Unicode blanks around them, which no shell test
# (`[ "$TP" -gt 1 ]`), `seq`, awk, nvidia-smi or Kubernetes reads: such a value comes from a
# document or an input method, not from the script it would then fail in. Refused with the rule
# said, as nvidia-smi's cells (smi/cells) and units.whole_number refuse them.
ASCII_DIGITS = "write numbers in ASCII digits (0-9)"


def ascii_number_text(text: str, what: str = "a number") -> str:
    """``text`` when it is ASCII; else the argparse error saying it is not ``what`` ("an
    integer") and that numbers are written in ASCII digits."""
    if not text.isascii():
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not {what}: {ASCII_DIGITS}")
    return text


def integer(text: str) -> int:
    """argparse type: any integer (a seed, a process id, a stage), in ASCII digits."""
    try:
        return int(ascii_number_text(text, "an integer"))
    except ValueError:
        # int() refuses more than 4,300 digits ("Exceeds the limit"): a number, but no count
        digits = text.strip().removeprefix("-").removeprefix("+").isdecimal()
        problem = "has too many digits" if digits else "is not an integer"
        raise argparse.ArgumentTypeError(f"{quoted(text)} {problem}") from None


def real(text: str) -> float:
    """argparse type: any number float() reads (a fraction, a time), in ASCII digits."""
    try:
        return float(ascii_number_text(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a number") from None


def positive_int(text: str) -> int:
    """argparse type: an integer ≥ 1, with an error that names the value."""
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{shown(text)} must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{shown(text)} must not be negative")
    return value


def element_count(text: str) -> int:
    """argparse type: a count ≥ 0 as DeepSpeed configs write them (``1e9``, ``500_000_000``, and
    ``0``: stage3_max_live_parameters 0 releases every parameter after its use)."""
    try:
        return non_negative_int(text)
    except argparse.ArgumentTypeError:
        pass
    value = real(text)
    if not (value >= 0 and value < 2**63 and value.is_integer()):  # also rejects nan and inf
        raise argparse.ArgumentTypeError(f"{quoted(text)} must be a whole number, at least 0")
    return int(value)


def number(
    must: str, holds: Callable[[float], bool], *, noun: str = "number"
) -> Callable[[str], float]:
    """argparse type: a finite number for which ``holds`` is true; the error says what it
    ``must`` be ("a price in USD, 0 or more") and names the value."""

    def parse(text: str) -> float:
        try:
            value = float(ascii_number_text(text, f"a {noun}"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{quoted(text)} is not a {noun}") from None
        if not (math.isfinite(value) and holds(value)):
            raise argparse.ArgumentTypeError(f"{shown(text)} must be {must}")
        return value

    return parse


def bounded_seconds(low: float, high: float) -> Callable[[str], float]:
    """argparse type: a finite number of seconds in [low, high], with an error naming both."""
    return number(
        f"between {low:g} and {high:g} s", lambda v: low <= v <= high, noun="number of seconds"
    )


def prometheus_url(url: str) -> str:
    """--prometheus: an http(s) base URL without credentials (fleet report, deploy
    remediate), else exit 2."""
    from gpuwarden.errors import InputError
    from gpuwarden.transport import http_url_problem

    url = _without_credentials(url)
    problem = http_url_problem(url, base=True)
    if problem is not None:
        raise InputError(
            f"--prometheus {quoted(url)} is not an http(s) base URL: {problem}",
            reference="fleet-prometheus-url",
            hint="give the server's base URL, e.g. http://prometheus:9090 or "
            "https://host/prometheus",
        )
    return url


def _without_credentials(url: str) -> str:
    """``url`` as given, or an InputError when it holds a user or password (``http://u:p@host``):
    the transport sends no basic authentication, so such a URL never works, and it would print
    the password in every error and every CronJob's arguments."""
    from gpuwarden.errors import InputError
    from gpuwarden.transport import split_url

    try:
        parts = split_url(url)
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:  # a URL the parser refuses ("http://[::1"): the URL check names it
        return url
    if not userinfo:
        return url
    host = parts.netloc.rpartition("@")[2]
    shown = parts._replace(netloc=f"***@{host}").geturl()
    raise InputError(
        f"--prometheus {shown}: a URL with a user and password (not sent: no basic auth)",
        reference="fleet-prometheus-url",
        hint="give the URL without them; a server behind authentication takes a bearer token "
        "(fleet report --bearer-token-file FILE)",
    )
