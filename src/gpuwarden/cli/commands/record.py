"""`gpuwarden record -- COMMAND...`: run a job while recording GPU telemetry, then summarise.

The collector polls in this (main) thread while the child runs; every snapshot goes to the
store. The exit code is the command's (128 + N when a signal N ended it). SIGINT/SIGTERM are
forwarded to the command; a Ctrl-C typed in the terminal already reaches it (same process
group), so it is not sent twice.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from gpuwarden.cli.live_backend import add_live_backend_options, open_live_backend
from gpuwarden.cli.options import integer, number
from gpuwarden.errors import (
    CommandNotRunnableError,
    GpuwardenError,
    InputError,
    InvalidConfigError,
)
from gpuwarden.telemetry.store import Store
from gpuwarden.telemetry.summary import RecordingSummarizer
from gpuwarden.types.telemetry import Snapshot

DEFAULT_PRICE_KWH = 0.15  # USD/kWh: an assumption (a typical industrial rate); set --price-kwh


_positive_float = number("a positive number of seconds", lambda v: v > 0)
# An hour between readings at most, as `watch` takes: time.sleep refuses a wait past what time_t
# holds (--interval 1e10 ended in exit 70), and readings hours apart are a cron job's work.
MAX_INTERVAL_S = 3600.0
_interval = number(f"above 0 and at most {MAX_INTERVAL_S:g} s", lambda v: 0 < v <= MAX_INTERVAL_S)
_price = number("a price ≥ 0 per kWh", lambda v: v >= 0, noun="price")


def register(parser: argparse.ArgumentParser) -> None:
    add_live_backend_options(parser)
    parser.add_argument(
        "--interval",
        type=_interval,
        default=1.0,
        metavar="S",
        help="seconds between readings (default 1)",
    )
    parser.add_argument(
        "--db", metavar="FILE", help="telemetry store (default $GPUWARDEN_DB or ~/.local/share)"
    )
    parser.add_argument(
        "--price-kwh",
        type=_price,
        metavar="USD",
        help=f"electricity price per kWh for the energy cost (default {DEFAULT_PRICE_KWH}, "
        "an assumption)",
    )
    parser.add_argument(
        "--pid", type=integer, help="attach to a running process instead of COMMAND"
    )
    parser.add_argument(
        "--duration",
        type=_positive_float,
        metavar="S",
        help="stop recording after S seconds (a COMMAND keeps running: record still waits for it "
        "and returns its exit code)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON (schema gpuwarden.record/1 in README) on stdout, alone: "
        "the command's own stdout then goes to stderr, like the summary table does",
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the job to run"
    )


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: past what a pid_t holds
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process that exited but was not reaped by its parent yet (Linux /proc; else False)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    # "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")"
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _terminal_delivers_sigint() -> bool:
    """True when we are the terminal's foreground group: a typed Ctrl-C reaches the child too."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def _check_args(args: argparse.Namespace, command: list[str]) -> None:
    if command and args.pid is not None:
        raise InvalidConfigError(
            "record either runs a COMMAND or attaches to --pid, not both",
            reference="record-command-and-pid",
            hint="drop --pid, or drop the command after --",
        )
    if not command and args.pid is None and args.duration is None:
        raise InvalidConfigError(
            "nothing to record: no COMMAND, --pid or --duration",
            reference="record-nothing",
            hint="gpuwarden record -- python train.py   (or --pid PID, or --duration SECONDS)",
        )
    if args.pid is not None and (args.pid <= 0 or not _pid_alive(args.pid)):
        raise InputError(
            f"--pid {args.pid}: no such process",
            reference="pid-not-found",
            hint="check the PID with `ps`, or run the job under record: gpuwarden record -- CMD",
        )


def _start(command: list[str], *, stdout_to_stderr: bool) -> subprocess.Popen[bytes]:
    # Under --json our stdout carries the summary document alone, so the job writes to our
    # stderr (fd 2, as GNU time keeps its report apart from the command's output).
    try:
        return subprocess.Popen(command, stdout=2 if stdout_to_stderr else None)
    except OSError as exc:
        raise CommandNotRunnableError(
            f"cannot run {command[0]!r}: {exc.strerror or exc}",
            found=not isinstance(exc, FileNotFoundError),
            hint="check the command name and PATH; put record's own options before --",
        ) from None


