"""What vLLM keeps outside its budget must fit in the GPU beside it (planner/plan.py ``_judge``,
planner/verdict.py ``judge_beside_budget``).

vLLM sizes its pool so that weights, profile peak, counted non-torch memory and KV fill
``gpu_memory_utilization × total``; the CUDA context its baseline snapshot already holds
(vllm_profile.py: V0 from 0.6.5, V1 from 0.9.2) and the CUDA graphs captured after the pool
(before 0.21, vllm_graphs.py) come on top. Real input: vllm#17469 / #17327 (V230 in
benchmarks/data/validation.csv): Qwen3-30B-A3B, vLLM 0.8.5, TP 4 on A10s, default utilization 0.9,
max-num-seqs 1: "Gives OOM ... Works with enforce-eager."
"""

from __future__ import annotations

import argparse

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.cli.commands.plan import build_request, register
from gpuwarden.planner import plan_memory
from gpuwarden.planner.fixes import fixes_for
from gpuwarden.planner.overheads import cuda_context
from gpuwarden.planner.verdict import (
    MARGIN_SHARE,
    highest_utilization,
    judge_beside_budget,
)
from gpuwarden.report.plan import verdict
from gpuwarden.types.plan import Engine, InferenceCapacity, MemoryPlan, Mode, PlanRequest, Verdict
from gpuwarden.units import GIB


def _request(*args: str) -> PlanRequest:
    parser = argparse.ArgumentParser()
    register(parser)
    return build_request(parser.parse_args(list(args)))


def _qwen3_8b(version: str, utilization: str, *extra: str) -> PlanRequest:
    return _request(
        "Qwen3-8B", "--mode", "infer", "--engine", "vllm", "--gpu", "rtx-5090-32gb",
        "--vllm-version", version, "--gpu-memory-utilization", utilization, *extra,
    )  # fmt: skip


def _capacity(plan: MemoryPlan) -> InferenceCapacity:
    assert plan.inference is not None
    return plan.inference


def test_high_utilization_leaves_no_room_for_the_context_and_graphs() -> None:
    """The brief's example: 0.98 on an RTX 5090 with 0.10.0 used to read FITS while the plan's
    own total per GPU exceeded the usable memory."""
    plan = plan_memory(_qwen3_8b("0.10.0", "0.98"))
    cap, gpu = _capacity(plan), resolve_gpu("rtx-5090-32gb")
    assert plan.predicted.nvidia_smi_used_bytes > gpu.usable_bytes  # the total said so already
    assert plan.verdict is Verdict.DOES_NOT_FIT and plan.beside_budget
    # 0.10.0's baseline is taken after the bare context; the graphs are captured after the pool
    assert cap.outside_context_bytes == cuda_context(gpu).bare_bytes
    assert cap.outside_graph_bytes == plan.component("cuda_graphs") > 0
    assert cap.budget_bytes == int(0.98 * gpu.usable_bytes)
    assert plan.usable_bytes == gpu.usable_bytes
    assert plan.headroom_bytes == gpu.usable_bytes - cap.budget_bytes - cap.outside_budget_bytes
    assert plan.margin_bytes == int(MARGIN_SHARE * cap.outside_budget_bytes)
    highest = highest_utilization(gpu.usable_bytes, cap.outside_budget_bytes)
    sentence = verdict(plan)
    assert sentence.startswith("DOES NOT FIT: vLLM budget 0.98 × 31.37 GiB = 30.74 GiB leaves")
    assert "the CUDA context" in sentence and "the CUDA graphs" in sentence
    assert sentence.endswith(f"lower --gpu-memory-utilization to ≤ {highest:g} or --enforce-eager")
    # the utilization named is the highest that fits: one hundredth more does not
    assert plan_memory(_qwen3_8b("0.10.0", f"{highest:g}")).verdict is Verdict.FITS
    above = plan_memory(_qwen3_8b("0.10.0", f"{highest + 0.01:.2f}"))
    assert above.verdict is not Verdict.FITS and above.beside_budget


def test_tight_when_the_bytes_outside_are_within_their_margin() -> None:
    """A utilization whose budget leaves the bytes outside it, and half their margin."""
    gpu = resolve_gpu("rtx-5090-32gb")
    outside = _capacity(plan_memory(_qwen3_8b("0.10.0", "0.9"))).outside_budget_bytes
    leave = outside + MARGIN_SHARE * outside / 2
    utilization = f"{(gpu.usable_bytes - leave) / gpu.usable_bytes:.5f}"
    plan = plan_memory(_qwen3_8b("0.10.0", utilization))
    assert _capacity(plan).outside_budget_bytes == outside  # neither part follows the budget
    assert plan.verdict is Verdict.TIGHT and plan.beside_budget
    assert plan.headroom_bytes is not None and plan.margin_bytes is not None
    assert 0 <= plan.headroom_bytes < plan.margin_bytes
    assert "less than the margin" in verdict(plan)


def test_default_utilization_keeps_fits() -> None:
    plan = plan_memory(_qwen3_8b("0.10.0", "0.9"))
    cap = _capacity(plan)
    assert plan.verdict is Verdict.FITS and not plan.beside_budget
    assert cap.budget_bytes is not None and plan.usable_bytes == cap.budget_bytes
    assert cap.outside_budget_bytes > 0
    assert "leaves" not in verdict(plan) and verdict(plan).startswith("FITS: vLLM budget 0.9 ×")


