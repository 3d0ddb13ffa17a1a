"""Issue 13, a hostile user's third pass over `trace analyze|diff`: Kineto JSON that is valid but
names a step no profiler wrote.

torch.profiler names each step ``"ProfilerStep#" + str(step_num)``, a counter from 0. A trace
whose annotation carried a number past an int64 (``ProfilerStep#`` and 19 nines: "Python int too
large to convert to C long") or past Python's 4,300-digit int() limit ended both verbs in exit 70.
Such a name is now no step: the rank is read as one without ProfilerStep annotations.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from tests.cli.test_fuzz_verbs import problem, run_in_process
from tests.conftest import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "traces"
Completed = subprocess.CompletedProcess[str]
SEED = (
    FIXTURES / "critical_path" / "simple_add" / "benchmark_result_493459_1694039959_trace.json.gz"
)


def _with_step(tmp_path: Path, number: str) -> Path:
    trace = json.loads(gzip.decompress(SEED.read_bytes()))
    first = min(e["ts"] for e in trace["traceEvents"] if isinstance(e.get("ts"), int | float))
    step = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}"}
    trace["traceEvents"].append({**step, "pid": 1, "tid": 1, "ts": first, "dur": 1})
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps(trace))
    return path


@pytest.mark.parametrize("digits", [19, 20, 5_000])
def test_a_step_number_no_counter_reaches_is_no_step(tmp_path: Path, digits: int) -> None:
    trace = _with_step(tmp_path, "9" * digits)
    for argv in (["trace", "analyze", str(trace)], ["trace", "diff", str(SEED), str(trace)]):
        outcome = run_in_process([*argv, "--json"])
        assert problem(outcome) is None, problem(outcome)  # before: exit 70
        assert outcome.code == 0
        if argv[1] == "analyze":
            document = json.loads(outcome.out)
            assert document["ranks"]["0"]["steps"] == []
            assert "no ProfilerStep annotation" in outcome.err


def test_a_step_number_as_torch_writes_it_is_still_a_step(tmp_path: Path) -> None:
    trace = _with_step(tmp_path, "7")
    outcome = run_in_process(["trace", "analyze", str(trace), "--json"])
    assert outcome.code == 0, outcome.err
    assert [s["step"] for s in json.loads(outcome.out)["ranks"]["0"]["steps"]] == [7]


@pytest.mark.parametrize(
    ("suffix", "copies"),
    [(b"\0" * 4096, 1), (b"\0" * (3 << 20), 1), (b"\0" * 100 + b"\x1f\x8b", 2)],
    ids=["padded", "padded-megabytes", "padding-between-members"],
)
def test_zero_padding_after_a_gzip_member_is_read_as_gzip_reads_it(
    tmp_path: Path, suffix: bytes, copies: int
) -> None:
    """A tape or block device pads a .gz with zero bytes; gzip(1) and Python's gzip module skip
    them (between members too). trace refused the file: 'Invalid gzip/zlib wrapper found'."""
    from gpuwarden.traces.decode import json_chunks

    raw = SEED.read_bytes()
    body = raw + suffix[:-2] + raw if copies == 2 else raw + suffix
    path = tmp_path / "rank0.pt.trace.json.gz"
    path.write_bytes(body)
    whole = gzip.decompress(raw)
    assert b"".join(json_chunks(path)) == whole * copies
    if copies == 1:
        outcome = run_in_process(["trace", "analyze", str(path), "--json"])
        assert (outcome.code, problem(outcome)) == (0, None)


def _analyze(cwd: Path, *args: str, stdout: int | IO[str] = subprocess.PIPE) -> Completed:
    """`gpuwarden trace analyze SEED ARGS` as a shell runs it, standard output where told."""
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", "trace", "analyze", str(SEED), *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        cwd=cwd,
        check=False,
    )


@pytest.mark.parametrize("page", ["-", "/dev/stdout"])
def test_a_page_written_to_standard_output_is_refused(tmp_path: Path, page: str) -> None:
    """`--html /dev/stdout --json` interleaved the page with the JSON document (stdout was no
    JSON); `--html -` wrote a file named "-". Both are refused before the work, exit 2."""
    done = _analyze(tmp_path, "--json", "--html", page)
    assert done.returncode == 2 and done.stdout == ""
    assert json.loads(done.stderr)["reference"] == "trace-html-path"
    assert not (tmp_path / "-").exists()


def test_a_page_thrown_away_with_standard_output_is_not_refused(tmp_path: Path) -> None:
    """`--html /dev/null > /dev/null`: both go nowhere, nothing interleaves."""
    with open(os.devnull, "w") as null:
        done = _analyze(tmp_path, "--html", os.devnull, stdout=null)
    assert done.returncode == 0, done.stderr
