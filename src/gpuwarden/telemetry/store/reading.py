"""Queries: sample tables → DeviceSamples, events, runs, devices, whole Snapshots."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gpuwarden.errors import InputError
from gpuwarden.telemetry.store.columns import (
    COLUMN_CODECS,
    checked_columns,
    device_columns,
    gc_paused,
)
from gpuwarden.telemetry.store.records import (
    RESOLUTIONS,
    DeviceSeries,
    Origin,
    Resolution,
    RunRecord,
    StoredSample,
)
from gpuwarden.telemetry.store.rows import SampleDecoder, check_types, decode_info, time_s, to_ms
from gpuwarden.telemetry.store.schema import (
    DEVICE_COLUMNS,
    ROLLUP_KEY,
    ROLLUP_TABLES,
    SAMPLE_COLUMNS,
    SAMPLE_KEY,
    Codec,
)
from gpuwarden.types.telemetry import DeviceEvent, DeviceInfo, DeviceSample, EventKind, Snapshot

_VALUES = ", ".join(c.name for c in SAMPLE_COLUMNS)
# Times SQLite's INTEGER holds as ms; a bound beyond them selects everything or nothing.
_MS_LIMIT = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Selection:
    """Which samples a query reads: a time range (seconds, inclusive, None = open), devices by
    UUID (None = all), a resolution, and a run (raw readings only)."""

    since_s: float | None
    until_s: float | None
    uuids: Sequence[str] | None
    resolution: Resolution
    run: int | None = None


def _table(resolution: Resolution) -> str:
    if resolution == "raw":
        return "samples"
    if resolution in ROLLUP_TABLES:
        return ROLLUP_TABLES[resolution][0]
    raise InputError(
        f"unknown resolution {resolution!r}",
        reference="unknown-resolution",
        hint=f"use one of {', '.join(RESOLUTIONS)}",
    )


def _bound_ms(seconds: float, name: str) -> int:
    """A range bound as the store's ms, clamped to what SQLite's INTEGER holds (1e300 s still
    means "after everything"); NaN is no time at all."""
    if math.isnan(seconds):
        raise InputError(
            f"{name} is NaN, not a time",
            reference="invalid-time",
            hint="give the range as Unix seconds, or leave that end open",
        )
    if math.isinf(seconds):
        return _MS_LIMIT if seconds > 0 else -_MS_LIMIT
    return max(-_MS_LIMIT, min(_MS_LIMIT, to_ms(seconds)))


def _between(since_s: float | None, until_s: float | None, column: str) -> tuple[str, list[Any]]:
    clauses, params = ["1"], []
    if since_s is not None:
        clauses.append(f"{column} >= ?")
        params.append(_bound_ms(since_s, "since_s"))
    if until_s is not None:
        clauses.append(f"{column} <= ?")
        params.append(_bound_ms(until_s, "until_s"))
    return " AND ".join(clauses), params


def _devices_by_id(conn: sqlite3.Connection) -> dict[int, DeviceInfo]:
    sql = f"SELECT id, {', '.join(DEVICE_COLUMNS)} FROM devices"
    return {row[0]: decode_info(row[1:]) for row in conn.execute(sql)}


_ORIGIN_TYPES = ((str,), (str,), (int,), (str, type(None)))
_ORIGIN_NAMES = ("origins.host", "origins.backend", "origins.simulated", "origins.source")


def _origin(values: Sequence[Any]) -> Origin:
    check_types(values, _ORIGIN_TYPES, _ORIGIN_NAMES)
    host, backend, simulated, source = values
    return Origin(host, backend, bool(simulated), source)


def _origins_by_id(conn: sqlite3.Connection) -> dict[int, Origin]:
    sql = "SELECT id, host, backend, simulated, source FROM origins"
    return {row[0]: _origin(row[1:]) for row in conn.execute(sql)}


def devices(
    conn: sqlite3.Connection, since_s: float | None, until_s: float | None
) -> tuple[DeviceInfo, ...]:
    by_id = _devices_by_id(conn)
    if since_s is not None or until_s is not None:
        where, params = _between(since_s, until_s, "t_ms")
        used = {
            row[0]
            for row in conn.execute(f"SELECT DISTINCT device_id FROM samples WHERE {where}", params)
        }
        by_id = {k: v for k, v in by_id.items() if k in used}
    return tuple(sorted(by_id.values(), key=lambda d: (d.index, d.uuid, d.mig_profile or "")))


def _key(table: str) -> tuple[str, ...]:
    """The primary key of a sample table, in its sort order."""
    return SAMPLE_KEY if table == "samples" else ROLLUP_KEY


def _sample_rows(
    conn: sqlite3.Connection, table: str, where: str, params: list[Any]
) -> Iterator[tuple[int | None, StoredSample]]:
    """(snapshot id, sample) pairs in key order (time, device, snapshot), fetched in chunks;
    rollup rows have neither a snapshot nor a run."""
    devices_by_id = _devices_by_id(conn)
    origins = _origins_by_id(conn)
    decode_sample = SampleDecoder(rollup=table != "samples")
    # the run by a primary-key lookup per row, not a join: "t_ms" stays unambiguous in WHERE
    ids = (
        "snapshot_id, (SELECT run_id FROM snapshots WHERE id = snapshot_id)"
        if table == "samples"
        else "NULL, NULL"
    )
    sql = (
        f"SELECT t_ms, dt_ms, device_id, origin_id, {ids}, {_VALUES} FROM {table}"
        f" WHERE {where} ORDER BY {', '.join(_key(table))}"
    )
    cursor = conn.execute(sql, params)
    while rows := cursor.fetchmany(_CHUNK):
        for row in rows:
            sample = decode_sample(devices_by_id[row[2]], row[0], row[1], row[6:])
            run_id = row[5]
            if run_id is not None and type(run_id) is not int:
                raise TypeError(f"snapshots.run_id holds a {type(run_id).__name__}")
            yield row[4], StoredSample(sample, origins[row[3]], run_id)


_CHUNK = 2048


def _device_filter(
    conn: sqlite3.Connection, uuids: Sequence[str] | None, where: str, params: list[Any]
) -> str | None:
    """``where`` narrowed to the devices with these UUIDs (None: no such device stored)."""
    if uuids is None:
        return where
    marks = ", ".join("?" * len(uuids))
    sql = f"SELECT id FROM devices WHERE uuid IN ({marks})"
    ids = [r[0] for r in conn.execute(sql, list(uuids))]
    if not ids:
        return None
    params.extend(ids)
    return where + f" AND device_id IN ({', '.join('?' * len(ids))})"


def _run_filter(
    conn: sqlite3.Connection, run: int, table: str, where: str, params: list[Any]
) -> str | None:
    """``where`` narrowed to one run's snapshots (None: the run stored none). The run's time
    span comes first, so SQLite still walks the primary key over that span only."""
    if table != "samples":
        raise InputError(
            f"--run {run}: the {table} rollup mixes every run that read a device",
            reference="run-needs-raw",
            hint="read one run's samples at --resolution raw",
        )
    lo, hi = conn.execute(
        "SELECT min(t_ms), max(t_ms) FROM snapshots WHERE run_id = ?", (run,)
    ).fetchone()
    if lo is None:
        return None
    params.extend((lo, hi, run))
    return (
        f"{where} AND t_ms >= ? AND t_ms <= ?"
        " AND snapshot_id IN (SELECT id FROM snapshots WHERE run_id = ?)"
    )


def _selection(conn: sqlite3.Connection, sel: Selection) -> tuple[str, str, list[Any]] | None:
    """(table, WHERE clause, its parameters) for the selection; None when nothing can match
    (none of the UUIDs stored, a run without snapshots)."""
    table = _table(sel.resolution)
    where, params = _between(sel.since_s, sel.until_s, "t_ms")
    narrowed = _device_filter(conn, sel.uuids, where, params)
    if narrowed is not None and sel.run is not None:
        narrowed = _run_filter(conn, sel.run, table, narrowed, params)
    return None if narrowed is None else (table, narrowed, params)


def samples(
    conn: sqlite3.Connection, sel: Selection, last: int | None = None
) -> Iterator[StoredSample]:
    """Oldest first; with ``last``, only the newest ``last`` of them (found by key, not read)."""
    selected = _selection(conn, sel)
    if selected is None or last == 0:
        return
    table, narrowed, params = selected
    if last is not None:
        key = _key(table)
        newest_first = ", ".join(f"{k} DESC" for k in key)
        sql = f"SELECT {', '.join(key)} FROM {table} WHERE {narrowed} ORDER BY {newest_first}"
        first = conn.execute(f"{sql} LIMIT 1 OFFSET ?", [*params, last - 1]).fetchone()
        if first is not None:
            # First, so SQLite seeks the primary key there (6 ms → 0.1 ms for an hour of 8 GPUs).
            marks = ", ".join("?" * len(key))
            narrowed = f"t_ms >= ? AND ({', '.join(key)}) >= ({marks}) AND {narrowed}"
            params = [first[0], *first, *params]
    for _, stored in _sample_rows(conn, table, narrowed, params):
        yield stored


def columns(
    conn: sqlite3.Connection, fields: Sequence[str], sel: Selection
) -> tuple[DeviceSeries, ...]:
    checked_columns(fields, COLUMN_CODECS)  # a bad name fails even on an empty range
    selected = _selection(conn, sel)
    if selected is None:
        return ()
    table, narrowed, params = selected
    return device_columns(conn, fields, table, narrowed, params, _devices_by_id(conn))


def count(conn: sqlite3.Connection, sel: Selection) -> int:
    selected = _selection(conn, sel)
    if selected is None:
        return 0
    table, narrowed, params = selected
    (total,) = conn.execute(f"SELECT count(*) FROM {table} WHERE {narrowed}", params).fetchone()
    return int(total)


_SCALAR_CODECS = frozenset({Codec.INT, Codec.FLOAT, Codec.TEXT, Codec.BOOL})


def series(
    conn: sqlite3.Connection,
    fields: Sequence[str],
    since_s: float | None,
    until_s: float | None,
    uuids: Sequence[str] | None,
    resolution: Resolution,
) -> list[tuple[Any, ...]]:
    """(timestamp_s, uuid, *values) per sample for a few scalar fields: no DeviceSample built."""
    picked = checked_columns(fields, _SCALAR_CODECS)
    table = _table(resolution)
    where, params = _between(since_s, until_s, "s.t_ms")
    if uuids is not None:
        where += f" AND d.uuid IN ({', '.join('?' * len(uuids))})"
        params.extend(uuids)
    names = ", ".join(f"s.{c.name}" for c in picked)
    # Time and UUID are computed by SQLite: no per-row Python work unless a type needs fixing.
    sql = (
        f"SELECT (s.t_ms + s.dt_ms) / 1000.0, d.uuid, {names}"
        f" FROM {table} s JOIN devices d ON d.id = s.device_id"
        f" WHERE {where} ORDER BY s.t_ms, s.device_id"
    )
    with gc_paused():
        rows: list[tuple[Any, ...]] = conn.execute(sql, params).fetchall()
    fixes = [
        (i + 2, bool if c.codec is Codec.BOOL else round)
        for i, c in enumerate(picked)
        if c.codec is Codec.BOOL or (c.codec is Codec.INT and table != "samples")
    ]
    if not fixes:
        return rows
    out = []
    for row in rows:
        values = list(row)
        for i, fix in fixes:
            if values[i] is not None:
                values[i] = fix(values[i])
        out.append(tuple(values))
    return out


_OPTIONAL_INT, _OPTIONAL_TEXT = (int, type(None)), (str, type(None))
_EVENT_TYPES = ((str,), (int,), _OPTIONAL_TEXT, _OPTIONAL_INT, _OPTIONAL_INT, (str,))
_EVENT_NAMES = tuple(f"events.{n}" for n in ("kind", "t_ms", "uuid", "idx", "code", "message"))


def _event(row: Sequence[Any]) -> DeviceEvent:
    check_types(row, _EVENT_TYPES, _EVENT_NAMES)
    kind, t_ms, uuid, index, code, message = row
    return DeviceEvent(EventKind(kind), time_s(t_ms), uuid, index, code, message)


def events(
    conn: sqlite3.Connection,
    since_s: float | None,
    until_s: float | None,
    uuids: Sequence[str] | None,
) -> list[DeviceEvent]:
    where, params = _between(since_s, until_s, "t_ms")
    if uuids is not None:
        where += f" AND uuid IN ({', '.join('?' * len(uuids))})"
        params.extend(uuids)
    sql = f"SELECT kind, t_ms, uuid, idx, code, message FROM events WHERE {where} ORDER BY t_ms, id"
    return [_event(row) for row in conn.execute(sql, params)]


_RUN_COLUMNS = ("id", "command", "pid", "host", "backend", "simulated", "started_ms",
                "ended_ms", "exit_code")  # fmt: skip
_RUN_TYPES = ((int,), (str,), _OPTIONAL_INT, (str,), (str,), (int,), (int,), _OPTIONAL_INT,
              _OPTIONAL_INT)  # fmt: skip
_RUN_NAMES = tuple(f"runs.{n}" for n in _RUN_COLUMNS)


def runs(conn: sqlite3.Connection) -> list[RunRecord]:
    sql = f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs ORDER BY id"
    out = []
    for row in conn.execute(sql):
        check_types(row, _RUN_TYPES, _RUN_NAMES)
        command = json.loads(row[1])
        if not isinstance(command, list):
            raise TypeError("runs.command is not a JSON array")
        ended = None if row[7] is None else time_s(row[7])
        out.append(
            RunRecord(
                row[0],
                tuple(map(str, command)),
                row[2],
                row[3],
                row[4],
                bool(row[5]),
                time_s(row[6]),
                ended,
                row[8],
            )
        )
    return out


def snapshots(
    conn: sqlite3.Connection,
    since_s: float | None,
    until_s: float | None,
    limit: int | None,
    newest: bool = False,
    *,
    after: tuple[int, int] | None = None,
) -> tuple[list[Snapshot], tuple[int, int] | None]:
    """Snapshots of the range in (time, id) order, and the (time, id) of the last one (the
    ``after`` of the next page). ``limit`` keeps the oldest, or the newest with ``newest``."""
    where, params = _between(since_s, until_s, "t_ms")
    if after is not None:
        where += " AND (t_ms, id) > (?, ?)"
        params.extend(after)
    order = "DESC" if newest else "ASC"  # the limit keeps the newest or the oldest
    sql = (
        f"SELECT t_ms, id, origin_id FROM snapshots WHERE {where}"
        f" ORDER BY t_ms {order}, id {order} LIMIT ?"
    )
    heads = conn.execute(sql, [*params, -1 if limit is None else limit]).fetchall()
    heads.sort()
    if not heads:
        return [], after
    lo, hi = heads[0][0], heads[-1][0]
    samples_of: dict[int | None, list[DeviceSample]] = {}
    for snapshot_id, stored in _sample_rows(conn, "samples", "t_ms >= ? AND t_ms <= ?", [lo, hi]):
        samples_of.setdefault(snapshot_id, []).append(stored.sample)
    ids = [head[1] for head in heads]
    events_of: dict[int, list[DeviceEvent]] = {}
    event_sql = (
        "SELECT snapshot_id, kind, t_ms, uuid, idx, code, message FROM events"
        " WHERE snapshot_id >= ? AND snapshot_id <= ? ORDER BY id"
    )
    for row in conn.execute(event_sql, (min(ids), max(ids))):
        events_of.setdefault(row[0], []).append(_event(row[1:]))
    origins = _origins_by_id(conn)
    out = []
    for t_ms, snapshot_id, origin_id in heads:
        origin = origins[origin_id]
        out.append(
            Snapshot(
                timestamp_s=time_s(t_ms),
                host=origin.host,
                backend=origin.backend,
                simulated=origin.simulated,
                samples=tuple(samples_of.get(snapshot_id, ())),
                events=tuple(events_of.get(snapshot_id, ())),
                source=origin.source,
            )
        )
    return out, (heads[-1][0], heads[-1][1])
