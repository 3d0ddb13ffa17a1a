"""The Mamba-2 mixer's training recipe (planner/families.py ``mamba2``) against a trace of
transformers' NemotronHMamba2Mixer, and how plans of Mamba-2 hybrids use it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.errors import GpuwardenError
from gpuwarden.planner import families, mixers, plan_memory
from gpuwarden.planner.state import conv_channels_per_rank
from gpuwarden.planner.tensors import Ctx, wiring
from gpuwarden.planner.validate import tp_fits_heads
from gpuwarden.types.model import LayerParameters, LinearShape, Mamba2Shape, Mixer, StateKind
from gpuwarden.types.plan import Attention, Engine, Mode, PlanRequest
from tests.planner.saved_trace import (
    HELDOUT,
    TINY_REST,
    heldout_model,
    recipe_bytes,
    state_block,
    tiny_config,
    tiny_module,
    traced_module_bytes,
)

# (hidden, heads, head_dim, groups, d_state, kernel, chunk, sequence): a sequence of whole chunks,
# one that pads the last chunk, and groups = heads
SHAPES = [
    (48, 4, 16, 2, 8, 4, 32, 256),
    (64, 8, 8, 1, 16, 4, 64, 200),
    (32, 2, 16, 2, 4, 3, 16, 96),
]


def _mixer_block(h: int, heads: int, head_dim: int, groups: int, d_state: int) -> LayerParameters:
    inner = heads * head_dim
    conv = inner + 2 * groups * d_state
    return state_block(
        LinearShape("in_proj", h, inner + conv + heads, part="attention"),
        LinearShape("out_proj", inner, h, part="attention"),
    )


def _mamba2_fields(shape: tuple[int, ...]) -> dict[str, Any]:
    return {**TINY_REST, "hidden_size": shape[0], "head_dim": 8}


def _falcon_h1_mixer(shape: tuple[int, ...], rms_norm: bool) -> Any:
    """FalconH1Mixer with its µP vector (the model sets it as a buffer, FalconH1Model)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.falcon_h1 import modeling_falcon_h1 as fh

    _, heads, head_dim, groups, d_state, kernel, chunk, _ = shape
    cfg = tiny_config(
        "FalconH1Config",
        **_mamba2_fields(shape),
        mamba_n_heads=heads,
        mamba_d_head=head_dim,
        mamba_d_ssm=heads * head_dim,
        mamba_n_groups=groups,
        mamba_d_state=d_state,
        mamba_d_conv=kernel,
        mamba_chunk_size=chunk,
        mamba_rms_norm=rms_norm,
    )
    mixer = tiny_module("falcon_h1.modeling_falcon_h1", "FalconH1Mixer", cfg)
    mixer.register_buffer("mup_vector", fh.compute_mup_vector(cfg), persistent=False)
    return mixer.to(torch.bfloat16)  # the µP vector too


def _nemotron_h_mixer(shape: tuple[int, ...]) -> Any:
    _, heads, head_dim, groups, d_state, kernel, chunk, _ = shape
    cfg = tiny_config(
        "NemotronHConfig",
        **_mamba2_fields(shape),
        mamba_num_heads=heads,
        mamba_head_dim=head_dim,
        n_groups=groups,
        ssm_state_size=d_state,
        conv_kernel=kernel,
        chunk_size=chunk,
    )
    return tiny_module("nemotron_h.modeling_nemotron_h", "NemotronHMamba2Mixer", cfg)


def _recipe(shape: tuple[int, ...], *, kernels: bool, **variant: Any) -> float:
    h, heads, head_dim, groups, d_state, kernel, chunk, s = shape
    inner = heads * head_dim
    dims = mixers.Mamba2Dims(heads, head_dim, groups, d_state, chunk, kernel, **variant)
    w = wiring(_mixer_block(h, heads, head_dim, groups, d_state), h)
    ctx = Ctx(s=s, eager=True, compile=False, mixer_kernels=kernels)
    assert dims.conv == inner + 2 * groups * d_state
    return recipe_bytes(mixers.mamba2(dims, ctx, w), s)


@pytest.mark.torch
@pytest.mark.parametrize(
    "shape", SHAPES, ids=lambda s: "h{}-H{}-p{}-g{}-n{}-k{}-Q{}-s{}".format(*s)
)
def test_the_torch_fallback_recipe_matches_a_trace_of_the_mixer(shape: tuple[int, ...]) -> None:
    """Within 2 % of all the mixer keeps; the mixer's input (in_proj's, the block norm's output)
    is the block's to count."""
    h, s = shape[0], shape[-1]
    traced = traced_module_bytes(_nemotron_h_mixer(shape), h, s) - s * h * 2
    assert _recipe(shape, kernels=False) == pytest.approx(traced, rel=0.02)


