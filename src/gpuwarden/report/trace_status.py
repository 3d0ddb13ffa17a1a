"""What ``gpuwarden trace`` says while it works and before its report: the progress bar while
trace files load and the warnings, on stderr. Kept apart from ``report.trace`` so that
``trace analyze --json`` never imports rich (~25 ms of a run that is ~0.1 s on a small trace):
rich is imported only when stderr is a terminal and a bar is drawn."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwarden.report.progress import stderr_progress
from gpuwarden.types.trace import TraceReport

if TYPE_CHECKING:
    from gpuwarden.traces.workers import ProgressFn


@contextmanager
def loading_progress() -> Iterator[ProgressFn | None]:
    """A progress bar on stderr while trace files load (see report.progress)."""
    with stderr_progress("loading traces") as advance:
        if advance is None:
            yield None
            return

        def update(path: str, done: int, total: int) -> None:
            advance(done, total, Path(path).name)

        yield update


def print_warnings(report: TraceReport) -> None:
    """Skipped files and warnings, one line each, on stderr (also in JSON mode)."""
    for skipped in report.skipped:
        print(f"warning: skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
    for line in report.warnings:
        print(f"warning: {line}", file=sys.stderr)
