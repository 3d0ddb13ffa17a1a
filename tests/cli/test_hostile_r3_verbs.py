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
def test_a_paste_of_blank_lines_is_explained(blank: str) -> None:
    """80,000 blank lines are explained (as nothing); what keeps it quick is checked below."""
    from gpuwarden.doctor.explain import explain

    assert explain(blank * 80_000) is not None


@pytest.mark.parametrize("blank", ["\n", " \n", "\t\n"])
@pytest.mark.parametrize(
    ("detector", "line"),
    [
        ("_ANY_SCREEN", "Timestamp                                 : Mon Nov 28 11:00:00 2026"),
        ("_ANY_SCREEN", "# gpu   pwr  gtemp  mtemp"),
        ("_ANY_SCREEN", "index, name, temperature.gpu"),
        ("_CSV_HEADER", "index, name, temperature.gpu"),
    ],
)
def test_a_screen_detector_s_indent_stays_on_its_line(detector: str, line: str, blank: str) -> None:
    """The screen detectors' `^\\s*` ran on through every blank line below under MULTILINE: each
    of n blank lines rescanned the rest (20,000 of them: 29 s; the 8 MiB cap: never). Checked
    without a clock (a wall-clock bound fails under load): such an indent matched from the first
    blank line above a screen's line, and the match would start there, not at the line."""
    from gpuwarden.doctor import explain

    above = blank * 200
    found = getattr(explain, detector).search(above + "  " + line + "\n")
    assert found is not None and found.start() == len(above)


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
def test_repeats_of_a_signatures_own_words_are_explained(text: str) -> None:
    """What keeps these quick is checked below, without a clock."""
    from gpuwarden.doctor.explain import explain

    assert explain(text) is not None


@pytest.mark.parametrize(
    ("repeated", "whole", "name_chars"),
    [
        ("ibv_", "ibv_post_send failed", 64),
        ("IBV_WC_", "IBV_WC_RETRY_EXC_ERR", 40),
    ],
)
def test_a_verbs_name_in_a_match_is_bounded(repeated: str, whole: str, name_chars: int) -> None:
    """The InfiniBand signature's unbounded names backtracked over every start: 160 KB of
    'ibv_' took 25 s (the 8 MiB cap: hours); a verbs name is bounded now (64 characters, a work
    completion's 40). Checked without a clock (a wall-clock bound fails under load): a search
    from each start reads at most that many characters of a name, so in a run of the name's
    prefix the match holds the name's last characters only; an unbounded name ran on through
    the whole run, and the match would start at its first copy."""
    from gpuwarden.health.explain.match import _compiled
    from gpuwarden.health.explain.signatures import SIGNATURES

    (signature,) = (s for s in SIGNATURES if ("nccl-ib-transport", 0.9) in s.votes)
    found = _compiled(signature.pattern).search("NCCL WARN " + repeated * 1_000 + whole)
    assert found is not None and found[0].endswith(whole)
    assert len(found[0]) <= len(repeated) + name_chars + len(whole)


def test_an_identifier_before_not_built_with_cuda_is_read_one_way() -> None:
    """kaolin's "<op> not built with CUDA" tried every split of a long identifier (\\w*_\\w+:
    quadratic in its length); its parts are possessive now, read one way. Checked without a
    clock: the split form also read an identifier ending in "_" (its \\w+ took the "_" back),
    the possessive one does not, while a whole identifier is still read."""
    from gpuwarden.health.explain.build_toolkit import _BUILT_WITHOUT_CUDA

    whole = "rasterize_forward_cuda not built with CUDA"
    found = _BUILT_WITHOUT_CUDA.search("x" + "_b" * 1_000 + " ; " + whole)
    assert found is not None and found[0] == whole
    assert _BUILT_WITHOUT_CUDA.search("rasterize_forward_ not built with CUDA") is None
