"""`gpuwarden history` over a store filled from the real H100 capture."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.commands.history import parse_when
from gpuwarden.cli.main import main
from gpuwarden.errors import InputError
from gpuwarden.report.history import COLUMNS
from gpuwarden.telemetry.store import Store
from gpuwarden.units import iso_utc
from tests.telemetry.store import captures
from tests.telemetry.store.unprivileged import cli_without_privileges, names, open_dir

MIB = 1 << 20
GPUS = 2
SNAPSHOTS = 90  # 1.5 minutes at 1 s


@pytest.fixture
def db(tmp_path: Path, fixtures: Path) -> tuple[Path, float, dict[str, str]]:
    row = captures.query_gpu_rows(fixtures / f"{captures.H100_LOAD}.query-gpu.csv")[0]
    t0 = captures.capture_timestamp(row)
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        for k in range(SNAPSHOTS):
            samples = captures.h100_samples(fixtures, GPUS, t0 + k)
            store.write(captures.snapshot(samples, t0 + k))
    return path, t0, row


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["history", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_json_rows_carry_the_captured_values(
    capsys: pytest.CaptureFixture[str], db: tuple[Path, float, dict[str, str]]
) -> None:
    path, t0, row = db
    document = _json(capsys, "--db", str(path))
    assert document["schema"] == "gpuwarden.history/1"
    assert document["simulated"] is False
    rows = document["samples"]
    assert len(rows) == GPUS * SNAPSHOTS
    first = rows[0]
    # the capture's own values: "19818 MiB", "631.95 W", "100 %", "P0", driver 590.48.01
    assert first["memory_used_bytes"] == 19818 * MIB
    assert first["power_draw_watts"] == 631.95
    assert first["gpu_utilization_percent"] == 100
    assert first["pstate"] == row["pstate"] == "P0"
    assert first["driver_version"] == "590.48.01"
    assert first["fan_speed_percent"] is None  # "[N/A]" on this H100
    assert first["timestamp"] == "2026-07-14T08:12:53.353Z"  # the capture's timestamp, UTC
    assert first["timestamp_s"] == t0
    assert first["uuid"].startswith("GPU-")
    assert [p["pid"] for p in first["processes"]] == [11327, 11328, 11345]
    assert first["simulated"] is False and first["backend"] == "smi"


def test_gpu_filter_by_index_and_uuid(
    capsys: pytest.CaptureFixture[str], db: tuple[Path, float, dict[str, str]]
) -> None:
    path, _, _ = db
    by_index = _json(capsys, "--db", str(path), "--gpu", "1")["samples"]
    assert {r["index"] for r in by_index} == {1}
    assert len(by_index) == SNAPSHOTS
    uuid = by_index[0]["uuid"]
    by_uuid = _json(capsys, "--db", str(path), "--gpu", uuid.lower(), "--gpu", "0")["samples"]
    assert {r["index"] for r in by_uuid} == {0, 1}
    code, _, err = _run(capsys, "--db", str(path), "--gpu", "7")
    assert code == 2
    assert "gpu-not-recorded" in err
    assert "Traceback" not in err


def test_since_until_select_a_window(
    capsys: pytest.CaptureFixture[str], db: tuple[Path, float, dict[str, str]]
) -> None:
    path, t0, _ = db
    window = _json(
        capsys, "--db", str(path), "--since", str(t0 + 10), "--until", "2026-07-14T08:13:12.353Z"
    )["samples"]
    assert sorted({r["timestamp_s"] for r in window}) == [t0 + k for k in range(10, 20)]


def test_resolution_1m_reads_the_rollup(
    capsys: pytest.CaptureFixture[str], db: tuple[Path, float, dict[str, str]]
) -> None:
    path, t0, _ = db
    rows = _json(capsys, "--db", str(path), "--resolution", "1m")["samples"]
    minutes = sorted({int(t0 + k) // 60 * 60 for k in range(SNAPSHOTS)})
    assert sorted({r["timestamp_s"] for r in rows}) == minutes
    assert all(r["memory_used_bytes"] == 19818 * MIB for r in rows)


def test_csv_has_the_json_columns(
    capsys: pytest.CaptureFixture[str], db: tuple[Path, float, dict[str, str]]
) -> None:
    path, _, _ = db
    code, out, err = _run(capsys, "--db", str(path), "--csv", "--gpu", "0")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == SNAPSHOTS
    assert rows[0]["memory_used_bytes"] == str(19818 * MIB)
    assert rows[0]["fan_speed_percent"] == ""
    assert rows[0]["ecc_mode_enabled"] == "true"
    assert [p["name"] for p in json.loads(rows[0]["processes"])][-1] == "./gpu_burn"


def test_table_names_the_gpu_and_labels_simulated_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fixtures: Path
) -> None:
    row = captures.query_gpu_rows(fixtures / f"{captures.H100_LOAD}.query-gpu.csv")[0]
    t0 = captures.capture_timestamp(row)
    path = tmp_path / "sim.db"
    with Store.open(path) as store:
        samples = captures.h100_samples(fixtures, 1, t0)
        store.write(captures.snapshot(samples, t0, simulated=True))
    code, out, err = _run(capsys, "--db", str(path))
    assert code == 0, err
    assert "NVIDIA H100 80GB HBM3" in out
    assert "SIMULATED" in out
    assert format(631.95, ".1f") in out  # power.draw "631.95 W", one decimal


def test_missing_db_says_record_first(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, "--db", str(tmp_path / "none.db"))
    assert code == 2
    assert "store-not-found" in err
    assert "record first: gpuwarden record -- python train.py" in err
    assert not (tmp_path / "none.db").exists()


def test_foreign_file_is_a_clear_error_end_to_end(tmp_path: Path, fixtures: Path) -> None:
    path = tmp_path / "x.db"
    path.write_bytes((fixtures / "xid" / "gpud__dmesg-with-xid-119.log").read_bytes())
    before = path.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwarden", "history", "--db", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert json.loads(proc.stderr)["reference"] == "store-not-gpuwarden"
    assert path.read_bytes() == before


def test_parse_when_forms() -> None:
    now = 1_784_016_773.353
    assert parse_when("10m", now_s=now, option="--since") == now - 600
    assert parse_when("2h", now_s=now, option="--since") == now - 7200
    assert parse_when("1d", now_s=now, option="--since") == now - 86400
    assert parse_when("1784016773.353", now_s=now, option="--since") == now
    assert parse_when("2026-07-14T08:12:53.353Z", now_s=0, option="--since") == now
    assert parse_when("2026-07-14T10:12:53.353+02:00", now_s=0, option="--since") == now
    with pytest.raises(InputError) as caught:
        parse_when("yesterday-ish", now_s=now, option="--since")
    assert caught.value.reference == "invalid-time"


def test_history_reads_what_record_stored_and_says_simulated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "rec.db"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "gpuwarden", "record", "--backend", "sim"),
            *("--interval", "0.2", "--duration", "1", "--db", str(db)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    with Store.open(db, readonly=True) as store:
        stored = store.samples()
        (run,) = store.runs()
    document = _json(capsys, "--db", str(db))
    rows = document["samples"]
    assert document["simulated"] is True
    assert len(rows) == len(stored) > 0
    assert all(r["simulated"] is True and r["backend"] == "sim" for r in rows)
    assert [r["power_draw_watts"] for r in rows] == [s.power_draw_watts for s in stored]
    assert run.simulated and run.backend == "sim"
    assert run.ended_s is not None and run.ended_s >= run.started_s


def test_empty_range_and_long_tables(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    db: tuple[Path, float, dict[str, str]],
) -> None:
    path, t0, _ = db
    empty = _json(capsys, "--db", str(path), "--since", str(t0 + 10 * SNAPSHOTS))
    assert empty["samples"] == [] and empty["simulated"] is False
    code, out, _ = _run(capsys, "--db", str(path), "--since", str(t0 + 10 * SNAPSHOTS))
    assert code == 0 and "no samples" in out
    monkeypatch.setattr("gpuwarden.report.history.TABLE_ROWS", 5)
    code, out, _ = _run(capsys, "--db", str(path))
    assert code == 0
    assert f"showing the last 5 of {GPUS * SNAPSHOTS} samples" in " ".join(out.split())
    # the newest 5 samples (3 snapshots of 2 GPUs), read by key: the last snapshot, not the first
    clock = [
        iso_utc(t0 + k, timespec="milliseconds")[11:-1]
        for k in (0, SNAPSHOTS - 4, SNAPSHOTS - 3, SNAPSHOTS - 1)
    ]
    assert clock[0] not in out and clock[1] not in out
    assert clock[2] in out and clock[3] in out


def _strict_json(text: str) -> Any:
    """json.loads that refuses Infinity / NaN (Python's own accepts them; JSON does not)."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "value", ["inf", "-inf", "1e400", "99999999999999999999d", "nan", "-1e20", "99999999999w"]
)
def test_a_time_beyond_any_date_is_invalid_time_not_a_damaged_store(
    capsys: pytest.CaptureFixture[str], db: tuple[Path, float, dict[str, str]], value: str
) -> None:
    path, _, _ = db
    for option in ("--since", "--until"):
        code, out, err = _run(capsys, "--db", str(path), f"{option}={value}", "--json")
        assert code == 2, err
        assert out == ""
        assert _strict_json(err)["reference"] == "invalid-time"


