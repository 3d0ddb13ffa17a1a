"""What the planner's trace tests share: a saved-tensor trace of one module, the bytes of a
recipe's saved items, the state blocks and tiny transformers modules they are traced on, and the
held-out configs the plans start from. Not a test module (pytest collects ``test_*.py`` only).

Whole models go through ``traced_saved`` (the exact mode's own build and counting code) and
``formula_saved`` (the plan's forward-phase activations); test_formula_vs_exact's module doc says
what each counts and why they compare like with like."""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.tensors import Dt, Saved
from gpuwarden.types.model import LayerParameters, LinearShape, Mixer, ModelSpec
from gpuwarden.types.plan import Checkpointing, PlanRequest, Precision

__all__ = [
    "HELDOUT",
    "SIZE",
    "TINY",
    "TINY_REST",
    "VARIANTS",
    "formula_saved",
    "heldout_model",
    "recipe_bytes",
    "rope_tables",
    "state_block",
    "tiny_config",
    "tiny_module",
    "traced_module_bytes",
    "traced_saved",
]

HELDOUT = Path(__file__).resolve().parents[1] / "data" / "model_configs_heldout"

# bytes per element of a saved item's dtype: activations in bf16, the fp32 ones
SIZE = {Dt.ACT: 2, Dt.F32: 4}

# the rest of a tiny hybrid config, where only the mixer's own fields matter
TINY_REST: dict[str, Any] = {
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 64,
}


# a 2-block gemma4_text (one sliding block, one full) and the variants its trace tests run
TINY: dict[str, Any] = {
    "model_type": "gemma4_text",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "global_head_dim": 32,
    "vocab_size": 1000,
    "sliding_window": 32,
    "layer_types": ["sliding_attention", "full_attention"],
    "hidden_size_per_layer_input": 0,
    "num_kv_shared_layers": 0,
}


# Gemma 4 variants: the attention widths (K, V apart or V = K), the E-series' per-layer
# embeddings, the 26B-A4B-style MoE block (dense MLP beside 4 experts, top 2), and both at once
VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "k_eq_v": {"attention_k_eq_v": True, "num_global_key_value_heads": 1},
    "per_layer_inputs": {"hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 1000},
    "moe": {
        "enable_moe_block": True,
        "num_experts": 4,
        "top_k_experts": 2,
        "moe_intermediate_size": 32,
    },
}
VARIANTS["both"] = {**VARIANTS["per_layer_inputs"], **VARIANTS["moe"]}


def recipe_bytes(items: Iterable[Saved], s: int = 1) -> float:
    """Bytes a recipe's saved items hold over ``s`` tokens (per token by default)."""
    return sum(it.width * SIZE[it.dtype] for it in items) * s


def state_block(*linears: LinearShape) -> LayerParameters:
    """A state-mixer block made of ``linears`` alone: what ``wiring`` needs for a mixer recipe."""
    return LayerParameters(
        attention=0, mlp=0, experts=0, router=0, norms=0, linears=linears, mixer=Mixer.STATE
    )


def tiny_config(name: str, **fields: Any) -> Any:
    """``transformers.<name>(**fields)``; skips without transformers."""
    transformers = pytest.importorskip("transformers")
    return getattr(transformers, name)(**fields)


def tiny_module(module: str, cls: str, cfg: Any) -> Any:
    """``transformers.models.<module>.<cls>(cfg, 0)`` (block 0's mixer) in bf16, seeded; skips
    without torch or transformers."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    modeling = importlib.import_module(f"transformers.models.{module}")
    torch.manual_seed(0)
    return getattr(modeling, cls)(cfg, 0).to(torch.bfloat16)


def traced_module_bytes(module: Any, h: int, s: int) -> int:
    """Bytes autograd keeps over one forward of ``module`` on a (1, s, h) bf16 input (CPU, so the
    torch fallbacks), parameters and buffers excluded, each storage once."""
    torch = pytest.importorskip("torch")
    fixed = {p.untyped_storage().data_ptr() for p in [*module.parameters(), *module.buffers()]}
    seen: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        if storage.data_ptr() not in fixed:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    x = torch.randn(1, s, h, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x)
    return sum(seen.values())


def heldout_model(tmp_path: Path, name: str, **changes: Any) -> ModelSpec:
    """The held-out ``arch/<name>.json`` config with ``changes``, resolved as a user's file."""
    config = json.loads((HELDOUT / "arch" / f"{name}.json").read_text(encoding="utf-8"))
    config.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return resolve_model(str(path))


def formula_saved(request: PlanRequest) -> int:
    """Bytes the formula says autograd holds at the end of the forward (test_formula_vs_exact)."""
    plan = plan_memory(request)
    forward = next(p for p in plan.phases if p.name == "forward")
    saved = forward.bytes_by_component["activations"]
    if request.checkpointing is Checkpointing.FULL:
        saved -= rope_tables(request)
    return saved


def rope_tables(request: PlanRequest) -> int:
    """cos + sin of the rotary dims, in the residual dtype (fp32 under AMP), shape (1, s, rot)."""
    spec = request.model
    if spec.position_encoding.value != "rope":
        return 0
    raw = spec.raw_config
    rot = spec.head_dim
    if spec.mla is not None:
        rot = spec.mla.qk_rope_head_dim
    factor = raw.get("partial_rotary_factor", raw.get("rotary_pct"))
    if isinstance(factor, float):
        rot = int(spec.head_dim * factor)
    width = 4 if request.precision is Precision.BF16_MIXED else 2
    return 2 * request.seq_len * rot * width


def traced_saved(request: PlanRequest, adapter_dtype: str | None = None) -> int:
    """``run_exact(request).saved_activation_bytes`` without the whole-step MemTracker pass.

    Same recipe, build and counting code as ``run_exact`` (``_trace.trace`` → ``_train`` →
    ``_run.saved_activations``) in a third of the time; ``test_full_size_model_within_tolerance``
    checks on Llama-2-7B that both give the same bytes. ``adapter_dtype`` builds the LoRA
    adapters in another dtype than exact mode's PEFT default (a stack with its own LoRA).
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuwarden.planner.exact import _build, _recipe, _run

    recipe = _recipe.resolve(request)
    if adapter_dtype is not None:
        recipe = dataclasses.replace(recipe, adapter_dtype=adapter_dtype)
    with (
        _build.quiet(),
        FakeTensorMode(),
        _build.fake_safe_masks(),
        _run.cuda_dropout(),
        _run.cuda_sdpa(),
    ):
        built = _build.build(request, recipe)
        inputs = _run.training_inputs(built, request.micro_batch, request.seq_len)
        return _run.saved_activations(built, inputs, recipe).bytes
