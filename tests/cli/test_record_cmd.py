"""`gpuwarden record` end to end, as a user runs it: a real child process, the sim backend, a real
store file; exit codes, the summary, Ctrl-C and a GPU lost mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.telemetry.store import Store

SLEEP_EXIT_3 = "import time; time.sleep(0.5); raise SystemExit(3)"


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def _record(db: Path, *args: str) -> list[str]:
    return ["record", "--backend", "sim", "--interval", "0.05", "--db", str(db), *args]


def test_exit_code_store_and_summary(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = run_cli(
        *_record(db, "--scenario", "healthy-training"), "--", sys.executable, "-c", SLEEP_EXIT_3
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("SIMULATED")
    assert "GPU summary" in proc.stderr and "command exit code 3" in proc.stderr
    assert "$0.15/kWh (assumed default" in proc.stderr
    with Store.open(db, readonly=True) as store:
        (run,) = store.runs()
        assert run.exit_code == 3 and run.simulated and run.backend == "sim"
        assert run.command == (sys.executable, "-c", SLEEP_EXIT_3)
        assert run.ended_s - run.started_s >= 0.5
        samples = store.samples()
    per_gpu = len(samples) / 8
    assert per_gpu >= 5  # 0.5 s at 0.05 s, with slack for a loaded machine
    assert samples[-1].power_average_watts is not None  # rates went into the store


def test_json_summary(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = run_cli(
        *_record(db, "--scenario", "power-capping", "--price-kwh", "0.3", "--json"),
        "--",
        sys.executable,
        "-c",
        SLEEP_EXIT_3,
    )
    assert proc.returncode == 3, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    assert doc["schema"] == "gpuwarden.record/1"
    assert doc["exit_code"] == 3 and doc["simulated"] is True and doc["db"] == str(db)
    assert doc["price_per_kwh"] == 0.3 and doc["price_basis"] == "--price-kwh"
    (gpu,) = doc["gpus"]
    with Store.open(db, readonly=True) as store:
        samples = store.samples()
    assert gpu["samples"] == len(samples) == doc["snapshots"]
    assert gpu["peak_memory_used_bytes"] == max(s.memory_used_bytes for s in samples)
    joules = samples[-1].energy_consumed_joules - samples[0].energy_consumed_joules
    assert gpu["energy_wh"] == pytest.approx(joules / 3600, rel=1e-6)
    assert gpu["energy_cost"] == pytest.approx(joules / 3.6e6 * 0.3, rel=1e-6)
    assert gpu["throttled_seconds_by_reason"]["sw_power_cap"] == pytest.approx(
        samples[-1].timestamp_s - samples[0].timestamp_s, rel=0.01
    )


def test_gpu_lost_mid_record_is_an_event_and_the_command_keeps_running(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    # at 100x the scenario's Xid 79 (30 s) comes 0.3 s into the run; the job runs 0.8 s
    script = "import time; time.sleep(0.8); print('job done')"
    proc = run_cli(
        *_record(db, "--scenario", "gpu-fallen-off-bus", "--sim-speed", "100", "--json"),
        "--",
        sys.executable,
        "-c",
        script,
    )
    assert proc.returncode == 0, proc.stderr
    assert "job done\n" in proc.stderr  # the child's stdout, kept apart from the document
    doc = json.loads(proc.stdout)
    lost = [g for g in doc["gpus"] if g["lost"]]
    assert [g["index"] for g in lost] == [3]
    assert [e["code"] for e in lost[0]["xid_events"]] == [79]
    with Store.open(db, readonly=True) as store:
        events = store.events()
        after = [
            s for s in store.samples() if s.timestamp_s > lost[0]["lost_at_s"] and s.info.index != 3
        ]
    assert {(e.kind.value, e.index) for e in events} >= {("xid", 3), ("gpu-lost", 3)}
    assert len(after) >= 7 * 3  # the seven others kept reporting


def test_json_stdout_is_the_document_alone_and_the_job_output_goes_to_stderr(
    tmp_path: Path,
) -> None:
    # A job that writes to stdout a lot, partial lines and JSON-looking text included: all of it
    # must reach our stderr, in order, and stdout must parse as one document.
    script = (
        "import sys\n"
        "for i in range(2000): print(f'step {i} loss {1 / (i + 1):.4f}')\n"
        'print(\'{"not": "the summary"}\')\n'
        "sys.stdout.write('no newline at the end')\n"
        "sys.stderr.write('job stderr line\\n')\n"
    )
    proc = run_cli(
        *_record(tmp_path / "t.db", "--scenario", "healthy-training", "--json"),
        "--",
        sys.executable,
        "-c",
        script,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # the whole of stdout, nothing before or after
    assert doc["schema"] == "gpuwarden.record/1" and doc["exit_code"] == 0
    steps = [line for line in proc.stderr.splitlines() if line.startswith("step ")]
    assert steps == [f"step {i} loss {1 / (i + 1):.4f}" for i in range(2000)]
    assert '{"not": "the summary"}' in proc.stderr and "no newline at the end" in proc.stderr
    assert "job stderr line" in proc.stderr
    assert "step 0" not in proc.stdout


def test_without_json_the_job_keeps_its_stdout(tmp_path: Path) -> None:
    proc = run_cli(
        *_record(tmp_path / "t.db", "--scenario", "healthy-training"),
        "--",
        sys.executable,
        "-c",
        "print('to stdout')",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "to stdout\n"  # the summary table is on stderr
    assert "GPU summary" in proc.stderr


def test_json_help_says_where_the_job_output_goes() -> None:
    proc = run_cli("record", "--help")
    assert proc.returncode == 0
    assert "stdout then goes to stderr" in " ".join(proc.stdout.split())


def test_signal_death_is_128_plus_n(tmp_path: Path) -> None:
    script = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    proc = run_cli(*_record(tmp_path / "t.db"), "--", sys.executable, "-c", script)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr


def test_ctrl_c_is_forwarded_and_the_store_flushed(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    script = "import time; print('ready', flush=True); time.sleep(30)"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuwarden", *_record(db), "--", sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # no terminal: record must forward the signal itself
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.3)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - started < 10  # the 30 s child was interrupted
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "KeyboardInterrupt" in err  # the child's own report of the forwarded SIGINT
    with Store.open(db, readonly=True) as store:
        (run,) = store.runs()
        assert run.exit_code == 130 and run.ended_s is not None
        assert len(store.samples()) >= 8 * 3


def test_attach_for_a_duration(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = run_cli(*_record(db, "--gpus", "2", "--duration", "0.4", "--json"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["command"] == [] and doc["exit_code"] is None
    assert 0.4 <= doc["duration_s"] < 5 and doc["snapshots"] >= 3
    with Store.open(db, readonly=True) as store:
        assert store.runs()[0].command == ("--duration=0.4",)


def test_attach_to_a_pid_until_it_exits(tmp_path: Path) -> None:
    born = time.time()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuwarden",
            *_record(tmp_path / "t.db", "--gpus", "1"),
            "--pid",
            str(sleeper.pid),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the sleeper stays a zombie of this test until reaped: record must see it as ended
        out, err = recorder.communicate(timeout=30)
    finally:
        sleeper.wait(timeout=10)
        if recorder.poll() is None:
            recorder.kill()
    assert recorder.returncode == 0, err
    doc = json.loads(out)
    assert doc["pid"] == sleeper.pid and doc["exit_code"] is None
    # it cannot have stopped before the sleeper ended (1.5 s after it was started)
    with Store.open(tmp_path / "t.db", readonly=True) as store:
        (run,) = store.runs()
    assert run.ended_s is not None and run.ended_s >= born + 1.5
    assert run.pid == sleeper.pid


@pytest.mark.parametrize(
    ("args", "reference"),
    [
        ([], "record-nothing"),
        (["--pid", "1", "--", "true"], "record-command-and-pid"),
        (["--pid", str(2**22 + 12345)], "pid-not-found"),
        (["--", "/nonexistent/gpuwarden-test-command"], "command-not-runnable"),
        (["--backend", "smi", "--sim-speed", "3", "--", "true"], "sim-option-without-sim"),
    ],
)
def test_bad_invocations(tmp_path: Path, args: list[str], reference: str) -> None:
    argv = ["record", "--db", str(tmp_path / "t.db")]
    if "--backend" not in args:
        argv += ["--backend", "sim"]
    proc = run_cli(*argv, *args)
    assert proc.returncode == 2, proc.stderr
    assert f"error: {reference}" in proc.stderr and "Traceback" not in proc.stderr


def test_record_runs_without_a_tty_in_a_pipeline(tmp_path: Path) -> None:
    """stdin closed, stdout a pipe: still the child's code; the summary stays on stderr."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwarden",
            *_record(tmp_path / "t.db", "--gpus", "1"),
            "--",
            sys.executable,
            "-c",
            "print('out')",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert proc.returncode == 0 and proc.stdout == "out\n"


