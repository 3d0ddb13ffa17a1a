"""The hybrid engines' knobs (planner/state.py, PlanRequest): vLLM's --mamba-cache-dtype,
--mamba-ssm-cache-dtype and --mamba-cache-mode, SGLang's --max-mamba-cache-size and
--mamba-full-memory-ratio, the training's --mixer-kernels; the config keys each stack reads for the
SSM state's dtype; Falcon-H1's blocks that cache K/V and keep a Mamba-2 state.

The state sizes are worked by hand from the configs:

* Nemotron-H-8B (tests/data/model_configs_heldout/Nemotron-H-8B-Base-8K.json): Mamba-2 of 128
  heads × 64, 8 groups, d_state 128, kernel 4 → conv over 128 · 64 + 2 · 8 · 128 = 10,240
  channels, state 128 · 64 · 128 = 1,048,576 elements; 24 Mamba-2 blocks.
* Falcon-H1's default (arch/falcon_h1.json): 32 blocks, each attention (8 KV heads of 4096 / 32 =
  128) and a Mamba-2 of mamba_d_ssm 1024 over 128 heads, 1 group, d_state 256, kernel 4 → conv
  1024 + 2 · 256 = 1,536 channels, state 1024 · 256 = 262,144 elements.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.cli.main import main
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.layout import layout
from gpuwarden.planner.memory import plan_memory
from gpuwarden.planner.state import (
    StateLayout,
    StateStack,
    hybrid_pool,
    mixer_kernels,
    sglang_state_slots,
    stage_mixers,
    state_layout,
    vllm_cache_mode,
)
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Attention, MambaCacheMode, Mode, PlanRequest

HELDOUT = Path(__file__).resolve().parent.parent / "data" / "model_configs_heldout"
NEMOTRON = HELDOUT / "Nemotron-H-8B-Base-8K.json"
FALCON_H1 = HELDOUT / "arch" / "falcon_h1.json"

NEMOTRON_CONV, NEMOTRON_STATE = 10_240, 1_048_576
FALCON_CONV, FALCON_STATE = 1_536, 262_144


def _spec(path: Path, **raw: object) -> ModelSpec:
    spec = resolve_model(str(path))
    return replace(spec, raw_config={**spec.raw_config, **raw}) if raw else spec


def _layout(spec: ModelSpec, stack: StateStack, request: PlanRequest | None = None) -> StateLayout:
    base = PlanRequest(model=spec, mode=Mode.INFER)
    state = state_layout(spec, layout(base), stack, 2.0, request=request)
    assert state is not None
    return state


# --- the sizes the tests rest on --------------------------------------------------------------


def test_the_state_sizes_are_the_configs() -> None:
    cfg = json.loads(NEMOTRON.read_text(encoding="utf-8"))
    heads, head_dim, groups = cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["n_groups"]
    d_state = cfg["ssm_state_size"]
    assert heads * head_dim + 2 * groups * d_state == NEMOTRON_CONV
    assert heads * head_dim * d_state == NEMOTRON_STATE
    state = _spec(NEMOTRON).state
    assert state is not None
    assert (state.conv_channels, state.recurrent_state_elements) == (NEMOTRON_CONV, NEMOTRON_STATE)
    falcon = _spec(FALCON_H1).state
    assert falcon is not None
    assert (falcon.conv_channels, falcon.recurrent_state_elements) == (FALCON_CONV, FALCON_STATE)


# --- vLLM's state dtypes --------------------------------------------------------------------------


def test_vllm_defaults_nemotron_h_ssm_state_to_float32_by_its_config_hook() -> None:
    """NemotronHForCausalLMConfig fills an auto SSM dtype from mamba_ssm_cache_dtype, float32 when
    the config has none; the conv state stays in the model dtype (conv_kernel − 1 columns)."""
    spec = _spec(NEMOTRON)
    absent = _spec(NEMOTRON)
    absent = replace(
        absent,
        raw_config={k: v for k, v in spec.raw_config.items() if k != "mamba_ssm_cache_dtype"},
    )
    for model in (spec, absent):
        state = _layout(model, StateStack.VLLM)
        assert state.conv_bytes == NEMOTRON_CONV * 3 * 2 == 61_440
        assert state.recurrent_bytes == NEMOTRON_STATE * 4 == 4_194_304
        assert state.layers == 24


@pytest.mark.parametrize(
    ("conv", "ssm", "conv_bytes", "ssm_bytes"),
    [
        (None, None, 2, 4),  # auto: model dtype, Nemotron-H's hook float32
        (None, "float16", 2, 2),  # an SSM dtype given wins over the hook
        ("float32", None, 4, 4),
        ("float32", "bfloat16", 4, 2),
        ("auto", "auto", 2, 4),
    ],
)
def test_vllm_mamba_dtypes_set_the_conv_and_ssm_bytes(
    conv: str | None, ssm: str | None, conv_bytes: int, ssm_bytes: int
) -> None:
    spec = _spec(NEMOTRON)
    request = PlanRequest(
        model=spec, mode=Mode.INFER, mamba_cache_dtype=conv, mamba_ssm_cache_dtype=ssm
    )
    state = _layout(spec, StateStack.VLLM, request)
    assert state.conv_bytes == NEMOTRON_CONV * 3 * conv_bytes
    assert state.recurrent_bytes == NEMOTRON_STATE * ssm_bytes


def test_an_auto_ssm_dtype_without_a_hook_follows_the_conv_dtype() -> None:
    """Falcon-H1 names no SSM dtype and has no hook: auto is the conv state's dtype."""
    spec = _spec(FALCON_H1)
    assert _layout(spec, StateStack.VLLM).recurrent_bytes == FALCON_STATE * 2
    fp32 = PlanRequest(model=spec, mode=Mode.INFER, mamba_cache_dtype="float32")
    state = _layout(spec, StateStack.VLLM, fp32)
    assert (state.conv_bytes, state.recurrent_bytes) == (FALCON_CONV * 3 * 4, FALCON_STATE * 4)


