"""What ``gpuwarden trace`` says while it works and before its report: the progress bar while
trace files load and the warnings, on stderr. Kept apart from ``report.trace`` so that
``trace analyze --json`` never imports rich (~25 ms of a run that is ~0.1 s on a small trace):
rich is imported only when stderr is a terminal and a bar is drawn."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gpuwarden.types.trace import TraceReport

ProgressFn = Callable[[str, int, int], None]


@contextmanager
def loading_progress() -> Iterator[ProgressFn | None]:
    """A progress bar on stderr while trace files load; nothing when stderr is not a terminal
    (pipes, CI logs, tests)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("loading traces"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def update(path: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=Path(path).name)

        yield update


def print_warnings(report: TraceReport) -> None:
    """Skipped files and warnings, one line each, on stderr (also in JSON mode)."""
    for skipped in report.skipped:
        print(f"warning: skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
    for line in report.warnings:
        print(f"warning: {line}", file=sys.stderr)
