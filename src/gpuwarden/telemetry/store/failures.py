"""SQLite and decoding failures → gpuwarden errors that name the store file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpuwarden.errors import GpuwardenError, InputError
from gpuwarden.telemetry.store.opening import busy, corrupt, io_problem, is_busy, is_io_problem


@contextmanager
def translated(path: Path, *, decoding: bool) -> Iterator[None]:
    """Busy, read-only, disk-full/I-O problems by name; anything else SQLite (or, when
    ``decoding``, the row decoder) rejects is a damaged file: ``store-corrupt``."""
    decode_errors: tuple[type[Exception], ...] = (
        (ValueError, TypeError, KeyError, ArithmeticError) if decoding else ()
    )
    try:
        yield
    except GpuwardenError:
        raise
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if is_busy(text):
            raise busy(path, text) from None
        if "readonly" in text:
            raise InputError(
                f"cannot write the telemetry store {path}: {text}",
                reference="store-unwritable",
                hint="check the file's permissions, or choose another path with --db",
            ) from None
        if is_io_problem(text):
            raise io_problem(path, text) from None
        raise corrupt(path, text) from None
    except sqlite3.DatabaseError as exc:
        raise corrupt(path, str(exc)) from None
    except decode_errors as exc:
        raise corrupt(path, f"{type(exc).__name__}: {exc}") from None
