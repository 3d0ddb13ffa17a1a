"""The telemetry store: Snapshots in, DeviceSamples, events, runs and Snapshots out.

Writes are buffered and committed in batches (one transaction, ``executemany``), when the caller
calls ``flush()``, on ``close()``, and after every ``flush_every_samples`` samples or
``flush_every_s`` seconds of snapshot time — the store reads no clock of its own.

Time resolution is 1 ms: timestamps come back as ``ms / 1000``. Every snapshot has its own id,
so snapshots stored in the same millisecond (two `record` runs into one file) are all kept, each
with its own origin, run and events. The 1 min / 1 h rollups are recomputed, in the same
transaction, for the buckets each committed batch touches (``rollup.refresh``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from gpuwarden.errors import InputError
from gpuwarden.telemetry.store import failures, opening, reading, rollup
from gpuwarden.telemetry.store.columns import gc_paused
from gpuwarden.telemetry.store.records import (
    DeviceSeries,
    Origin,
    Resolution,
    RunRecord,
    StoredSample,
)
from gpuwarden.telemetry.store.rows import (
    checked_ms,
    encode_info,
    encode_values,
    sample_row,
    to_ms,
)
from gpuwarden.telemetry.store.schema import DEVICE_COLUMNS, KEY_COLUMNS, SAMPLE_COLUMNS
from gpuwarden.types.telemetry import DeviceEvent, DeviceInfo, DeviceSample, Snapshot

_SAMPLE_NAMES = (*KEY_COLUMNS, *(c.name for c in SAMPLE_COLUMNS))
_INSERT_SAMPLE = (
    f"INSERT INTO samples ({', '.join(_SAMPLE_NAMES)})"
    f" VALUES ({', '.join('?' * len(_SAMPLE_NAMES))})"
)
_INSERT_DEVICE = (
    f"INSERT INTO devices ({', '.join(DEVICE_COLUMNS)}, identity)"
    f" VALUES ({', '.join('?' * (len(DEVICE_COLUMNS) + 1))})"
)


def _event_row(snapshot_id: int, snapshot_ms: int, e: DeviceEvent) -> tuple[Any, ...]:
    """The row of ``events`` (after its id), in the column order of the INSERT below."""
    t_ms = to_ms(e.timestamp_s)
    return (snapshot_id, snapshot_ms, t_ms, e.kind.value, e.uuid, e.index, e.code, e.message)


def _check_devices_once(snapshot: Snapshot) -> None:
    """A device read twice in one snapshot has nowhere to go: its rows would share one key."""
    seen: set[DeviceInfo] = set()
    for sample in snapshot.samples:
        if sample.info in seen:
            raise ValueError(f"device {sample.info.index} ({sample.info.uuid}) appears twice")
        seen.add(sample.info)


class Store:
    """One open store file. Use ``Store.open``; close it (or use ``with``) to commit the rest."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        readonly: bool,
        flush_every_samples: int,
        flush_every_s: float,
    ) -> None:
        self._conn = conn
        self.path = path
        self.readonly = readonly
        self._flush_every_samples = flush_every_samples
        self._flush_every_s = flush_every_s
        # (snapshot, run id, encoded values of each sample): encoded at write() so a value the
        # file cannot hold is refused there, alone, and never blocks the batch it would join.
        self._pending: list[tuple[Snapshot, int | None, list[list[Any]]]] = []
        self._pending_samples = 0
        self._pending_since_s = 0.0
        self._run_id: int | None = None
        self._device_ids: dict[DeviceInfo, int] = {}
        self._origin_ids: dict[Origin, int] = {}
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        readonly: bool = False,
        flush_every_samples: int = 1024,
        flush_every_s: float = 5.0,
    ) -> Store:
        """Open (or create, unless ``readonly``) the store at ``path`` (default_db_path()).

        Raises InputError ``store-not-found`` (readonly, no file), ``store-not-gpuwarden``,
        ``store-newer-schema``, ``store-not-a-file``, ``store-unwritable``, ``store-unreadable``
        (the OS refuses the path), EnvironmentProblemError ``store-busy``, or CorruptInputError
        ``store-corrupt``; a file that is refused is never modified and gets no side file. An
        older schema is migrated (every row kept), also when ``readonly``; one that cannot be
        written is refused as ``store-unwritable``, unchanged."""
        target = Path(path) if path is not None else opening.default_db_path()
        conn = opening.connect(target, readonly=readonly)
        return cls(
            conn,
            target,
            readonly=readonly,
            flush_every_samples=flush_every_samples,
            flush_every_s=flush_every_s,
        )

    # --- errors -------------------------------------------------------------------------------

    def _db(self, *, decoding: bool = True) -> AbstractContextManager[None]:
        return failures.translated(self.path, decoding=decoding)

    def _writable(self) -> None:
        if self._closed:
            raise ValueError("the store is closed")
        if self.readonly:
            raise ValueError("the store was opened read-only")

    # --- writing ------------------------------------------------------------------------------

    def write(self, snapshot: Snapshot) -> None:
        """Buffer one snapshot; commits when a flush threshold is reached."""
        self._writable()
        try:
            for moment in (
                snapshot.timestamp_s,
                *(s.timestamp_s for s in snapshot.samples),
                *(e.timestamp_s for e in snapshot.events),
            ):
                checked_ms(moment)  # NaN, inf, the year 30000 have no place on the time axis
            _check_devices_once(snapshot)
            encoded = [encode_values(sample) for sample in snapshot.samples]
        except (ValueError, TypeError, OverflowError) as exc:
            raise InputError(
                f"cannot store the snapshot of {snapshot.timestamp_s} from {snapshot.backend}: "
                f"{exc}",
                reference="store-bad-value",
                hint="this is a bug in the backend that produced it; the other snapshots are kept",
            ) from None
        if not self._pending:
            self._pending_since_s = snapshot.timestamp_s
        self._pending.append((snapshot, self._run_id, encoded))
        self._pending_samples += max(1, len(snapshot.samples))
        if (
            self._pending_samples >= self._flush_every_samples
            or snapshot.timestamp_s - self._pending_since_s >= self._flush_every_s
        ):
            self.flush()

    def flush(self) -> int:
        """Commit every buffered snapshot in one transaction; returns the samples committed.
        When it raises, nothing of the batch is committed and the batch stays buffered."""
        if not self._pending or self.readonly:
            return 0
        new_devices: dict[DeviceInfo, int] = {}
        new_origins: dict[Origin, int] = {}
        with self._db(decoding=False):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                count = self._insert(self._pending, new_devices, new_origins)
                self._conn.execute("COMMIT")
            except BaseException:
                self._roll_back()
                raise
        self._device_ids.update(new_devices)
        self._origin_ids.update(new_origins)
        self._pending.clear()
        self._pending_samples = 0
        return count

    def _roll_back(self) -> None:
        """Undo the open transaction. After a full disk or an I/O error SQLite may have rolled
        it back itself ("Response To Errors Within A Transaction"): a second ROLLBACK would
        fail with "no transaction is active" and hide the error that says what happened."""
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _insert(
        self,
        batch: Sequence[tuple[Snapshot, int | None, list[list[Any]]]],
        new_devices: dict[DeviceInfo, int],
        new_origins: dict[Origin, int],
    ) -> int:
        sample_rows: list[tuple[Any, ...]] = []
        snapshot_rows: list[tuple[int, int, int, int | None]] = []
        event_rows: list[tuple[Any, ...]] = []
        conn = self._conn
        # Ids are handed out here, under the write lock BEGIN IMMEDIATE took: no other writer
        # can insert a snapshot between this read and our inserts.
        (snapshot_id,) = conn.execute("SELECT coalesce(max(id), 0) FROM snapshots").fetchone()
        for snapshot, run_id, encoded in batch:
            snapshot_id += 1
            origin = Origin(snapshot.host, snapshot.backend, snapshot.simulated, snapshot.source)
            origin_id = self._origin_id(origin, new_origins)
            t_ms = to_ms(snapshot.timestamp_s)
            snapshot_rows.append((snapshot_id, t_ms, origin_id, run_id))
            for sample, values in zip(snapshot.samples, encoded, strict=True):
                device_id = self._device_id(sample.info, new_devices)
                sample_rows.append(
                    sample_row(values, sample, t_ms, device_id, snapshot_id, origin_id)
                )
            event_rows.extend(_event_row(snapshot_id, t_ms, e) for e in snapshot.events)
        conn.executemany(
            "INSERT INTO snapshots (id, t_ms, origin_id, run_id) VALUES (?, ?, ?, ?)",
            snapshot_rows,
        )
        conn.executemany(_INSERT_SAMPLE, sample_rows)
        conn.executemany(
            "INSERT INTO events (snapshot_id, snapshot_ms, t_ms, kind, uuid, idx, code, message)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            event_rows,
        )
        rollup.refresh(conn, {row[0] for row in sample_rows})
        return len(sample_rows)

    def _device_id(self, info: DeviceInfo, new: dict[DeviceInfo, int]) -> int:
        known = self._device_ids.get(info) or new.get(info)
        if known is not None:
            return known
        values = encode_info(info)
        row = self._conn.execute(
            "SELECT id FROM devices WHERE identity = ?", (values[-1],)
        ).fetchone()
        device_id = int(row[0]) if row else self._lastrowid(_INSERT_DEVICE, values)
        new[info] = device_id
        return device_id

    def _origin_id(self, origin: Origin, new: dict[Origin, int]) -> int:
        known = self._origin_ids.get(origin) or new.get(origin)
        if known is not None:
            return known
        values = (origin.host, origin.backend, origin.simulated, origin.source)
        identity = json.dumps(values)
        row = self._conn.execute(
            "SELECT id FROM origins WHERE identity = ?", (identity,)
        ).fetchone()
        origin_id = (
            int(row[0])
            if row
            else self._lastrowid(
                "INSERT INTO origins (host, backend, simulated, source, identity)"
                " VALUES (?, ?, ?, ?, ?)",
                (*values, identity),
            )
        )
        new[origin] = origin_id
        return origin_id

    def _lastrowid(self, sql: str, values: Sequence[Any]) -> int:
        rowid = self._conn.execute(sql, values).lastrowid
        assert rowid is not None  # an INSERT into a rowid table always has one
        return rowid

    # --- runs ---------------------------------------------------------------------------------

    def begin_run(
        self,
        command: Sequence[str],
        *,
        started_s: float,
        host: str,
        backend: str,
        simulated: bool,
        pid: int | None = None,
    ) -> int:
        """Record the start of a `gpuwarden record` run (committed at once); later snapshots
        belong to it until ``end_run``. Returns the run id."""
        self._writable()
        self.flush()
        with self._db():
            run_id = self._lastrowid(
                "INSERT INTO runs (command, pid, host, backend, simulated, started_ms)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (json.dumps(list(command)), pid, host, backend, simulated, to_ms(started_s)),
            )
        self._run_id = run_id
        return run_id

    def end_run(self, run_id: int, *, ended_s: float, exit_code: int | None) -> None:
        """Commit what is buffered, then the run's end time and exit code."""
        self._writable()
        self.flush()
        with self._db():
            self._conn.execute(
                "UPDATE runs SET ended_ms = ?, exit_code = ? WHERE id = ?",
                (to_ms(ended_s), exit_code, run_id),
            )
        if self._run_id == run_id:
            self._run_id = None

    # --- reading ------------------------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same commit (WAL snapshot), so a
        writer committing new devices between two queries cannot split them."""
        if self._closed:
            raise ValueError("the store is closed")
        self.flush()  # a writer reads its own writes
        with self._db():
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                # A stream left unfinished may end after close(): nothing left to release then.
                if not self._closed and self._conn.in_transaction:
                    self._conn.execute("COMMIT")

    def runs(self) -> list[RunRecord]:
        with self._reading() as conn:
            return reading.runs(conn)

    def devices(
        self, since_s: float | None = None, until_s: float | None = None
    ) -> tuple[DeviceInfo, ...]:
        """Every device identity stored (with a range: those with raw samples in it), by index."""
        with self._reading() as conn:
            return reading.devices(conn, since_s, until_s)

    def stored_samples(
        self,
        since_s: float | None = None,
        until_s: float | None = None,
        uuids: Sequence[str] | None = None,
        resolution: Resolution = "raw",
        *,
        run: int | None = None,
    ) -> list[StoredSample]:
        """Samples with since_s ≤ snapshot time ≤ until_s, oldest first, with their origin and
        run. Rollup samples carry their bucket's start as timestamp_s and no run (a bucket
        summarises every run that read the device). ``run``: only that run's samples (raw
        only: InputError ``run-needs-raw`` for a rollup)."""
        with gc_paused():  # a list is built in one go: no generator left holding GC off
            return list(self.iter_stored_samples(since_s, until_s, uuids, resolution, run=run))

    def iter_stored_samples(
        self,
        since_s: float | None = None,
        until_s: float | None = None,
        uuids: Sequence[str] | None = None,
        resolution: Resolution = "raw",
        last: int | None = None,
        *,
        run: int | None = None,
    ) -> Iterator[StoredSample]:
        """``stored_samples`` as a stream (bounded memory for `history --json` over days); one
        read transaction from the first sample to the last, or until the iterator is closed.
        ``last``: only the newest ``last`` samples of the range (still oldest first)."""
        if last is not None and last < 0:  # before reading: a ValueError there means damage
            raise ValueError(f"last={last}: a count of samples, 0 or more")
        selection = reading.Selection(since_s, until_s, uuids, resolution, run)
        with self._reading() as conn:
            yield from reading.samples(conn, selection, last)

    def count(
        self,
        since_s: float | None = None,
        until_s: float | None = None,
        uuids: Sequence[str] | None = None,
        resolution: Resolution = "raw",
        *,
        run: int | None = None,
    ) -> int:
        """How many samples ``stored_samples`` would return (counted by SQLite, none read)."""
        selection = reading.Selection(since_s, until_s, uuids, resolution, run)
        with self._reading() as conn:
            return reading.count(conn, selection)

    def columns(
        self,
        fields: Sequence[str],
        since_s: float | None = None,
        until_s: float | None = None,
        uuids: Sequence[str] | None = None,
        resolution: Resolution = "raw",
    ) -> tuple[DeviceSeries, ...]:
        """Per device (by index), its timestamps and one tuple per field: the fastest read
        (no DeviceSample, no per-row tuple kept; the last hour of 8 GPUs × 4 fields: ~75 ms
        on a loaded 2-core machine, where SQLite's rows alone take ~65 ms and whole
        DeviceSamples ~1 s; see benchmarks/telemetry_store.py). Fields: scalar ones and
        ``state``; unknown or nested field → InputError ``unknown-field``."""
        selection = reading.Selection(since_s, until_s, uuids, resolution)
        with self._reading() as conn:
            return reading.columns(conn, fields, selection)

    def samples(
        self,
        since_s: float | None = None,
        until_s: float | None = None,
        uuids: Sequence[str] | None = None,
        resolution: Resolution = "raw",
    ) -> list[DeviceSample]:
        return [s.sample for s in self.stored_samples(since_s, until_s, uuids, resolution)]

    def series(
        self,
        fields: Sequence[str],
        since_s: float | None = None,
        until_s: float | None = None,
        uuids: Sequence[str] | None = None,
        resolution: Resolution = "raw",
    ) -> list[tuple[Any, ...]]:
        """``(timestamp_s, uuid, *values)`` per sample for a few scalar fields (names of
        DeviceSample fields), oldest first: the fast path for plots and summaries, which need
        a handful of columns, not whole DeviceSamples. Unknown/nested field → InputError."""
        with self._reading() as conn:
            return reading.series(conn, fields, since_s, until_s, uuids, resolution)

    def events(
        self,
        since_s: float | None = None,
        until_s: float | None = None,
        uuids: Sequence[str] | None = None,
    ) -> list[DeviceEvent]:
        with self._reading() as conn:
            return reading.events(conn, since_s, until_s, uuids)

    def snapshots(
        self,
        since_s: float | None = None,
        until_s: float | None = None,
        *,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Snapshot]:
        """Stored snapshots, rebuilt with their samples and events, oldest first; ``limit``
        keeps the oldest ones, or the newest with ``newest=True``."""
        with self._reading() as conn:
            return reading.snapshots(conn, since_s, until_s, limit, newest)[0]

    def snapshot_pages(
        self, since_s: float | None = None, until_s: float | None = None, *, page: int = 256
    ) -> Iterator[list[Snapshot]]:
        """Every stored snapshot of the range, oldest first, ``page`` at a time: each page is
        read in a read transaction of its own (a replay that sleeps between snapshots holds
        none), and the next page starts after the last snapshot of this one, even when several
        were stored in the same millisecond."""
        if page < 1:
            raise ValueError(f"page={page}: at least 1 snapshot per page")
        after: tuple[int, int] | None = None
        while True:
            with self._reading() as conn:
                found, after = reading.snapshots(conn, since_s, until_s, page, after=after)
            if not found:
                return
            yield found

    def check_integrity(self) -> list[str]:
        """SQLite's ``PRAGMA integrity_check`` problems; empty when the file is sound."""
        with self._reading() as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        return [] if rows == [("ok",)] else [str(r[0]) for r in rows]

    # --- downsampling and retention -----------------------------------------------------------

    def prune(
        self, now_s: float, *, raw_keep_s: float, minute_keep_s: float, hour_keep_s: float
    ) -> int:
        """Delete raw rows older than ``raw_keep_s``, 1 min rows older than ``minute_keep_s``,
        1 h rows (and events) older than ``hour_keep_s``; returns rows deleted. The rollups of
        what goes are already there: they are kept up to date with every write."""
        self._writable()
        return self._transaction(
            lambda: rollup.prune(
                self._conn,
                to_ms(now_s),
                raw_keep_ms=to_ms(raw_keep_s),
                minute_keep_ms=to_ms(minute_keep_s),
                hour_keep_ms=to_ms(hour_keep_s),
            )
        )

    def _transaction(self, work: Any) -> int:
        self.flush()
        with self._db():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = int(work())
                self._conn.execute("COMMIT")
            except BaseException:
                self._roll_back()
                raise
        return result

    # --- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Commit what is buffered and close the file (idempotent)."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
