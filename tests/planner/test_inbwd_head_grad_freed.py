"""``--optimizer-in-backward``: an untied LM head's gradient is gone before the last block's
backward. torchtune's ``register_optim_in_bwd_hooks`` (training/memory.py) registers on every
parameter a post-accumulate-grad hook that runs ``optim_dict[param].step()`` then
``optim_dict[param].zero_grad()`` (``.grad`` set to None); the head's ``AccumulateGrad`` runs
right after its matmul's backward, first of all. A tied head's gradient is the embedding's,
complete only once the lookup's part is added at the end of backward.

Traced (/tmp/h209/inbwd_head_trace.py: bf16, one AdamW per parameter stepped from that hook,
untied 32768 × 256 head, every live storage tracked by a dispatch mode): at the first block
weight-gradient mm the head has already stepped and no ``.grad`` of it is alive; only its two
AdamW states (the plan's optimizer states) are.
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

BF16 = 2  # full-bf16 torchtune: gradients in bf16


def _backward(name: str) -> dict[str, int]:
    request = PlanRequest(
        model=resolve_model(name),
        mode=Mode.TRAIN,
        precision=Precision.BF16,
        optimizer=Optimizer.ADAMW,
        optimizer_impl=OptimizerImpl.FUSED,  # no step temporaries: the blocks' moment is the peak
        optimizer_in_backward=True,
        micro_batch=2,
        seq_len=2048,
        checkpointing=Checkpointing.FULL,
        framework=Framework.TORCHTUNE,
    )
    (phase,) = [p for p in plan_memory(request).phases if p.name == "backward"]
    return phase.bytes_by_component


def test_an_untied_heads_gradient_is_freed_before_the_last_blocks_backward() -> None:
    # Qwen2.5-7B: an untied 152,064 × 3,584 head; only the last block's share of the
    # gradients is alive in its backward
    spec = resolve_model("Qwen2.5-7B")
    p = spec.parameters
    head = spec.vocab_size * spec.hidden_size
    block_share = p.total / len(p.layers) * BF16
    gradients = _backward("Qwen2.5-7B")["gradients"]
    assert gradients == pytest.approx(block_share, abs=1)
    assert gradients < head * BF16


def test_a_tied_heads_gradient_waits_for_the_lookup() -> None:
    # Llama-3.2-1B ties its head to the 128,256 × 2,048 embedding
    spec = resolve_model("Llama-3.2-1B")
    p = spec.parameters
    block_share = p.total / len(p.layers) * BF16
    gradients = _backward("Llama-3.2-1B")["gradients"]
    assert gradients == pytest.approx(p.embedding * BF16 + block_share, abs=1)