def test_the_store_refuses_nan_and_clamps_huge_bounds(
    db: tuple[Path, float, dict[str, str]],
) -> None:
    path, _, _ = db
    with Store.open(path, readonly=True) as store:
        with pytest.raises(InputError) as caught:
            store.stored_samples(since_s=float("nan"))
        assert caught.value.reference == "invalid-time"
        assert store.count(since_s=1e300) == 0
        assert store.count(until_s=float("inf"), since_s=-1e300) == GPUS * SNAPSHOTS
        assert store.snapshots(since_s=float("-inf"), until_s=-1e30) == []


def test_non_finite_readings_are_null_in_json_and_blank_in_csv(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fixtures: Path
) -> None:
    row = captures.query_gpu_rows(fixtures / f"{captures.H100_LOAD}.query-gpu.csv")[0]
    t0 = captures.capture_timestamp(row)
    path = tmp_path / "odd.db"
    (sample,) = captures.h100_samples(fixtures, 1, t0)
    with Store.open(path) as store:  # what a backend passing on dcgm-exporter's +Inf stores
        odd = replace(sample, power_draw_watts=float("inf"), temperature_gpu_celsius=-math.inf)
        store.write(captures.snapshot((odd,), t0))
    document = _strict_json(_run(capsys, "--db", str(path), "--json")[1])
    (first,) = document["samples"]
    assert first["power_draw_watts"] is None and first["temperature_gpu_celsius"] is None
    assert first["memory_used_bytes"] == 19818 * MIB  # the finite readings stay
    code, out, _ = _run(capsys, "--db", str(path), "--csv")
    (csv_row,) = csv.DictReader(io.StringIO(out))
    assert code == 0 and csv_row["power_draw_watts"] == ""
    code, out, _ = _run(capsys, "--db", str(path))
    assert code == 0 and "inf" not in out


