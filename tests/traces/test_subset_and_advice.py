"""What a trace of part of a job says about itself, what `trace diff` compares against a median
step, and advice worded for the GPU the trace ran on (a V100 has no bf16 or TF32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.traces.analyze import analyze
from gpuwarden.traces.diff import diff_traces
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.precision_advice import cheaper_precision


@pytest.fixture(scope="module")
def astra(fixtures: Path) -> Path:
    return fixtures / "traces" / "astra_megatron_tp8_a100"


def test_one_rank_of_eight_says_what_it_cannot_judge(astra: Path) -> None:
    """One rank alone of an 8-rank job read "communication-bound" with no word that its
    collectives wait for the seven others."""
    report = analyze(load_traces([astra / "megatron_kineto_6.json.gz"]))
    [line] = [w for w in report.warnings if "ranks loaded" in w]
    assert line.startswith("1 of 8 ranks loaded (rank 6)")
    assert "waiting for the other ranks" in line and "stragglers are not judged" in line


def test_a_diff_of_different_rank_sets_of_one_job_says_so(astra: Path, tmp_path: Path) -> None:
    two = [astra / "megatron_kineto_0.json.gz", astra / "megatron_kineto_1.json.gz"]
    diff = diff_traces(load_traces(two), load_traces([astra]))
    assert [w for w in diff.warnings if w.startswith("different ranks loaded")] == [
        "different ranks loaded: before is 2 of 8 ranks, after is 8 of 8 ranks: the averages "
        "are over different ranks, and a straggler on one side moves them"
    ]
    same = diff_traces(load_traces([astra]), load_traces([astra]))
    assert same.warnings == ()


def test_diff_busy_is_the_median_steps_inside_its_window(fixtures: Path) -> None:
    """It was the trace's whole GPU-busy time over its steps (work outside every step counted):
    119.66 ms of GPU busy beside a 114.69 ms median step."""
    root = fixtures / "traces" / "trace_diff"
    diff = diff_traces(load_traces([root / "control"]), load_traces([root / "test"]))
    assert diff.per_step
    assert diff.before_step_us is not None and diff.after_step_us is not None
    assert 0 < diff.before_busy_us <= diff.before_step_us
    assert 0 < diff.after_busy_us <= diff.after_step_us
    assert round(diff.before_busy_us / 1000, 2) == 65.82
    assert round(diff.after_busy_us / 1000, 2) == 110.78


@pytest.mark.parametrize(
    ("capability", "says", "never"),
    [
        ((7, 0), "train in fp16 (torch.autocast(dtype=torch.float16) with a GradScaler)", "bf16/"),
        ((7, 5), "compute capability 7.5 has fp16 tensor cores but no bf16 or TF32", "bf16/"),
        ((8, 0), "train in bf16/fp16 (torch.autocast) or allow TF32", "Ampere"),
        ((9, 0), "or allow TF32 (torch.set_float32_matmul_precision('high'))", "fp16 tensor"),
        ((6, 0), "compute capability 6.0 has no tensor cores", "autocast"),
        (None, "on NVIDIA Ampere and newer, allow TF32", "compute capability"),
    ],
)
def test_advice_for_the_gpu(capability: tuple[int, int] | None, says: str, never: str) -> None:
    advice = cheaper_precision(capability)
    assert says in advice and never not in advice