def test_kimi_delta_attention_keeps_every_state_in_the_conv_dtype() -> None:
    """vLLM's kda_state_dtype takes only --mamba-cache-dtype; transformers' delta rules return an
    fp32 state (modeling_kimi_linear.py casts q, k, v, g and beta to fp32)."""
    spec = _spec(HELDOUT / "arch" / "kimi_linear.json")
    assert spec.state is not None and spec.state.kind == "Kimi delta attention"
    elements = spec.state.recurrent_state_elements
    ssm32 = PlanRequest(model=spec, mode=Mode.INFER, mamba_ssm_cache_dtype="float32")
    assert _layout(spec, StateStack.VLLM, ssm32).recurrent_bytes == elements * 2
    assert _layout(spec, StateStack.HF).recurrent_bytes == elements * 4


def test_the_hf_mamba_states_are_fp32() -> None:
    """modeling_mamba2.py's scan computes and returns its state in fp32; the conv columns stay in
    the compute dtype, all conv_kernel of them."""
    state = _layout(_spec(NEMOTRON), StateStack.HF)
    assert state.conv_bytes == NEMOTRON_CONV * 4 * 2
    assert state.recurrent_bytes == NEMOTRON_STATE * 4


def test_each_stack_reads_its_own_ssm_dtype_key() -> None:
    """vLLM's Nemotron-H hook reads mamba_ssm_cache_dtype; SGLang's mamba2_state_dtype reads only
    mamba_ssm_dtype (float32 otherwise); both read mamba_ssm_dtype (Qwen3.5's key)."""
    half = _spec(NEMOTRON, mamba_ssm_cache_dtype="float16")
    assert _layout(half, StateStack.VLLM).recurrent_bytes == NEMOTRON_STATE * 2
    assert _layout(half, StateStack.SGLANG).recurrent_bytes == NEMOTRON_STATE * 4
    bf16 = _spec(NEMOTRON, mamba_ssm_dtype="bfloat16")
    assert _layout(bf16, StateStack.SGLANG).recurrent_bytes == NEMOTRON_STATE * 2
    assert _layout(bf16, StateStack.VLLM).recurrent_bytes == NEMOTRON_STATE * 2


