"""Anonymous memory maps for the loader's large buffers (the decode window, the columns): their
pages become resident only when written and go back to the system when the map is freed,
whatever the allocator did in between; and the heap's free pages given back between phases."""

from __future__ import annotations

import functools
import mmap
from collections.abc import Callable


def anonymous_map(size: int) -> mmap.mmap:
    """A zero-filled map of ``size`` bytes (at least one); MemoryError when the system refuses
    (ENOMEM under strict overcommit), the loader's "not enough memory"."""
    try:
        return mmap.mmap(-1, max(size, 1))
    except OSError as exc:
        raise MemoryError(str(exc)) from exc


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        import ctypes

        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (ImportError, OSError, AttributeError, TypeError):  # not glibc (TypeError: Windows)
        return None
    return trim


def release_free_heap() -> None:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``), between phases of
    the analysis: once glibc has raised its mmap threshold, numpy's freed temporaries stay
    resident in the heap and add to the next phase's peak. A no-op where there is no glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
