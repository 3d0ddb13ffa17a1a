"""`history`, `snapshot --backend replay` and `record --backend replay` on stores damaged the ways
files get damaged (cut, overwritten bytes) and the ways other writers, old releases and hand
edits leave them (values of the wrong type, ids pointing nowhere, tables gone): never exit 70,
never invalid JSON, bounded memory. Cases from a fixed seed (verb_fuzz.py runs them)."""

from __future__ import annotations

import contextlib
import random
import shutil
import sqlite3
from pathlib import Path

from gpuwarden.telemetry.store import Store
from gpuwarden.telemetry.store.schema import KEY_COLUMNS, SAMPLE_COLUMNS
from gpuwarden.types.telemetry import DeviceSample

from . import legacy
from .captures import snapshot
from .conftest import xid_event
from .verb_fuzz import PEAK_RSS_LIMIT_MB, problems, run_cases

SEED = 13
STORES = 40

# Values of every SQLite type and the edge of each: text where numbers go, blobs, the INTEGER
# limits, REAL beyond any reading (1e999 is stored as inf), broken and odd JSON for the nested
# columns, NULL.
_VALUES = (
    "'text'", "x'00ff10'", "9223372036854775807", "-9223372036854775808", "1e308", "-1e999",
    "1e999", "'[1,2'", "'{\"a\": [1]}'", "'[[1,2,3,4,5,6,7,8,9,10,11,12,13,14]]'", "'[[\"a\"]]'",
    "'[]'", "'null'", "'[{}]'", "0", "-1", "NULL", "'0x10'", "3.5",
)  # fmt: skip
_TABLE_COLUMNS = {
    "samples": (*KEY_COLUMNS, *(c.name for c in SAMPLE_COLUMNS)),
    "samples_1m": ("t_ms", "device_id", "origin_id", "n", *(c.name for c in SAMPLE_COLUMNS)),
    "devices": ("idx", "uuid", "name", "memory_total_bytes", "gpu_instance_id", "identity"),
    "origins": ("host", "backend", "simulated", "source"),
    "runs": ("command", "pid", "started_ms", "ended_ms", "exit_code"),
    "snapshots": ("t_ms", "origin_id", "run_id"),
    "events": ("snapshot_id", "snapshot_ms", "t_ms", "kind", "uuid", "idx", "code", "message"),
}
_STATEMENTS = (
    "DELETE FROM devices",
    "DELETE FROM origins",
    "DELETE FROM snapshots WHERE id % 2 = 0",
    "DROP TABLE events",
    "DROP TABLE samples_1h",
    "PRAGMA user_version = 99",
    "PRAGMA user_version = 3",
    "UPDATE meta SET value = 'other' WHERE key = 'application'",
    "CREATE TABLE their_table (x)",
    "INSERT INTO samples_1m (t_ms, device_id, dt_ms, origin_id, n) VALUES (0, 77, 0, 88, 1)",
)


def _seed_store(path: Path, samples: tuple[DeviceSample, ...], t0: float, xid: str) -> None:
    """What `record` leaves: two runs, nested readings (processes, MIG, NVLinks), an event."""
    with Store.open(path) as store:
        for run in range(2):
            run_id = store.begin_run(
                ["python", "train.py"], started_s=t0, host="node", backend="smi", simulated=False
            )
            for k in range(30):
                events = (xid_event(samples[0], t0 + k, 79, xid),) if k == 3 else ()
                store.write(snapshot(samples, t0 + run * 40 + k, events=events))
            store.end_run(run_id, ended_s=t0 + run * 40 + 30, exit_code=run)


def _sql_mutation(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return rng.choice(_STATEMENTS)
    table = rng.choice(list(_TABLE_COLUMNS))
    column = rng.choice(_TABLE_COLUMNS[table])
    which = "" if rng.random() < 0.5 else f" WHERE t_ms % {rng.randint(2, 5)} = 0"
    if table not in ("samples", "samples_1m", "snapshots", "events"):
        which = ""
    return f"UPDATE {table} SET {column} = {rng.choice(_VALUES)}{which}"


def _mutate_sql(path: Path, rng: random.Random) -> None:
    conn = sqlite3.connect(path)
    for _ in range(rng.randint(1, 3)):
        with contextlib.suppress(sqlite3.DatabaseError):  # a constraint said no: fine
            conn.execute(_sql_mutation(rng))
    conn.commit()
    conn.close()


def _mutate_bytes(path: Path, rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    kind = rng.choice(["truncate", "overwrite", "page"])
    if kind == "truncate":
        del data[rng.randrange(len(data)) :]
    elif kind == "overwrite":
        at = rng.randrange(len(data))
        data[at : at + rng.randint(1, 64)] = rng.randbytes(rng.randint(1, 64))
    else:
        page = 4096 * rng.randrange(max(1, len(data) // 4096))
        data[page : page + 4096] = bytes(4096)
    path.write_bytes(bytes(data))


def _verbs(store: Path, out: Path) -> list[list[str]]:
    db = str(store)
    return [
        ["history", "--db", db, "--json"],
        ["history", "--db", db, "--csv"],
        ["history", "--db", db],
        ["history", "--db", db, "--resolution", "1m", "--json"],
        ["history", "--db", db, "--run", "2", "--since", "0", "--json"],
        ["snapshot", "--backend", "replay", "--from", db, "--json"],
        [
            *("record", "--backend", "replay", "--from", db, "--db", str(out)),
            *("--duration", "0.05", "--interval", "0.01", "--json"),
        ],
    ]


def test_damaged_and_odd_stores_never_crash_a_verb(
    tmp_path: Path,
    rich_samples: tuple[DeviceSample, ...],
    t0: float,
    xid_lines: dict[int, str],
) -> None:
    rng = random.Random(SEED)
    seed = tmp_path / "seed.db"
    _seed_store(seed, rich_samples, t0, xid_lines[79])
    old = tmp_path / "v4.db"
    legacy.write_v4(old, [snapshot(rich_samples, t0 + k) for k in range(20)], command=["job"])
    cases: list[list[str]] = []
    for k in range(STORES):
        path = tmp_path / f"case-{k}.db"
        shutil.copy(old if k % 5 == 4 else seed, path)  # every 5th an old file to migrate
        if rng.random() < 0.3:
            _mutate_bytes(path, rng)
        else:
            _mutate_sql(path, rng)
        cases += _verbs(path, tmp_path / f"out-{k}.db")
    outcomes, peak_mb = run_cases(cases, tmp_path)
    assert problems(outcomes) == []
    assert peak_mb < PEAK_RSS_LIMIT_MB
    # the cases did reach past the refusals: some verbs read data, some stores were refused
    codes = {o.code for o in outcomes}
    assert 0 in codes and 2 in codes