def test_a_request_with_an_unknown_mamba_dtype_is_refused() -> None:
    spec = _spec(NEMOTRON)
    request = PlanRequest(model=spec, mode=Mode.INFER, mamba_ssm_cache_dtype="fp8")
    with pytest.raises(InvalidConfigError) as info:
        _layout(spec, StateStack.VLLM, request)
    assert info.value.reference == "mamba-dtype-unknown" and info.value.hint


# --- vLLM's cache mode ----------------------------------------------------------------------------


def test_the_cache_mode_defaults_by_release_and_the_request_wins() -> None:
    spec = _spec(FALCON_H1)
    assert vllm_cache_mode(PlanRequest(model=spec, vllm_version="0.17.0")) is MambaCacheMode.ALIGN
    assert vllm_cache_mode(PlanRequest(model=spec, vllm_version="0.11.0")) is MambaCacheMode.NONE
    told = PlanRequest(model=spec, vllm_version="0.17.0", mamba_cache_mode=MambaCacheMode.NONE)
    assert vllm_cache_mode(told) is MambaCacheMode.NONE


def test_the_cache_mode_sets_the_state_blocks_per_request() -> None:
    state = StateLayout(layers=10, conv_bytes=0.0, recurrent_bytes=1_000_000.0, source="")
    args = (4096.0, 10, state, 10 * 2**30, 16, 32_768)
    none = hybrid_pool(*args, mode=MambaCacheMode.NONE)
    align = hybrid_pool(*args, mode=MambaCacheMode.ALIGN)
    # a page holds a 1,000,000 B state: 16 · ceil(1e6 / (16 · 4096)) = 256 tokens per block
    assert none.block_size == align.block_size == 256
    # 128 attention blocks for 32,768 tokens, plus 1 (none) or 2 (align) state blocks
    assert (none.blocks_per_sequence, align.blocks_per_sequence) == (129, 130)
    assert hybrid_pool(*args) == none  # the default: prefix caching off


# --- SGLang's state slots -------------------------------------------------------------------------


def test_sglang_state_slots_follow_the_ratio_or_the_size_given() -> None:
    spec = _spec(NEMOTRON)
    default = PlanRequest(model=spec, mode=Mode.INFER)
    # 4e9 B left: 4e9 · 0.9 / 1.9 = 1,894,736,842 B → 1,894 slots of 1e6 B
    assert sglang_state_slots(default, 4e9, 1e6) == 1894
    # ratio 1: half of it, 2,000 slots
    assert sglang_state_slots(replace(default, mamba_full_memory_ratio=1.0), 4e9, 1e6) == 2000
    # an explicit size is taken as it is
    assert sglang_state_slots(replace(default, max_mamba_cache_size=300), 4e9, 1e6) == 300
    assert sglang_state_slots(default, 0.0, 1e6) == 0


# --- training kernels -----------------------------------------------------------------------------


def test_the_mixer_kernels_default_to_the_attention_kind() -> None:
    spec = _spec(NEMOTRON)
    assert mixer_kernels(PlanRequest(model=spec))
    assert not mixer_kernels(PlanRequest(model=spec, attention=Attention.EAGER))
    assert not mixer_kernels(PlanRequest(model=spec, mixer_kernels=False))
    assert mixer_kernels(PlanRequest(model=spec, attention=Attention.EAGER, mixer_kernels=True))


# --- Falcon-H1: K/V and a state in every block ---------------------------------------------------


def test_nemotron_h_mixerless_blocks_cache_nothing_on_any_stage() -> None:
    """Nemotron-H-8B: 52 blocks, 4 attend, 24 keep a Mamba-2 state, 24 (MLP only) neither."""
    spec = _spec(NEMOTRON)
    assert spec.num_layers == 52
    assert stage_mixers(spec, 1, 0) == (4, 24)
    # 26 blocks per stage, in proportion: 2 attend, 12 keep a state
    assert stage_mixers(spec, 2, 0) == (2, 12)


