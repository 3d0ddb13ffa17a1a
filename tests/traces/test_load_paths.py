"""The loader's alternative code paths give the same trace: ISA-L vs zlib gunzip, forked vs
fork-server workers vs one process; and a failed decode leaves the garbage collector as it was."""

from __future__ import annotations

import concurrent.futures
import gc
import gzip
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.traces import gunzip, native, workers
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.model import RankTrace

NCCL = "nccl_parser_config/nccl_data.json.gz"
MEGATRON = "astra_megatron_tp8_a100"


def _same(a: RankTrace, b: RankTrace) -> None:
    for field in RankTrace.__dataclass_fields__:
        x, y = getattr(a, field), getattr(b, field)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), field
        else:
            assert x == y, field


@pytest.fixture
def zlib_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gunzip, "new_member", gunzip.zlib_member)
    monkeypatch.setattr(gunzip, "ERRORS", (gunzip.zlib.error,))


def _load_one(path: Path) -> RankTrace:
    (rank,) = load_traces([path]).ranks.values()
    return rank


def test_isal_and_zlib_give_the_same_columns(
    fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("isal")
    assert gunzip.BACKEND == "isal"
    path = fixtures / "traces" / NCCL
    data = gzip.decompress(path.read_bytes())
    two = tmp_path / "two_members.json.gz"  # concatenated gzip members, cut mid-event
    two.write_bytes(gzip.compress(data[:1000]) + gzip.compress(data[1000:]))
    with_isal = [_load_one(path), _load_one(two)]
    monkeypatch.setattr(gunzip, "new_member", gunzip.zlib_member)
    monkeypatch.setattr(gunzip, "ERRORS", (gunzip.zlib.error,))
    with_zlib = [_load_one(path), _load_one(two)]
    for a, b in zip(with_isal, with_zlib, strict=True):
        _same(a, b)
    events = orjson.loads(data)["traceEvents"]
    kept = [e for e in events if e.get("dur") is not None and e.get("cat") not in (None, "Trace")]
    assert len(with_isal[0]) == len(with_isal[1]) == len(kept) > 0


@pytest.mark.parametrize("backend", ["default", "zlib"])
@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_corrupt_gzip_is_named_by_either_backend(
    fixtures: Path, tmp_path: Path, request: pytest.FixtureRequest, backend: str, damage: str
) -> None:
    if backend == "zlib":
        request.getfixturevalue("zlib_only")
    data = (fixtures / "traces" / NCCL).read_bytes()
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:  # a byte of the deflate stream, past the header
        data = data[:5000] + bytes([data[5000] ^ 0xFF]) + data[5001:]
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(data)
    with pytest.raises(CorruptInputError) as info:
        load_traces([bad])
    assert info.value.reference == "trace-unreadable"
    assert str(bad) in info.value.message


@pytest.mark.parametrize("enabled", [True, False])
def test_gc_state_is_restored_after_a_decode_error(tmp_path: Path, enabled: bool) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": ')
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with pytest.raises(CorruptInputError):
            load_traces([bad])
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


@pytest.fixture
def busy_thread() -> Iterator[None]:
    """A second thread (like a progress display's), alive while the test loads."""
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()


@pytest.mark.parametrize("threads", [False, True])
def test_parallel_loads_match_one_process(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, threads: bool
) -> None:
    """Without other threads, forked children decode some files while this process decodes the
    rest; with a thread running (a progress display), a fork-server pool does it instead."""
    if threading.active_count() != 1:
        pytest.skip("the test runner itself runs threads")
    monkeypatch.setenv(native.DECODER_ENV, "msgspec")  # processes serve the GIL-bound decoder
    folder = fixtures / "traces" / MEGATRON
    sequential = load_traces([folder], workers=1)
    monkeypatch.setattr(workers, "FORK_MIN_JSON_BYTES", 0)
    monkeypatch.setattr(workers, "SERVER_MIN_BYTES", 0)
    if threads:
        request.getfixturevalue("busy_thread")
    forks: list[int] = []
    pools: list[str] = []
    real_fork = os.fork

    def spy_fork() -> int:
        forks.append(1)
        return real_fork()

    class SpyPool(ProcessPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pools.append(kwargs["mp_context"].get_start_method())
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(workers.os, "fork", spy_fork)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", SpyPool)
    seen: list[int] = []
    parallel = load_traces([folder], workers=2, progress=lambda p, d, t: seen.append(d))
    assert (forks, pools) == (([], ["forkserver"]) if threads else ([1], []))
    assert seen == list(range(1, 9))
    assert list(parallel.ranks) == list(sequential.ranks) == list(range(8))
    for r, rank in parallel.ranks.items():
        _same(rank, sequential.ranks[r])


def test_a_child_that_dies_leaves_its_files_to_this_process(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if threading.active_count() != 1:
        pytest.skip("the test runner itself runs threads")
    monkeypatch.setenv(native.DECODER_ENV, "msgspec")  # processes serve the GIL-bound decoder
    folder = fixtures / "traces" / MEGATRON
    monkeypatch.setattr(workers, "FORK_MIN_JSON_BYTES", 0)
    real_fork = os.fork

    def dying_fork() -> int:
        pid = real_fork()
        if pid == 0:
            os._exit(3)  # killed before it could send anything
        return pid

    monkeypatch.setattr(workers.os, "fork", dying_fork)
    trace = load_traces([folder], workers=2)
    assert sorted(trace.ranks) == list(range(8)) and trace.skipped == ()


def test_groups_balance_json_size_and_keep_file_order(fixtures: Path) -> None:
    files = sorted((fixtures / "traces" / MEGATRON).iterdir())
    groups = workers._balanced(files, 3)
    assert sorted(f for g in groups for f in g) == files
    assert all(g == sorted(g) for g in groups)
    sizes = [sum(workers._json_size(f) for f in g) for g in groups]
    largest = max(workers._json_size(f) for f in files)
    assert max(sizes) - min(sizes) <= largest
    raw = gzip.decompress(files[0].read_bytes())
    assert workers._json_size(files[0]) == len(raw)


def test_no_process_to_fork_decodes_everything_here(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if threading.active_count() != 1:
        pytest.skip("the test runner itself runs threads")
    monkeypatch.setenv(native.DECODER_ENV, "msgspec")  # processes serve the GIL-bound decoder
    monkeypatch.setattr(workers, "FORK_MIN_JSON_BYTES", 0)
    forks: list[int] = []

    def no_fork() -> int:
        forks.append(1)
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(workers.os, "fork", no_fork)
    seen: list[int] = []
    trace = load_traces(
        [fixtures / "traces" / MEGATRON], workers=2, progress=lambda p, d, t: seen.append(d)
    )
    assert forks == [1]
    assert sorted(trace.ranks) == list(range(8)) and seen == list(range(1, 9))


def test_scanner_is_built() -> None:
    # scripts/install builds it (libsimdjson-dev); without it every trace takes the msgspec path
    from gpuwarden.traces import _kineto

    assert _kineto.SIMDJSON_VERSION.startswith("3.")


def test_scanner_threads_match_one_thread(fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simdjson scanner releases the GIL, so several files decode in threads (no process,
    no pickling); the ranks are the same as decoded one after the other."""
    monkeypatch.delenv(native.DECODER_ENV, raising=False)
    assert native.available()
    folder = fixtures / "traces" / MEGATRON
    sequential = load_traces([folder], workers=1)
    monkeypatch.setattr(workers, "THREAD_MIN_JSON_BYTES", 0)
    names: set[str] = set()
    real = workers._threaded

    def spy(*args: Any) -> Any:
        names.add("threaded")
        return real(*args)

    monkeypatch.setattr(workers, "_threaded", spy)
    monkeypatch.setattr(workers.os, "fork", lambda: pytest.fail("no process for the scanner"))
    seen: list[int] = []
    parallel = load_traces([folder], workers=2, progress=lambda p, d, t: seen.append(d))
    assert names == {"threaded"} and seen == list(range(1, 9))
    assert list(parallel.ranks) == list(sequential.ranks) == list(range(8))
    for r, rank in parallel.ranks.items():
        _same(rank, sequential.ranks[r])