@pytest.mark.parametrize("kind", ["directory", "garbage"])
def test_an_unusable_store_fails_before_the_job_starts(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "t.db"
    if kind == "directory":
        db.mkdir()
    else:
        db.write_bytes(b"this is not a database\n" * 10)
    marker = tmp_path / "job-ran"
    script = f"open({str(marker)!r}, 'w').close()"
    proc = run_cli(*_record(db), "--", sys.executable, "-c", script)
    assert proc.returncode == 2, proc.stderr
    assert "error: store-" in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists()
    if kind == "garbage":
        assert db.read_bytes() == b"this is not a database\n" * 10  # left as it was


def test_no_gpu_backend_fails_before_the_job_starts(tmp_path: Path) -> None:
    marker = tmp_path / "job-ran"
    job = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwarden", "record", "--db", str(tmp_path / "t.db"), "--", *job],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},  # no nvidia-smi, no driver here
    )
    assert proc.returncode == 4, proc.stderr
    assert "error: no-gpu-backend" in proc.stderr
    assert not marker.exists() and not (tmp_path / "t.db").exists()


def test_duration_stops_recording_but_waits_for_the_command(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    script = "import time; time.sleep(1.5); raise SystemExit(4)"
    began = time.monotonic()
    proc = run_cli(
        *_record(db, "--gpus", "1", "--duration", "0.3", "--json"),
        "--",
        sys.executable,
        "-c",
        script,
    )
    assert proc.returncode == 4, proc.stderr
    assert time.monotonic() - began >= 1.5
    doc = json.loads(proc.stdout)
    with Store.open(db, readonly=True) as store:
        samples = store.samples()
    span = samples[-1].timestamp_s - samples[0].timestamp_s
    # Recording stopped at the duration (0.3 s), not at the exit (1.5 s); the first sample may
    # come late on a loaded machine, so only the upper side is tight.
    assert len(samples) >= 2 and span < 1.0
    assert doc["exit_code"] == 4 and doc["gpus"][0]["samples"] == len(samples)


def test_a_store_failing_mid_run_costs_only_the_stored_telemetry() -> None:
    from gpuwarden.cli.commands.record import _StoreSink
    from gpuwarden.errors import EnvironmentProblemError
    from gpuwarden.telemetry.sim import open_sim

    class DiskFull:
        path = Path("full.db")

        def __init__(self) -> None:
            self.writes = 0
            self.closed = 0

        def begin_run(self, *args: object, **kwargs: object) -> int:
            return 1

        def write(self, snapshot: object) -> None:
            self.writes += 1
            if self.writes > 2:
                raise EnvironmentProblemError("disk full", reference="store-io-error")

        def end_run(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("a failed store gets no end_run")

        def close(self) -> None:
            self.closed += 1

    now = [1_800_000_000.0]
    backend = open_sim("fake-load", clock=lambda: now[0])
    store = DiskFull()
    sink = _StoreSink(store)  # type: ignore[arg-type]
    first = backend.read()
    sink.begin(["job"], first, 123)
    for _ in range(5):
        now[0] += 1.0
        sink(backend.read())
    sink.end(now[0], 0)
    assert store.writes == 3 and sink.problem == "store-io-error: disk full"
    assert sink.snapshots == 5 and store.closed >= 1
    (summary,) = sink.summarizer.summaries(price_per_kwh=0.15)
    assert summary.samples == 5  # the summary kept every reading
