"""Which tensors of a training step meet at once: evaluation after ``zero_grad``, the first
micro-batch before any backward, a dequantized weight freed before the loss, and LitGPT's chunked
head in backward.

* lit-gpt's ``validate()`` runs as a sanity check before the first step and then only where
  ``not is_accumulating`` after ``optimizer.zero_grad()`` (``finetune/lora.py`` @b96a570 and
  litgpt @01fe959): no gradient is alive through an evaluation.
* ``PeakStep.FIRST`` is the job's first iteration: no earlier micro-batch of its accumulation
  window has left gradients.
* bitsandbytes' ``MatMul4Bit.forward`` dequantizes the packed weight for its ``linear`` and keeps
  only the packed one: the 16-bit copies are gone before the loss. LitGPT's plugin packs the LM
  head too, so the head's last call dequantizes it next to the bf16 logit chunks made before.
* In backward, every chunk's cross-entropy, log-softmax and cast (made after all head calls, so
  with higher sequence numbers) run before the first head call's backward: every chunk's bf16
  gradient waits next to the held float32 logits while the head is dequantized again.

Expected bytes come from the model configs in ``shared/fixtures/models``.
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

BF16, FP32 = 2, 4
DEQUANT_COPIES = 2  # LitGPT quantizes from fp16: dequantize_4bit, then the cast to bf16


def config(fixtures: Path, name: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((fixtures / "models" / f"{name}.json").read_text())
    return cfg


def phase(plan: MemoryPlan, name: str) -> dict[str, int]:
    return next(p.bytes_by_component for p in plan.phases if p.name == name)


def litgpt(name: str, **knobs: Any) -> PlanRequest:
    base: dict[str, Any] = {
        "model": resolve_model(name),
        "optimizer": Optimizer.ADAMW,
        "lora_dropout": 0.05,
        "framework": Framework.LITGPT,
    }
    return PlanRequest(**{**base, **knobs})


def fsdp_lora(*flags: str) -> PlanRequest:
    """lit-gpt 2023 finetune/lora.py on 2 GPUs (FSDP, Block checkpointing), phi-1.5, as the CLI
    plans it."""
    from gpuwarden.cli.commands.plan import build_request, register

    parser = argparse.ArgumentParser()
    register(parser)
    args = ["phi-1_5", "--mode", "lora", "--framework", "litgpt", "--gpus", "2"]
    args += ["--micro-batch", "2", "--seq-len", "1044", "--grad-accum", "32", *flags]
    return build_request(parser.parse_args(args))


def qlora(name: str, batch: int, seq: int, **knobs: Any) -> PlanRequest:
    return litgpt(
        name,
        mode=Mode.QLORA,
        precision=Precision.NF4,
        micro_batch=batch,
        seq_len=seq,
        grad_accum=6,
        quant_kernel=QuantKernel.BNB_LEGACY,
        **knobs,
    )


def test_an_evaluation_holds_no_gradients() -> None:
    plan = plan_memory(fsdp_lora())
    window = phase(plan, "forward")["gradients"]
    assert window > 0  # a steady micro-batch: the window's unsharded gradients (no_sync)
    assert phase(plan, "evaluation")["gradients"] == 0


def test_zero_grad_without_set_to_none_keeps_them_through_an_evaluation() -> None:
    plan = plan_memory(replace(fsdp_lora(), keep_grads=True))
    assert phase(plan, "evaluation")["gradients"] == phase(plan, "forward")["gradients"] > 0


def test_the_first_micro_batch_has_no_window_gradients() -> None:
    steady = plan_memory(fsdp_lora())
    first = plan_memory(fsdp_lora("--peak-step", "first"))
    assert phase(steady, "forward")["gradients"] > 0
    assert phase(first, "forward")["gradients"] == 0
    # its own backward makes them all the same
    assert phase(first, "backward-end")["gradients"] > 0


def test_the_dequantized_head_never_meets_the_loss(fixtures: Path) -> None:
    # gemma-2b QLoRA on LitGPT 0.4 (config_hub gemma-2b/qlora.yaml: b=2, max_seq_length 512)
    cfg = config(fixtures, "gemma-2b")
    vocab, hidden = cfg["vocab_size"], cfg["hidden_size"]
    batch, seq = 2, 512
    forward = phase(plan_memory(qlora("gemma-2b", batch, seq)), "forward")
    # the head's last call: the packed head dequantized (the largest packed weight) next to the
    # bf16 chunks of the calls before it ...
    assert forward["temporaries"] == DEQUANT_COPIES * vocab * hidden * BF16 == 2_097_152_000
    assert forward["logits"] == batch * seq * vocab * BF16
    # ... and not the loss's float32 log-softmax, which comes after the weight is freed: the
    # blocks' saved tensors alone, as in backward (no checkpointing, nothing recomputed)
    backward = phase(plan_memory(qlora("gemma-2b", batch, seq)), "backward")
    assert forward["activations"] == backward["activations"]


def test_the_chunked_head_backward_waits_with_every_chunk_gradient(fixtures: Path) -> None:
    # lit-gpt 2023 QLoRA, phi-1.5 (untied head), its longest Alpaca sample in the first step
    cfg = config(fixtures, "phi-1_5")
    vocab, hidden = cfg["vocab_size"], cfg["hidden_size"]
    tokens = 1044
    plan = plan_memory(qlora("phi-1_5", 1, tokens, peak_step=PeakStep.FIRST))
    backward = phase(plan, "backward")
    assert backward["logits"] == tokens * vocab * BF16  # every chunk's gradient
    assert backward["held_outputs"] == tokens * vocab * FP32  # this step's `logits`
    # (the catalog counts phi's head bias with the packed head)
    assert backward["temporaries"] == DEQUANT_COPIES * (vocab * hidden + vocab) * BF16
    assert plan.peak_phase == "backward"


def test_a_trainer_has_no_chunked_head_moment() -> None:
    # HF's head runs once, unpacked: the backward is the last block's, with nothing held
    plan = plan_memory(qlora("phi-1_5", 1, 1044, framework=Framework.HF))
    backward = phase(plan, "backward")
    assert backward["logits"] == 0
    assert backward["held_outputs"] == 0


def test_an_unpacked_head_leaves_the_dequantized_moment_to_a_block(fixtures: Path) -> None:
    # HF QLoRA packs the blocks' Linears only: the forward's last dequantized weight is the
    # largest block Linear (phi-1.5's fc1), freed before any logits exist; it sets the forward's
    # peak only where the loss's logits are smaller than it (a short sequence)
    cfg = config(fixtures, "phi-1_5")
    short = plan_memory(qlora("phi-1_5", 1, 4, framework=Framework.HF))
    forward = phase(short, "forward")
    assert forward["temporaries"] == cfg["hidden_size"] * cfg["intermediate_size"] * BF16
    assert forward["logits"] == 0
    assert forward["activations"] == phase(short, "backward")["activations"]
    long = phase(plan_memory(qlora("phi-1_5", 1, 1044, framework=Framework.HF)), "forward")
    assert long["temporaries"] == 0
    assert long["logits"] > 0
