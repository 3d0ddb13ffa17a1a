"""Writing documents and tables to the terminal. rich is loaded on the first table, so a
`--json` run never pays for it."""

from __future__ import annotations

import functools
import json
import math
import os
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuwarden.units import whole_number

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


def console(*, stderr: bool = False, piped_width: int = 120) -> Console:
    """The console every text report prints through (stdout, or stderr for what must stay out
    of stdout's way). It reads no markup and no emoji codes: what it prints is the outside
    world's text (GPU, kernel, host, pod, model and file names, nvidia-smi and kernel messages,
    pasted errors), where rich took "[nvidia]" for a style and dropped it, ended the process on
    "[/bold]" (MarkupError) and drew ":fire:" as an emoji. Our own styles are Text spans."""
    terminal = (sys.stderr if stderr else sys.stdout).isatty()
    return _console_class()(
        stderr=stderr,
        # tables must not wrap when piped to a file or a pager; a width the user exported
        # (`COLUMNS=250 gpuwarden ... | less -S`) is theirs to choose, as rich and ls honour it
        width=None if terminal else _exported_columns() or piped_width,
        _environ=_environ_for_rich(),
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=False,
    )


# The terminal size a shell exports (POSIX XBD 8.3: COLUMNS and LINES are decimal integers).
_SIZE_VARIABLES = ("COLUMNS", "LINES")
_SIZE_DIGITS = 5  # no terminal is 100,000 cells wide; int() refuses past 4,300 digits anyway


def _terminal_size_variable(name: str) -> int | None:
    """``COLUMNS`` or ``LINES`` as a positive number, or None when it is not one. ASCII digits
    only (units.whole_number): "٣٠" and "²⁰" pass ``str.isdigit``, and ``int`` refuses the
    superscripts."""
    value = whole_number(os.environ.get(name, "").strip(), max_digits=_SIZE_DIGITS)
    return value or None  # 0 cells: rich printed nothing at all on a terminal


def _exported_columns() -> int | None:
    """``COLUMNS`` when the environment holds a usable width (a shell keeps it unexported
    unless the user exports or sets it for the command)."""
    width = _terminal_size_variable("COLUMNS")
    return width if width is not None and 20 <= width <= 10_000 else None


def _environ_for_rich() -> dict[str, str] | None:
    """The environment rich reads, without a COLUMNS or LINES that is no size: rich takes any
    ``str.isdigit`` text to ``int`` (internal error on "²⁰" or 5,000 digits) and draws nothing
    at 0 columns; without them it measures the terminal. None: the environment as it is."""
    unusable = {
        name
        for name in _SIZE_VARIABLES
        if name in os.environ and _terminal_size_variable(name) is None
    }
    if not unusable:
        return None
    return {key: value for key, value in os.environ.items() if key not in unusable}


def print_line(out: Console, line: Any) -> None:
    """One line of a log-like report (a finding, an event, a file read): on a terminal wrapped
    as rich lays it out, piped or redirected one line per item, as journalctl and dmesg write
    them, so that grep and awk see each whole (the piped console's 120 columns are for tables)."""
    out.print(line, soft_wrap=not out.is_terminal)


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


def _is_standard_output(path: Path) -> bool:
    """``path`` is "-" or the file standard output already writes to (/dev/stdout, the file or
    pipe stdout was redirected to)."""
    if str(path) == "-":
        return True
    try:
        mine, theirs, null = os.fstat(1), path.stat(), os.stat(os.devnull)
    except (OSError, ValueError):
        return False
    same = (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
    # both thrown away (`--html /dev/null > /dev/null`) interleave into nothing
    return same and (theirs.st_dev, theirs.st_ino) != (null.st_dev, null.st_ino)


def check_output_path(
    path: Path, *, option: str, reference: str, example: str, beside_stdout: bool = False
) -> None:
    """Before the work, not after it: ``option`` naming a directory, a file in a directory that
    does not exist, or a path the OS refuses (a name too long, no permission to look). An
    output written ``beside_stdout`` (a page besides the tables or --json) may not be standard
    output itself: the two would interleave into one stream that is neither."""
    from gpuwarden.errors import InputError

    try:
        if beside_stdout and _is_standard_output(path):
            problem: str | None = "is standard output, where the tables or --json already go"
        elif path.is_dir():
            problem = "is a directory"
        elif not path.parent.is_dir():
            problem = f"its directory {path.parent} does not exist"
        else:
            problem = None
    except OSError as exc:
        problem = f"cannot be used ({exc.strerror or exc})"
    if problem is not None:
        raise InputError(
            f"{option} {path}: {problem}",
            reference=reference,
            hint=f"give a file name in a writable directory, e.g. {option} {example}",
        )


def write_output(text: str, path: Path, *, option: str, reference: str) -> None:
    """``text`` into ``path`` whole or not at all: written beside it, then renamed over it, so a
    reader (a page open in a browser, `remediate --findings` in the next container) never sees
    half a file. A device, FIFO or socket (/dev/null, /dev/stdout, a pipe a viewer reads) is
    written into as the shell's `>` would: renaming a file over it would replace the device node
    itself (as root, /dev/null becomes a page)."""
    from gpuwarden.errors import InputError

    try:
        if _is_special_file(path):
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            return
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 is not what open() would give
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        raise InputError(
            f"{option} {path}: cannot write: {exc.strerror or exc}",
            reference=reference,
            hint="choose a path in a writable directory",
        ) from exc


def _is_special_file(path: Path) -> bool:
    """An existing path (or a link to one) that is neither a regular file nor a directory."""
    try:
        mode = path.stat().st_mode
    except OSError:  # absent, or refused: the write itself says why
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it back at once
    os.umask(mask)
    return mask
