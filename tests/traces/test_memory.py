"""The loader's memory helpers, on the real allocator."""

from __future__ import annotations

import numpy as np
import pytest

from gpuwarden.traces import memory


def _rss_kb() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def test_release_free_heap_returns_freed_temporaries_to_the_system() -> None:
    if memory._malloc_trim() is None:
        pytest.skip("not glibc: release_free_heap is a no-op")
    # freeing a mapped 4 MB block raises glibc's mmap threshold: the 1 MB blocks that follow
    # come from the heap, and freeing them (below the last one) leaves them resident
    big = np.ones(1 << 19)
    del big
    blocks = [np.ones(1 << 17) for _ in range(40)]
    last = blocks.pop()
    del blocks
    before = _rss_kb()
    memory.release_free_heap()
    after = _rss_kb()
    assert last.sum() == 1 << 17
    assert before - after > 20_000, (before, after)


def test_anonymous_map_is_zero_filled_and_refuses_as_memory_error() -> None:
    m = memory.anonymous_map(0)
    assert len(m) == 1 and m[:1] == b"\0"
    with pytest.raises(MemoryError):
        memory.anonymous_map(1 << 62)
