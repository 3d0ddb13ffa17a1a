"""Activation checkpointing by torch's ``checkpoint_wrapper`` (``--checkpoint-wrapper``) instead of
transformers' ``gradient_checkpointing_enable``: llama-recipes' ``apply_fsdp_checkpointing`` (PR #41
of meta-llama/llama-cookbook, validation V540-V542).

Two things differ from transformers' own checkpointing, each read in the code:
* the model's ``gradient_checkpointing`` switch stays off, so ``LlamaModel.forward`` keeps
  ``use_cache`` on and every layer's K and V are built and returned; inside a checkpointed block
  autograd saves only the block's input, so none of them is a saved tensor;
* the wrapper is applied after FSDP, inside each unit: FSDP1's reshard hook on a frozen unit's
  input holds nothing (a CPU trace with gloo), where transformers' loop checkpoints the unit's
  call from outside and the hook keeps every block input and its gradient
  (``test_fsdp_frozen_units.py``).

Sizes come from the catalog shapes of Llama-2-7B and the job's 4 × 2,048 tokens.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog.models import load_bundled
from gpuwarden.planner import plan_memory
from gpuwarden.planner.fixes import fixes_for
from gpuwarden.planner.outputs import builds_cache
from gpuwarden.planner.validate import validate
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    Framework,
    FsdpKind,
    MemoryPlan,
    Mode,
    OptimizerImpl,
    PlanRequest,
    Precision,
    TrainLoop,
)

BF16_BYTES = 2
MICRO_BATCH, SEQ_LEN = 4, 2048


def llama_recipes_lora(**knobs: object) -> PlanRequest:
    """llama_finetuning.py @4767f09e as PR #41 ran it: Llama-2-7B, PEFT LoRA r 8 on q/v, pure
    bf16, FSDP1 FULL_SHARD over 4 GPUs, torch's checkpoint wrapper on every decoder layer, the
    config's use_cache left on, 4 × 2,048 packed tokens, `outputs = model(**batch)`."""
    base: dict[str, object] = {
        "model": load_bundled("Llama-2-7b-hf"),
        "mode": Mode.LORA,
        "num_gpus": 4,
        "precision": Precision.BF16,
        "load_dtype": "bf16",
        "fsdp": FsdpKind.FULL,
        "optimizer_impl": OptimizerImpl.FOREACH,
        "micro_batch": MICRO_BATCH,
        "seq_len": SEQ_LEN,
        "checkpointing": Checkpointing.FULL,
        "checkpoint_wrapper": True,
        "attention": Attention.EAGER,
        "use_cache": True,
        "loop": TrainLoop.SCRIPT,
        "lora_targets": ("q_proj", "v_proj"),
        "lora_dropout": 0.05,
        "framework": Framework.HF_LEGACY,
    }
    return PlanRequest(**{**base, **knobs})  # type: ignore[arg-type]


def phase(plan: MemoryPlan, name: str) -> dict[str, int]:
    return next(p for p in plan.phases if p.name == name).bytes_by_component


def kv_cache_bytes() -> int:
    """32 layers × (K, V) × 4 × 2,048 tokens × 4,096 (32 KV heads × 128) × 2 B = 4.29 GB."""
    model = load_bundled("Llama-2-7b-hf")
    return model.num_layers * 2 * MICRO_BATCH * SEQ_LEN * model.kv_width * BF16_BYTES


def block_stream_bytes() -> int:
    """One block's input (the residual stream): 4 × 2,048 tokens × 4,096 × 2 B."""
    return MICRO_BATCH * SEQ_LEN * load_bundled("Llama-2-7b-hf").hidden_size * BF16_BYTES


def test_the_wrapper_leaves_use_cache_on_and_transformers_checkpointing_turns_it_off() -> None:
    assert builds_cache(llama_recipes_lora())
    assert not builds_cache(llama_recipes_lora(checkpoint_wrapper=False))
    assert kv_cache_bytes() / 1e9 == pytest.approx(4.29, abs=0.005)