@pytest.mark.torch
@pytest.mark.parametrize("rms_norm", [False, True])
def test_falcon_h1s_mixer_matches_its_variant(rms_norm: bool) -> None:
    """FalconH1Mixer: in_proj reads a scaled copy of the input (counted here, not the input
    itself), and without mamba_rms_norm (its default) the norm is y · SiLU(z)."""
    shape = SHAPES[0]
    h, s = shape[0], shape[-1]
    traced = traced_module_bytes(_falcon_h1_mixer(shape, rms_norm), h, s)
    recipe = _recipe(shape, kernels=False, gated_norm=rms_norm, scaled_input_width=h)
    assert recipe == pytest.approx(traced, rel=0.02)
    # the plain gate keeps 3 inner-wide tensors fewer than the fp32 norm (1 of 5 fp32 becomes bf16)
    if not rms_norm:
        normed = _recipe(shape, kernels=False, gated_norm=True, scaled_input_width=h)
        inner = shape[1] * shape[2]
        assert normed - recipe == s * (inner * (5 * 4 - 4 - 2) + shape[3] * 4)


def test_the_mamba_ssm_recipe_keeps_in_proj_output_scan_output_and_rstd() -> None:
    # MambaSplitConv1dScanCombinedFn saves zxbcdt, out_x and rstd; conv, norm output and
    # out_proj input are recomputed in backward, so nothing grows with the chunk
    h, heads, head_dim, groups, d_state = 256, 16, 32, 2, 16
    inner, conv = heads * head_dim, heads * head_dim + 2 * groups * d_state
    w = wiring(_mixer_block(h, heads, head_dim, groups, d_state), h)
    widths = []
    for chunk in (64, 256):
        dims = mixers.Mamba2Dims(heads, head_dim, groups, d_state, chunk, 4)
        items = mixers.mamba2(dims, Ctx(s=4096, eager=False, compile=False), w)
        widths.append(recipe_bytes(items))
    assert widths[0] == widths[1] == 2 * (inner + conv + heads) + 2 * inner + 4 * groups


def test_the_torch_fallback_grows_with_the_chunk() -> None:
    # L, C·Bᵀ and the masked scores are heads × chunk fp32 per token; the chunk states shrink
    h, heads, head_dim, groups, d_state = 256, 16, 32, 2, 16
    w = wiring(_mixer_block(h, heads, head_dim, groups, d_state), h)
    ctx = Ctx(s=4096, eager=True, compile=False, mixer_kernels=False)

    def per_token(chunk: int) -> float:
        dims = mixers.Mamba2Dims(heads, head_dim, groups, d_state, chunk, 4)
        return recipe_bytes(mixers.mamba2(dims, ctx, w))

    states = heads * head_dim * d_state * 4 * 2  # entering and leaving each chunk, fp32
    decay = heads * 4  # the chunk-to-chunk decay, (chunks + 1)² per sequence
    grow = 3 * heads * 4 * (256 - 64) - states * (1 / 64 - 1 / 256)
    grow -= decay * ((4096 / 64 + 1) ** 2 - (4096 / 256 + 1) ** 2) / 4096
    assert per_token(256) - per_token(64) == pytest.approx(grow, abs=0.5)


# --- plans ----------------------------------------------------------------------------------------


def _nemotron_h(tmp_path: Path) -> Any:
    return heldout_model(
        tmp_path, "nemotron_h", hidden_size=256, intermediate_size=512, head_dim=32,
        num_attention_heads=8, num_key_value_heads=2, mamba_num_heads=16, mamba_head_dim=32,
        n_groups=2, ssm_state_size=16, vocab_size=2048, chunk_size=64,
        layers_block_type=["linear_attention", "mlp", "full_attention", "mlp"],
    )  # fmt: skip


def test_nemotron_h_state_blocks_use_the_mamba2_recipe(tmp_path: Path) -> None:
    spec = _nemotron_h(tmp_path)
    layer = next(x for x in spec.parameters.layers if x.mixer is Mixer.STATE)
    dims = mixers._mamba2_dims(spec, layer)
    assert dims == mixers.Mamba2Dims(16, 32, 2, 16, 64, 4)
    assert mixers.modelled_mixer(spec)
    request = PlanRequest(model=spec, mode=Mode.TRAIN, seq_len=256, micro_batch=2)
    kernels = plan_memory(request)
    assert "mamba-ssm and causal-conv1d kernels" in kernels.notes["state_blocks"]
    fallback = plan_memory(replace(request, attention=Attention.EAGER))
    assert "torch fallbacks (no mamba-ssm" in fallback.notes["state_blocks"]
    switched = plan_memory(replace(request, mixer_kernels=False))
    assert switched.notes["state_blocks"] == fallback.notes["state_blocks"]
    # the fallback's fp32 chunk tensors against the kernels' three saved tensors
    assert switched.component("activations") > kernels.component("activations")
    items = families.block(spec, layer, Ctx(s=256, eager=False, compile=False))
    assert any("zxbcdt" in it.what for it in items)
    assert not any(it.role is not None and it.role.value == "q" for it in items)


