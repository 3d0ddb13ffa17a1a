"""Argument helpers shared by the verbs."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

# an argument error repeats enough of a value to recognise it, never the whole of a 5,000-digit
# --tp (argparse puts the message in the usage error as it is)
from gpuwarden.errors import quoted, shown


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


def positive_int(text: str) -> int:
    """argparse type: an integer ≥ 1, with an error that names the value."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{shown(text)} must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{shown(text)} must not be negative")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        # int() refuses more than 4,300 digits ("Exceeds the limit"): a number, but no count
        digits = text.strip().removeprefix("-").removeprefix("+").isdecimal()
        problem = "has too many digits" if digits else "is not an integer"
        raise argparse.ArgumentTypeError(f"{quoted(text)} {problem}") from None


def element_count(text: str) -> int:
    """argparse type: a count ≥ 0 as DeepSpeed configs write them (``1e9``, ``500_000_000``, and
    ``0``: stage3_max_live_parameters 0 releases every parameter after its use)."""
    try:
        return non_negative_int(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a number") from None
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
            value = float(text)
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
            f"--prometheus {url!r} is not an http(s) base URL: {problem}",
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
