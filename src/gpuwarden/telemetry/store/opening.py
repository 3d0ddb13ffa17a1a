"""Opening a store file: refuse what is not ours before SQLite may write to it, then migrate.

Order matters for "never modify a file we do not own": the 100-byte SQLite header is read with
plain file I/O (magic, page size, application_id, truncation), then the schema is read through a
connection that creates nothing (SQLite's ``immutable=1`` when no ``-wal`` file is there, i.e. no
connection of any process is open on the file; ``mode=ro`` otherwise, where the side files exist
already); only a file that passed both, in a place we may write, is opened for writing. A new
file gets its application_id and tables in one rollback-journal transaction before it switches to
WAL, so the main file's header always carries our application_id, even after a kill -9.

Readers use ``mode=ro``, which follows a live writer's commits; where that cannot open (a
read-only directory, so no ``-shm`` can be made) and no ``-wal`` is there, ``immutable=1``: the
main file then holds every commit, and nobody can be writing it.

Durability: WAL with synchronous=NORMAL. A commit is appended to the -wal file with write()
before COMMIT returns, so the kernel holds it even if the process dies the next instant
(kill -9, OOM killer); only an OS crash or power loss can drop the last commits, which FULL
would prevent at one fsync per commit. Telemetry batches are committed every few seconds, so
the trade is the usual one for WAL (sqlite.org/pragma.html#pragma_synchronous).
"""

from __future__ import annotations

import os
import sqlite3
import struct
from pathlib import Path

from gpuwarden.errors import CorruptInputError, EnvironmentProblemError, InputError
from gpuwarden.telemetry.store.schema import (
    APPLICATION_ID,
    APPLICATION_NAME,
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLES_BY_VERSION,
)

_MAGIC = b"SQLite format 3\x00"
_HEADER = 100
BUSY_TIMEOUT_MS = 5000  # readers and the writer wait this long for each other's locks
RECORD_HINT = "record first: gpuwarden record -- python train.py"


def default_db_path() -> Path:
    """``$GPUWARDEN_DB``, else ``$XDG_DATA_HOME/gpuwarden/telemetry.db``, else
    ``~/.local/share/gpuwarden/telemetry.db``."""
    explicit = os.environ.get("GPUWARDEN_DB")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "gpuwarden" / "telemetry.db"


def not_found(path: Path) -> InputError:
    return InputError(
        f"no telemetry store at {path}", reference="store-not-found", hint=RECORD_HINT
    )


def _not_ours(path: Path, why: str) -> InputError:
    return InputError(
        f"{path} is not a gpuwarden telemetry store: {why}",
        reference="store-not-gpuwarden",
        hint="pass the file `gpuwarden record` wrote with --db, or a new path; "
        "gpuwarden never writes to a file it did not create",
    )


def corrupt(path: Path, why: str) -> CorruptInputError:
    return CorruptInputError(
        f"telemetry store {path} is damaged: {why}",
        reference="store-corrupt",
        hint="it was left untouched; copy what is readable with `sqlite3 FILE .recover`, "
        "or record into a new file with --db",
    )


def is_io_problem(text: str) -> bool:
    """What SQLite says for SQLITE_FULL ("database or disk is full") and SQLITE_IOERR ("disk
    I/O error"): the disk failed the write, the file is not damaged."""
    return "full" in text or "I/O" in text


def io_problem(path: Path, text: str) -> EnvironmentProblemError:
    return EnvironmentProblemError(
        f"telemetry store {path}: {text}",
        reference="store-io-error",
        hint="check free disk space and the disk's health",
    )


def busy(path: Path, text: str) -> EnvironmentProblemError:
    """SQLite waited BUSY_TIMEOUT_MS for another connection's lock (``text``: what it said)."""
    return EnvironmentProblemError(
        f"telemetry store {path} stayed locked by another process: {text}",
        reference="store-busy",
        hint="another gpuwarden may be upgrading or pruning it; retry in a moment",
    )


def is_busy(text: str) -> bool:
    """SQLite's "database is locked" (SQLITE_BUSY) or "database table is locked"."""
    return "locked" in text or "busy" in text


def unreadable(path: Path, exc: OSError, doing: str = "read") -> InputError:
    """What the OS said about the path (permission denied, file name too long, ...)."""
    return InputError(
        f"cannot {doing} {path}: {exc.strerror or exc}",
        reference="store-unreadable",
        hint="check the path and its permissions",
    )