def test_memory_reads_as_snapshot_shows_it(
    capsys: pytest.CaptureFixture[str], db: tuple[Path, float, dict[str, str]]
) -> None:
    """19818 MiB of 81559 MiB (the capture's memory.used / memory.total): one rule, one
    decimal, in both verbs."""
    path, _, _ = db
    code, out, _ = _run(capsys, "--db", str(path), "--gpu", "0")
    assert code == 0
    assert f"{19818 / 1024:.1f}/{81559 / 1024:.1f}" in out  # 19.4/79.6, as `snapshot` prints


def _recorded_runs(tmp_path: Path, runs: int) -> tuple[Path, list[int]]:
    """``runs`` short `record` runs (sim, 2 GPUs) one after the other into one store."""
    path = tmp_path / "runs.db"
    for _ in range(runs):
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "gpuwarden", "record", "--backend", "sim", "--gpus", "2"),
                *("--interval", "0.1", "--duration", "0.35", "--db", str(path)),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
    with Store.open(path, readonly=True) as store:
        ids = [r.id for r in store.runs()]
    return path, ids


def test_run_column_and_run_filter(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path, (first, second) = _recorded_runs(tmp_path, 2)
    with Store.open(path, readonly=True) as store:
        by_run = {run: store.count(run=run) for run in (first, second)}
        total = store.count()
    assert total == sum(by_run.values()) and all(n >= 2 for n in by_run.values())
    rows = _json(capsys, "--db", str(path), "--run", str(second))["samples"]
    assert len(rows) == by_run[second] and {r["run_id"] for r in rows} == {second}
    code, out, _ = _run(capsys, "--db", str(path), "--run", str(first))
    assert code == 0 and "┃ run ┃" in out
    code, _, err = _run(capsys, "--db", str(path), "--run", "99")
    assert code == 2 and "run-not-recorded" in err and f"{first}, {second}" in err
    code, _, err = _run(capsys, "--db", str(path), "--run", str(first), "--resolution", "1m")
    assert code == 2 and "run-needs-raw" in err
    code, _, err = _run(capsys, "--db", str(path), "--run", "0")
    assert code == 2


def test_record_then_history_at_1m_and_1h_has_the_rollups(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Nothing but `record` ran: the rollups were built as it wrote."""
    path, _ = _recorded_runs(tmp_path, 1)
    with Store.open(path, readonly=True) as store:
        raw = store.samples()
    for resolution in ("1m", "1h"):
        rows = _json(capsys, "--db", str(path), "--resolution", resolution)["samples"]
        by_gpu = {r["index"]: r for r in rows}
        assert sorted(by_gpu) == [0, 1]
        for index, got in by_gpu.items():
            mine = [s for s in raw if s.info.index == index]
            power = [s.power_draw_watts for s in mine if s.power_draw_watts is not None]
            if len({int(s.timestamp_s) // 60 for s in mine}) == 1:  # one minute: one bucket
                assert got["power_draw_watts"] == pytest.approx(sum(power) / len(power))
            assert got["run_id"] is None


def test_a_name_too_long_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    long = tmp_path / ("x" * 300) / "t.db"
    code, _, err = _run(capsys, "--db", str(long))
    assert code == 2, err
    assert "store-unreadable" in err and "File name too long" in err


def test_history_reads_a_store_in_a_read_only_directory(
    db: tuple[Path, float, dict[str, str]],
) -> None:
    source, _, _ = db
    with open_dir() as shared:
        folder = shared / "ro"
        folder.mkdir()
        shutil.copy(source, folder / "t.db")
        folder.chmod(0o555)
        code, out, err = cli_without_privileges(["history", "--db", str(folder / "t.db"), "--json"])
        assert code == 0, err
        assert len(_strict_json(out)["samples"]) == GPUS * SNAPSHOTS
        assert names(folder) == ["t.db"]  # no -wal / -shm could be made, none was needed


def test_a_store_failing_mid_stream_still_ends_the_json_document(
    capsys: pytest.CaptureFixture[str], db: tuple[Path, float, dict[str, str]]
) -> None:
    """A value no writer stores (a BLOB) in the last snapshot: the rows before it are out,
    the document is closed with the error, and the exit is 2 (store-corrupt), not 70."""
    path, _, _ = db
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE samples SET power_draw_watts = x'00ff' WHERE t_ms = (SELECT max(t_ms) FROM samples)"
    )
    conn.commit()
    conn.close()
    code, out, err = _run(capsys, "--db", str(path), "--json")
    assert code == 2
    document = _strict_json(out)
    assert len(document["samples"]) == GPUS * (SNAPSHOTS - 1)
    assert document["error"]["reference"] == "store-corrupt"
    assert "power_draw_watts holds a bytes" in document["error"]["message"]
    assert _strict_json(err)["reference"] == "store-corrupt"


_DATE_LIKE = st.from_regex(
    r"\A-?\d{1,6}-\d{1,2}-\d{1,2}[T t+\-Z:.\d]{0,14}\Z|\A\d{1,25}(\.\d{0,3})?\s?[smhdwx]?\Z",
)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.text(max_size=40), _DATE_LIKE))
def test_parse_when_reads_a_time_or_refuses_it_clearly(text: str) -> None:
    """Any text, and text shaped like the forms it reads (ISO dates with zones and separators
    of every kind, years 0-999999, relative counts): a finite time in years 1-9999, or
    invalid-time — never another exception."""
    try:
        seconds = parse_when(text, now_s=1_790_000_000.0, option="--since")
    except InputError as exc:
        refused: InputError | None = exc
    else:
        refused = None
    if refused is not None:
        assert refused.reference == "invalid-time"
        return
    assert math.isfinite(seconds)
    assert -62_135_596_800 <= seconds <= 253_402_300_800  # 0001-01-01 .. 10000-01-01 UTC
