"""Writing documents and tables to the terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich's own handler exits 1; a reader that went away (`| head`) is a normal end, which
        # the CLI's funnel turns into exit 0.
        self.quiet = True
        raise BrokenPipeError


def console() -> Console:
    # Tables must not wrap when piped to a file or a pager.
    return _Console(width=None if sys.stdout.isatty() else 120, highlight=False, soft_wrap=False)


def print_json(document: Mapping[str, Any]) -> None:
    """One JSON document on stdout, stable key order as built."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