def check_header(path: Path) -> None:
    """Reject non-SQLite, foreign and truncated files from the header alone (no SQLite)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(_HEADER)
        size = path.stat().st_size
    except OSError as exc:
        raise unreadable(path, exc) from None
    if not header.startswith(_MAGIC):
        if header and _MAGIC.startswith(header):
            raise corrupt(path, f"truncated to {len(header)} bytes")
        raise _not_ours(path, "it is not an SQLite database")
    if len(header) < _HEADER:
        raise corrupt(path, f"truncated to {len(header)} bytes (the header alone is {_HEADER})")
    (raw_page_size,) = struct.unpack_from(">H", header, 16)
    page_size = 65536 if raw_page_size == 1 else raw_page_size
    (application_id,) = struct.unpack_from(">I", header, 68)
    if application_id != APPLICATION_ID:
        why = (
            f"its application_id is {application_id:#010x}, not gpuwarden's {APPLICATION_ID:#010x}"
            if application_id
            else "it is an SQLite database of another program (no gpuwarden application_id)"
        )
        raise _not_ours(path, why)
    if page_size < 512 or page_size & (page_size - 1):
        raise corrupt(path, f"invalid page size {raw_page_size} in the header")
    if size % page_size:
        raise corrupt(path, f"{size} bytes is not a whole number of {page_size}-byte pages")
    change_counter, pages = struct.unpack_from(">II", header, 24)
    (valid_for,) = struct.unpack_from(">I", header, 92)
    if change_counter == valid_for and pages * page_size > size:
        raise corrupt(path, f"truncated: the header counts {pages} pages, the file holds fewer")


def _wal_file(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _connect_uri(path: Path, flags: str) -> sqlite3.Connection:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?{flags}", uri=True, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _inspecting(path: Path) -> sqlite3.Connection:
    """A connection to look at a file not yet known to be ours: it creates no side file."""
    return _connect_uri(path, "mode=ro" if _wal_file(path).exists() else "immutable=1")


# What SQLite says when a read-only connection cannot make its -shm (read-only directory).
_NO_SHARED_MEMORY = frozenset(
    {"SQLITE_READONLY_DIRECTORY", "SQLITE_CANTOPEN", "SQLITE_READONLY_CANTINIT"}
)


def _reading(path: Path) -> sqlite3.Connection:
    """A reader's connection to a store of ours (see the module docstring)."""
    conn = _connect_uri(path, "mode=ro")
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # opens the WAL index, or fails
    except sqlite3.OperationalError as exc:
        conn.close()
        if getattr(exc, "sqlite_errorname", "") not in _NO_SHARED_MEMORY:
            raise
        if _wal_file(path).exists():
            raise InputError(
                f"cannot read the telemetry store {path}: its -wal file holds commits not yet "
                f"in the file, and reading them needs write access to {path.parent} ({exc})",
                reference="store-unreadable",
                hint="read it as the user that records into it, or copy the file with its "
                "-wal and -shm files to a writable place",
            ) from None
        return _connect_uri(path, "immutable=1")
    return conn


