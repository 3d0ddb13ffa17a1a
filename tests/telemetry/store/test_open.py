"""Opening: default path, refusals that leave the file untouched, migration of an old file."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError, GpuwardenError, InputError
from gpuwarden.telemetry.store import APPLICATION_ID, SCHEMA_VERSION, Store, default_db_path
from gpuwarden.telemetry.store.schema import V4_COLUMNS
from gpuwarden.types.telemetry import DeviceSample
from tests.conftest import FIXTURES

from . import legacy
from .captures import snapshot
from .conftest import xid_event
from .unprivileged import as_user_without_privileges, names, open_dir


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(path: Path, reference: str, *, readonly: bool = False) -> GpuwardenError:
    """Open must fail with ``reference``, leave the file's bytes as they were and create
    nothing beside it (no -wal/-shm: no connection is open on it, so it is read immutable)."""
    before = _digest(path)
    siblings = names(path.parent)
    assert f"{path.name}-wal" not in siblings  # closed: SQLite removed it
    with pytest.raises(GpuwardenError) as caught:
        Store.open(path, readonly=readonly)
    assert caught.value.reference == reference, caught.value.message
    assert caught.value.hint
    assert str(path) in caught.value.message
    assert _digest(path) == before  # never modified
    assert names(path.parent) == siblings
    return caught.value


@pytest.fixture
def good_db(tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float) -> Path:
    path = tmp_path / "good.db"
    with Store.open(path) as store:
        for k in range(40):
            store.write(snapshot(rich_samples, t0 + k))
    return path


def test_default_path_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUWARDEN_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "gpuwarden" / "telemetry.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert default_db_path() == Path.home() / ".local/share/gpuwarden/telemetry.db"
    monkeypatch.setenv("GPUWARDEN_DB", str(tmp_path / "explicit.db"))
    assert default_db_path() == tmp_path / "explicit.db"


def test_new_file_is_created_with_parents_wal_and_ids(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "t.db"
    Store.open(path).close()
    header = path.read_bytes()[:100]
    assert struct.unpack_from(">I", header, 68)[0] == APPLICATION_ID
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()


def test_missing_file_readonly_is_store_not_found(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        Store.open(tmp_path / "none.db", readonly=True)
    assert caught.value.reference == "store-not-found"
    assert caught.value.hint == "record first: gpuwarden record -- python train.py"
    assert not (tmp_path / "none.db").exists()


def test_not_sqlite_is_refused_untouched(tmp_path: Path, fixtures: Path) -> None:
    path = tmp_path / "capture.db"
    shutil.copy(
        fixtures / "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv",
        path,
    )
    _refused(path, "store-not-gpuwarden")


def test_foreign_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE samples (t REAL, value REAL)")
    conn.execute("INSERT INTO samples VALUES (1.0, 2.0)")
    conn.commit()
    conn.close()
    error = _refused(path, "store-not-gpuwarden")
    assert "another program" in error.message
    _refused(path, "store-not-gpuwarden", readonly=True)


def test_foreign_application_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fossil.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 0x0f055112")  # Fossil's id (sqlite.org magic.txt)
    conn.execute("CREATE TABLE blob (rid INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    error = _refused(path, "store-not-gpuwarden")
    assert "0x0f055112" in error.message


def test_our_id_with_unknown_tables_is_refused(good_db: Path) -> None:
    conn = sqlite3.connect(good_db)
    conn.execute("CREATE TABLE their_table (x)")
    conn.commit()
    conn.close()
    error = _refused(good_db, "store-not-gpuwarden")
    assert "their_table" in error.message


def test_newer_schema_is_refused_untouched(good_db: Path) -> None:
    conn = sqlite3.connect(good_db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    error = _refused(good_db, "store-newer-schema")
    assert f"version {SCHEMA_VERSION + 1}" in error.message
    _refused(good_db, "store-newer-schema", readonly=True)


def _checkpointed(path: Path) -> None:
    """Everything in the main file (an empty -wal), as after a clean close: one file to damage."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for companion in path.parent.glob(f"{path.name}-*"):
        companion.unlink()


@pytest.mark.parametrize("keep", [10, 99, 4096, 3 * 4096 + 17])
def test_truncated_file_is_store_corrupt(good_db: Path, keep: int) -> None:
    _checkpointed(good_db)
    data = good_db.read_bytes()
    assert len(data) > keep
    good_db.write_bytes(data[:keep])
    error = _refused(good_db, "store-corrupt")
    assert isinstance(error, CorruptInputError)


