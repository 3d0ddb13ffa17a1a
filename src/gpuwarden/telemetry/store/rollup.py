"""Downsampling (raw → 1 min → 1 h) and retention, as SQL over the sample tables.

Per column (schema.Agg): gauges are averaged, memory used keeps its peak (and memory free its
low), counters, limits, modes and nested tuples keep the bucket's last reading, and the state is
the worst one seen, so a minute in which a GPU fell off the bus does not read "ok". Events are
never downsampled; they are kept as long as the longest tier.

When: on write. Every batch the store commits recomputes, in the same transaction, the 1 min
buckets its snapshots fall in (from every raw row in them) and the 1 h buckets above those (from
the minutes). So a rollup is never behind the raw rows: a bucket still filling is there with
what it has so far, a late batch (another writer's, which flushes a few seconds after ours)
lands in its bucket instead of being left out, and `history --resolution 1m` needs nothing but
a read. The cost is one GROUP BY over at most a bucket's rows per batch (measured in
benchmarks/telemetry_store.py). The alternative, rolling up lazily on read, cannot work for the
readers that matter: `history` opens the store read-only.

A bucket older than what ``prune`` deleted from its source is never recomputed (that would
rebuild it from the part that is left); a watermark per source table in ``meta`` says how far.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from gpuwarden.telemetry.store.schema import ROLLUP_TABLES, SAMPLE_COLUMNS, Agg

_SQL_AGG = {Agg.MEAN: "avg", Agg.MAX: "max", Agg.MIN: "min", Agg.WORST: "max"}
# A bucket's start, floor(t_ms / width) * width as Python computes it: SQLite's integer division
# truncates toward zero, so a time before 1970 needs the correction.
_BUCKET = "(t_ms / :width - (t_ms % :width < 0)) * :width"


def _rollup_sql(source: str, target: str, *, source_is_rollup: bool) -> str:
    """INSERT OR REPLACE the buckets of ``target`` from the rows of ``source`` with t_ms in
    [:lo, :hi)."""
    inner: list[str] = []
    outer: list[str] = []
    for column in SAMPLE_COLUMNS:
        name = column.name
        if column.agg is Agg.LAST:
            outer.append(f"l.{name}")
            continue
        if column.agg is Agg.MEAN and source_is_rollup:
            # Minute means weighted by their reading counts (over minutes that reported it).
            inner.append(
                f"sum({name} * n) / sum(CASE WHEN {name} IS NULL THEN NULL ELSE n END) AS {name}"
            )
        else:
            inner.append(f"{_SQL_AGG[column.agg]}({name}) AS {name}")
        outer.append(f"a.{name}")
    count = "sum(n)" if source_is_rollup else "count(*)"
    # The last reading of a bucket: the newest row; raw rows of two snapshots may share that
    # millisecond (two writers), then the later-stored snapshot's.
    last = (
        ""
        if source_is_rollup
        else " AND l.snapshot_id = (SELECT max(snapshot_id) FROM samples"
        " WHERE t_ms = a.last_ms AND device_id = a.device_id)"
    )
    names = ", ".join(c.name for c in SAMPLE_COLUMNS)
    return (
        f"INSERT OR REPLACE INTO {target} (t_ms, device_id, dt_ms, origin_id, n, {names})\n"
        f"SELECT a.bucket, a.device_id, 0, l.origin_id, a.n, {', '.join(outer)}\n"
        f"FROM (SELECT {_BUCKET} AS bucket, device_id, {count} AS n,"
        f" max(t_ms) AS last_ms, {', '.join(inner)}\n"
        f"      FROM {source} WHERE t_ms >= :lo AND t_ms < :hi GROUP BY bucket, device_id) a\n"
        f"JOIN {source} l ON l.t_ms = a.last_ms AND l.device_id = a.device_id{last}"
    )


# (source, target, bucket width in ms, source is a rollup), finest first.
_STEPS = (
    ("samples", *ROLLUP_TABLES["1m"], False),
    ("samples_1m", *ROLLUP_TABLES["1h"], True),
)
_SQL = {target: _rollup_sql(source, target, source_is_rollup=r) for source, target, _, r in _STEPS}


def _pruned_key(source: str) -> str:
    return f"{source}_pruned_until_ms"


def _pruned_until(conn: sqlite3.Connection, source: str) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_pruned_key(source),)).fetchone()
    return None if row is None else int(row[0])


def _spans(buckets: Iterable[int], width: int) -> list[tuple[int, int]]:
    """Sorted bucket starts → [lo, hi) ranges of consecutive buckets: one query per run of
    buckets, so a batch with an odd timestamp far away does not recompute everything between."""
    spans: list[tuple[int, int]] = []
    for start in sorted(set(buckets)):
        if spans and spans[-1][1] == start:
            spans[-1] = (spans[-1][0], start + width)
        else:
            spans.append((start, start + width))
    return spans


def refresh(conn: sqlite3.Connection, times_ms: Iterable[int]) -> int:
    """Recompute the 1 min buckets holding these raw snapshot times, then the 1 h buckets
    holding those minutes; returns rollup rows written. Runs inside the caller's transaction."""
    touched = set(times_ms)
    written = 0
    for source, target, width, _ in _STEPS:
        floor = _pruned_until(conn, source)
        buckets = {t // width * width for t in touched}
        if floor is not None:
            buckets = {b for b in buckets if b >= floor}
        for lo, hi in _spans(buckets, width):
            cursor = conn.execute(_SQL[target], {"width": width, "lo": lo, "hi": hi})
            written += max(cursor.rowcount, 0)
        touched = buckets  # the next tier's input: the minutes just written
    return written


def rebuild(conn: sqlite3.Connection) -> int:
    """Every bucket from every raw row (a file that had rows before rollups were kept)."""
    width = ROLLUP_TABLES["1m"][1]
    sql = f"SELECT DISTINCT {_BUCKET} FROM samples"
    return refresh(conn, [t for (t,) in conn.execute(sql, {"width": width})])


def prune(
    conn: sqlite3.Connection,
    now_ms: int,
    *,
    raw_keep_ms: int,
    minute_keep_ms: int,
    hour_keep_ms: int,
) -> int:
    """Delete rows older than each tier keeps; returns rows deleted. The rollups of the rows
    deleted are already there (refresh runs with every write)."""
    deleted = 0
    for table, keep in (
        ("samples", raw_keep_ms),
        ("snapshots", raw_keep_ms),
        ("samples_1m", minute_keep_ms),
        ("samples_1h", hour_keep_ms),
        ("events", max(raw_keep_ms, minute_keep_ms, hour_keep_ms)),
    ):
        cursor = conn.execute(f"DELETE FROM {table} WHERE t_ms < ?", (now_ms - keep,))
        deleted += max(cursor.rowcount, 0)
        if table in ("samples", "samples_1m"):
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                (_pruned_key(table), str(max(now_ms - keep, _pruned_until(conn, table) or 0))),
            )
    return deleted
