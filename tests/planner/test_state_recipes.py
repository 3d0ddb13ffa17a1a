"""The recipes of LFM2's short convolution and the Mamba-1 mixer (planner/families.py
``short_convolution``, ``mamba1``) against traces of transformers' Lfm2ShortConv, MambaMixer and
JambaMambaMixer, and how plans of LFM2 and Jamba use them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.planner import families, mixers, plan_memory
from gpuwarden.planner.tensors import Ctx, wiring
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    Mamba1Shape,
    Mixer,
    ScanNorms,
    StateKind,
)
from gpuwarden.types.plan import Attention, Mode, Optimizer, PlanRequest, Precision
from tests.planner.saved_trace import (
    HELDOUT,
    TINY_REST,
    formula_saved,
    heldout_model,
    recipe_bytes,
    state_block,
    tiny_config,
    tiny_module,
    traced_module_bytes,
    traced_saved,
)


def _state_block(h: int, out_in: int) -> LayerParameters:
    return state_block(
        LinearShape("in_proj", h, 3 * h, part="attention"),
        LinearShape("out_proj", out_in, h, part="attention"),
    )


def _traced(mixer: Any, h: int, s: int) -> int:
    """Bytes autograd keeps over one forward of ``mixer``, less the mixer's input (in_proj's: the
    block norm's output, the block's to count)."""
    return traced_module_bytes(mixer, h, s) - s * h * 2


# --- LFM2's short convolution ---------------------------------------------------------------------

# (hidden, conv_L_cache, sequence)
CONV_SHAPES = [(64, 3, 128), (48, 4, 100), (96, 2, 40)]


def _lfm2_short_conv(h: int, kernel: int) -> Any:
    fields = {**TINY_REST, "layer_types": ["conv", "full_attention"]}
    cfg = tiny_config("Lfm2Config", hidden_size=h, conv_L_cache=kernel, **fields)
    return tiny_module("lfm2.modeling_lfm2", "Lfm2ShortConv", cfg)


@pytest.mark.torch
@pytest.mark.parametrize("shape", CONV_SHAPES, ids=lambda s: "h{}-k{}-s{}".format(*s))
def test_the_short_convolution_recipe_matches_a_trace(shape: tuple[int, int, int]) -> None:
    h, kernel, s = shape
    traced = _traced(_lfm2_short_conv(h, kernel), h, s)
    w = wiring(_state_block(h, h), h)
    ctx = Ctx(s=s, eager=True, compile=False, mixer_kernels=False)
    assert recipe_bytes(mixers.short_convolution(h, kernel, ctx, w), s) == pytest.approx(
        traced, rel=0.02
    )


def test_causal_conv1d_keeps_the_unpadded_conv_output() -> None:
    # the fallback's F.conv1d output is kernel − 1 columns longer; the kernel's is not
    h, kernel, s = 64, 3, 128
    w = wiring(_state_block(h, h), h)
    fallback = mixers.short_convolution(h, kernel, Ctx(s, True, False, mixer_kernels=False), w)
    kernels = mixers.short_convolution(h, kernel, Ctx(s, False, False, mixer_kernels=True), w)
    assert recipe_bytes(kernels, s) == s * 6 * h * 2
    assert recipe_bytes(fallback, s) - recipe_bytes(kernels, s) == (kernel - 1) * h * 2
    assert [it.consumers for it in kernels if it.consumers] == [w.attn_out]


# --- Mamba-1 --------------------------------------------------------------------------------------

# (hidden, d_state, conv kernel, sequence); the mixers' inner width is 2 · hidden, dt rank h / 16
MAMBA_SHAPES = [(64, 16, 4, 96), (48, 8, 3, 64), (32, 4, 4, 120)]


def _mamba_mixer(kind: str, h: int, d_state: int, kernel: int) -> Any:
    if kind == "jamba":
        cfg = tiny_config(
            "JambaConfig",
            **TINY_REST,
            hidden_size=h,
            mamba_d_state=d_state,
            mamba_d_conv=kernel,
            mamba_expand=2,
            num_experts=1,
        )
        return tiny_module("jamba.modeling_jamba", "JambaMambaMixer", cfg)
    cfg = tiny_config(
        "MambaConfig",
        hidden_size=h,
        state_size=d_state,
        conv_kernel=kernel,
        expand=2,
        vocab_size=64,
    )
    return tiny_module("mamba.modeling_mamba", "MambaMixer", cfg)


def _dims(h: int, d_state: int, kernel: int, norms: bool) -> mixers.Mamba1Dims:
    return mixers.Mamba1Dims(2 * h, d_state, -(-h // 16), kernel, norms)


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["mamba", "jamba"])
@pytest.mark.parametrize("shape", MAMBA_SHAPES, ids=lambda s: "h{}-n{}-k{}-s{}".format(*s))
def test_the_mamba1_torch_fallback_recipe_matches_a_trace(
    kind: str, shape: tuple[int, int, int, int]
) -> None:
    h, d_state, kernel, s = shape
    traced = _traced(_mamba_mixer(kind, h, d_state, kernel), h, s)
    dims = _dims(h, d_state, kernel, norms=kind == "jamba")
    w = wiring(_state_block(h, dims.inner), h)
    ctx = Ctx(s=s, eager=True, compile=False, mixer_kernels=False)
    assert recipe_bytes(mixers.mamba1(dims, ctx, w), s) == pytest.approx(traced, rel=0.02)


def test_the_torch_scan_keeps_every_tokens_state_the_kernels_one_per_chunk() -> None:
    # fallback: discretised A and B·u, each step's fp32 state and its bf16 copy: 14 bytes per
    # channel and state element; mamba-ssm keeps the state once per 2048 tokens, in fp32
    dims = _dims(1024, 16, 4, norms=False)
    w = wiring(_state_block(1024, dims.inner), 1024)
    states = dims.inner * dims.d_state
    s = 4096
    fallback = Ctx(s, True, False, mixer_kernels=False)
    wider = replace(dims, d_state=32)
    grow = recipe_bytes(mixers.mamba1(wider, fallback, w), s) - recipe_bytes(
        mixers.mamba1(dims, fallback, w), s
    )
    assert grow / s == pytest.approx(14 * dims.inner * 16, rel=0.01)
    kernels = mixers.mamba1(dims, Ctx(s, False, False, mixer_kernels=True), w)
    scan = [it for it in kernels if "2048-token" in it.what]
    assert [it.width for it in scan] == [2 * states * 2 / s]
    # MambaInnerFn: xz, x_dbl, B and C, the scan output; no out_proj input (recomputed)
    rank, n = dims.dt_rank, dims.d_state
    assert (
        recipe_bytes(kernels, s) / s == 2 * (3 * dims.inner + rank + 4 * n) + 4 * 2 * states * 2 / s
    )
    assert not any(it.consumers for it in kernels)


# --- plans ----------------------------------------------------------------------------------------


def _jamba(tmp_path: Path) -> Any:
    return heldout_model(
        tmp_path, "jamba", hidden_size=128, intermediate_size=256, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=512, mamba_d_state=16,
        attn_layer_period=4, attn_layer_offset=1, num_experts=1, mamba_dt_rank="auto",
    )  # fmt: skip


def _lfm2(tmp_path: Path) -> Any:
    return heldout_model(
        tmp_path, "lfm2", hidden_size=128, intermediate_size=384, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
        layer_types=["conv", "full_attention", "conv", "conv"],
    )  # fmt: skip


def test_jamba_mamba_blocks_use_the_mamba1_recipe(tmp_path: Path) -> None:
    spec = _jamba(tmp_path)
    layer = next(x for x in spec.parameters.layers if x.mixer is Mixer.STATE)
    assert mixers._mamba1_dims(spec, layer) == mixers.Mamba1Dims(256, 16, 8, 4, True)
    assert mixers.modelled_mixer(spec)
    request = PlanRequest(model=spec, mode=Mode.TRAIN, seq_len=256, micro_batch=2)
    kernels = plan_memory(request)
    assert "mamba-ssm and causal-conv1d kernels' saved" in kernels.notes["state_blocks"]
    fallback = plan_memory(replace(request, attention=Attention.EAGER))
    assert (
        "torch fallbacks (no mamba-ssm / causal-conv1d kernels)" in (fallback.notes["state_blocks"])
    )
    switched = plan_memory(replace(request, mixer_kernels=False))
    assert switched.notes["state_blocks"] == fallback.notes["state_blocks"]
    assert switched.component("activations") > 4 * kernels.component("activations")
    items = families.block(spec, layer, Ctx(s=256, eager=False, compile=False))
    assert any("selective scan" in it.what for it in items)
    assert not any(it.role is not None and it.role.value == "q" for it in items)


def test_lfm2_conv_blocks_use_the_short_convolution_recipe(tmp_path: Path) -> None:
    spec = _lfm2(tmp_path)
    assert mixers.modelled_mixer(spec)
    layer = next(x for x in spec.parameters.layers if x.mixer is Mixer.STATE)
    items = families.block(spec, layer, Ctx(s=256, eager=True, compile=False))
    assert any(it.what == "B·x (conv input)" for it in items)
    request = PlanRequest(model=spec, mode=Mode.TRAIN, seq_len=256, micro_batch=2)
    note = plan_memory(request).notes["state_blocks"]
    assert note == (
        "3 short-convolution blocks planned with the causal-conv1d kernel's saved tensors, "
        "read from their source"
    )
    eager = plan_memory(replace(request, attention=Attention.EAGER)).notes["state_blocks"]
    assert "torch fallbacks (no causal-conv1d kernel), traced" in eager


def test_a_mamba1_mixer_that_is_not_traced_stays_approximated(tmp_path: Path) -> None:
    # FalconMambaMixer's weightless dt / B / C norms are not traced: the attention stand-in
    spec = resolve_model(str(HELDOUT / "arch" / "falcon_mamba.json"))
    assert spec.state is not None and spec.state.kind == StateKind.MAMBA
    assert not mixers.modelled_mixer(spec)
    plan = plan_memory(PlanRequest(model=spec, mode=Mode.TRAIN, seq_len=256))
    assert "approximated" in plan.notes["state_blocks"]
    assert isinstance(spec.state.mixer_shape, Mamba1Shape)
    assert spec.state.mixer_shape.norms is ScanNorms.WEIGHTLESS
    # a Jamba StateSpec built without the mixer's inner sizes: the stand-in too
    jamba = _jamba(tmp_path)
    assert jamba.state is not None
    bare = replace(jamba, state=replace(jamba.state, mixer_shape=None))
    assert not mixers.modelled_mixer(bare)


@pytest.mark.parametrize("name", ["jamba", "mamba"])
def test_held_out_mamba1_configs_are_modelled(name: str) -> None:
    spec = resolve_model(str(HELDOUT / "arch" / f"{name}.json"))
    assert spec.state is not None and spec.state.kind == StateKind.MAMBA
    assert mixers.modelled_mixer(spec), name


@pytest.mark.torch
@pytest.mark.parametrize("attention", [Attention.EAGER, Attention.SDPA])
def test_a_tiny_lfm2_with_its_q_k_layernorms_matches_the_trace(attention: Attention) -> None:
    """Conv and attention blocks together: the short-convolution recipe plus the attention
    blocks' per-head q_layernorm / k_layernorm (catalog/traits.py lfm2 row) give the traced
    bytes (measured 0.00 %; −3.6 / −4.5 % before the row)."""
    pytest.importorskip("transformers")

    cfg = {
        **json.loads((HELDOUT / "arch" / "lfm2.json").read_text(encoding="utf-8")),
        "hidden_size": 128,
        "intermediate_size": 256,
        "block_ff_dim": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 4,
        "layer_types": ["conv", "full_attention", "conv", "full_attention"],
        "vocab_size": 512,
    }
    spec = normalise("tiny-lfm2", cfg, "tiny lfm2")
    request = PlanRequest(
        model=spec,
        micro_batch=2,
        seq_len=256,
        optimizer=Optimizer.NONE,
        precision=Precision.BF16,
        attention=attention,
        mixer_kernels=False,
    )
    exact, formula = traced_saved(request), formula_saved(request)
    assert abs(formula - exact) <= 0.01 * exact, f"formula {formula:,} B, exact {exact:,} B"
