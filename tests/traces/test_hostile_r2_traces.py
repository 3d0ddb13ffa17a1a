"""Traces a hostile user hands `trace analyze`.

A gzip of blanks as a trace: 100 MiB of spaces packs into about 100 KB. Before, the streamed
decoders searched the whole growing header for "traceEvents" at every 64 KB chunk (quadratic:
25 s per 100 MiB, for each of the two decoders) and then the whole-file reader inflated all of
it (an 800 MiB one: 49 s and 1.7 GB of RSS) to say "invalid or truncated JSON". Now the search
resumes where it stopped and blanks with no JSON after 64 MiB are refused: one pass, memory
bounded by that limit, and a reason that says what the file holds.

A folder of files none of which is a trace: the error listed every file's reason (20,000 files:
a message of 1.2 MB); now the first few and how many more.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.checkout import child_env
from tests.cli.test_fuzz_verbs import problem, run_in_process

BLANKS = 100 << 20
RSS_LIMIT_MB = 400  # three 64 MiB windows at most, plus the interpreter and numpy
TIME_LIMIT_S = 12.0  # of CPU: about 1 s here; the quadratic search took 50 s


def test_a_gzip_of_blanks_is_refused_in_one_pass_and_bounded_memory(tmp_path: Path) -> None:
    bomb = tmp_path / "rank0.pt.trace.json.gz"
    bomb.write_bytes(gzip.compress(b" " * BLANKS, compresslevel=9))
    assert bomb.stat().st_size < BLANKS // 500
    measure = textwrap.dedent(
        f"""
        import json, resource, subprocess, sys
        run = subprocess.run(
            [sys.executable, "-m", "gpuwarden", "trace", "analyze", {str(bomb)!r}, "--json"],
            capture_output=True, text=True,
        )
        print(json.dumps({{
            "code": run.returncode, "err": run.stderr, "out": run.stdout,
            # the child's own CPU, not the wall: a loaded runner's other work does not count
            "cpu_s": sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2]),
            "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }}))
        """
    )
    child = subprocess.run(
        [sys.executable, "-c", measure],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
        check=True,
    )
    result = json.loads(child.stdout)
    assert result["code"] == 2, result["err"]
    assert result["out"] == ""
    error = json.loads(result["err"])
    assert error["reference"] == "trace-not-kineto"
    assert "only blanks" in error["message"]
    assert result["rss_mb"] < RSS_LIMIT_MB, result
    assert result["cpu_s"] < TIME_LIMIT_S, result


def test_a_folder_of_no_traces_names_a_few_and_counts_the_rest(tmp_path: Path) -> None:
    for k in range(300):
        (tmp_path / f"rank{k}.json").write_text("{}")
    outcome = run_in_process(["trace", "analyze", str(tmp_path), "--json"])
    assert problem(outcome) is None, problem(outcome)
    error = json.loads(outcome.err)
    assert error["reference"] == "trace-unreadable"
    assert error["message"].endswith("; and 295 more of 300 files")
    assert error["message"].count("no `traceEvents` array") == 5
