"""Issue 13's promise, a hostile user's second pass over the core verbs: the breaks the earlier
sweeps left, each as it was found.

- `history --since 0001-01-01` (a naive time on the calendar's first day) ended in exit 70:
  Python finds the local offset by stepping a day out of the calendar.
- `history --since 2026-07-14+05:00` was read as 05:00 local time: Python 3.11's fromisoformat
  takes any one character between date and time.
- `record --pid 99999999999999999999` (or 2**31) ended in exit 70: no pid_t holds it.
- A locale whose encoding is not UTF-8 ended every verb in exit 70 (UnicodeEncodeError on
  "·", "—", "≈"), `--json` included.
- `trace analyze --html` renamed its page over whatever the path named: over a device node
  (as root `--html /dev/null` replaced /dev/null with a regular file; /dev/full took the page and
  exit 0), and over the very trace it read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from gpuwarden.cli.commands.history import parse_when
from gpuwarden.errors import InputError
from tests.checkout import child_env
from tests.cli.test_fuzz_verbs import problem, run_in_process
from tests.conftest import FIXTURES

TRACE = FIXTURES / "traces" / "call_stack" / "backward_thread.json"
SMI_CAPTURES = FIXTURES / "nvidia-smi" / "captures"


# --- history: times at the calendar's ends, a date with only a zone ---------------------------


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "rec.db"
    outcome = run_in_process(
        ["record", "--backend", "sim", "--duration", "0.3", "--interval", "0.1", "--db", str(db)]
    )
    assert outcome.code == 0, outcome.err
    return db


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York"])
@pytest.mark.parametrize("when", ["0001-01-01", "0001-01-01T00:00", "9999-12-31T23:59:59"])
def test_a_local_time_at_the_calendars_end_is_no_crash(
    store: Path, zone: str, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        for option in ("--since", "--until"):
            outcome = run_in_process(["history", "--db", str(store), option, when, "--json"])
            assert problem(outcome) is None, problem(outcome)
            if outcome.code != 0:
                assert json.loads(outcome.err)["reference"] == "invalid-time"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_a_date_with_a_zone_is_midnight_in_that_zone() -> None:
    midnight = datetime(2026, 7, 14, tzinfo=UTC)
    assert parse_when("2026-07-14Z", now_s=0, option="--since") == midnight.timestamp()
    plus_five = datetime(2026, 7, 14, tzinfo=timezone(timedelta(hours=5)))
    assert parse_when("2026-07-14+05:00", now_s=0, option="--since") == plus_five.timestamp()
    minus_five = datetime(2026, 7, 14, tzinfo=timezone(timedelta(hours=-5)))
    assert parse_when("2026-07-14-0500", now_s=0, option="--since") == minus_five.timestamp()
    assert (
        parse_when("0001-01-01Z", now_s=0, option="--since")
        == datetime(1, 1, 1, tzinfo=UTC).timestamp()
    )
    # ISO-8601's separators still read as before
    assert (
        parse_when("2026-07-14t08:00z", now_s=0, option="--since")
        == (midnight + timedelta(hours=8)).timestamp()
    )


@pytest.mark.parametrize("text", ["2026-07-14x05:00", "2026-07-14_08:00", "2026-07-14/08:00"])
def test_a_date_and_time_joined_by_another_character_is_no_time(text: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_when(text, now_s=0, option="--since")
    assert caught.value.reference == "invalid-time"


# --- doctor --from "" (an unset shell variable) --------------------------------------------------


def test_doctor_from_an_empty_path_is_refused_not_read_as_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = sorted(SMI_CAPTURES.iterdir())[0]
    (tmp_path / capture.name).write_bytes(capture.read_bytes())
    monkeypatch.chdir(tmp_path)  # before: "" read as ".", this capture judged, exit 0
    outcome = run_in_process(["doctor", "--from", "", "--json"])
    assert problem(outcome) is None, problem(outcome)
    assert outcome.code == 2
    assert "names no file or directory" in json.loads(outcome.err)["message"]


GPUWARDEN = (sys.executable, "-m", "gpuwarden")


def _without_permission_override() -> list[str]:
    """The prefix that runs a child without root's permission override (as root, chmod 000
    stops nothing); none for another user."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root without setpriv: permissions cannot be tested")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all"]


