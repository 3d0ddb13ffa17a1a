"""``--optimizer-in-backward`` (torchtune's ``optimizer_in_bwd``): each parameter has its own
optimizer (torchtune ``{p: config.instantiate(cfg_optimizer, [p])}``) stepped from its
post-accumulate-grad hook, so the step's temporaries are one parameter's, during backward, at
the moment that parameter's gradient is complete. Per kernel, read in torch/optim/adamw.py
(pytorch/pytorch @002d2f0b) and torchao/optim/adam.py:

* ``_single_tensor_adamw`` (foreach=False): ``(exp_avg_sq.sqrt() / bias_correction2_sqrt)``
  holds the root and the quotient at once, two tensors of the parameter in the state dtype;
* ``_multi_tensor_adamw`` over one parameter: ``torch._foreach_sqrt(exp_avg_sqs)``, one tensor,
  then in place;
* ``_fused_adamw`` (``torch._fused_adamw_``) and bitsandbytes' 8-bit kernel: in place, none;
* torchao's ``single_param_adam``: fp32 copies of both states of the parameter.
"""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    Mode,
    Optimizer,
    OptimizerImpl,
    PlanRequest,
    Precision,
)

BF16 = 2  # full-bf16 torchtune: gradients and AdamW states in bf16
FP32 = 4
LLAMA2_7B_MLP = 11008 * 4096  # Llama-2-7b's gate / up / down projections: its largest block tensor


def _phase(
    name: str, phase: str, optimizer: Optimizer, impl: OptimizerImpl = OptimizerImpl.FUSED
) -> dict[str, int]:
    request = PlanRequest(
        model=resolve_model(name),
        mode=Mode.TRAIN,
        precision=Precision.BF16,
        optimizer=optimizer,
        optimizer_impl=impl,
        optimizer_in_backward=True,
        micro_batch=2,
        seq_len=2048,
        checkpointing=Checkpointing.FULL,
        framework=Framework.TORCHTUNE,
    )
    plan = plan_memory(request)
    return next(p for p in plan.phases if p.name == phase).bytes_by_component


@pytest.mark.parametrize(
    ("optimizer", "impl", "step_copies"),
    [
        (Optimizer.ADAMW, OptimizerImpl.FOR_LOOP, 2),  # sqrt() and its quotient
        (Optimizer.ADAMW, OptimizerImpl.FOREACH, 1),  # _foreach_sqrt over one parameter
        (Optimizer.ADAMW_8BIT, OptimizerImpl.FUSED, 0),  # bitsandbytes: one in-place kernel
    ],
)
def test_the_last_block_steps_its_largest_matrix_during_its_backward(
    optimizer: Optimizer, impl: OptimizerImpl, step_copies: int
) -> None:
    fused = _phase("Llama-2-7b-hf", "backward", Optimizer.ADAMW)["temporaries"]
    stepped = _phase("Llama-2-7b-hf", "backward", optimizer, impl)["temporaries"]
    assert stepped - fused == pytest.approx(step_copies * LLAMA2_7B_MLP * BF16, abs=1)


def test_an_untied_head_steps_first_next_to_every_saved_activation() -> None:
    # Qwen2.5-7B: an untied 152,064 × 3,584 head, far larger than any block matrix; torchao's
    # AdamW8bit dequantizes both its states to fp32 while its bf16 gradient waits to be freed
    spec = resolve_model("Qwen2.5-7B")
    head = spec.vocab_size * spec.hidden_size
    backward = _phase("Qwen2.5-7B", "backward", Optimizer.ADAMW_8BIT_TORCHAO)
    assert backward["gradients"] == pytest.approx(head * BF16, abs=1)
    assert backward["temporaries"] == pytest.approx(2 * head * FP32, abs=1)


def test_a_tied_embedding_steps_after_its_two_gradient_parts_are_summed() -> None:
    # Llama-3.2-1B ties the head to the embedding: its gradient completes at the lookup
    spec = resolve_model("Llama-3.2-1B")
    embedding = spec.vocab_size * spec.hidden_size
    step = _phase("Llama-3.2-1B", "embedding-backward", Optimizer.ADAMW_8BIT_TORCHAO)
    assert step["gradients"] == pytest.approx(embedding * BF16, abs=1)
    assert step["temporaries"] == pytest.approx(2 * embedding * FP32, abs=1)
    fused = _phase("Llama-3.2-1B", "embedding-backward", Optimizer.ADAMW)
    assert fused["gradients"] == pytest.approx(3 * embedding * BF16, abs=1)  # the sum, unchanged
    assert fused["temporaries"] == 0
