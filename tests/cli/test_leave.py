"""The process's exit (cli.main.leave): it skips the interpreter's teardown, so what teardown
would have done must still happen — buffered output written, atexit handlers run, a running
thread waited for — and the exit code must be the command's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SMALL_TRACE = (
    SHARED
    / "fixtures/traces/critical_path/simple_add"
    / "benchmark_result_493459_1694039959_trace.json.gz"
)


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )


def test_buffered_output_is_written_and_the_code_kept() -> None:
    done = _python(
        "import sys\nfrom gpuwarden.cli.main import leave\n"
        "sys.stdout.write('x' * 200_000); sys.stderr.write('e' * 5_000); leave(3)"
    )
    assert done.returncode == 3
    assert done.stdout == "x" * 200_000
    assert done.stderr == "e" * 5_000


def test_atexit_handlers_run(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    done = _python(
        "import atexit\nfrom gpuwarden.cli.main import leave\n"
        f"atexit.register(lambda: open({str(mark)!r}, 'w').write('ran'))\nleave(0)"
    )
    assert done.returncode == 0, done.stderr
    assert mark.read_text() == "ran"


def test_a_running_thread_is_waited_for_before_the_handlers_run(tmp_path: Path) -> None:
    """A handler (coverage's, a finalizer) sees what the thread did, as at the usual exit."""
    mark = tmp_path / "thread"
    done = _python(
        "import atexit, os, threading, time\nfrom gpuwarden.cli.main import leave\n"
        "def work():\n    time.sleep(0.3)\n"
        f"    open({str(mark)!r}, 'w').write('done')\n"
        f"atexit.register(lambda: print('thread done:', os.path.exists({str(mark)!r})))\n"
        "threading.Thread(target=work).start()\nleave(4)"
    )
    assert done.returncode == 4, done.stderr
    assert mark.read_text() == "done"
    assert done.stdout == "thread done: True\n"


def test_python_dash_m_gives_the_whole_document_and_its_code() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuwarden", "trace", "analyze", str(SMALL_TRACE), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("}")
    assert '"schema": "gpuwarden.trace/' in done.stdout
    refused = subprocess.run(
        [sys.executable, "-m", "gpuwarden", "plan", "no-such-model", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert refused.returncode == 2
    assert '"reference": "unknown-model"' in refused.stdout + refused.stderr


def test_what_an_atexit_handler_prints_is_written() -> None:
    """The interpreter runs the handlers before it flushes the streams: so does leave."""
    done = _python(
        "import atexit\nfrom gpuwarden.cli.main import leave\n"
        "atexit.register(lambda: print('from a handler'))\nprint('before')\nleave(5)"
    )
    assert done.returncode == 5, done.stderr
    assert done.stdout == "before\nfrom a handler\n"


def test_a_reader_that_went_away_keeps_the_commands_code() -> None:
    """stdout's reader closed the pipe before the last (buffered) write reached it: the command's
    own code, and no "Exception ignored ... BrokenPipeError" (the interpreter's exit gave 120)."""
    done = _python(
        "import os, sys\nfrom gpuwarden.cli.main import leave\n"
        "read_end, write_end = os.pipe()\nos.close(read_end)\nos.dup2(write_end, 1)\n"
        "sys.stdout.write('{}')\nleave(3)"
    )
    assert done.returncode == 3
    assert done.stderr == ""


def test_output_that_could_not_be_written_is_not_a_success() -> None:
    """A full disk (/dev/full) is no reader that went away: the interpreter's exit reports it."""
    done = _python(
        "import os, sys\nfrom gpuwarden.cli.main import leave\n"
        "full = os.open('/dev/full', os.O_WRONLY)\nos.dup2(full, 1)\n"
        "sys.stdout.write('{}')\nleave(0)"
    )
    assert done.returncode == 120
    assert "No space left on device" in done.stderr


def test_an_error_report_whose_reader_went_away_keeps_the_errors_code() -> None:
    """`gpuwarden ... 2>&1 | head` with the reader gone before the report: the error's exit code
    (2 here), not a BrokenPipeError traceback nobody reads and the interpreter's 1 or 120."""
    done = _python(
        "import os, sys\nfrom gpuwarden.cli.main import console\n"
        "read_end, write_end = os.pipe()\nos.close(read_end)\nos.dup2(write_end, 2)\n"
        "sys.argv = ['gpuwarden', 'plan', 'no-such-model', '--json']\nconsole()"
    )
    assert done.returncode == 2
