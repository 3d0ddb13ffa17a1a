"""``--framework megatron``: Megatron-core's DDP buffer, (distributed) optimizer and loss, as
closed-form invariants read in its source (planner/stacks.py, module docstring).

The model states are Megatron's own count (``theoretical_memory_usage.py``: 18 B per parameter,
6 + 12/N with the distributed optimizer); the gradient buffer is allocated with the model, so it
is there in every forward; a 16-bit buffer is copied to fp32 at the step only; the vocab-parallel
cross-entropy keeps one fp32 copy of the logits.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner.plan import compute_plan
from gpuwarden.planner.precision import Stack, recipe
from gpuwarden.types.plan import Framework, PlanRequest, Precision

MODEL = resolve_model("Llama-3.2-1B")


def _request(**knobs: object) -> PlanRequest:
    base = PlanRequest(
        model=MODEL,
        num_gpus=8,
        zero_stage=1,
        micro_batch=1,
        seq_len=1024,
        framework=Framework.MEGATRON,
    )
    return replace(base, **knobs)


def _phase(request: PlanRequest, name: str) -> dict[str, int]:
    plan = compute_plan(request)
    return dict(next(p for p in plan.phases if p.name == name).bytes_by_component)


def _states(phase: dict[str, int]) -> int:
    return sum(phase.get(k, 0) for k in ("parameters", "gradients", "optimizer_states"))


@pytest.mark.parametrize(("zero", "dp", "per_param"), [(1, 8, 6 + 12 / 8), (0, 8, 18), (1, 1, 18)])
def test_model_states_are_megatrons_own_count(zero: int, dp: int, per_param: float) -> None:
    """bf16 params (2) + fp32 main_grad buffer (4) + fp32 main params and Adam m, v (12), the
    last sharded over DP by the distributed optimizer (--zero 1), in every phase."""
    request = _request(zero_stage=zero, num_gpus=dp)
    params = MODEL.parameters.total
    for name in ("forward", "optimizer-step"):
        assert _states(_phase(request, name)) == pytest.approx(params * per_param, rel=1e-6)


def test_the_gradient_buffer_is_there_in_the_first_forward_without_accumulation() -> None:
    """Megatron's DDP allocates the main_grad buffer when it wraps the model; no bucket copies
    (reduced in place). The same request under transformers has no gradients in forward."""
    forward = _phase(_request(grad_accum=1), "forward")
    assert forward["gradients"] == pytest.approx(MODEL.parameters.total * 4, rel=1e-6)
    assert forward.get("communication", 0) == 0
    hf = _phase(_request(grad_accum=1, framework=Framework.HF), "forward")
    assert hf.get("gradients", 0) == 0


def test_megatron_is_its_own_stack_whatever_the_layout() -> None:
    """TP 1 / PP 1 data parallelism is still Megatron's recipe (transformers' would be AMP, or
    DeepSpeed's under ZeRO-1)."""
    assert recipe(_request()).stack is Stack.MEGATRON
    assert recipe(_request(zero_stage=0)).stack is Stack.MEGATRON
    assert recipe(_request(framework=Framework.HF)).stack is Stack.DEEPSPEED
    assert recipe(_request(zero_stage=0, framework=Framework.HF)).stack is Stack.AMP


def test_a_16_bit_buffer_is_copied_to_fp32_at_the_step_only() -> None:
    """fp16 (accumulate_allreduce_grads_in_fp32 off by default): a 2 B main_grad buffer, and
    Float16Optimizer's ``main_grad.float()`` copy (4 B per stepped parameter) at the step;
    ``--grad-reduce-in-fp32`` makes the buffer fp32 and the copy an alias."""
    fp16 = _request(precision=Precision.FP16_MIXED, zero_stage=0)
    params = MODEL.parameters.total
    assert _phase(fp16, "forward")["gradients"] == pytest.approx(params * 2, rel=1e-6)
    assert _phase(fp16, "optimizer-step")["gradients"] == pytest.approx(params * 6, rel=1e-6)
    sharded = replace(fp16, zero_stage=1)
    assert _phase(sharded, "optimizer-step")["gradients"] == pytest.approx(
        params * (2 + 4 / 8), rel=1e-6
    )
    wide = replace(fp16, grad_reduce_in_fp32=True)
    assert _phase(wide, "forward")["gradients"] == pytest.approx(params * 4, rel=1e-6)
    assert _phase(wide, "optimizer-step")["gradients"] == pytest.approx(params * 4, rel=1e-6)


def test_the_loss_keeps_one_fp32_copy_of_the_logits() -> None:
    """VocabParallelCrossEntropy: the fp32 copy becomes the softmax in place and is saved (with
    the activations); around it only the 16-bit logits or their 16-bit gradient, and the head's
    weight gradient goes straight into main_grad (gradient_accumulation_fusion). transformers'
    loss makes two fp32 gradients at the start of backward (8 B per logit)."""
    logits = 1024 * MODEL.vocab_size
    megatron = _phase(_request(), "forward")
    assert megatron["logits"] == pytest.approx(2 * logits, rel=1e-6)
    hf = _phase(_request(framework=Framework.HF), "forward")
    assert hf["logits"] == pytest.approx(8 * logits, rel=1e-6)


@pytest.mark.parametrize(("flag", "expected"), [([], None), (["--no-grad-reduce-in-fp32"], False)])
def test_the_cli_names_the_buffer_dtype(flag: list[str], expected: bool | None) -> None:
    import argparse

    from gpuwarden.cli.commands import plan as plan_cmd

    parser = argparse.ArgumentParser()
    plan_cmd.register(parser)
    args = parser.parse_args(["Llama-3.2-1B", "--framework", "megatron", *flag])
    request = plan_cmd.build_request(args)
    assert request.framework is Framework.MEGATRON
    assert request.grad_reduce_in_fp32 is expected
    if expected is False:  # bf16 with a 16-bit buffer: 2 B gradients, the fp32 copy at the step
        assert recipe(request).grad_bytes == 2
