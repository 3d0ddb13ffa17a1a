"""A job whose peak is its first step holds nothing from a previous step at that peak.

lit-gpt's 2023 ``finetune/lora.py`` (read @064fd52) forces its longest training sample into the
first micro-batch only, ``get_batch(..., longest_seq_ix if iter_num == 0 else None)`` ("force the
longest sample at the beginning so potential OOMs happen right away"), and draws shorter ones
after: its peak is step one, whose forward has no previous ``logits`` and so no previous graph
(with the 4-bit Linear inputs bitsandbytes < 0.43.2 keeps on ``ctx``). A steady step holds both
through its forward. Expected bytes are derived by hand from ``shared/fixtures/models``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import (
    Framework,
    MemoryPlan,
    Mode,
    Optimizer,
    PeakStep,
    PlanRequest,
    Precision,
    QuantKernel,
)

BF16 = 2
FP32 = 4
BATCH, SEQ = 1, 1304  # lit-gpt's longest Alpaca sample under the Llama 2 tokenizer


def llama2(fixtures: Path) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((fixtures / "models" / "Llama-2-7b-hf.json").read_text())
    return cfg


def litgpt_qlora(**knobs: Any) -> PlanRequest:
    base: dict[str, Any] = {
        "model": resolve_model("Llama-2-7b-hf"),
        "mode": Mode.QLORA,
        "precision": Precision.NF4,
        "optimizer": Optimizer.ADAMW,
        "micro_batch": BATCH,
        "seq_len": SEQ,
        "grad_accum": 128,
        "lora_dropout": 0.05,
        "quant_kernel": QuantKernel.BNB_LEGACY,
        "framework": Framework.LITGPT,
    }
    return PlanRequest(**{**base, **knobs})


def phase(plan: MemoryPlan, name: str) -> dict[str, int]:
    return next(p.bytes_by_component for p in plan.phases if p.name == name)


def allocated(plan: MemoryPlan, name: str) -> dict[str, int]:
    return {k: v for k, v in phase(plan, name).items() if k != "allocator_cache"}


def test_the_first_step_is_the_steady_step_minus_the_previous_outputs(fixtures: Path) -> None:
    cfg = llama2(fixtures)
    h, i, layers, vocab = (
        cfg["hidden_size"],
        cfg["intermediate_size"],
        cfg["num_hidden_layers"],
        cfg["vocab_size"],
    )
    tokens = BATCH * SEQ
    # LitGPT's `logits` keeps the previous step's logit chunks, float32 copies of the bf16 head's
    # (Lightning Fabric's convert_output casts outputs to torch's default dtype) ...
    logits = tokens * vocab * FP32
    # ... and their graph: every 4-bit Linear's input (q/k/v share the attention-norm output, the
    # o_proj input, gate/up share the MLP-norm output, down_proj's input; layer 0's q/k/v input
    # comes from the frozen embedding, which keeps no graph)
    inputs = ((3 * h + i) * layers - h) * BF16 * tokens
    steady = plan_memory(litgpt_qlora())
    first = plan_memory(litgpt_qlora(peak_step=PeakStep.FIRST))
    assert phase(steady, "forward")["held_outputs"] == int(logits + inputs) == 2_100_420_608
    assert phase(first, "forward")["held_outputs"] == 0
    # nor an earlier micro-batch's gradients: the first step's is the window's first
    window = phase(steady, "forward")["gradients"]
    assert window > 0
    assert phase(first, "forward")["gradients"] == 0
    # both forwards peak at the head's last call, which dequantizes the packed head next to the
    # bf16 chunks before it (the loss comes after the 16-bit weight is freed)
    for name in ("activations", "logits", "temporaries"):
        assert phase(first, "forward")[name] == phase(steady, "forward")[name]
    assert phase(first, "forward")["logits"] == tokens * vocab * BF16
    # (the allocator's cache follows the step's own allocations)
    allocated_gap = sum(allocated(steady, "forward").values()) - sum(
        allocated(first, "forward").values()
    )
    assert allocated_gap == logits + inputs + window
    # this step's own outputs and graph are held after its forward all the same
    for name in ("backward", "backward-end", "optimizer-step"):
        assert phase(first, name)["held_outputs"] == phase(steady, name)["held_outputs"]
    assert allocated(first, "optimizer-step") == allocated(steady, "optimizer-step")
    assert steady.peak_phase == "forward"
    assert first.peak_bytes < steady.peak_bytes


def test_the_plan_says_which_step_it_assumed() -> None:
    steady = plan_memory(litgpt_qlora())
    first = plan_memory(litgpt_qlora(peak_step=PeakStep.FIRST))
    assert steady.notes["peak_step"].startswith("steady step")
    assert first.notes["peak_step"].startswith("first step")
    detail = next(c for c in first.components if c.key == "held_outputs").detail
    assert "first step: none from before it" in detail


def test_a_trainer_loop_holds_nothing_either_way() -> None:
    # HF Trainer drops the step's outputs with training_step: the first step differs only by
    # the gradients an earlier micro-batch of the window would have left
    trainer = litgpt_qlora(framework=Framework.HF)
    steady, first = plan_memory(trainer), plan_memory(replace(trainer, peak_step=PeakStep.FIRST))
    assert steady.peak_phase == first.peak_phase == "forward"
    window = phase(steady, "forward")["gradients"]
    assert window > 0 == phase(first, "forward")["gradients"]
    assert steady.peak_bytes - first.peak_bytes == window
    for plan in (steady, first):
        assert phase(plan, "forward")["held_outputs"] == 0
    assert "peak_step" not in steady.notes and "peak_step" not in first.notes


def test_the_cli_flag_sets_the_knob() -> None:
    from gpuwarden.cli.commands.plan import build_request, register

    parser = argparse.ArgumentParser()
    register(parser)
    common = ["Llama-2-7b-hf", "--mode", "qlora", "--framework", "litgpt"]
    assert build_request(parser.parse_args(common)).peak_step is PeakStep.STEADY
    first = build_request(parser.parse_args([*common, "--peak-step", "first"]))
    assert first.peak_step is PeakStep.FIRST


def test_the_echo_names_the_knob() -> None:
    from gpuwarden.report.plan import request_echo

    assert request_echo(litgpt_qlora(peak_step=PeakStep.FIRST))["peak_step"] == "first"
