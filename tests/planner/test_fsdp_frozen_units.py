"""FSDP1 frozen units under reentrant checkpointing keep every block input and its gradient to the
end of backward (planner/training.py ``frozen_unit_inputs``).

The sizes come from the model's shapes alone: hidden size, block count, residual dtype, tokens.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.layout import layout
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.training import frozen_unit_inputs, frozen_units_keep_checkpoints
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    FsdpKind,
    MemoryPlan,
    Mode,
    PlanRequest,
    Precision,
)


def mistral_lora_fsdp(**knobs: object) -> PlanRequest:
    """fms-acceleration's standard-peft run (validation V246): Mistral-7B, pure bf16, LoRA r16 on
    q/k/v/o, FSDP FULL_SHARD on 2 GPUs, HF gradient checkpointing, b2 × 4096."""
    base: dict[str, object] = {
        "model": resolve_model("Mistral-7B-v0.1"),
        "mode": Mode.LORA,
        "num_gpus": 2,
        "precision": Precision.BF16,
        "load_dtype": "bf16",
        "fsdp": FsdpKind.FULL,
        "micro_batch": 2,
        "seq_len": 4096,
        "checkpointing": Checkpointing.FULL,
        "lora_rank": 16,
        "lora_targets": ("q_proj", "k_proj", "v_proj", "o_proj"),
        "framework": Framework.HF_LEGACY,
    }
    return PlanRequest(**{**base, **knobs})  # type: ignore[arg-type]


def kept(request: PlanRequest) -> float:
    return frozen_unit_inputs(request, recipe(request), layout(request), 32)


def backward_end(plan: MemoryPlan) -> dict[str, int]:
    return next(p for p in plan.phases if p.name == "backward-end").bytes_by_component


def test_term_is_blocks_but_one_times_input_and_gradient() -> None:
    request = mistral_lora_fsdp()
    spec = request.model
    assert (spec.hidden_size, len(spec.parameters.layers)) == (4096, 32)
    # 31 blocks' bf16 residual inputs (hidden × 2 B) and their bf16 gradients, 2 × 4096 tokens
    assert kept(request) == 2 * 31 * 4096 * 2 * (2 * 4096)
    # per token: 507,904 B; per 4096-token sequence 1.94 GiB
    assert kept(request) / (2 * 4096) == 507_904
    assert kept(replace(request, micro_batch=4)) == 2 * kept(request)


def test_term_follows_the_residual_dtype() -> None:
    # fp32 training keeps an fp32 residual stream: inputs and gradients double; under FSDP's
    # bf16 MixedPrecision the recipe's residual stream is bf16, as in pure bf16
    fp32 = mistral_lora_fsdp(precision=Precision.FP32, load_dtype=None)
    assert recipe(fp32).res_bytes == 4
    assert kept(fp32) == 2 * kept(mistral_lora_fsdp())
    mixed = mistral_lora_fsdp(precision=Precision.BF16_MIXED, load_dtype=None)
    assert kept(mixed) == kept(mistral_lora_fsdp())


@pytest.mark.parametrize(
    "knobs",
    [
        {"fsdp": None, "num_gpus": 1},  # no FSDP unit, no reshard hook
        {"mode": Mode.TRAIN, "lora_rank": 0, "lora_targets": ()},  # units' params need grad
        {"checkpointing": Checkpointing.NONE},  # inputs are not detached leaves
        {"framework": Framework.HF},  # transformers 5.x: not read
        {"framework": Framework.LITGPT},  # block units mix frozen and trainable params
        {"framework": Framework.TORCHTITAN},  # FSDP2
    ],
)
def test_term_is_absent_outside_the_stack_that_has_it(knobs: dict[str, object]) -> None:
    request = mistral_lora_fsdp(**knobs)
    assert not frozen_units_keep_checkpoints(request)
    assert kept(request) == 0.0


def test_qlora_base_blocks_are_frozen_units_too() -> None:
    assert frozen_units_keep_checkpoints(mistral_lora_fsdp(mode=Mode.QLORA))


def test_backward_end_carries_the_term_and_becomes_the_peak() -> None:
    request = mistral_lora_fsdp()
    plan = plan_memory(request)
    end = backward_end(plan)
    # the same step without the hooks: the single-GPU layout of the same per-GPU batch
    alone = backward_end(plan_memory(mistral_lora_fsdp(fsdp=None, num_gpus=1)))
    assert end["activations"] - alone["activations"] == pytest.approx(kept(request), abs=2)
    peak = max(plan.phases, key=lambda p: p.total)
    assert peak.name == "backward-end"
    assert "fsdp_frozen_units" in plan.notes


def test_single_gpu_lora_plan_is_unchanged_by_the_term() -> None:
    # the one-GPU rows (V244/V245) peak at the loss; nothing here may move them
    plan = plan_memory(mistral_lora_fsdp(fsdp=None, num_gpus=1, micro_batch=4))
    assert "fsdp_frozen_units" not in plan.notes
    assert max(plan.phases, key=lambda p: p.total).name == "forward"