def check_schema(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version, after checking it is ours and not newer than this code."""
    try:
        (app_id,) = conn.execute("PRAGMA application_id").fetchone()
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        tables = {
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
        }
        meta_ok = (
            "meta" in tables
            and conn.execute(
                "SELECT 1 FROM meta WHERE key = 'application' AND value = ?", (APPLICATION_NAME,)
            ).fetchone()
        )
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise corrupt(path, str(exc)) from None
    if app_id != APPLICATION_ID:
        raise _not_ours(path, f"application_id {app_id:#010x}")
    if version > SCHEMA_VERSION:
        raise InputError(
            f"telemetry store {path} has schema version {version}; this gpuwarden reads up to "
            f"version {SCHEMA_VERSION}",
            reference="store-newer-schema",
            hint="upgrade gpuwarden (pip install -U gpuwarden); the file was not changed",
        )
    expected = TABLES_BY_VERSION.get(version)
    if expected is None or not meta_ok:
        raise corrupt(path, f"schema version {version} without gpuwarden's tables")
    if tables - expected:
        unknown = ", ".join(sorted(tables - expected))
        raise _not_ours(path, f"it has tables gpuwarden does not create ({unknown})")
    if expected - tables:
        raise corrupt(path, f"tables missing: {', '.join(sorted(expected - tables))}")
    return int(version)


def _check_pages(conn: sqlite3.Connection, path: Path) -> None:
    """Before anything writes to an existing file: SQLite's structural check (about 40 ms per
    10 MB here, i.e. per hour of 8 GPUs at 1 s), so new data never goes into a damaged file."""
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise corrupt(path, str(exc)) from None
    if rows != [("ok",)]:
        raise corrupt(path, f"integrity check: {rows[0][0]}")


def _writable_error(path: Path, why: str) -> InputError:
    return InputError(
        f"cannot write the telemetry store {path}: {why}",
        reference="store-unwritable",
        hint="choose a writable path with --db or GPUWARDEN_DB",
    )


def _unwritable_reason(path: Path) -> str | None:
    """Why SQLite could not write an existing store here (it also makes -wal/-shm files beside
    it), before it tries; None when it can."""
    if not os.access(path, os.W_OK):
        return "the file is read-only (permission denied)"
    if not os.access(path.parent, os.W_OK):
        return f"its directory {path.parent} is read-only (permission denied)"
    return None


def _read_write(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except OSError as exc:
        raise _writable_error(path, exc.strerror or str(exc)) from None
    except sqlite3.OperationalError as exc:
        raise _writable_error(path, str(exc)) from None
    return conn


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the file to SCHEMA_VERSION; a new (empty) file gets every migration."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION:
            conn.execute("COMMIT")
            return
        if version == 0:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise _not_ours(path, "it already holds tables")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for migrate in MIGRATIONS[version:]:
            migrate(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # a full disk may have rolled it back already (Store._roll_back)
            conn.execute("ROLLBACK")
        raise


def _existing_size(path: Path) -> int | None:
    """The file's size, None when there is none; a directory or a path the OS refuses to look
    at (permission denied, a name too long) is an InputError naming it."""
    try:
        if path.is_dir():
            raise InputError(
                f"{path} is a directory, not a telemetry store file",
                reference="store-not-a-file",
                hint=f"pass a file path, e.g. --db {path / 'telemetry.db'}",
            )
        return path.stat().st_size
    except (FileNotFoundError, NotADirectoryError):  # no such file (a writer creates it)
        return None
    except OSError as exc:
        raise unreadable(path, exc, "use") from None


def _accepted_version(path: Path, *, readonly: bool) -> int:
    """The schema version of an existing file, after it passed every check that reads it."""
    check_header(path)
    try:
        conn = _inspecting(path)
    except sqlite3.DatabaseError as exc:
        raise corrupt(path, str(exc)) from None
    try:
        version = check_schema(conn, path)
        if not (readonly and version == SCHEMA_VERSION):
            _check_pages(conn, path)  # it will be written (migrated): must be sound first
    finally:
        conn.close()
    return version


def connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    """An open connection to a valid store at SCHEMA_VERSION (creating or migrating it)."""
    size = _existing_size(path)
    exists = bool(size)
    if not exists and readonly:
        raise not_found(path)
    if exists:
        version = _accepted_version(path, readonly=readonly)
        if readonly and version == SCHEMA_VERSION:
            try:  # readers never write: damage shows (as store-corrupt) when read
                return _reading(path)
            except sqlite3.DatabaseError as exc:
                raise corrupt(path, str(exc)) from None
        if (why := _unwritable_reason(path)) is not None:
            if readonly:
                why = (
                    f"it has schema version {version} and must be upgraded to version "
                    f"{SCHEMA_VERSION} (a one-time change that keeps every row) before this "
                    f"gpuwarden can read it, but {why}"
                )
            raise _writable_error(path, why)
    elif size is not None and not os.access(path, os.W_OK):
        raise _writable_error(path, "permission denied")
    conn = _read_write(path)
    try:
        _migrate(conn, path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        text = str(exc)
        if is_busy(text):  # another process migrating or pruning it
            raise busy(path, text) from None
        if any(word in text for word in ("readonly", "unable to open", "permission")):
            raise _writable_error(path, text) from None
        if is_io_problem(text):  # a full disk while creating or migrating it
            raise io_problem(path, text) from None
        raise corrupt(path, text) from None
    except BaseException:
        conn.close()
        raise
    if readonly:  # an older file was migrated; read it through a read-only connection
        conn.close()
        return _reading(path)
    return conn
