"""Store files as the release before schema v5 wrote them: the snapshot's millisecond was its key
and every row went in with ``INSERT OR REPLACE``. Built with that release's migrations
(``MIGRATIONS[:4]``, which still create its layout) and its writer's SQL, for the tests that
open an old file with this release."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuwarden.telemetry.store.rows import encode_info, encode_values, to_ms
from gpuwarden.telemetry.store.schema import APPLICATION_ID, DEVICE_COLUMNS, MIGRATIONS
from gpuwarden.types.telemetry import Snapshot

V4 = 4
_V4_KEY_COLUMNS = ("t_ms", "device_id", "dt_ms", "origin_id")


def _id(
    conn: sqlite3.Connection, table: str, identity: str, insert: str, values: tuple[Any, ...]
) -> int:
    row = conn.execute(f"SELECT id FROM {table} WHERE identity = ?", (identity,)).fetchone()
    if row:
        return int(row[0])
    rowid = conn.execute(insert, values).lastrowid
    assert rowid is not None
    return rowid


def write_v4(path: Path, snapshots: Sequence[Snapshot], *, command: Sequence[str]) -> int:
    """A v4 file holding ``snapshots`` as one run of ``command``; returns the run's id."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for migrate in MIGRATIONS[:V4]:
        migrate(conn)
    conn.execute(f"PRAGMA user_version = {V4}")
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode = WAL")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(samples)")]
    assert tuple(columns[:4]) == _V4_KEY_COLUMNS, columns  # the old layout, not v5's
    insert_sample = (
        f"INSERT OR REPLACE INTO samples ({', '.join(columns)})"
        f" VALUES ({', '.join('?' * len(columns))})"
    )
    first = snapshots[0]
    conn.execute("BEGIN")
    run_id = conn.execute(
        "INSERT INTO runs (command, pid, host, backend, simulated, started_ms)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (
            json.dumps(list(command)),
            4242,
            first.host,
            first.backend,
            first.simulated,
            to_ms(first.timestamp_s),
        ),
    ).lastrowid
    for snap in snapshots:
        origin = (snap.host, snap.backend, snap.simulated, snap.source)
        origin_id = _id(
            conn,
            "origins",
            json.dumps(origin),
            "INSERT INTO origins (host, backend, simulated, source, identity)"
            " VALUES (?, ?, ?, ?, ?)",
            (*origin, json.dumps(origin)),
        )
        t_ms = to_ms(snap.timestamp_s)
        conn.execute("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?)", (t_ms, origin_id, run_id))
        for sample in snap.samples:
            info = encode_info(sample.info)
            device_id = _id(
                conn,
                "devices",
                info[-1],
                f"INSERT INTO devices ({', '.join(DEVICE_COLUMNS)}, identity)"
                f" VALUES ({', '.join('?' * (len(DEVICE_COLUMNS) + 1))})",
                info,
            )
            dt_ms = to_ms(sample.timestamp_s) - t_ms
            conn.execute(insert_sample, (t_ms, device_id, dt_ms, origin_id, *encode_values(sample)))
        for e in snap.events:
            conn.execute(
                "INSERT INTO events (snapshot_ms, t_ms, kind, uuid, idx, code, message)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (t_ms, to_ms(e.timestamp_s), e.kind.value, e.uuid, e.index, e.code, e.message),
            )
    conn.execute("COMMIT")
    conn.close()
    assert run_id is not None
    return run_id
