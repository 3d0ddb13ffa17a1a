"""Issue 13, a hostile user's third pass over plan, explain, catalog and trace: what they type.

- An empty argument (a shell variable that was never set: `plan "$MODEL"`, `trace analyze
  "$TRACE_DIR"`) was read as the path "." and the verbs answered for whatever the working
  directory held: `plan ""` planned ./config.json, `trace analyze ""` analysed ./*.json (exit 0),
  `trace diff "" ""` compared the directory with itself; `catalog gpus --gpu ""` listed the
  whole catalog as if it were the answer; `explain --plan ""` dropped the plan without a word and
  `explain --file ""` said ": no such file". Each is now refused, naming the argument.
- `plan --cp 2 --attention eager` was planned: no framework splits eager attention across
  context-parallel ranks (torch's context_parallel swaps SDPA for ring attention and
  transformers' Trainer refuses any other attn_implementation; Megatron asserts Transformer
  Engine's DotProductAttention).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.cli.test_fuzz_verbs import problem, run_in_process
from tests.conftest import FIXTURES

CONFIG = FIXTURES / "models" / "Llama-2-7b-hf.json"
TRACE = FIXTURES / "traces" / "call_stack" / "backward_thread.json"


@pytest.fixture
def workdir_with_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding what "." would have found: a config.json and a rank trace."""
    shutil.copy(CONFIG, tmp_path / "config.json")
    shutil.copy(TRACE, tmp_path / "rank0.pt.trace.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


EMPTY_ARGUMENTS = {
    "plan": (["plan", ""], "argument MODEL: '' names no model"),
    "plan-blank": (["plan", "  ", "--gpu", "H100"], "argument MODEL: '  ' names no model"),
    "trace-analyze": (["trace", "analyze", ""], "argument PATH: '' names no file or directory"),
    "trace-diff": (
        ["trace", "diff", "rank0.pt.trace.json", ""],
        "argument B: '' names no file or directory",
    ),
    "catalog-gpus": (["catalog", "gpus", "--gpu", ""], "argument --gpu: '' names no GPU"),
    "catalog-instances": (["catalog", "instances", "--gpu", " "], "argument --gpu: ' ' names no"),
    "explain-file": (["explain", "--file", ""], "--file '' names no file"),
    "explain-plan": (
        ["explain", "--plan", "", "torch.OutOfMemoryError: CUDA out of memory."],
        "--plan: the following arguments are required: MODEL",
    ),
    "explain-plan-quoted-empty": (
        ["explain", "--plan", '"" --gpu H100', "torch.OutOfMemoryError: CUDA out of memory."],
        "--plan: argument MODEL: '' names no model",
    ),
}


@pytest.mark.parametrize("case", sorted(EMPTY_ARGUMENTS))
def test_an_empty_argument_is_refused_not_read_as_the_working_directory(
    workdir_with_inputs: Path, case: str
) -> None:
    argv, message = EMPTY_ARGUMENTS[case]
    outcome = run_in_process([*argv, "--json"])
    assert problem(outcome) is None, problem(outcome)
    # before: exit 0 with a plan of ./config.json, an analysis of ./rank0.pt.trace.json, the
    # whole GPU catalog, or an explanation without the plan asked for
    assert outcome.code == 2, outcome.out[:300]
    assert outcome.out == ""
    assert message in json.loads(outcome.err)["message"]


@pytest.mark.parametrize("attention", ["eager", None])
def test_context_parallel_with_eager_attention_is_refused(attention: str | None) -> None:
    model = "Llama-2-7b-hf"
    chosen = ["--attention", attention] if attention else []
    argv = ["plan", model, "--gpu", "H100", "--gpus", "2", "--cp", "2", *chosen, "--json"]
    outcome = run_in_process(argv)
    assert problem(outcome) is None, problem(outcome)
    if attention is None:  # the default attention is a fused one: planned as before
        assert outcome.code == 0, outcome.err
        return
    assert outcome.code == 2  # before: exit 0, a plan of a job no framework runs
    error = json.loads(outcome.err)
    assert error["reference"] == "cp-needs-fused-attention"
    assert error["message"] == "cp=2 with eager attention"
    assert "--attention sdpa or flash" in error["hint"]


@pytest.mark.parametrize("attention", ["sdpa", "flash"])
def test_context_parallel_with_fused_attention_still_plans(attention: str) -> None:
    argv = ["plan", "Llama-2-7b-hf", "--gpu", "H100", "--gpus", "2", "--cp", "2"]
    outcome = run_in_process([*argv, "--attention", attention, "--json"])
    assert outcome.code == 0, outcome.err
    assert json.loads(outcome.out)["request"]["cp"] == 2


def test_inference_with_cp_and_eager_attention_is_not_judged_here() -> None:
    argv = ["plan", "Llama-2-7b-hf", "--gpu", "H100", "--gpus", "2", "--cp", "2", "--mode"]
    outcome = run_in_process([*argv, "infer", "--attention", "eager", "--json"])
    assert outcome.code == 0, outcome.err


@pytest.mark.parametrize("blank", ["\n", " \n", "\t\n"])
def test_a_paste_of_blank_lines_is_explained_in_linear_time(blank: str) -> None:
    """The screen detectors' `^\\s*` ran on through every blank line below under MULTILINE: each
    of n blank lines rescanned the rest (20,000 of them: 29 s; the 8 MiB cap: never)."""
    from gpuwarden.doctor.explain import explain

    text = blank * 80_000
    started = time.perf_counter()
    explanation = explain(text)
    assert time.perf_counter() - started < 10.0
    assert explanation is not None


@pytest.mark.parametrize(
    "text",
    [
        "NCCL WARN " + "ibv_" * 160_000,  # `ibv_\w+ failed` retried its \w+ at every start
        "NCCL WARN " + "IBV_WC_" * 100_000,
        # kaolin's "<op> not built with CUDA" tried every split of a long identifier
        "x" + "_b" * 80_000 + " ; torch not built with CUDA ; Kaolin",
    ],
    ids=["ibv-names", "ibv-wc-names", "identifier-not-built-with-cuda"],
)
def test_repeats_of_a_signatures_own_words_are_explained_in_linear_time(text: str) -> None:
    """The InfiniBand signature's unbounded names backtracked over every start: 160 KB of
    'ibv_' took 25 s (the 8 MiB cap: hours); a verbs name is bounded now (64 characters)."""
    from gpuwarden.doctor.explain import explain

    started = time.perf_counter()
    assert explain(text) is not None
    assert time.perf_counter() - started < 10.0
