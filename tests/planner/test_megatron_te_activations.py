"""``--framework megatron``: what Megatron-core's Transformer Engine layer keeps for backward per
block, as a closed form of h, ffn, heads and KV heads (planner/stacks.py, module docstring).

Per token of one block, bf16 (TP 1):
* each norm fused into the next Linear (TELayerNormColumnParallelLinear: ``save_for_backward(
  inputmat, ..., rsigma, ..., ln_out)``): its 16-bit input, fp32 rsigma, its output (2h + 4 + 2h);
* linear_qkv's output, of which v stays a ``torch.split`` view (SplitAlongDim): (h + 2 kv) × 2;
* q and k after RoPE, the fused attention's inputs: (h + kv) × 2; its output (linear_proj's
  input): 2h; its softmax statistics: heads × 4;
* fc1's output, kept by the fused bias-SwiGLU as its only input: 2 ffn × 2; fc2's input: ffn × 2.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner.plan import compute_plan
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import (
    ActivationFacts,
    Attention,
    Checkpointing,
    Framework,
    PlanRequest,
    Precision,
)

MODEL = resolve_model("Llama-3.2-1B")  # GQA: 32 heads, 8 KV heads of 64, h 2048, ffn 8192
SEQ, BATCH = 1024, 2


def _request(**knobs: object) -> PlanRequest:
    base = PlanRequest(
        model=MODEL,
        num_gpus=8,
        zero_stage=1,
        micro_batch=BATCH,
        seq_len=SEQ,
        attention=Attention.FLASH,
        checkpointing=Checkpointing.NONE,
        framework=Framework.MEGATRON,
    )
    return replace(base, **knobs)


def _block_bytes_per_token(request: PlanRequest) -> float:
    plan = compute_plan(request)
    facts = next(c for c in plan.components if c.key == "activations").facts
    assert isinstance(facts, ActivationFacts)
    per_block = facts.per_block_bytes["block"]
    return per_block / (request.seq_len * request.micro_batch)


def _widths(spec: ModelSpec) -> tuple[int, int, int, int, int]:
    """h, ffn, heads, q width (heads × head dim), KV width (KV heads × head dim)."""
    h, heads, d = spec.hidden_size, spec.num_heads, spec.head_dim
    return h, spec.intermediate_size, heads, heads * d, spec.num_kv_heads * d


def _megatron_te(spec: ModelSpec) -> float:
    h, ffn, heads, q, kv = _widths(spec)
    norms = 2 * (2 * h + 4 + 2 * h)
    attention = (q + 2 * kv) * 2 + (q + kv) * 2 + 2 * q + 4 * heads
    mlp = 2 * ffn * 2 + ffn * 2
    return norms + attention + mlp


def test_a_te_block_keeps_megatrons_own_tensors() -> None:
    assert _block_bytes_per_token(_request()) == pytest.approx(_megatron_te(MODEL), rel=1e-9)


def test_sequence_parallelism_splits_every_tensor_of_the_block() -> None:
    """With SP the norms' inputs and outputs are sequence shards (TE gathers ln_out again in
    backward instead of keeping the gathered copy); the rest is split by TP."""
    request = _request(tp=2, num_gpus=8, sequence_parallel=True)
    assert _block_bytes_per_token(request) == pytest.approx(_megatron_te(MODEL) / 2, rel=1e-9)


def test_transformers_blocks_are_unchanged() -> None:
    """The same job under transformers keeps LlamaRMSNorm's fp32 input and x̂, separate q / k / v
    projections and SiLU's output (pure bf16: no autocast casts): the fused-kernel behaviours are
    Megatron's profile only."""
    h, ffn, heads, _, kv = _widths(MODEL)
    norms = 2 * (4 * h + 4 + 2 * h + 2 * h)
    attention = 2 * h + 2 * kv + 2 * kv + 2 * h + 4 * heads
    mlp = 4 * ffn * 2
    hf = _request(framework=Framework.HF, zero_stage=0, precision=Precision.BF16)
    assert _block_bytes_per_token(hf) == pytest.approx(norms + attention + mlp, rel=1e-9)


def test_qk_layernorm_keeps_the_query_copy_it_normalises() -> None:
    """Qwen3 (q_layernorm / k_layernorm = TENorm): q_layernorm keeps its input, the query that
    SelfAttention reshapes out of the split (a copy under GQA), and one fp32 rsigma per head;
    k_layernorm keeps a contiguous copy of k too (TE's RMSNorm op saves input_.contiguous(), and
    k is a strided split of linear_qkv's output: r8c's review, the term h71a left out)."""
    spec = resolve_model("Qwen3-0.6B")
    _, _, heads, q, kv = _widths(spec)
    request = _request(model=spec)
    expected = _megatron_te(spec) + 2 * q + 2 * kv + 4 * (heads + kv // spec.head_dim)
    assert _block_bytes_per_token(request) == pytest.approx(expected, rel=1e-9)