def _doctor_with_a_folder_locked(captures: Path, locked: Path) -> subprocess.CompletedProcess[str]:
    """`doctor --from captures --json` in a child that cannot list ``locked`` (chmod 000, without
    root's permission override); ``locked`` is opened again after."""
    locked.chmod(0)
    try:
        return subprocess.run(
            [
                *_without_permission_override(),
                *GPUWARDEN,
                "doctor",
                "--from",
                str(captures),
                "--json",
            ],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
            check=False,
        )
    finally:
        locked.chmod(0o755)


def test_doctor_from_a_directory_it_cannot_list_is_refused_not_judged_empty(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "captures"
    folder.mkdir()
    capture = sorted(SMI_CAPTURES.iterdir())[0]
    (folder / capture.name).write_bytes(capture.read_bytes())
    proc = _doctor_with_a_folder_locked(folder, folder)
    # before: exit 0, "UNKNOWN · 0 GPU(s)", as if the folder were empty
    assert proc.returncode == 2, proc.stdout[:300]
    error = json.loads(proc.stderr)
    assert error["reference"] == "capture-unreadable"
    assert "Permission denied" in error["message"]


def test_doctor_from_an_empty_directory_is_refused_not_judged(tmp_path: Path) -> None:
    outcome = run_in_process(["doctor", "--from", str(tmp_path), "--json"])
    assert problem(outcome) is None, problem(outcome)
    # before: exit 0, "UNKNOWN · 0 GPU(s) · 9 check(s) could not run"
    assert outcome.code == 2 and outcome.out == ""
    assert json.loads(outcome.err)["reference"] == "capture-not-found"


# --- record --pid past what a pid_t holds -------------------------------------------------------


@pytest.mark.parametrize("pid", [str(2**31), str(2**63), "99999999999999999999"])
def test_record_a_pid_no_process_can_have(pid: str, tmp_path: Path) -> None:
    outcome = run_in_process(
        ["record", "--backend", "sim", "--pid", pid, "--db", str(tmp_path / "r.db"), "--json"]
    )
    assert problem(outcome) is None, problem(outcome)
    assert outcome.code == 2
    assert json.loads(outcome.err)["reference"] == "pid-not-found"


@pytest.mark.parametrize("interval", ["1e10", "1e300", "3600.5"])
def test_record_an_interval_no_sleep_can_wait_is_refused(interval: str, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    job = ("--", sys.executable, "-c", "pass")
    outcome = run_in_process(
        ["record", "--backend", "sim", "--interval", interval, "--db", str(db), "--json", *job]
    )
    # before: OverflowError (timestamp out of range for platform time_t), exit 70
    assert problem(outcome) is None, problem(outcome)
    assert outcome.code == 2
    assert "at most 3600 s" in json.loads(outcome.err)["message"]


# --- a locale whose encoding is not UTF-8 -------------------------------------------------------

ASCII_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def _run(argv: list[str], extra_env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in child_env().items() if k not in ("PYTHONIOENCODING", "LANG")}
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", *argv],
        capture_output=True,
        env={**env, **extra_env},
        timeout=120,
        check=False,
    )


VERBS_THAT_PRINT_BEYOND_ASCII = (
    ["snapshot", "--backend", "sim"],
    ["plan", "Llama-2-7b-hf", "--gpu", "T4"],
    ["catalog", "gpus"],
    ["explain", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"],
    ["trace", "analyze", str(TRACE)],
)


DETERMINISTIC = ("plan", "catalog", "explain")  # no clock, no random reading in the document


@pytest.mark.parametrize("argv", VERBS_THAT_PRINT_BEYOND_ASCII, ids=lambda a: a[0])
def test_an_ascii_locale_gets_the_report_not_a_crash(argv: list[str]) -> None:
    text = _run(argv, ASCII_LOCALE)
    assert text.returncode == 0, text.stderr.decode(errors="replace")[-400:]
    assert b"internal-error" not in text.stderr
    as_json = _run([*argv, "--json"], ASCII_LOCALE)
    assert as_json.returncode == 0, as_json.stderr.decode(errors="replace")[-400:]
    ascii_document = json.loads(as_json.stdout.decode("ascii"))
    if argv[0] in DETERMINISTIC:
        # the same document: what the locale cannot spell is a JSON escape of the same character
        in_utf8 = _run([*argv, "--json"], {"LC_ALL": "C.UTF-8"})
        assert ascii_document == json.loads(in_utf8.stdout.decode("utf-8"))


# --- trace analyze --html: never renamed over a device, a pipe or the trace read ----------------


def test_html_into_a_device_writes_into_it_and_says_when_it_is_full(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.symlink_to("/dev/full")  # a link: the code before renamed over the link, not /dev/full
    outcome = run_in_process(["trace", "analyze", str(TRACE), "--html", str(page), "--json"])
    assert problem(outcome) is None, problem(outcome)
    assert outcome.code == 2
    assert "No space left on device" in outcome.err
    assert page.is_symlink() and os.readlink(page) == "/dev/full"


def test_html_into_a_fifo_reaches_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "page.html"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    outcome = run_in_process(["trace", "analyze", str(TRACE), "--html", str(fifo)])
    reader.join(timeout=60)
    assert outcome.code == 0, outcome.err
    assert received and received[0].startswith(b"<!DOCTYPE html>")
    assert fifo.is_fifo()


@pytest.mark.parametrize("as_directory", [False, True])
def test_html_naming_the_trace_read_is_refused_and_the_trace_kept(
    tmp_path: Path, as_directory: bool
) -> None:
    trace = tmp_path / "rank0.pt.trace.json"
    trace.write_bytes(TRACE.read_bytes())
    given = str(tmp_path if as_directory else trace)
    outcome = run_in_process(["trace", "analyze", given, "--html", str(trace), "--json"])
    assert problem(outcome) is None, problem(outcome)
    assert outcome.code == 2
    assert json.loads(outcome.err)["reference"] == "trace-html-path"
    assert trace.read_bytes() == TRACE.read_bytes()


def test_a_folder_inside_the_bundle_that_cannot_be_listed_is_said_skipped(
    tmp_path: Path,
) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "logs").mkdir(parents=True)
    capture = sorted(SMI_CAPTURES.iterdir())[0]
    (bundle / capture.name).write_bytes(capture.read_bytes())
    proc = _doctor_with_a_folder_locked(bundle, bundle / "logs")
    document = json.loads(proc.stdout)
    (skipped,) = [s for s in document["skipped"] if s["path"].endswith("logs")]
    assert skipped["reason"] == "folder not readable (Permission denied)"


def test_an_ascii_locale_reads_our_symbols_in_ascii_and_keeps_the_columns() -> None:
    """A table under LC_ALL=C printed "temp \\u00b0C" and "\\u00b7" literally; our own symbols
    are now ASCII ("·" a dash, "°" a blank, so the columns stay aligned), anything else escaped."""
    text = _run(["snapshot", "--backend", "sim", "--gpus", "2"], ASCII_LOCALE)
    assert text.returncode == 0
    out = text.stdout.decode("ascii")
    assert "\\u00b7" not in out and "\\u00b0" not in out and " - backend sim - " in out
    gpus = out.split("processes")[0]  # the GPU table, above the process table
    rows = [line for line in gpus.splitlines() if line.startswith("|")]
    assert rows and len({len(line) for line in rows}) == 1  # every row as wide as the header