class _Signals:
    """Forward SIGINT/SIGTERM to the child while recording; restore the old handlers after.
    Installed before the child starts, so an early Ctrl-C cannot leave the job orphaned."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.interrupted = False
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True
        child = self.child
        if child is None or child.poll() is not None:
            return
        if signum == signal.SIGINT and _terminal_delivers_sigint():
            return  # the terminal sent it to the whole foreground group, child included
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    def __enter__(self) -> _Signals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._old[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._old.items():
            signal.signal(signum, handler)


class _StoreSink:
    """Each snapshot into the summary, the store and the live line. A store that fails mid-run
    (disk full) costs the rest of the stored telemetry, never the job, its exit code or the
    summary."""

    def __init__(self, store: Store, live: Callable[[Snapshot], None]) -> None:
        from gpuwarden.doctor.watch import DEFAULT_WINDOW_S, EpisodeLog, Watcher, health_judge

        self.store = store
        self.live = live
        self.summarizer = RecordingSummarizer()
        # the health rules over a sliding window, as `watch` judges: what the run went through
        self.watcher = Watcher(health_judge(), window_s=DEFAULT_WINDOW_S)
        self.findings = EpisodeLog()
        self.snapshots = 0
        self.run_id: int | None = None
        self.problem: str | None = None

    def _guard(self, action: Callable[[], None]) -> None:
        if self.problem is not None:
            return
        try:
            action()
        except GpuwardenError as exc:
            self.problem = f"{exc.reference}: {exc.message}"
            print(f"warning: telemetry no longer stored: {exc.message}", file=sys.stderr)

    def begin(self, command: list[str], first: Snapshot, pid: int | None) -> None:
        def begin() -> None:
            self.run_id = self.store.begin_run(
                command,
                started_s=time.time(),
                host=first.host,
                backend=first.backend,
                simulated=first.simulated,
                pid=pid,
            )

        self._guard(begin)

    def __call__(self, snapshot: Snapshot) -> None:
        self.snapshots += 1
        for sample in snapshot.samples:
            self.summarizer.add_sample(sample)
        for event in snapshot.events:
            self.summarizer.add_event(event)
        self.findings.add(self.watcher.update(snapshot))
        self._guard(lambda: self.store.write(snapshot))
        self.live(snapshot)

    def end(self, ended_s: float, exit_code: int | None) -> None:
        run_id = self.run_id
        if run_id is not None:
            self._guard(lambda: self.store.end_run(run_id, ended_s=ended_s, exit_code=exit_code))
        self._guard(self.store.close)
        with contextlib.suppress(GpuwardenError):
            self.store.close()  # already failed: release the file all the same


def run(args: argparse.Namespace) -> int:
    from gpuwarden.report import record as report
    from gpuwarden.telemetry.collector import Collector

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    _check_args(args, command)
    price = DEFAULT_PRICE_KWH if args.price_kwh is None else args.price_kwh
    backend = open_live_backend(args)
    try:
        collector = Collector(backend, interval_s=args.interval)
        first = collector.poll()  # a backend that cannot start fails before the job starts
        live = report.LiveLine()
        sink = _StoreSink(Store.open(args.db), live.update)
        started = time.time()
        with _Signals() as signals:
            try:
                child = signals.child = (
                    _start(command, stdout_to_stderr=args.json) if command else None
                )
            except GpuwardenError:
                sink.end(started, None)
                raise
            pid = child.pid if child is not None else args.pid
            label = command or [f"--pid={pid}" if args.pid else f"--duration={args.duration:g}"]
            sink.begin(label, first, pid)
            sink(first)
            deadline = None if args.duration is None else time.monotonic() + args.duration
            try:
                collector.run(until=_until(child, args.pid, deadline, signals), sink=sink)
            finally:
                live.close()  # the terminal's whole screen back, whatever ended the recording
            returncode = child.wait() if child is not None else None
        ended = time.time()
        exit_code = None if returncode is None else _exit_code(returncode)
        sink.end(ended, exit_code)
    finally:
        backend.close()
    stored = sink.problem is None
    run_info = report.RecordRun(
        command=tuple(command),
        pid=pid,
        exit_code=exit_code,
        host=first.host,
        backend=backend.name,
        simulated=backend.simulated,
        started_s=started,
        ended_s=ended,
        interval_s=args.interval,
        snapshots=sink.snapshots,
        db_path=str(sink.store.path) if stored else None,
        run_id=sink.run_id if stored else None,
        price_per_kwh=price,
        price_is_default=args.price_kwh is None,
        events=tuple(sink.summarizer.unattributed_events),
        findings=sink.findings.episodes(),
        findings_dropped=sink.findings.dropped,
    )
    summaries = sink.summarizer.summaries(price_per_kwh=price)
    (report.print_record_json if args.json else report.print_record_table)(run_info, summaries)
    if exit_code is not None:
        return exit_code
    return 130 if signals.interrupted else 0


def _until(
    child: subprocess.Popen[bytes] | None,
    pid: int | None,
    deadline: float | None,
    signals: _Signals,
) -> Callable[[], bool]:
    def done() -> bool:
        if deadline is not None and time.monotonic() >= deadline:
            return True
        if child is not None:
            return child.poll() is not None
        if pid is not None and not _pid_alive(pid):
            return True
        return signals.interrupted  # attached: Ctrl-C ends the recording

    return done
