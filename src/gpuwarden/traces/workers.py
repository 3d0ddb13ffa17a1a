"""Decode several rank files at once: in threads when the decoder releases the GIL (the simdjson
scanner and ISA-L gunzip do), else in other processes, whose results come back pickled.

Threads share this process's memory and imports, so they cost one more file's buffers, not a
process; they only pay off once the job takes a noticeable time (the scanner decodes several
hundred MB/s per core). For the msgspec decoder, which holds the GIL: when this process runs no
other thread, children are forked: they start in milliseconds with every module imported, and
this process decodes a share of the files itself meanwhile. With other threads (a progress
display), a forked child could inherit a lock one of them holds, so then a pool from the fork
server (preloaded with the decoder) or spawn is used, which pays the imports once per server or
worker and so only pays off on large jobs.
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwarden.errors import CorruptInputError
from gpuwarden.traces.gunzip import json_size as _json_size
from gpuwarden.traces.model import RankTrace

if TYPE_CHECKING:
    from concurrent.futures import Executor
    from multiprocessing.context import BaseContext

Outcome = RankTrace | CorruptInputError
DecodeFn = Callable[[str], Outcome]
ProgressFn = Callable[[str, int, int], None]

MAX_WORKERS = 8
# Forked children decode ~20% slower than this process (a fresh heap: page faults, copied
# pages), so forking pays in wall time from a few tens of MB of JSON; a pool from the fork
# server or spawn must first import numpy and msgspec (~0.1-0.2 s of CPU).
FORK_MIN_JSON_BYTES = 16 * 1024 * 1024
SERVER_MIN_BYTES = 8 * 1024 * 1024  # on disk
# Below this much JSON the job takes a few ms: a thread would cost more than it saves. Above it,
# as a shell times it: 8 ranks of 31 MB (astra_megatron_tp8) 0.207 -> 0.199 s wall on 2 cores.
THREAD_MIN_JSON_BYTES = 4 * 1024 * 1024
_PRELOAD = [
    "gpuwarden.traces.decode",
    "gpuwarden.traces.columns",
    "gpuwarden.traces.kineto_structs",
]


def decode_files(
    files: Sequence[Path],
    decode: DecodeFn,
    workers: int,
    progress: ProgressFn | None,
    *,
    threads: bool = False,
) -> dict[str, Outcome]:
    """``decode`` of every file (keyed by ``str(path)``), in up to ``workers`` threads (when
    ``threads``: ``decode`` releases the GIL) or processes (this one included) when the job is
    large enough to win from it."""
    n = min(workers, len(files), MAX_WORKERS)
    if n > 1:
        if threads:
            if sum(_json_size(f) for f in files) >= THREAD_MIN_JSON_BYTES:
                return _threaded(files, decode, n, progress)
        elif _forkable():
            if sum(_json_size(f) for f in files) >= FORK_MIN_JSON_BYTES:
                return _forked(files, decode, n, progress)
        elif sum(_disk_size(f) for f in files) >= SERVER_MIN_BYTES:
            return _pooled(files, decode, n, progress)
    results: dict[str, Outcome] = {}
    for done, f in enumerate(files, start=1):
        results[str(f)] = decode(str(f))
        if progress is not None:
            progress(str(f), done, len(files))
    return results


def _forkable() -> bool:
    """Linux (macOS system libraries are not fork-safe: Python spawns there) and no thread."""
    import sys
    import threading

    return sys.platform == "linux" and threading.active_count() == 1


def _disk_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _balanced(files: Sequence[Path], n: int) -> list[list[Path]]:
    """``n`` groups of about equal JSON size (largest files first into the lightest group),
    each in the original file order."""
    sizes = {f: _json_size(f) for f in files}
    groups: list[list[Path]] = [[] for _ in range(n)]
    loads = [0] * n
    for f in sorted(files, key=lambda f: -sizes[f]):
        i = loads.index(min(loads))
        groups[i].append(f)
        loads[i] += sizes[f]
    order = {f: i for i, f in enumerate(files)}
    return [sorted(g, key=order.__getitem__) for g in groups if g]


def _forked(
    files: Sequence[Path], decode: DecodeFn, n: int, progress: ProgressFn | None
) -> dict[str, Outcome]:
    groups = _balanced(files, n)
    children: list[tuple[int, int, list[Path]]] = []
    results: dict[str, Outcome] = {}
    done = 0
    mine = list(groups[0])
    try:
        for group in groups[1:]:
            child = _fork_child(group, decode, [r for _, r, _ in children])
            if child is None:  # no process to be had (EAGAIN, ENOMEM): decode them here
                mine.extend(group)
            else:
                children.append(child)
        for f in mine:
            results[str(f)] = decode(str(f))
            done += 1
            if progress is not None:
                progress(str(f), done, len(files))
        while children:
            pid, fd, group = children.pop(0)
            got = _receive(pid, fd)
            for f in group:
                # a child that died (killed, out of memory) leaves its files to this process
                results[str(f)] = got[str(f)] if got is not None else decode(str(f))
                done += 1
                if progress is not None:
                    progress(str(f), done, len(files))
    finally:
        for pid, fd, _ in children:  # only after an error here: stop and reap the others
            os.close(fd)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return results


def _fork_child(
    group: list[Path], decode: DecodeFn, inherited: list[int]
) -> tuple[int, int, list[Path]] | None:
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child: decode, send, exit without running the parent's cleanup
        code = 1
        try:
            os.close(read_fd)
            for fd in inherited:  # other children's pipes, so their EOF is theirs alone
                os.close(fd)
            out = {str(f): decode(str(f)) for f in group}
            with os.fdopen(write_fd, "wb") as fh:
                pickle.dump(out, fh, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd, group


def _receive(pid: int, fd: int) -> dict[str, Outcome] | None:
    """The child's results (read as they stream in), or None when it died before sending all."""
    out: dict[str, Outcome] | None
    try:
        with os.fdopen(fd, "rb") as fh:
            out = pickle.load(fh)
    except Exception:  # nothing, or a truncated message
        out = None
    _, status = os.waitpid(pid, 0)
    return out if status == 0 else None


def _threaded(
    files: Sequence[Path], decode: DecodeFn, n: int, progress: ProgressFn | None
) -> dict[str, Outcome]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="gpuwarden-decode") as pool:
        return _collect(pool, files, decode, progress)


def _pooled(
    files: Sequence[Path], decode: DecodeFn, n: int, progress: ProgressFn | None
) -> dict[str, Outcome]:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=n, mp_context=_pool_context()) as pool:
        return _collect(pool, files, decode, progress)


def _collect(
    pool: Executor, files: Sequence[Path], decode: DecodeFn, progress: ProgressFn | None
) -> dict[str, Outcome]:
    """Every file decoded by ``pool``, progress reported as each one finishes."""
    from concurrent.futures import as_completed

    results: dict[str, Outcome] = {}
    futures = {pool.submit(decode, str(f)): str(f) for f in files}
    for done, fut in enumerate(as_completed(futures), start=1):
        results[futures[fut]] = fut.result()
        if progress is not None:
            progress(futures[fut], done, len(files))
    return results


def _pool_context() -> BaseContext:
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")
