"""The working set of an MoE block without autograd, against the traced module (transformers
5.24 under FakeTensorMode): routed experts per engine, shared experts, Llama 4's every-expert
dispatch."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.planner.working_set import moe_block_bytes
from gpuwarden.types.plan import Attention, Framework, Optimizer, PlanRequest, Precision
from tests.planner.test_formula_vs_exact import small_spec


def _request(family: str, tokens: int = 64) -> PlanRequest:
    return PlanRequest(
        model=small_spec(family),
        precision=Precision.BF16,
        optimizer=Optimizer.NONE,
        seq_len=tokens,
        attention=Attention.SDPA,
    )


def _traced_moe_block(request: PlanRequest, tokens: int) -> float:
    """Peak bytes per token of the first MoE block's MLP over ``tokens`` bf16 tokens, under
    ``torch.no_grad``, its weights and input excluded."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuwarden.planner.exact import _build, _recipe, _run

    recipe = _recipe.resolve(request)
    with _build.quiet(), FakeTensorMode(), _build.fake_safe_masks():
        built = _build.build(request, recipe)
        model = built.model.eval()
        blocks = [getattr(layer, "mlp", None) or layer.feed_forward for layer in model.model.layers]
        mlp = next(m for m in blocks if hasattr(m, "experts"))
        x = torch.randn(1, tokens, request.model.hidden_size, dtype=torch.bfloat16)
        tracker = _run.PeakTracker()
        tracker.track_external(mlp, x)
        with tracker, torch.no_grad():
            mlp(x)
        held = [*mlp.parameters(), *mlp.buffers(), x]
        return (int(tracker.peak()) - sum(t.numel() * t.element_size() for t in held)) / tokens


@pytest.mark.torch
@pytest.mark.parametrize(
    "family",
    [
        "mixtral",  # grouped_mm, top-2
        "qwen3_moe",  # grouped_mm, top-4 of 16
        "qwen2_moe",  # shared expert first: its output alive through the routed experts
        "deepseek_v2",  # two shared experts after the routed ones; fp32 routing weights
        "deepseek_v3",  # one shared expert, group-limited sigmoid router
        "gpt_oss",  # biased experts, clamped SwiGLU gate
        "llama4",  # every expert on every token, shared expert after
    ],
)
@pytest.mark.parametrize("tokens", [48, 96])
def test_the_moe_working_set_is_what_the_module_holds(family: str, tokens: int) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    request = _request(family, tokens)
    assert moe_block_bytes(request, 2) == pytest.approx(
        _traced_moe_block(request, tokens), rel=0.01
    )


def test_shared_experts_are_counted() -> None:
    request = _request("qwen2_moe")
    moe = request.model.moe
    assert moe is not None and moe.num_shared_experts
    # a shared expert wider than the routed dispatch: its 3·i transient sets the peak
    wide = replace(moe, shared_intermediate_size=64 * moe.shared_intermediate_size)
    widened = replace(request, model=replace(request.model, moe=wide))
    assert moe_block_bytes(widened, 2) == 3 * 64 * moe.shared_intermediate_size * 2
    alone = replace(request, model=replace(request.model, moe=replace(moe, num_shared_experts=0)))
    h = request.model.hidden_size
    assert moe_block_bytes(request, 2) == moe_block_bytes(alone, 2) + 2 * h  # its output


def test_llama4_runs_every_expert_in_transformers_and_top_k_in_vllm() -> None:
    request = _request("llama4")
    moe = request.model.moe
    assert moe is not None and moe.experts_per_token < moe.num_experts
    h, i = request.model.hidden_size, moe.expert_intermediate_size
    hf = moe_block_bytes(request, 2)
    assert hf == moe.num_experts * (4 + (2 * h + 3 * i) * 2)
    vllm = moe_block_bytes(replace(request, gpu_memory_utilization=0.9), 2)
    shared = 3 * moe.shared_intermediate_size * 2
    routed = moe.num_experts * 4 + moe.experts_per_token * (2 * h + 3 * i) * 2
    assert vllm == max(routed, shared) + 2 * h
    # other frameworks keep the fused top-k dispatch too
    assert moe_block_bytes(replace(request, framework=Framework.TORCHTUNE), 2) == vllm


def test_a_dense_model_has_no_moe_block() -> None:
    assert moe_block_bytes(_request("llama"), 2) == 0
