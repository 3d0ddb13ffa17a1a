"""Permission tests that mean something under root, which ignores file modes.

``as_user_without_privileges(work)`` runs ``work`` in a forked child without the capabilities
that let root write (and, with ``read_anything=False``, read) what file modes forbid, when the
tests run as root; else in this process. Either way ``chmod`` then decides what ``work`` may do.
The child stays uid 0 (files it makes are root's, so a root-owned 0644 file stays writable to
it and a 0555 directory does not), and by default keeps CAP_DAC_READ_SEARCH: the Python it runs
lives under /root, which other users cannot read, and modules are imported lazily. A child that
may not read everything can use only the modules this process imported already.
``work`` returns something picklable.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
# linux/capability.h
_CAP_VERSION_3 = 0x20080522
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _drop_capabilities(*caps: int) -> None:
    """Remove ``caps`` (all below 32) from this process's capability sets."""
    libc = ctypes.CDLL(None, use_errno=True)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    mask = ~sum(1 << cap for cap in caps) & 0xFFFFFFFF
    data[0].effective &= mask
    data[0].permitted &= mask
    data[0].inheritable &= mask
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def as_user_without_privileges(work: Callable[[], T], *, read_anything: bool = True) -> T:
    if os.geteuid() != 0:
        return work()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 0
        try:
            os.close(read)
            dropped = (CAP_DAC_OVERRIDE, CAP_FOWNER)
            _drop_capabilities(*dropped, *(() if read_anything else (CAP_DAC_READ_SEARCH,)))
            try:
                payload = pickle.dumps(("ok", work()))
            except BaseException as exc:  # handed to the parent, which raises it there
                payload = pickle.dumps(("raised", f"{type(exc).__name__}: {exc}"))
            with os.fdopen(write, "wb") as pipe:
                pipe.write(payload)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0 and data, "the unprivileged child failed before reporting"
    kind, value = pickle.loads(data)
    if kind == "raised":
        raise AssertionError(f"in the unprivileged child: {value}")
    result: T = value
    return result


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """``gpuwarden argv`` in this process with stdout/stderr captured: (exit code, out, err)."""
    from gpuwarden.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def cli_without_privileges(
    argv: Sequence[str], *, read_anything: bool = True
) -> tuple[int, str, str]:
    return as_user_without_privileges(lambda: run_cli(argv), read_anything=read_anything)


@contextlib.contextmanager
def open_dir() -> Iterator[Path]:
    """A fresh directory, removed afterwards (modes restored first)."""
    path = Path(tempfile.mkdtemp(prefix="gpuwarden-perm-"))
    try:
        yield path
    finally:
        for item in (path, *path.rglob("*")):
            with contextlib.suppress(OSError):
                item.chmod(0o777 if item.is_dir() else 0o666)
        shutil.rmtree(path, ignore_errors=True)


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())
