"""Anonymous memory maps for the loader's large buffers (the decode window, the columns): their
pages become resident only when written and go back to the system when the map is freed,
whatever the allocator did in between."""

from __future__ import annotations

import mmap


def anonymous_map(size: int) -> mmap.mmap:
    """A zero-filled map of ``size`` bytes (at least one); MemoryError when the system refuses
    (ENOMEM under strict overcommit), the loader's "not enough memory"."""
    try:
        return mmap.mmap(-1, max(size, 1))
    except OSError as exc:
        raise MemoryError(str(exc)) from exc
