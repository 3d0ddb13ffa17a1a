"""`gpuwarden record` end to end, as a user runs it: a real child process, the sim backend, a real
store file; exit codes, the summary, Ctrl-C and a GPU lost mid-run."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.telemetry.store import Store
from tests.conftest import FIXTURES
from tests.telemetry.store import captures
from tests.telemetry.store.unprivileged import cli_without_privileges, names, open_dir

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


# A process that lives until a file appears (bounded: 60 s), so the test ends it once record has
# attached: a fixed sleep raced record's start-up on a loaded machine (the PID gone before it
# looked: "--pid N: no such process")
_UNTIL_FILE = (
    "import os, sys, time\n"
    "deadline = time.monotonic() + 60\n"
    "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
    "    time.sleep(0.02)\n"
)


def _wait_for_a_run(db: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if db.exists():
            with contextlib.suppress(Exception), Store.open(db, readonly=True) as store:
                if store.runs():
                    return
        time.sleep(0.05)
    raise AssertionError(f"record wrote no run to {db} in {timeout_s} s")


def test_attach_to_a_pid_until_it_exits(tmp_path: Path) -> None:
    release = tmp_path / "release"
    sleeper = subprocess.Popen([sys.executable, "-c", _UNTIL_FILE, str(release)])
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
        _wait_for_a_run(tmp_path / "t.db")
        released = time.time()
        release.touch()
        # the sleeper stays a zombie of this test until reaped: record must see it as ended
        out, err = recorder.communicate(timeout=30)
    finally:
        release.touch()
        sleeper.wait(timeout=10)
        if recorder.poll() is None:
            recorder.kill()
    assert recorder.returncode == 0, err
    doc = json.loads(out)
    assert doc["pid"] == sleeper.pid and doc["exit_code"] is None
    # it cannot have stopped before the sleeper was let go
    with Store.open(tmp_path / "t.db", readonly=True) as store:
        (run,) = store.runs()
    assert run.ended_s is not None and run.ended_s >= released
    assert run.pid == sleeper.pid


@pytest.mark.parametrize(
    ("args", "reference", "code"),
    [
        ([], "record-nothing", 2),
        (["--pid", "1", "--", "true"], "record-command-and-pid", 2),
        (["--pid", str(2**22 + 12345)], "pid-not-found", 2),
        # the codes a shell, env(1) and timeout(1) give a command they cannot run
        (["--", "/nonexistent/gpuwarden-test-command"], "command-not-runnable", 127),
        (["--", "{tmp}/notes.txt"], "command-not-runnable", 126),  # there, not executable
        (["--backend", "smi", "--sim-speed", "3", "--", "true"], "sim-option-without-sim", 2),
    ],
)
def test_bad_invocations(tmp_path: Path, args: list[str], reference: str, code: int) -> None:
    (tmp_path / "notes.txt").write_text("not a program\n")
    argv = ["record", "--db", str(tmp_path / "t.db")]
    if "--backend" not in args:
        argv += ["--backend", "sim"]
    proc = run_cli(*argv, *(arg.format(tmp=tmp_path) for arg in args))
    assert proc.returncode == code, proc.stderr
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
    sink = _StoreSink(store, lambda snapshot: None)  # type: ignore[arg-type]
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


def _source_store(path: Path, snapshots: int, **changes: Any) -> float:
    """A store of ``snapshots`` readings, 20 ms apart, of 2 GPUs from the real H100 capture
    (with ``changes`` applied to every sample); returns the first timestamp."""
    row = captures.query_gpu_rows(FIXTURES / f"{captures.H100_LOAD}.query-gpu.csv")[0]
    t0 = captures.capture_timestamp(row)
    samples = tuple(replace(s, **changes) for s in captures.h100_samples(FIXTURES, 2, t0))
    with Store.open(path) as store:
        for k in range(snapshots):
            store.write(captures.snapshot(samples, t0 + k * 0.02))
    return t0


def test_concurrent_records_keep_every_reading_under_its_own_run(tmp_path: Path) -> None:
    """Three `record` runs at 0.02 s into one store, replaying one recording: their snapshots
    carry the same timestamps, millisecond for millisecond (what lost rows before v5)."""
    source, shared = tmp_path / "source.db", tmp_path / "shared.db"
    _source_store(source, 200)
    argv = [
        *(sys.executable, "-m", "gpuwarden", "record", "--backend", "replay"),
        *("--from", str(source), "--db", str(shared), "--interval", "0.02"),
        *("--duration", "0.6", "--json"),
    ]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    docs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        docs.append(json.loads(out))
    with Store.open(shared, readonly=True) as store:
        stored = store.stored_samples()
        snapshots = store.snapshots()
    assert len(snapshots) == sum(doc["snapshots"] for doc in docs)
    for doc in docs:
        mine = [s for s in stored if s.run_id == doc["run_id"]]
        assert len(mine) == 2 * doc["snapshots"]  # every reading of 2 GPUs, under its run
        assert doc["gpus"][0]["samples"] == doc["snapshots"]
    times = [s.sample.timestamp_s for s in stored if s.sample.info.index == 0]
    assert len(times) > len(set(times))  # the runs did store the same milliseconds


def test_non_finite_readings_leave_the_summary_finite_and_the_json_valid(tmp_path: Path) -> None:
    """Replaying readings where one backend passed on an exporter's +Inf power (stored as it
    came): the summary ignores them like missing ones, and stdout is strict JSON."""
    source = tmp_path / "source.db"
    _source_store(source, 30, power_draw_watts=float("inf"))
    proc = run_cli(
        *("record", "--backend", "replay", "--from", str(source), "--db", str(tmp_path / "t.db")),
        *("--interval", "0.02", "--duration", "0.3", "--json"),
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    for gpu in doc["gpus"]:
        assert gpu["power_mean_watts"] is None and gpu["power_peak_watts"] is None
        assert gpu["gpu_utilization_mean_percent"] == 100  # the capture's finite reading


@pytest.mark.parametrize("where", ["db", "from"])
def test_a_name_too_long_is_exit_2_before_the_job(tmp_path: Path, where: str) -> None:
    long = str(tmp_path / ("x" * 300) / "t.db")
    marker = tmp_path / "job-ran"
    job = ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    if where == "db":
        proc = run_cli(*_record(Path(long)), *job)
    else:
        proc = run_cli("record", "--backend", "replay", "--from", long, *job)
    assert proc.returncode == 2, proc.stderr
    assert "error: store-unreadable" in proc.stderr and "File name too long" in proc.stderr
    assert not marker.exists()


def test_snapshot_replay_of_a_name_too_long_is_exit_2(tmp_path: Path) -> None:
    long = str(tmp_path / ("y" * 256) / "t.db")
    proc = run_cli("snapshot", "--backend", "replay", "--from", long, "--json")
    assert proc.returncode == 2, proc.stderr
    assert json.loads(proc.stderr)["reference"] == "store-unreadable"


def test_a_read_only_directory_is_unwritable_not_damaged(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    _source_store(source, 3)
    with open_dir() as shared:
        folder = shared / "ro"
        folder.mkdir()
        shutil.copy(source, folder / "t.db")
        folder.chmod(0o555)
        code, _, err = cli_without_privileges(
            ["record", "--backend", "sim", "--db", str(folder / "t.db"), "--duration", "0.1"]
        )
        assert code == 2
        assert "error: store-unwritable" in err and "damaged" not in err
        assert names(folder) == ["t.db"]


def test_the_live_line_shows_elapsed_time_and_the_latest_reading(tmp_path: Path) -> None:
    """On a terminal (a pseudo-terminal of 40 rows here) the last row is kept for a status line,
    rewritten as readings come, while the job's output scrolls above it (DECSTBM, as apt does);
    the whole screen is given back before the summary."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    job = "import time\nfor i in range(6): print(f'step {i}', flush=True); time.sleep(0.2)"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuwarden",
            *_record(tmp_path / "t.db", "--gpus", "2"),
            "--",
            sys.executable,
            "-c",
            job,
        ],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode()
    reserve, draw, give_back = "\x1b[1;39r", "\x1b7\x1b[40;1H\x1b[2K", "\x1b[2K\x1b[r\x1b8"
    assert text.count(reserve) == 1
    lines = [part.split("\x1b8")[0] for part in text.split(draw)[1:]]
    status = [line for line in lines if line.startswith("SIMULATED")]  # not the give-back
    assert len(status) >= 2  # rewritten as readings came
    assert status[0].startswith("SIMULATED · recording 0:00:00 · ") and "2 GPUs" in status[0]
    assert " W" in status[-1] and " °C max" in status[-1]
    assert text.index(reserve) < text.index("step 0")  # the job's output came after the reserve
    assert [f"step {i}" in text for i in range(6)] == [True] * 6
    assert text.rindex(give_back) < text.index("GPU summary")


