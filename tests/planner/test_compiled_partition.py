"""The formula's torch.compile terms against what the min-cut partitioner really keeps.

``exact.compiled_block`` traces the first decoder block of a small model (every structural flag
of its bundled config, test_formula_vs_exact's ``SMALL``) through AOTAutograd's
``min_cut_rematerialization_partition`` as Inductor calls it, and counts the backward graph's
saved inputs by storage. The formula's side is the plan's per-block activations with
``compile=True``. Families whose layers differ from block to block (Gemma 3's sliding and global
layers, Llama 4, DeepSeek's dense-then-MoE) are left out: the plan reports one figure per block
kind, not per layer. MLA is left out too: exact mode stands in for CUDA's memory-efficient SDPA
kernel with a Python autograd.Function, whose backward the partitioner would trace as math ops.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuwarden.errors import GpuwardenError
from gpuwarden.planner import plan_memory
from gpuwarden.planner.exact import compiled_block
from gpuwarden.types.plan import ActivationFacts, Framework, Mode, PlanRequest
from tests.planner.test_formula_vs_exact import make_request

pytest.importorskip("torch")

BATCH, SEQ = 2, 32
# one kind of block throughout; the norms' and the MLP's kinds all occur (RMSNorm, LayerNorm,
# gated SiLU, Python tanh-GELU, GELU, parallel blocks, fused qkv, partial rotary, q/k norms)
UNIFORM = [
    "llama",
    "llama-tied-gqa",
    "mistral",
    "qwen2",
    "phi3",
    "gemma",
    "gpt2",
    "gpt_bigcode",
    "falcon",
    "falcon-new",
    "phi",
    "gpt_neox",
    "olmo2",
    "granite",
    "starcoder2",
    "qwen3",
]


def _compiled_request(family: str) -> PlanRequest:
    return dataclasses.replace(make_request(family, "bf16-sdpa", BATCH, SEQ), compile=True)


def _formula_block_bytes(request: PlanRequest) -> int:
    plan = plan_memory(request)
    facts = next(c.facts for c in plan.components if isinstance(c.facts, ActivationFacts))
    (saved,) = facts.per_block_bytes.values()
    return saved


@pytest.mark.parametrize("family", UNIFORM)
def test_formula_compile_terms_match_the_partitioner(family: str) -> None:
    """To the byte: what the compiled block keeps for backward, formula and partitioner."""
    request = _compiled_request(family)
    traced = compiled_block(request)
    assert traced.tokens == BATCH * SEQ
    assert _formula_block_bytes(request) == traced.block_bytes


def test_compiled_block_keeps_fewer_tensors_than_eager() -> None:
    """The partitioner recomputes the norms' arithmetic and SiLU's output: the Llama block keeps
    its input, x̂ and rstd per norm, q/k/v, the attention output, the logsumexp, gate, up and
    down's input, and nothing of SiLU."""
    request = _compiled_request("llama")
    traced = compiled_block(request)
    eager = _formula_block_bytes(dataclasses.replace(request, compile=False))
    assert traced.block_bytes < eager
    spec = request.model
    tokens, h, i = BATCH * SEQ, spec.hidden_size, spec.intermediate_size
    rows = [t for t in traced.tensors if t.bytes]
    fp32_per_row = [t for t in rows if t.dtype == "torch.float32" and t.bytes == 4 * tokens]
    assert len(fp32_per_row) == 2  # one rstd per RMSNorm
    i_wide = [t for t in rows if t.bytes == 2 * i * tokens]
    assert len(i_wide) == 3  # gate output, up output, down_proj's input
    assert [t.kind for t in rows if t.kind != "activation"].count("block input") == 1
    assert sum(t.bytes for t in rows if t.shape[-1] == h and t.kind == "block input") == (
        2 * h * tokens
    )


def test_partitioner_keeps_copied_kv(monkeypatch: pytest.MonkeyPatch) -> None:
    """GQA K/V copied to every head before SDPA (transformers' repeat_kv, torchtune's and
    LitGPT's expand + reshape) are SDPA's backward inputs: compiled, they stay saved, and what
    they add is what the formula adds for a stack that copies them."""
    from transformers.integrations import sdpa_attention

    request = _compiled_request("llama-tied-gqa")
    grouped = compiled_block(request).block_bytes
    monkeypatch.setattr(sdpa_attention, "use_gqa_in_sdpa", lambda *args: False)
    repeated = compiled_block(request).block_bytes
    legacy = dataclasses.replace(request, framework=Framework.HF_LEGACY)
    assert repeated > grouped
    assert _formula_block_bytes(legacy) - _formula_block_bytes(request) == repeated - grouped


def test_python_tanh_gelu_keeps_its_tanh_when_compiled() -> None:
    """Phi's gelu_new: the partitioner keeps fc1's output and tanh's output (tanh's backward
    reads it), two i-wide tensors where eager keeps four and torch's own kernel one."""
    request = _compiled_request("phi")
    traced = compiled_block(request)
    tokens, i = BATCH * SEQ, request.model.intermediate_size
    i_wide = [t for t in traced.tensors if t.bytes == 2 * i * tokens]
    assert len(i_wide) == 3  # fc1 output, tanh output, fc2's input


def test_only_full_training_is_traced() -> None:
    request = dataclasses.replace(_compiled_request("llama"), mode=Mode.INFER)
    with pytest.raises(GpuwardenError) as caught:
        compiled_block(request)
    assert caught.value.reference == "exact-unsupported"