def test_damaged_pages_are_store_corrupt_on_open_or_read(good_db: Path) -> None:
    _checkpointed(good_db)
    data = bytearray(good_db.read_bytes())
    page = struct.unpack_from(">H", data, 16)[0]
    for offset in range(page, len(data), page):  # every page but the header page: garbage
        data[offset : offset + 64] = b"\xa5" * 64
    good_db.write_bytes(bytes(data))
    before = _digest(good_db)
    with pytest.raises(CorruptInputError) as caught, Store.open(good_db, readonly=True) as store:
        store.samples()
    assert caught.value.reference == "store-corrupt"
    assert _digest(good_db) == before


def test_directory_and_unwritable_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        Store.open(tmp_path)
    assert caught.value.reference == "store-not-a-file"
    with open_dir() as shared:
        locked = shared / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        assert _reference(lambda: Store.open(locked / "t.db").close()) == "store-unwritable"
        assert names(locked) == []


def _reference(work: Any) -> str | None:
    """The reference of the GpuwardenError ``work`` raises as an unprivileged user, else None."""

    def attempt() -> str | None:
        try:
            work()
        except GpuwardenError as exc:
            return exc.reference
        return None

    return as_user_without_privileges(attempt)


def _samples_read(path: Path) -> int:
    with Store.open(path, readonly=True) as store:
        return len(store.samples())