def test_no_live_line_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    proc = run_cli(*_record(tmp_path / "t.db", "--gpus", "1", "--duration", "0.3"))
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "recording 0:" not in proc.stderr


def test_the_run_is_judged_as_watch_judges_it(tmp_path: Path) -> None:
    """record judged nothing: a GPU lost and its peers' uncorrectable ECC were summary columns
    only. The health rules now run over the readings as `watch` runs them: each finding once per
    time it was active, with when it began (and ended, or "the end")."""
    script = "import time; time.sleep(0.8)"
    proc = run_cli(
        *_record(tmp_path / "t.db", "--scenario", "gpu-fallen-off-bus", "--sim-speed", "100"),
        "--json",
        "--",
        sys.executable,
        "-c",
        script,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    lost = [f for f in doc["findings"] if f["code"] == "gpu-lost"]
    assert [(f["severity"], f["device"]["index"]) for f in lost] == [("critical", 3)]
    assert lost[0]["first_seen"] >= doc["started"] and doc["findings_not_listed"] == 0
    table = run_cli(
        *_record(tmp_path / "u.db", "--scenario", "gpu-fallen-off-bus", "--sim-speed", "100"),
        "--",
        sys.executable,
        "-c",
        script,
    )
    assert "findings during the run" in table.stderr
    assert any("gpu-lost" in line and "→" in line for line in table.stderr.splitlines())


def test_a_healthy_run_finds_nothing_above_info(tmp_path: Path) -> None:
    proc = run_cli(
        *_record(tmp_path / "t.db", "--scenario", "healthy-training", "--json"),
        "--",
        sys.executable,
        "-c",
        "import time; time.sleep(0.5)",
    )
    assert proc.returncode == 0, proc.stderr
    assert [f for f in json.loads(proc.stdout)["findings"] if f["severity"] != "info"] == []