def test_falcon_h1_blocks_count_as_attention_and_state_on_every_stage() -> None:
    spec = _spec(FALCON_H1)
    assert stage_mixers(spec, 1, 0) == (32, 32)
    assert stage_mixers(spec, 2, 1) == (16, 16)


def test_falcon_h1_hf_generate_plans_kv_and_a_state_per_sequence() -> None:
    spec = _spec(FALCON_H1)
    request = PlanRequest(model=spec, mode=Mode.INFER, batch=4, prompt_tokens=512, new_tokens=512)
    plan = plan_memory(request)
    # K and V of 8 heads of 128 in bf16, every one of the 32 blocks: 131,072 B per token
    assert plan.component("kv_cache") == 32 * 2 * 8 * 128 * 2 * 4 * 1024 == 536_870_912
    # and each block's Mamba-2 state: 4 bf16 conv columns + an fp32 state per sequence
    per_sequence = 32 * (FALCON_CONV * 4 * 2 + FALCON_STATE * 4)
    assert plan.component("recurrent_state") == per_sequence * 4 == 135_790_592


# --- the CLI flags --------------------------------------------------------------------------------


def _request(*flags: str) -> PlanRequest:
    from gpuwarden.cli.commands.plan import build_request, register

    parser = argparse.ArgumentParser()
    register(parser)
    return build_request(parser.parse_args([str(FALCON_H1), "--mode", "infer", *flags]))


def test_the_flags_reach_the_request() -> None:
    default = _request()
    assert default.mamba_cache_dtype is None and default.mamba_ssm_cache_dtype is None
    assert default.mamba_cache_mode is None and default.max_mamba_cache_size is None
    assert default.mamba_full_memory_ratio == 0.9 and default.mixer_kernels is None
    told = _request(
        "--mamba-cache-dtype",
        "Float32",
        "--mamba-ssm-cache-dtype",
        "bfloat16",
        "--mamba-cache-mode",
        "none",
        "--max-mamba-cache-size",
        "600",
        "--mamba-full-memory-ratio",
        "0.5",
        "--no-mixer-kernels",
    )
    assert told.mamba_cache_dtype == "float32" and told.mamba_ssm_cache_dtype == "bfloat16"
    assert told.mamba_cache_mode is MambaCacheMode.NONE and told.max_mamba_cache_size == 600
    assert told.mamba_full_memory_ratio == 0.5 and told.mixer_kernels is False
    assert _request("--mixer-kernels").mixer_kernels is True


@pytest.mark.parametrize(
    ("flags", "reference", "named"),
    [
        (["--mamba-cache-dtype", "fp8"], "mamba-dtype-unknown", "--mamba-cache-dtype"),
        (["--mamba-ssm-cache-dtype", "int8"], "mamba-dtype-unknown", "--mamba-ssm-cache-dtype"),
        (["--mamba-cache-mode", "all"], "mamba-cache-mode-unsupported", "chunk size"),
        (["--mamba-cache-mode", "often"], "mamba-cache-mode-unsupported", "often"),
        (["--max-mamba-cache-size", "0"], "value-out-of-range", "--max-mamba-cache-size"),
        (["--max-mamba-cache-size", "x"], "value-out-of-range", "--max-mamba-cache-size"),
        (["--mamba-full-memory-ratio", "0"], "value-out-of-range", "--mamba-full-memory-ratio"),
        (["--mamba-full-memory-ratio", "inf"], "value-out-of-range", "--mamba-full-memory-ratio"),
    ],
)
def test_bad_knob_values_exit_2_with_a_reference_and_a_hint(
    flags: list[str], reference: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(FALCON_H1), "--mode", "infer", *flags]) == 2
    err = capsys.readouterr().err
    assert f"error: {reference}" in err
    assert named in err and "hint:" in err
    assert "Traceback" not in err
