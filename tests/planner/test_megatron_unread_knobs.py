"""``--framework megatron`` with a knob Megatron does not have, or that was not read in it: the
plan says so (``stacks.unknowns``), every such knob at once; ``grad_reduce_in_fp32`` where no
Megatron buffer reads it is a warning, not silently ignored (review r8c)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner.plan import compute_plan
from gpuwarden.planner.precision import megatron_ddp
from gpuwarden.planner.stacks import unknowns
from gpuwarden.planner.validate import validate
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    FsdpKind,
    LossImpl,
    Mode,
    Offload,
    PlanRequest,
    Precision,
)

MODEL = resolve_model("Llama-3.2-1B")


def _request(**knobs: object) -> PlanRequest:
    base = PlanRequest(
        model=MODEL, num_gpus=8, zero_stage=1, seq_len=1024, framework=Framework.MEGATRON
    )
    return replace(base, **knobs)


def test_megatrons_own_job_has_no_unread_note() -> None:
    assert "stack_unknown" not in unknowns(_request())
    assert "stack_unknown" not in unknowns(_request(precision=Precision.FP16_MIXED, zero_stage=0))


@pytest.mark.parametrize(
    ("knobs", "says"),
    [
        ({"mode": Mode.INFER, "zero_stage": 0}, "inference engines were not read"),
        ({"compile": True}, "does not torch.compile"),
        ({"loss": LossImpl.CHUNKED}, "torchtune's chunked"),
        ({"loss": LossImpl.FUSED}, "Liger's fused"),
        ({"offload": Offload.OPTIMIZER}, "a fraction below 1 was not read"),
        ({"optimizer_in_backward": True}, "does not step the optimizer in backward"),
        ({"precision": Precision.BF16}, "keep fp32 main params"),
        ({"zero_stage": 3}, "FSDP paths were not read"),
        ({"zero_stage": 0, "fsdp": FsdpKind.FULL}, "FSDP paths were not read"),
    ],
)
def test_a_knob_megatron_does_not_have_is_named(knobs: dict[str, object], says: str) -> None:
    assert says in compute_plan(_request(**knobs)).notes["stack_unknown"]


def test_every_unread_knob_is_named_not_only_the_last() -> None:
    """LoRA under ZeRO-3 with --compile: three notes, none overwritten by the next."""
    note = unknowns(_request(mode=Mode.LORA, zero_stage=3, compile=True))["stack_unknown"]
    assert "own LoRA" in note
    assert "FSDP paths" in note
    assert "torch.compile" in note


def test_fp8_says_params_are_bf16() -> None:
    assert "--fp8-param-gather" in unknowns(_request(precision=Precision.FP8))["float8"]


@pytest.mark.parametrize(
    ("knobs", "reads"),
    [
        ({}, True),
        ({"precision": Precision.FP16_MIXED, "zero_stage": 0, "tp": 2}, True),
        ({"precision": Precision.FP8}, True),
        ({"framework": Framework.HF}, False),
        ({"framework": Framework.TORCHTUNE, "zero_stage": 0}, False),
        ({"precision": Precision.FP32}, False),
        ({"mode": Mode.LORA}, False),
        ({"zero_stage": 2}, False),
        ({"zero_stage": 0, "fsdp": FsdpKind.FULL}, False),
    ],
)
def test_grad_reduce_in_fp32_warns_where_no_megatron_buffer_reads_it(
    knobs: dict[str, object], reads: bool
) -> None:
    request = _request(grad_reduce_in_fp32=False, **knobs)
    assert megatron_ddp(request) is reads
    warned = any("grad_reduce_in_fp32" in w for w in validate(request))
    assert warned is not reads
    assert not any(
        "grad_reduce_in_fp32" in w for w in validate(replace(request, grad_reduce_in_fp32=None))
    )


def test_k_layernorm_keeps_a_contiguous_copy_of_the_key() -> None:
    spec = resolve_model("Qwen3-0.6B")
    base = _request(model=spec, micro_batch=1, checkpointing=Checkpointing.NONE)
    h, d = spec.hidden_size, spec.head_dim
    q, kv = spec.num_heads * d, spec.num_kv_heads * d
    norms = 2 * (2 * h + 4 + 2 * h)
    attention = (q + 2 * kv) * 2 + (q + kv) * 2 + 2 * q + 4 * spec.num_heads
    mlp = 3 * spec.intermediate_size * 2
    qk_norms = 2 * q + 2 * kv + 4 * (spec.num_heads + spec.num_kv_heads)
    plan = compute_plan(base)
    facts = next(c for c in plan.components if c.key == "activations").facts
    per_token = facts.per_block_bytes["block"] / base.seq_len  # type: ignore[union-attr]
    assert per_token == pytest.approx(norms + attention + mlp + qk_norms, rel=1e-9)
