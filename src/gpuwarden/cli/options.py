"""Argument helpers shared by the verbs."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print machine-readable JSON (schema in README)"
    )


def positive_int(text: str) -> int:
    """argparse type: an integer ≥ 1, with an error that names the value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must not be negative")
    return value


def element_count(text: str) -> int:
    """argparse type: a count ≥ 1 as DeepSpeed configs write them (``1e9``, ``500_000_000``)."""
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (value >= 1 and value < 2**63 and value.is_integer()):  # also rejects nan and inf
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number, at least 1")
    return int(value)


def bounded_seconds(low: float, high: float) -> Callable[[str], float]:
    """argparse type: a finite number of seconds in [low, high], with an error naming both."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} must be between {low:g} and {high:g} s")
        return value

    return parse
