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
from pathlib import Path

import pytest

from tests.cli.test_fuzz_verbs import problem, run_in_process
from tests.conftest import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "traces"
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
