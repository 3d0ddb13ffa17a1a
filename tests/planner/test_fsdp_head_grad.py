"""The LM head's unsharded gradient under FSDP: alive from the head's backward (the first of the
blocks') to the end of backward where its unit is reduced only then (torch 2.13 sources):

* FSDP1 ``fsdp/_runtime_utils.py``: ``_register_post_backward_hook`` hooks the flat parameter's
  ``AccumulateGrad``, which runs only once the flat parameter's whole gradient is in; the head is
  a ``torch.split`` view of the root unit's flat parameter, with the embedding, whose gradient
  comes last; ``_reduce_grad`` then takes ``flat_param.grad`` and drops it.
* FSDP2 ``fsdp/_fully_shard``: the root group's inputs are token ids (no gradient), so its
  ``post_backward`` runs from ``_root_post_backward_final_callback`` after backward;
  ``foreach_reduce`` frees the unsharded gradients after their copy-in.

A head wrapped as its own unit is reduced right after its backward: nothing is kept, unless it
is tied to the embedding (whose lookup adds the gradient's last part). The gradient has the
unsharded parameter's dtype: bf16 under MixedPrecision(param_dtype=bf16).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    FsdpKind,
    Kernels,
    LossImpl,
    Mode,
    PlanRequest,
    Precision,
)

BF16 = 2


def _request(model: str, **changes: object) -> PlanRequest:
    base = PlanRequest(
        model=resolve_model(model),
        mode=Mode.TRAIN,
        precision=Precision.BF16_MIXED,
        num_gpus=4,
        fsdp=FsdpKind.FULL,
        micro_batch=8,
        seq_len=512,
        checkpointing=Checkpointing.FULL,
        framework=Framework.HF_LEGACY,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def _phase(request: PlanRequest, name: str) -> dict[str, int]:
    (phase,) = [p for p in plan_memory(request).phases if p.name == name]
    return phase.bytes_by_component


def _backward_only_comm(request: PlanRequest) -> int:
    """What the backward holds unsharded besides the forward's gathered units."""
    return (
        _phase(request, "backward")["communication"] - _phase(request, "forward")["communication"]
    )


def _head_matrix(model: str) -> int:
    spec = resolve_model(model)
    return spec.vocab_size * spec.hidden_size


@pytest.mark.parametrize("kernels", [Kernels.NONE, Kernels.LIGER])
def test_a_root_unit_head_keeps_its_unsharded_gradient_through_backward(kernels: Kernels) -> None:
    # Llama-3-8B: untied 128,256 x 4,096 head, in the root unit (accelerate's transformer-layer
    # auto wrap) or a unit of its own (custom_sharded_layers)
    loss = LossImpl.FUSED if kernels is Kernels.LIGER else LossImpl.FULL
    root = _request("Meta-Llama-3-8B", kernels=kernels, loss=loss)
    own = replace(root, fsdp_shard_embeddings=True)
    kept = _backward_only_comm(root) - _backward_only_comm(own)
    assert kept == pytest.approx(_head_matrix("Meta-Llama-3-8B") * BF16, abs=2)
    for end in ("backward", "backward-end"):
        assert _phase(root, end)["communication"] == _phase(root, "backward")["communication"]


def test_a_tied_head_waits_for_the_embedding_in_either_wrapping() -> None:
    # gemma-7b ties its 256,000 x 3,072 head to the embedding: one parameter, whose gradient
    # completes at the lookup's backward whatever unit holds it
    root = _request("gemma-7b")
    own = replace(root, fsdp_shard_embeddings=True)
    assert _backward_only_comm(root) == pytest.approx(_backward_only_comm(own), abs=2)
    untied_root = _request("Meta-Llama-3-8B")
    untied_own = replace(untied_root, fsdp_shard_embeddings=True)
    assert _backward_only_comm(untied_root) > _backward_only_comm(untied_own)


def test_no_head_gradient_without_sharding_or_training() -> None:
    lora = _request("Meta-Llama-3-8B", mode=Mode.LORA)
    lora_own = replace(lora, fsdp_shard_embeddings=True)
    assert _backward_only_comm(lora) == pytest.approx(_backward_only_comm(lora_own), abs=2)
    one_gpu = _request("Meta-Llama-3-8B", num_gpus=1, fsdp=None)
    assert _phase(one_gpu, "backward")["communication"] == 0
