"""A progress bar on stderr while long work runs (trace files loading, fleet queries); nothing
when stderr is not a terminal (pipes, CI logs, tests). rich is imported only when a bar is drawn,
so a `--json` run never pays for it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Advance = Callable[[int, int, str], None]  # (done, total, what is being done now)


@contextmanager
def stderr_progress(title: str) -> Iterator[Advance | None]:
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from gpuwarden.report.output import console

    # a TextColumn reads markup on its own, whatever its console does; what is being done is a
    # file's or a query's name: text as written (see output.console)
    with Progress(
        TextColumn(title, markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}", markup=False),
        console=console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def advance(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=what)

        yield advance
