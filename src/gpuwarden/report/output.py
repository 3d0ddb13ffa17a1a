"""Writing documents and tables to the terminal. rich is loaded on the first table, so a
`--json` run never pays for it."""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handler exits 1; a reader that went away (`| head`) is a normal end,
            # which the CLI's funnel turns into exit 0.
            self.quiet = True
            raise BrokenPipeError

    return _Console


def console() -> Console:
    # Tables must not wrap when piped to a file or a pager.
    return _console_class()(
        width=None if sys.stdout.isatty() else 120, highlight=False, soft_wrap=False
    )


def finite(value: Any) -> Any:
    """A JSON-ready value with every non-finite float (inf, -inf, NaN) as None, at any depth:
    ``json.dumps`` would write them as ``Infinity``/``NaN``, which no JSON parser takes."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def json_text(document: Any, **options: Any) -> str:
    """``json.dumps`` that never writes Infinity or NaN (see ``finite``); the common case, all
    finite, costs one pass."""
    try:
        return json.dumps(document, ensure_ascii=False, allow_nan=False, **options)
    except ValueError:
        return json.dumps(finite(document), ensure_ascii=False, allow_nan=False, **options)


def print_json(document: Mapping[str, Any]) -> None:
    """One JSON document on stdout, stable key order as built, valid JSON whatever it holds."""
    sys.stdout.write(json_text(document, indent=2) + "\n")