def test_what_lies_outside_follows_the_release() -> None:
    gpu = resolve_gpu("rtx-5090-32gb")
    # V1 before 0.9.2 counts the whole context as non-torch memory: inside the budget
    assert _capacity(plan_memory(_qwen3_8b("0.9.1", "0.9"))).outside_context_bytes == 0
    assert _capacity(plan_memory(_qwen3_8b("0.9.2", "0.9"))).outside_context_bytes == (
        cuda_context(gpu).bare_bytes
    )
    # from 0.21 the budget holds the graphs: at 0.98 only the context is outside, and it fits
    profiled = plan_memory(_qwen3_8b("0.21.0", "0.98"))
    cap = _capacity(profiled)
    assert cap.outside_graph_bytes == 0 and cap.budgeted_graph_bytes > 0
    assert not profiled.beside_budget and profiled.verdict is Verdict.FITS
    # eager on 0.10.0: the graphs go, the context alone fits beside the 0.98 budget
    eager = plan_memory(_qwen3_8b("0.10.0", "0.98", "--enforce-eager"))
    assert _capacity(eager).outside_graph_bytes == 0 and eager.verdict is Verdict.FITS


def test_fixes_lower_the_utilization_or_drop_the_graphs() -> None:
    plan = plan_memory(_qwen3_8b("0.10.0", "0.98"))
    cap, gpu = _capacity(plan), resolve_gpu("rtx-5090-32gb")
    fixes = {f.key: f for f in fixes_for(plan)}
    lower = fixes["lower-gpu-memory-utilization"]
    highest = highest_utilization(gpu.usable_bytes, cap.outside_budget_bytes)
    assert lower.changes == {"gpu_memory_utilization": f"{highest:g}"}
    assert lower.fits and lower.saved_bytes == cap.budget_bytes - int(highest * gpu.usable_bytes)
    eager = fixes["enforce-eager"]
    assert eager.fits and eager.saved_bytes == cap.outside_graph_bytes
    # a smaller KV dtype shrinks what is inside the budget, not what is beside it
    assert "fp8-kv-cache" not in fixes
    # a plan that fits beside its budget is offered no lower utilization
    assert all(
        f.key != "lower-gpu-memory-utilization"
        for f in fixes_for(plan_memory(_qwen3_8b("0.10.0", "0.9")))
    )


def test_vllm_17469_oom_at_graph_capture_that_eager_avoids() -> None:
    """V230: TP 4 on A10s (no P2P: NCCL's all-reduce is captured in 67 piecewise sizes); the
    default utilization leaves 10 % of the card, about what the graphs take: the run that ran
    out of memory must not read FITS."""
    args = (
        "Qwen3-30B-A3B", "--mode", "infer", "--precision", "bf16", "--tp", "4", "--gpus", "4",
        "--gpu", "A10", "--gpu-memory-utilization", "0.9", "--max-model-len", "1024",
        "--max-num-seqs", "1", "--vllm-version", "0.8.5",
    )  # fmt: skip
    plan = plan_memory(_request(*args))
    assert plan.verdict is not Verdict.FITS and plan.beside_budget
    # 0.8.5 (V1 before 0.9.2) counts the context inside: only the graphs are outside
    assert _capacity(plan).outside_context_bytes == 0
    assert _capacity(plan).outside_graph_bytes == plan.component("cuda_graphs")
    assert plan_memory(_request(*args, "--enforce-eager")).verdict is Verdict.FITS


def test_other_engines_are_not_judged_beside_a_budget() -> None:
    """Look-alikes: SGLang's static share (also a fraction of the GPU) and HF generate."""
    model, gpu = resolve_model("Qwen3-8B"), resolve_gpu("rtx-5090-32gb")
    sglang = plan_memory(
        PlanRequest(
            model=model, mode=Mode.INFER, engine=Engine.SGLANG, gpu=gpu,
            mem_fraction_static=0.98,
        )
    )  # fmt: skip
    hf = plan_memory(PlanRequest(model=model, mode=Mode.INFER, engine=Engine.HF, gpu=gpu))
    for plan in (sglang, hf):
        cap = _capacity(plan)
        assert not plan.beside_budget and cap.budget_bytes is None
        assert cap.outside_budget_bytes == 0
        assert "outside it" not in verdict(plan)


def test_beside_budget_verdicts() -> None:
    usable = 24 * GIB
    outside = GIB
    margin = int(MARGIN_SHARE * outside)
    fits = judge_beside_budget(usable - outside - margin, outside, usable)
    assert fits.verdict is Verdict.FITS and fits.headroom_bytes == margin
    tight = judge_beside_budget(usable - outside - margin + 1, outside, usable)
    assert tight.verdict is Verdict.TIGHT and tight.beside_budget
    short = judge_beside_budget(usable - outside + 1, outside, usable)
    assert short.verdict is Verdict.DOES_NOT_FIT and short.headroom_bytes == -1
    # nothing outside: the budget may take the whole card
    assert judge_beside_budget(usable, 0, usable).verdict is Verdict.FITS


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 200 * GIB), st.integers(0, 400 * GIB))
def test_highest_utilization_is_the_last_hundredth_that_fits(usable: int, outside: int) -> None:
    highest = highest_utilization(usable, outside)
    assert 0 <= highest <= 1
    if highest > 0:
        fits = judge_beside_budget(int(highest * usable), outside, usable)
        assert fits.verdict is Verdict.FITS
    # one hundredth more would leave less than the bytes outside and their margin (exact
    # integer arithmetic: hundredths × usable against 100 × the room)
    hundredths = round(100 * highest)
    room = usable - outside - int(MARGIN_SHARE * outside)
    assert hundredths * usable <= 100 * max(room, 0)
    if highest < 1:
        assert (hundredths + 1) * usable > 100 * room
