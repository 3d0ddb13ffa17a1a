"""Issue 13, a hostile user's fourth pass: one rank of a job whose distributedInfo lies.

`trace analyze` said "1 of 1000000000000 ranks loaded" and "1 of 2 ranks loaded (rank 5)", and
`trace diff` "before is rank 0 of -1", as facts. torch.distributed holds the world size and the
ranks as C ints, and a rank is below the world size: a world size past 2**31 - 1, or not above
the rank that states it (0 and negatives included), states nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_fuzz_verbs import problem, run_in_process
from tests.conftest import FIXTURES

SEED = FIXTURES / "traces" / "call_stack" / "backward_thread.json"


def _rank_trace(folder: Path, name: str, distributed: object) -> Path:
    document = json.loads(SEED.read_text())
    document["distributedInfo"] = distributed
    path = folder / f"{name}.json"
    path.write_text(json.dumps(document))
    return path


def _warnings(*argv: str) -> list[str]:
    outcome = run_in_process([*argv, "--json"])
    assert problem(outcome) is None
    assert outcome.code == 0, outcome.err
    warnings: list[str] = json.loads(outcome.out)["warnings"]
    return warnings


LIES = {
    "zero": {"rank": 0, "world_size": 0},
    "negative": {"rank": 0, "world_size": -1},
    "past-int32": {"rank": 0, "world_size": 10**12},
    "past-int64": {"rank": 0, "world_size": 2**70},
    "not-above-its-rank": {"rank": 5, "world_size": 2},
    "its-own-rank": {"rank": 2, "world_size": 2},
    "a-string": {"rank": 0, "world_size": "8"},
    "a-float": {"rank": 0, "world_size": 1e12},
}


@pytest.mark.parametrize("distributed", LIES.values(), ids=LIES.keys())
def test_a_world_size_no_job_has_says_nothing_of_the_ranks_left_out(
    tmp_path: Path, distributed: dict[str, object]
) -> None:
    trace = _rank_trace(tmp_path, "rank", distributed)
    warnings = _warnings("trace", "analyze", str(trace))
    assert not [w for w in warnings if "ranks loaded" in w], warnings


def test_a_true_world_size_still_says_one_rank_of_it(tmp_path: Path) -> None:
    trace = _rank_trace(tmp_path, "rank", {"rank": 3, "world_size": 8})
    warnings = _warnings("trace", "analyze", str(trace))
    assert [w for w in warnings if w.startswith("1 of 8 ranks loaded (rank 3)")], warnings


@pytest.mark.parametrize(
    "lie", [LIES["negative"], LIES["past-int32"], LIES["not-above-its-rank"]], ids=str
)
def test_diff_names_no_job_size_a_trace_does_not_state(
    tmp_path: Path, lie: dict[str, object]
) -> None:
    before = _rank_trace(tmp_path, "before", lie)
    after = _rank_trace(tmp_path, "after", {"rank": 3, "world_size": 8})
    warnings = _warnings("trace", "diff", str(before), str(after))
    assert not [w for w in warnings if "job sizes" in w], warnings


def test_diff_still_names_two_stated_job_sizes(tmp_path: Path) -> None:
    before = _rank_trace(tmp_path, "before", {"rank": 0, "world_size": 1})
    after = _rank_trace(tmp_path, "after", {"rank": 3, "world_size": 8})
    warnings = _warnings("trace", "diff", str(before), str(after))
    assert any(
        w.startswith("different job sizes: before is rank 0 of 1, after is rank 3 of 8")
        for w in warnings
    ), warnings
