"""The inputs bitsandbytes < 0.43.2 keeps on ``ctx`` live as long as the graph, not until backward.

bitsandbytes 0.42.0 ``autograd/_functions.py``, ``MatMul4Bit.forward``: ``ctx.tensors = (A, B)``
whenever the input or the weight needs a gradient — an attribute of the custom Function's ``ctx``,
not ``ctx.save_for_backward``. Backward frees a graph's saved tensors ("Saved intermediate values
of the graph are freed when you call .backward()"), not ``ctx`` attributes, which live with the
graph's nodes (PyTorch ``FunctionCtx.save_for_backward`` docs: tensors for backward "should be
saved with save_for_backward (as opposed to directly on ctx) to prevent incorrect gradients and
memory leaks"). A loop that keeps a tensor of the graph past backward — LitGPT's ``logits =
model(input_ids, lm_head_chunk_size=128)`` (``finetune/lora.py`` @01fe959), a script's ``outputs =
model(**batch)`` — so keeps every 4-bit Linear's input of the step until the name is rebound at the
end of the next forward. Expected bytes are derived by hand from ``shared/fixtures/models``: per
Llama block the kernel references the attention-norm output (q, k, v: not in layer 0, whose input
comes from the frozen embedding), the o_proj input (the SDPA output, which attention saves too),
the MLP-norm output (gate, up) and the down_proj input.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    Mode,
    Optimizer,
    PlanRequest,
    Precision,
    QuantKernel,
    TrainLoop,
)

BF16, FP32 = 2, 4
TOKENS = 2 * 512


def llama2(fixtures: Path) -> tuple[int, int, int]:
    cfg: dict[str, Any] = json.loads((fixtures / "models" / "Llama-2-7b-hf.json").read_text())
    return cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]


def qlora(**knobs: Any) -> PlanRequest:
    base: dict[str, Any] = {
        "model": resolve_model("Llama-2-7b-hf"),
        "mode": Mode.QLORA,
        "precision": Precision.NF4,
        "optimizer": Optimizer.ADAMW,
        "micro_batch": 2,
        "seq_len": 512,
        "lora_rank": 32,
        "lora_targets": ("q_proj", "v_proj"),
        "lora_dropout": 0.05,
        "quant_kernel": QuantKernel.BNB_LEGACY,
        "framework": Framework.LITGPT,
    }
    return PlanRequest(**{**base, **knobs})


def held(request: PlanRequest, phase: str = "forward") -> int:
    plan = plan_memory(request)
    return next(p.bytes_by_component for p in plan.phases if p.name == phase)["held_outputs"]


def graph_inputs(request: PlanRequest, phase: str = "forward") -> int:
    """What the legacy kernel adds to the held outputs over the current one (logits alike)."""
    return held(request, phase) - held(replace(request, quant_kernel=QuantKernel.BNB), phase)


@pytest.mark.parametrize("dropout", [0.05, 0.0])
def test_litgpt_holds_the_previous_steps_4bit_inputs_through_the_next_forward(
    fixtures: Path, dropout: float
) -> None:
    # without dropout the adapters save x too; the kernel's reference outlives their saving
    h, i, layers = llama2(fixtures)
    expected = ((3 * h + i) * layers - h) * BF16 * TOKENS
    assert graph_inputs(qlora(lora_dropout=dropout)) == expected == 1_518_338_048


def test_the_current_steps_graph_holds_them_through_the_optimizer_step(fixtures: Path) -> None:
    h, i, layers = llama2(fixtures)
    expected = ((3 * h + i) * layers - h) * BF16 * TOKENS
    request = qlora()
    assert graph_inputs(request, "backward-end") == expected
    assert graph_inputs(request, "optimizer-step") == expected
    # the previous step's graph died when this forward's outputs were bound
    assert graph_inputs(request, "backward") == 0


def test_a_script_loop_holds_each_linears_own_fp32_cast(fixtures: Path) -> None:
    # fp32 compute: Linear4bit.forward's x.to(compute_dtype) is one copy per Linear (q, k, v each
    # their own cast of the attention-norm output), and that copy is what ctx keeps
    h, i, layers = llama2(fixtures)
    request = qlora(framework=Framework.HF, loop=TrainLoop.SCRIPT, bnb_compute_dtype="fp32")
    expected = ((6 * h + i) * layers - 3 * h) * FP32 * TOKENS
    assert graph_inputs(request) == expected


def test_no_held_graph_no_held_inputs() -> None:
    # HF Trainer returns loss.detach(): the graph dies with training_step
    assert graph_inputs(qlora(framework=Framework.HF)) == 0
    # under full checkpointing the blocks' MatMul4Bit nodes belong to the recompute graphs,
    # which die with each block's backward
    assert graph_inputs(qlora(checkpointing=Checkpointing.FULL)) == 0
    # a 16-bit base has no 4-bit kernel
    assert graph_inputs(qlora(mode=Mode.LORA, precision=Precision.BF16)) == 0


def test_the_plan_names_the_term() -> None:
    plan = plan_memory(qlora())
    detail = next(c for c in plan.components if c.key == "held_outputs").detail
    assert "4-bit Linear inputs 1.41 GiB" in detail
    assert "save_for_backward" in detail
