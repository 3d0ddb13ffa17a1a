"""Parsing a document the user wrote (JSON, TOML, YAML) into Python values, with ONE error.

The standard parsers fail in more ways than their own error type: past CPython's 4,300-digit
``int()`` limit they raise a bare ValueError (in Python's words, naming its own API), and nesting
a few thousand deep raises RecursionError. Each loader here turns all of them into
``DocumentError``, whose text is the problem in our words and, where the parser tells it, the
line and column. The caller adds the file's name, its error reference and its hint, once.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from types import ModuleType
from typing import Any

# CPython's message for the limit ("Exceeds the limit (4300 digits) for integer string
# conversion"), documented in the stdtypes "Integer string conversion length limitation"
_INT_LIMIT = "Exceeds the limit"
# Python's words about a value are short ("month must be in 1..12"); an echo is cut anyway
_MAX_ECHO = 120
# tomllib (3.11-3.13) puts the place in the text only: "Invalid value (at line 3, column 7)"
# with the blanks before it. A run of blanks is tried from its first blank only, and taken whole:
# the (leftmost) place starts there, and a start inside the run only scanned the same run again
# (quadratic in its length)
_TOML_PLACE = re.compile(r"(?<!\s)\s*+\(at (?:line (\d+), column (\d+)|end of document)\)$")


class DocumentError(Exception):
    """A document that does not parse: ``problem`` in our words, and its 1-based ``line`` and
    ``column`` when the parser gives them. ``str()`` is "not valid JSON (line 3, column 7: ...)"
    or "not valid TOML: nested too deeply"."""

    def __init__(
        self, kind: str, problem: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.kind = kind
        self.problem = problem
        self.line = line
        self.column = column
        place = self.place
        super().__init__(
            f"not valid {kind} ({place}: {problem})" if place else f"not valid {kind}: {problem}"
        )

    @property
    def place(self) -> str:
        """Where the parser stopped, "line 3, column 7" or "line 3"; "" when it did not say."""
        if self.line is None:
            return ""
        if self.column is None:
            return f"line {self.line}"
        return f"line {self.line}, column {self.column}"


def _beyond_the_parser(kind: str, exc: RecursionError | ValueError) -> DocumentError:
    """The failures every parser shares: recursion, and an int() past Python's digit limit
    (any other ValueError is a value the format allows but Python cannot hold: a date in
    month 13)."""
    if isinstance(exc, RecursionError):
        return DocumentError(kind, "nested too deeply")
    if str(exc).startswith(_INT_LIMIT):
        return DocumentError(kind, "a number too long (more than 4,300 digits)")
    return DocumentError(kind, f"a value out of range ({str(exc)[:_MAX_ECHO]})")


def _parsed(
    kind: str,
    parse: Callable[[str], Any],
    text: str,
    own: type[Exception],
    described: Callable[[Any], DocumentError],
) -> Any:
    """``parse(text)``; the parser's ``own`` error is ``described``, the shared ones after it
    (``own`` is caught first: JSONDecodeError and TOMLDecodeError are ValueErrors too)."""
    try:
        return parse(text)
    except own as exc:
        raise described(exc) from None
    except (RecursionError, ValueError) as exc:
        raise _beyond_the_parser(kind, exc) from None


def load_json_text(text: str | bytes) -> Any:
    """The value of a JSON document; bytes are UTF-8 (RFC 8259 §8.1: JSON exchanged between
    systems is UTF-8; a byte-order mark is ignored). Raises DocumentError."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentError("JSON", f"not UTF-8 text ({exc.reason})") from None
    return _parsed("JSON", json.loads, text, json.JSONDecodeError, _json_error)


def _json_error(exc: json.JSONDecodeError) -> DocumentError:
    return DocumentError("JSON", exc.msg, exc.lineno, exc.colno)


def load_toml_text(text: str) -> dict[str, Any]:
    """The table of a TOML document. Raises DocumentError."""
    table: dict[str, Any] = _parsed(
        "TOML", tomllib.loads, text, tomllib.TOMLDecodeError, _toml_error
    )
    return table


def _toml_error(exc: tomllib.TOMLDecodeError) -> DocumentError:
    text = str(exc)
    place = _TOML_PLACE.search(text)
    if place is None or place.group(1) is None:  # "(at end of document)" stays in the words
        return DocumentError("TOML", text)
    return DocumentError("TOML", text[: place.start()], int(place.group(1)), int(place.group(2)))


def load_yaml_text(text: str, yaml: ModuleType) -> Any:
    """The value of a YAML document read with ``yaml.safe_load`` (plain data, never objects).
    ``yaml`` is PyYAML as the caller imported it: which extra brings PyYAML, and which modules
    may import it, are the caller's business (the import contract of pyproject.toml).
    Raises DocumentError."""
    return _parsed("YAML", yaml.safe_load, text, yaml.YAMLError, _yaml_error)


def _yaml_error(exc: Exception) -> DocumentError:
    # a MarkedYAMLError points at the place (0-based mark); a ReaderError (a control character)
    # only says what it found, on its first line
    problem = getattr(exc, "problem", None) or str(exc).partition("\n")[0] or "a syntax error"
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return DocumentError("YAML", problem)
    return DocumentError("YAML", problem, mark.line + 1, mark.column + 1)
