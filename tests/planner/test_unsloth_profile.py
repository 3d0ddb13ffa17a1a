"""``--framework unsloth`` (planner/stacks.py): Unsloth's cross-entropy and what the HF Trainer's
accelerate wrapper adds, pinned from first principles on gemma-2b (vocabulary 256,000, over
Unsloth's 65,536-column ``MAX_FUSED_SIZE``) and Llama-2-7b-hf (32,000, under it)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.loss import LossBuffers, loss_buffers
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.stacks import PROFILES, load_dtype, unknowns
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    LossImpl,
    Mode,
    PlanRequest,
    Precision,
    TrainLoop,
)

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ROWS = 2 * 2048  # micro-batch 2 × 2048 positions: one logits row each


def qlora(model: str = "gemma-2b", **changes: Any) -> PlanRequest:
    request = PlanRequest(
        model=resolve_model(model),
        mode=Mode.QLORA,
        precision=Precision.NF4,
        lora_rank=16,
        lora_targets=ALL_LINEAR,
        micro_batch=2,
        seq_len=2048,
        checkpointing=Checkpointing.FULL,
        framework=Framework.UNSLOTH,
    )
    return replace(request, **changes)


def buffers(request: PlanRequest) -> LossBuffers:
    return loss_buffers(request, recipe(request), ROWS, 1)


def test_the_loss_keeps_the_16bit_logits_a_logsumexp_and_a_label_per_row() -> None:
    lb = buffers(qlora())
    vocab = 256_000
    # Fast_CrossEntropyLoss: ctx.save_for_backward(logits, logsumexp, labels) — fp16 logits as
    # the head wrote them (2 B), fp32 logsumexp (4 B) and int64 label (8 B) per row
    assert lb.saved == 2 * ROWS * vocab + (4 + 8) * ROWS
    # backward stores dloss * y into the logits and returns them: nothing new
    assert lb.transient_backward == 0
    assert lb.grad_logits == 0


def test_the_trainer_returns_a_float32_copy_of_the_logits() -> None:
    # accelerate's convert_outputs_to_fp32 under the Trainer's fp16 / bf16 mixed precision
    assert buffers(qlora()).transient_forward == 4 * ROWS * 256_000


def test_without_the_trainer_only_the_kernels_scratch_is_transient() -> None:
    # 256,000 columns = 4 chunks of 65,536: four fp32 logsumexps per row before the reduction,
    # next to the fp32 loss per row
    script = buffers(qlora(loop=TrainLoop.SCRIPT))
    assert script.transient_forward == (4 + 4 * 4) * ROWS
    # 32,000 columns fit one program: one logsumexp per row (kept), one fp32 loss per row
    small = buffers(qlora("Llama-2-7b-hf", loop=TrainLoop.SCRIPT))
    assert small.transient_forward == 4 * ROWS
    assert small.saved == 2 * ROWS * 32_000 + (4 + 8) * ROWS


def test_the_plan_holds_no_fp32_log_softmax() -> None:
    unsloth = plan_memory(qlora(loop=TrainLoop.SCRIPT))
    legacy = plan_memory(qlora(loop=TrainLoop.SCRIPT, framework=Framework.HF_LEGACY))
    elems = ROWS * 256_000
    # transformers keeps the fp32 log-softmax (4 B per logit), Unsloth the 16-bit logits (2 B)
    # and 12 B per row: the saved activations differ by exactly that
    assert legacy.component("activations") - unsloth.component("activations") == pytest.approx(
        4 * elems - (2 * elems + 12 * ROWS), abs=1
    )


def test_it_is_hf_legacy_but_for_what_unsloth_does_its_own_way() -> None:
    unsloth, legacy = PROFILES[Framework.UNSLOTH], PROFILES[Framework.HF_LEGACY]
    own = {"framework", "version", "load_dtype", "memory_reading", "unsloth_ce"}
    own.add("trainer_fp32_logits")
    for field in type(unsloth).__dataclass_fields__:
        if field not in own:
            assert getattr(unsloth, field) == getattr(legacy, field), field
    assert unsloth.reentrant_checkpointing  # its checkpointers recompute as reentrant ones do


def test_it_loads_in_the_compute_dtype() -> None:
    # from_pretrained(..., torch_dtype=dtype): a 16-bit load, not transformers 4.x's fp32
    lora = qlora("Llama-2-7b-hf", mode=Mode.LORA, precision=Precision.BF16)
    assert load_dtype(lora, 2)[0] == 2
    assert load_dtype(replace(lora, framework=Framework.HF_LEGACY), 2)[0] == 4


def test_what_was_not_read_is_said() -> None:
    notes = unknowns(qlora())
    assert "unsloth_loss" in notes and "unsloth_dynamic_4bit" in notes
    fused = unknowns(qlora(loss=LossImpl.FUSED))
    assert "Liger's fused" in fused["stack_unknown"]
    assert "unsloth_dynamic_4bit" not in unknowns(qlora(mode=Mode.LORA, precision=Precision.BF16))


def test_the_cli_names_it() -> None:
    from gpuwarden.cli.commands.plan import build_request, register

    parser = argparse.ArgumentParser()
    register(parser)
    args = parser.parse_args(["gemma-2b", "--mode", "qlora", "--framework", "unsloth"])
    assert build_request(args).framework is Framework.UNSLOTH
