"""`record` on a full disk (RLIMIT_FSIZE in the child stands in for a tiny tmpfs): the error says
the disk failed, never that the store is damaged, and what was stored before stays.

Before: a commit that failed on the full disk was rolled back by SQLite itself, the store's own
ROLLBACK then failed ("cannot rollback - no transaction is active") and that error, read as a
damaged file, replaced the real one: `warning: ... store is damaged: cannot rollback`; a new
store on a full disk was `store-corrupt ... damaged: disk I/O error` with a hint to run
`sqlite3 .recover`.
"""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gpuwarden.telemetry.store import Store
from tests.checkout import child_env


def _file_size_limit(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _record(db: Path, seconds: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "gpuwarden", "record", "--backend", "sim"),
            *("--duration", seconds, "--interval", "0.1", "--db", str(db), "--json"),
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        preexec_fn=None if limit is None else _file_size_limit(limit),
        timeout=120,
        check=False,
    )


def _samples(db: Path) -> int:
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        count: int = conn.execute("SELECT count(*) FROM samples").fetchone()[0]
    return count


def test_a_new_store_on_a_full_disk_is_a_disk_problem_not_a_damaged_file(tmp_path: Path) -> None:
    proc = _record(tmp_path / "new.db", "0.3", limit=0)
    error = json.loads(proc.stderr)
    assert (proc.returncode, error["reference"]) == (4, "store-io-error"), proc.stderr
    assert "damaged" not in error["message"] and "recover" not in error["hint"]


def test_a_full_disk_mid_record_keeps_what_was_stored_and_says_why(tmp_path: Path) -> None:
    db = tmp_path / "kept.db"
    first = _record(db, "0.5")
    assert first.returncode == 0, first.stderr
    stored = _samples(db)
    assert stored > 0
    second = _record(db, "2", limit=db.stat().st_size + 8192)
    assert second.returncode == 0, second.stderr  # the job's outcome, not the store's
    warning = second.stderr.splitlines()[0]
    assert warning.startswith("warning: telemetry no longer stored")
    assert "disk I/O error" in warning or "full" in warning, warning
    assert "damaged" not in warning and "no transaction" not in warning
    json.loads(second.stdout)
    assert _samples(db) == stored


def test_replaying_a_store_that_holds_no_snapshot_is_bad_input_with_a_true_hint(
    tmp_path: Path,
) -> None:
    """A run stopped by a full disk leaves its run row and no snapshot. Before: exit 1
    `replay-finished`, "widen --since/--until" (options snapshot, watch and record lack)."""
    db = tmp_path / "empty.db"
    with Store.open(db) as store:  # what such a run leaves: its start, nothing stored
        store.begin_run(["train.py"], started_s=1.8e9, host="node", backend="sim", simulated=True)
    replay_args = ("--backend", "replay", "--from", str(db), "--json")
    for verb in (["snapshot"], ["watch", "--once"]):
        proc = subprocess.run(
            [sys.executable, "-m", "gpuwarden", *verb, *replay_args],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
            check=False,
        )
        error = json.loads(proc.stderr)
        assert (proc.returncode, error["reference"]) == (2, "replay-empty"), proc.stderr
        assert "--since" not in error["hint"]