def test_this_steps_cache_is_counted_in_forward_and_held_through_backward() -> None:
    plan = plan_memory(llama_recipes_lora())
    model = load_bundled("Llama-2-7b-hf")
    logits = MICRO_BATCH * SEQ_LEN * model.vocab_size * BF16_BYTES
    # the checkpointed blocks save none of the K and V the cache holds
    assert phase(plan, "forward")["kv_cache"] == pytest.approx(kv_cache_bytes(), rel=1e-9)
    # `outputs` keeps this step's logits and cache through backward, the previous step's
    # through the next forward
    assert phase(plan, "backward")["held_outputs"] == pytest.approx(
        logits + kv_cache_bytes(), rel=1e-9
    )
    assert phase(plan, "forward")["held_outputs"] == pytest.approx(
        logits + kv_cache_bytes(), rel=1e-9
    )


def test_dropping_the_outputs_frees_what_pr41_measured() -> None:
    """PR #41: not keeping `outputs` 'decreases ... active memory by 4.98 GB' (V541 -> V542); the
    plan's difference is the logits and cache held through backward (4.82 GB), 3 % under it."""
    kept = plan_memory(llama_recipes_lora())
    dropped = plan_memory(llama_recipes_lora(loop=TrainLoop.TRAINER))
    saved = kept.predicted.max_allocated_bytes - dropped.predicted.max_allocated_bytes
    assert saved / 1e9 == pytest.approx(4.98, rel=0.04)


def test_frozen_units_keep_no_block_inputs_under_the_wrapper() -> None:
    wrapper = plan_memory(llama_recipes_lora(loop=TrainLoop.TRAINER))
    hf = plan_memory(llama_recipes_lora(loop=TrainLoop.TRAINER, checkpoint_wrapper=False))
    assert "fsdp_frozen_units" not in wrapper.notes
    assert "fsdp_frozen_units" in hf.notes
    # transformers' reentrant checkpoint adds, at the end of backward, every block's input but
    # the first and its gradient (2 × 31) and the first block's recomputed output (1)
    blocks = load_bundled("Llama-2-7b-hf").num_layers
    extra = (2 * (blocks - 1) + 1) * block_stream_bytes()
    difference = (
        phase(hf, "backward-end")["activations"] - phase(wrapper, "backward-end")["activations"]
    )
    assert difference == pytest.approx(extra, rel=1e-9)


def test_use_cache_off_is_offered_where_the_cache_is_built() -> None:
    """llama-recipes PR #165 passed use_cache=False under FSDP ('saves ~4 GB')."""
    keys = {f.key for f in fixes_for(plan_memory(llama_recipes_lora(loop=TrainLoop.TRAINER)))}
    assert "use-cache-off" in keys
    hf = plan_memory(llama_recipes_lora(loop=TrainLoop.TRAINER, checkpoint_wrapper=False))
    assert "use-cache-off" not in {f.key for f in fixes_for(hf)}


def test_wrapper_without_checkpointing_warns_that_it_does_nothing() -> None:
    request = llama_recipes_lora(checkpointing=Checkpointing.NONE)
    assert any("--checkpoint-wrapper" in w for w in validate(request))
    assert not any("--checkpoint-wrapper" in w for w in validate(llama_recipes_lora()))
    unwrapped = replace(request, checkpoint_wrapper=False)
    assert plan_memory(request).peak_bytes == plan_memory(unwrapped).peak_bytes


@pytest.mark.parametrize("checkpointing", [Checkpointing.SELECTIVE, Checkpointing.OP])
def test_wrapper_describes_full_checkpointing_only(checkpointing: Checkpointing) -> None:
    """torch's checkpoint_wrapper checkpoints whole blocks; under selective or op checkpointing the
    stack's own mechanism runs (as --exact applies it, through transformers' switch: no cache),
    so the flag changes nothing and says so (review r23: the formula built the cache the exact
    trace did not)."""
    request = llama_recipes_lora(checkpointing=checkpointing)
    assert not builds_cache(request)
    assert any("--checkpoint-wrapper" in w for w in validate(request))
    unwrapped = replace(request, checkpoint_wrapper=False)
    assert plan_memory(request).peak_bytes == plan_memory(unwrapped).peak_bytes