def test_the_config_default_chunk_is_the_model_types(tmp_path: Path) -> None:
    spec = _nemotron_h(tmp_path)
    raw = {k: v for k, v in spec.raw_config.items() if k != "chunk_size"}

    def chunk(cfg: dict[str, Any]) -> int:
        state = normalise("tiny", cfg, "tiny").state
        assert state is not None and isinstance(state.mixer_shape, Mamba2Shape)
        return state.mixer_shape.chunk_tokens

    assert chunk(spec.raw_config) == 64
    assert chunk(raw) == 128  # NemotronHConfig
    bamba = {**raw, "model_type": "bamba"}
    assert chunk(bamba) == 256
    assert chunk({**bamba, "mamba_chunk_size": 32}) == 32
    # the chunk sizes no weight: a value no kernel takes falls back to the class default
    assert chunk({**bamba, "mamba_chunk_size": "64"}) == 256


def test_a_state_without_its_mixer_shape_falls_back_to_the_attention_recipe(
    tmp_path: Path,
) -> None:
    spec = _nemotron_h(tmp_path)
    assert spec.state is not None
    # a StateSpec built without the mixer's inner sizes: the stand-in, and the plan says so
    bare = replace(spec, state=replace(spec.state, mixer_shape=None))
    assert not mixers.modelled_mixer(bare)
    plan = plan_memory(PlanRequest(model=bare, mode=Mode.TRAIN, seq_len=256))
    assert "approximated" in plan.notes["state_blocks"]


@pytest.mark.parametrize("name", ["falcon_h1", "bamba", "granitemoehybrid", "mamba2"])
def test_other_mamba2_families_are_modelled(name: str) -> None:
    spec = resolve_model(str(HELDOUT / "arch" / f"{name}.json"))
    assert spec.state is not None and spec.state.kind == StateKind.MAMBA2
    assert mixers.modelled_mixer(spec), name
    plan = plan_memory(PlanRequest(model=spec, mode=Mode.TRAIN, seq_len=512))
    assert "mamba-ssm" in plan.notes["state_blocks"]


# --- tensor parallelism and the B/C groups (vLLM / SGLang MambaMixer2) -------------------------


def test_tp_must_divide_the_groups_unless_there_is_one(tmp_path: Path) -> None:
    spec = _nemotron_h(tmp_path)  # 16 Mamba-2 heads, 2 groups, 8 attention heads, 2 KV heads
    assert tp_fits_heads(spec, 2)
    # 4 divides the heads (state and attention) and replicates the KV heads, not the 2 groups
    assert not tp_fits_heads(spec, 4)
    with pytest.raises(GpuwardenError) as caught:
        plan_memory(PlanRequest(model=spec, mode=Mode.INFER, num_gpus=4, tp=4, engine=Engine.VLLM))
    assert caught.value.reference == "tp-state-groups-mismatch"
    assert "2 B/C groups" in str(caught.value)
    granite = resolve_model(str(HELDOUT / "arch" / "granitemoehybrid.json"))  # one group
    assert tp_fits_heads(granite, 4)


def test_one_group_is_copied_to_every_rank_in_the_conv_state() -> None:
    # GraniteMoeHybridConfig defaults: 128 heads × 64 = 8192 inner, 1 group of d_state 256: vLLM's
    # mamba2_state_shape pads the groups to tp before the split (conv_dim / tp per rank)
    granite = resolve_model(str(HELDOUT / "arch" / "granitemoehybrid.json"))
    state = granite.state
    assert state is not None and state.mixer_shape == Mamba2Shape(64, 1, 256, 256)
    assert state.conv_channels == 8192 + 2 * 256
    for tp in (1, 2, 4, 8):
        padded = 8192 + 2 * 256 * (1 if tp == 1 else tp)  # n_groups + (tp − n_groups)
        assert conv_channels_per_rank(state, tp, 1 / tp) == padded / tp
    nemotron = resolve_model(str(HELDOUT / "arch" / "nemotron_h.json"))
    assert nemotron.state is not None and isinstance(nemotron.state.mixer_shape, Mamba2Shape)
    assert nemotron.state.mixer_shape.groups % 4 == 0  # split, not copied: the plain share
    assert conv_channels_per_rank(nemotron.state, 4, 0.25) == nemotron.state.conv_channels / 4