def test_store_in_a_read_only_directory_is_read_and_refused_for_writing(
    rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    """A read-only directory is not a damaged store: readers read it (without -shm/-wal
    files, which cannot be made there) and a writer is told it cannot write, with nothing
    created and the file unchanged."""
    with open_dir() as shared:
        folder = shared / "ro"
        folder.mkdir()
        path = folder / "t.db"
        with Store.open(path) as store:
            for k in range(5):
                store.write(snapshot(rich_samples, t0 + k))
        folder.chmod(0o555)
        before, siblings = _digest(path), names(folder)
        assert as_user_without_privileges(lambda: _samples_read(path)) == 5 * len(rich_samples)
        assert _reference(lambda: Store.open(path).close()) == "store-unwritable"
        assert (_digest(path), names(folder)) == (before, siblings)


def test_read_only_file_is_refused_for_writing_without_side_files(
    rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    with open_dir() as shared:
        path = shared / "t.db"
        with Store.open(path) as store:
            store.write(snapshot(rich_samples, t0))
        path.chmod(0o444)
        before, siblings = _digest(path), names(shared)
        assert _reference(lambda: Store.open(path).close()) == "store-unwritable"
        assert (_digest(path), names(shared)) == (before, siblings)


def test_an_old_file_that_cannot_be_upgraded_says_so(
    rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    with open_dir() as shared:
        path = shared / "v4.db"
        legacy.write_v4(path, [snapshot(rich_samples, t0)], command=["job"])
        path.chmod(0o444)
        before = _digest(path)

        def read() -> tuple[str, str]:
            try:
                Store.open(path, readonly=True).close()
            except GpuwardenError as exc:
                return exc.reference, exc.message
            return "", ""

        reference, message = as_user_without_privileges(read)
        assert reference == "store-unwritable"
        assert f"schema version 4 and must be upgraded to version {SCHEMA_VERSION}" in message
        assert _digest(path) == before


def test_a_name_too_long_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / ("x" * 300) / "t.db"
    for readonly in (True, False):
        with pytest.raises(InputError) as caught:
            Store.open(path, readonly=readonly)
        assert caught.value.reference == "store-unreadable"
        assert "File name too long" in caught.value.message


def test_unwritable_parent_is_store_unwritable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(InputError) as caught:
        Store.open(blocker / "sub" / "t.db")
    assert caught.value.reference == "store-unwritable"


@pytest.fixture
def v4_db(tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float) -> Path:
    """The good_db snapshots as the release before v5 wrote them (tests/.../legacy.py)."""
    path = tmp_path / "v4.db"
    legacy.write_v4(path, [snapshot(rich_samples, t0 + k) for k in range(40)], command=["job"])
    return path


def _version(path: Path) -> int:
    conn = sqlite3.connect(path)
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    conn.close()
    return int(version)


def test_v4_file_is_migrated_keeping_every_row(
    v4_db: Path, good_db: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    """Every sample, snapshot, event and run of a v4 file is there after the migration to v5,
    as a file written by this release holds them; the rollups are built from them."""
    with Store.open(good_db, readonly=True) as store:
        expected = store.samples()
        expected_snapshots = store.snapshots()
    with Store.open(v4_db, readonly=True) as store:  # readonly still migrates our own file
        stored = store.stored_samples()
        snapshots = store.snapshots()
        (run,) = store.runs()
        minutes = store.samples(resolution="1m")
    assert _version(v4_db) == SCHEMA_VERSION
    assert [s.sample for s in stored] == expected
    assert {s.run_id for s in stored} == {run.id}
    assert run.command == ("job",)
    assert [(s.timestamp_s, s.samples) for s in snapshots] == [
        (s.timestamp_s, s.samples) for s in expected_snapshots
    ]
    assert len(minutes) == len({round((t0 + k) * 1000) // 60_000 for k in range(40)}) * len(
        rich_samples
    )


def test_v4_events_stay_with_their_snapshot(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float, xid_lines: dict[int, str]
) -> None:
    event = xid_event(rich_samples[0], t0 + 1.5, 79, xid_lines[79])
    snaps = [snapshot(rich_samples, t0 + k, events=(event,) if k == 1 else ()) for k in range(3)]
    path = tmp_path / "v4.db"
    legacy.write_v4(path, snaps, command=["job"])
    with Store.open(path, readonly=True) as store:
        back = store.snapshots()
        events = store.events()
    assert [s.events for s in back] == [(), (event,), ()]
    assert events == [event]


def _older(path: Path, version: int) -> None:
    """A v4 file (legacy.write_v4) turned into what ``version`` 1 or 2 wrote: without the
    columns v3 (pods) and v4 (health readings) added, and for v1 without the rollup tables."""
    conn = sqlite3.connect(path)
    tables = ("samples",) if version == 1 else ("samples", "samples_1m", "samples_1h")
    if version == 1:
        conn.execute("DROP TABLE samples_1m")
        conn.execute("DROP TABLE samples_1h")
        conn.execute("DELETE FROM meta WHERE key LIKE 'samples_1%'")
    for table in tables:
        for column in ("pods", *V4_COLUMNS):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


_BEFORE_V3 = {"pods": None, **dict.fromkeys(V4_COLUMNS)}


@pytest.mark.parametrize("version", [1, 2])
def test_v1_and_v2_files_are_migrated_keeping_their_data(
    tmp_path: Path, good_db: Path, rich_samples: tuple[DeviceSample, ...], t0: float, version: int
) -> None:
    """Data kept, fields those versions did not store None, rollups built, tables usable."""
    with Store.open(good_db, readonly=True) as store:
        expected = [dataclasses.replace(s, **_BEFORE_V3) for s in store.samples()]
    path = tmp_path / f"v{version}.db"
    legacy.write_v4(path, [snapshot(rich_samples, t0 + k) for k in range(40)], command=["job"])
    _older(path, version)
    with Store.open(path, readonly=True) as store:
        assert store.samples() == expected
    assert _version(path) == SCHEMA_VERSION
    with Store.open(path) as store:
        minutes = {round((t0 + k) * 1000) // 60_000 for k in range(40)}
        assert len(store.samples(resolution="1m")) == len(minutes) * len(rich_samples)
        store.write(snapshot(rich_samples, t0 + 100))
        assert len(store.samples()) == 41 * len(rich_samples)


# --- fuzz: any bytes, any truncation or mutation of a real store ------------------------------


def _real_store_bytes(tmp_dir: Path) -> bytes:
    from . import captures

    row = captures.query_gpu_rows(FIXTURES / f"{captures.H100_LOAD}.query-gpu.csv")[0]
    t0 = captures.capture_timestamp(row)
    path = tmp_dir / "seed.db"
    with Store.open(path) as store:
        for k in range(20):
            store.write(snapshot(captures.h100_samples(FIXTURES, 2, t0), t0 + k))
    _checkpointed(path)
    return path.read_bytes()


_SEED: dict[str, bytes] = {}


def _seed(tmp_path_factory: Any) -> bytes:
    if "db" not in _SEED:
        _SEED["db"] = _real_store_bytes(tmp_path_factory.mktemp("seed"))
    return _SEED["db"]


_mutations = st.one_of(
    st.binary(max_size=2048).map(lambda b: ("random", b, 0)),
    st.tuples(st.just("truncate"), st.just(b""), st.integers(0, 1 << 16)),
    st.tuples(st.just("flip"), st.binary(min_size=1, max_size=32), st.integers(0, 1 << 16)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation=_mutations)
def test_fuzzed_files_give_a_gpuwarden_error_and_stay_untouched(
    tmp_path_factory: Any, mutation: tuple[str, bytes, int]
) -> None:
    kind, payload, at = mutation
    seed = _seed(tmp_path_factory)
    if kind == "random":
        data = payload
    elif kind == "truncate":
        data = seed[: at % len(seed)]
    else:
        at %= len(seed)
        data = seed[:at] + payload + seed[at + len(payload) :]
    path = tmp_path_factory.mktemp("fuzz") / "t.db"
    path.write_bytes(data)
    if not data:
        return  # an empty file is a new store, as SQLite itself treats it
    before = _digest(path)
    for readonly in (True, False):
        try:
            with Store.open(path, readonly=readonly) as store:
                store.samples()
                store.events()
                store.runs()
        except GpuwardenError:
            assert _digest(path) == before
            continue
        # Opened: it was (still) a valid store of ours; it may only have been migrated.
        break
