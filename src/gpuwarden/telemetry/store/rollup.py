"""Downsampling (raw → 1 min → 1 h) and retention, as SQL over the sample tables.

Per column (schema.Agg): gauges are averaged, memory used keeps its peak (and memory free its
low), counters, limits, modes and nested tuples keep the bucket's last reading, and the state is
the worst one seen, so a minute in which a GPU fell off the bus does not read "ok". Events are
never downsampled; they are kept as long as the longest tier.

A bucket is rolled up once, when it is complete (its end ≤ now); a watermark per table in
``meta`` records how far. Raw rows written later for an already rolled-up bucket stay raw only.
"""

from __future__ import annotations

import sqlite3

from gpuwarden.telemetry.store.schema import ROLLUP_TABLES, SAMPLE_COLUMNS, Agg

_SQL_AGG = {Agg.MEAN: "avg", Agg.MAX: "max", Agg.MIN: "min", Agg.WORST: "max"}


def _rollup_sql(source: str, target: str, *, source_is_rollup: bool) -> str:
    """INSERT the buckets of ``target`` from the rows of ``source`` with t_ms in [?, ?)."""
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
    names = ", ".join(c.name for c in SAMPLE_COLUMNS)
    return (
        f"INSERT OR REPLACE INTO {target} (t_ms, device_id, dt_ms, origin_id, n, {names})\n"
        f"SELECT a.bucket, a.device_id, 0, l.origin_id, a.n, {', '.join(outer)}\n"
        f"FROM (SELECT (t_ms / :width) * :width AS bucket, device_id, {count} AS n,"
        f" max(t_ms) AS last_ms, {', '.join(inner)}\n"
        f"      FROM {source} WHERE t_ms >= :lo AND t_ms < :hi GROUP BY bucket, device_id) a\n"
        f"JOIN {source} l ON l.t_ms = a.last_ms AND l.device_id = a.device_id"
    )


_STEPS = (
    ("samples", *ROLLUP_TABLES["1m"], False),
    ("samples_1m", *ROLLUP_TABLES["1h"], True),
)
_SQL = {target: _rollup_sql(source, target, source_is_rollup=r) for source, target, _, r in _STEPS}


def downsample(conn: sqlite3.Connection, now_ms: int) -> int:
    """Roll every complete bucket up to ``now_ms`` into samples_1m, then samples_1h; returns
    the number of rollup rows written. Runs inside the caller's transaction."""
    written = 0
    for source, target, width, _ in _STEPS:
        key = f"{target}_until_ms"
        (done,) = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        lo, hi = int(done), (now_ms // width) * width
        if hi <= lo:
            continue
        if lo == 0:  # first run: start at the first bucket, not at 1970
            (first,) = conn.execute(f"SELECT min(t_ms) FROM {source}").fetchone()
            lo = hi if first is None else (first // width) * width
        cursor = conn.execute(_SQL[target], {"width": width, "lo": lo, "hi": hi})
        written += max(cursor.rowcount, 0)
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (str(hi), key))
    return written


def prune(
    conn: sqlite3.Connection,
    now_ms: int,
    *,
    raw_keep_ms: int,
    minute_keep_ms: int,
    hour_keep_ms: int,
) -> int:
    """Delete rows older than each tier keeps (after rolling them up); returns rows deleted."""
    downsample(conn, now_ms)
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
    return deleted
