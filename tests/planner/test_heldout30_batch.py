"""Held-out batch 30 (benchmarks/data/validation.csv V540-V543): llama-recipes runs.

V540-V542 are one job in three code states (meta-llama/llama-cookbook PR #41, formerly
facebookresearch/llama-recipes): Llama-2-7B, PEFT LoRA r 8 on q_proj / v_proj, pure bf16,
FSDP1 FULL_SHARD over 4 A100 40GB, torch's checkpoint wrapper on every decoder layer, samsum
packed to 2,048 tokens, batch 4. V543 is issue #413: ``finetuning.py`` with its defaults on one
A100 80GB without FSDP (fp32 weights and AdamW), reported out of memory.

The PR measured 4.98 GB of active memory freed by no longer keeping ``outputs`` (V541 -> V542).
Those outputs hold the fp32 logits and ``past_key_values``: the model runs with its config
default ``use_cache=True``, and llama-recipes checkpoints with torch's
``apply_activation_checkpointing`` (policies/activation_checkpointing_functions.py @4767f09e),
not transformers' ``gradient_checkpointing_enable``, so the cache is built: the rows say so with
``--checkpoint-wrapper`` (``test_checkpoint_wrapper.py``). The last test checks the figures the
README quotes for it against the catalog shapes."""

from __future__ import annotations

import functools

import pytest
from benchmarks.measured_rows import MappedRow, flagged, map_validation

from gpuwarden.catalog.models import load_bundled
from gpuwarden.planner import plan_memory
from gpuwarden.planner.outputs import builds_cache
from gpuwarden.types.plan import Checkpointing

GIB = 2**30
BATCH = ("V540", "V541", "V542", "V543")
SCORED = ("V540", "V541", "V542")
SCRIPT_LOOP_ROW = "V541"  # limit_all_gathers=True, `outputs = model(**batch)` kept
OOM_ROW = "V543"
BF16_BYTES = 2
FP32_BYTES = 4
# fp32 weights, fp32 gradients and AdamW's two fp32 states
FP32_ADAMW_BYTES_PER_PARAMETER = 4 * FP32_BYTES
A100_80GB_BYTES = 80e9


@functools.cache
def _batch() -> dict[str, MappedRow]:
    """The batch's rows as mapped, once for the module (mapping every row takes a second)."""
    return {m.row.id: m for m in map_validation() if m.row.id in BATCH}


def _mapped(row_id: str) -> MappedRow:
    return _batch()[row_id]


@pytest.mark.parametrize("row_id", SCORED)
def test_pr41_rows_plan_and_count_in_the_statistics(row_id: str) -> None:
    mapped = _mapped(row_id)
    assert mapped.request is not None
    assert mapped.eligible
    assert flagged(mapped.row) is None
    assert plan_memory(mapped.request).peak_bytes > 0


def test_fp32_full_fine_tune_on_one_80gb_gpu_is_caught_as_out_of_memory() -> None:
    mapped = _mapped(OOM_ROW)
    assert mapped.request is not None
    assert mapped.row.oom
    plan = plan_memory(mapped.request)
    # The model states alone exceed the card before any activation.
    states = plan.total_parameters * FP32_ADAMW_BYTES_PER_PARAMETER
    assert states > A100_80GB_BYTES
    assert mapped.gpu_memory_bytes is not None
    assert plan.predicted.nvidia_smi_used_bytes > mapped.gpu_memory_bytes
    assert plan.fits is False


def test_script_loop_under_the_checkpoint_wrapper_holds_logits_and_kv_cache() -> None:
    mapped = _mapped(SCRIPT_LOOP_ROW)
    request = mapped.request
    assert request is not None
    assert request.use_cache
    assert request.checkpointing is Checkpointing.FULL
    # torch's checkpoint_wrapper leaves transformers' use_cache on (planned off before the rows
    # named the wrapper: 0.49 GiB of logits held, no cache)
    assert request.checkpoint_wrapper
    assert builds_cache(request)

    model = load_bundled("Llama-2-7b-hf")
    tokens = request.micro_batch * request.seq_len
    held_logits = tokens * model.vocab_size * BF16_BYTES
    kv_cache = model.num_layers * 2 * tokens * model.kv_width * BF16_BYTES
    plan = plan_memory(request)
    assert max(phase.bytes_by_component.get("held_outputs", 0) for phase in plan.phases) == (
        pytest.approx(held_logits + kv_cache, rel=1e-6)
    )

    # benchmarks/README.md, batch 30: the KV cache `outputs` keeps (4.29 GB) and the fp32
    # logits (1.05 GB) next to the 4.98 GB the PR measured; the plan holds 0.49 GiB of logits.
    fp32_logits = tokens * model.vocab_size * FP32_BYTES
    assert kv_cache / 1e9 == pytest.approx(4.29, abs=0.005)
    assert fp32_logits / 1e9 == pytest.approx(1.05, abs=0.005)
    assert held_logits / GIB == pytest.approx(0.49, abs=0.005)
