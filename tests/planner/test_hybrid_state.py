"""Hybrids (ModelSpec.state): KV cache for the attention blocks only, a fixed state per sequence
for the others, in HF generate, vLLM's hybrid allocator, SGLang's MambaPool and training.

The test model is Qwen3-Next-80B-A3B's mixer layout on a bundled spec: 48 blocks, 36 gated
DeltaNets and 12 attention blocks (2 KV heads of 256); a DeltaNet of 16 key heads and 32 value
heads of 128, conv kernel 4 (configuration_qwen3_next.py defaults, checked below): conv channels
2 · 16 · 128 + 32 · 128 = 8192, recurrent state 32 · 128 · 128 = 524,288 elements.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.planner import mixers
from gpuwarden.planner.kv_cache import kv_layout
from gpuwarden.planner.layout import layout
from gpuwarden.planner.memory import plan_memory
from gpuwarden.planner.sglang import token_pool
from gpuwarden.planner.state import (
    StateStack,
    hybrid_pool,
    sglang_state_slots,
    state_layout,
    vllm_cache_mode,
    vllm_logs_concurrency,
)
from gpuwarden.planner.tensors import Ctx, Dt, wiring
from gpuwarden.types.model import (
    DeltaNetShape,
    LayerParameters,
    LinearShape,
    Mixer,
    ModelSpec,
    StateSpec,
)
from gpuwarden.types.plan import Attention, Engine, MambaCacheMode, Mode, PlanRequest
from gpuwarden.units import GIB
from tests.planner.saved_trace import (
    TINY_REST,
    recipe_bytes,
    state_block,
    tiny_config,
    tiny_module,
    traced_module_bytes,
)

HELDOUT = Path(__file__).resolve().parent.parent / "data" / "model_configs_heldout"

NEXT_STATE = StateSpec(
    kind="gated-DeltaNet",
    num_layers=36,
    conv_channels=8192,
    conv_kernel=4,
    recurrent_state_elements=524_288,
    num_heads=32,
    mixer_shape=DeltaNetShape(16, 128, 128),
)
NEXT_LINEAR = {
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
}


def _deltanet_layer(layer: LayerParameters, h: int) -> LayerParameters:
    """A Qwen3-Next DeltaNet block: the attention Linears swapped for the mixer's."""
    key_dim, value_dim = 16 * 128, 32 * 128
    mixer = (
        LinearShape("in_proj_qkvz", h, 2 * key_dim + 2 * value_dim, part="attention"),
        LinearShape("in_proj_ba", h, 2 * 32, part="attention"),
        LinearShape("out_proj", value_dim, h, part="attention"),
    )
    rest = tuple(lin for lin in layer.linears if lin.part != "attention")
    return replace(
        layer,
        attention=sum(lin.parameters for lin in mixer),
        linears=(*mixer, *rest),
        mixer=Mixer.STATE,
    )


def _next_spec(*, deltanet_blocks: bool = False, **raw: object) -> ModelSpec:
    base = resolve_model("Qwen/Qwen3-30B-A3B")
    assert base.num_layers == 48
    layers = base.parameters.layers
    if deltanet_blocks:
        # every 4th block attends (full_attention_interval 4)
        gdn = _deltanet_layer(layers[0], base.hidden_size)
        layers = tuple(layer if (i + 1) % 4 == 0 else gdn for i, layer in enumerate(layers))
    return replace(
        base,
        num_kv_heads=2,
        head_dim=256,
        state=NEXT_STATE,
        parameters=replace(base.parameters, layers=layers),
        raw_config={**base.raw_config, **NEXT_LINEAR, **raw},
    )


# --- the facts the test model rests on ----------------------------------------------------------


@pytest.mark.torch
def test_the_state_sizes_are_qwen3_next_defaults() -> None:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.Qwen3NextConfig()
    key_dim = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    value_dim = cfg.linear_num_value_heads * cfg.linear_value_head_dim
    assert NEXT_STATE.conv_channels == 2 * key_dim + value_dim
    assert NEXT_STATE.conv_kernel == cfg.linear_conv_kernel_dim
    assert NEXT_STATE.recurrent_state_elements == (
        cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim
    )
    assert NEXT_STATE.num_heads == cfg.linear_num_value_heads


# --- KV cache: attention blocks only --------------------------------------------------------------


def test_kv_cache_counts_only_the_attention_blocks() -> None:
    spec = _next_spec()
    request = PlanRequest(model=spec, mode=Mode.INFER)
    kv = kv_layout(request, layout(request), paged=False)
    assert kv.full_layers == 12 and kv.window_layers == 0
    # K and V, 2 heads of 256, bf16: 2048 B per token and layer, 12 layers
    assert kv.bytes_per_token == 12 * 2 * 2 * 256 * 2 == 24_576


def test_pipeline_stages_share_the_attention_blocks_in_proportion() -> None:
    spec = _next_spec()
    request = PlanRequest(model=spec, mode=Mode.INFER, pp=4, num_gpus=4)
    kv = kv_layout(request, layout(request), paged=False)
    state = state_layout(spec, layout(request), StateStack.HF, 2.0)
    assert state is not None
    # 12 blocks per stage: 3 attend, 9 keep a state
    assert (kv.full_layers, state.layers) == (3, 9)


def test_hf_generate_plans_kv_for_attention_and_a_state_per_sequence() -> None:
    spec = _next_spec()
    request = PlanRequest(model=spec, mode=Mode.INFER, batch=4, prompt_tokens=512, new_tokens=512)
    plan = plan_memory(request)
    kv = plan.component("kv_cache")
    state = plan.component("recurrent_state")
    # 24,576 B per token × 4 sequences × 1024 tokens
    assert kv == 24_576 * 4 * 1024 == 100_663_296
    # transformers: 4 conv columns in bf16 (8192 · 4 · 2 = 65,536 B) and an fp32 recurrent state
    # (524,288 · 4 = 2,097,152 B) per block and sequence; 36 blocks, 4 sequences
    assert state == 36 * (65_536 + 2_097_152) * 4 == 311_427_072
    assert plan.inference is not None
    assert plan.inference.kv_pool_bytes == kv + state
    decode = next(p for p in plan.phases if p.name == "decode")
    assert decode.bytes_by_component["recurrent_state"] == state
    component = next(c for c in plan.components if c.key == "recurrent_state")
    assert "LinearAttentionLayer" in component.source


def test_tensor_parallel_splits_the_state_by_heads() -> None:
    spec = _next_spec()
    one = PlanRequest(model=spec, mode=Mode.INFER)
    four = replace(one, tp=4, num_gpus=4)
    s1 = state_layout(spec, layout(one), StateStack.VLLM, 2.0)
    s4 = state_layout(spec, layout(four), StateStack.VLLM, 2.0)
    assert s1 is not None and s4 is not None
    # vLLM: conv_kernel − 1 columns; 32 value heads split 8 per rank
    assert s1.conv_bytes == 8192 * 3 * 2 and s1.recurrent_bytes == 524_288 * 2
    assert s4.conv_bytes == 8192 / 4 * 3 * 2 and s4.recurrent_bytes == 524_288 / 4 * 2


def test_a_config_mamba_ssm_dtype_sets_the_engines_recurrent_dtype() -> None:
    fp32 = _next_spec(mamba_ssm_dtype="float32")
    request = PlanRequest(model=fp32, mode=Mode.INFER)
    vllm = state_layout(fp32, layout(request), StateStack.VLLM, 2.0)
    sglang_default = state_layout(_next_spec(), layout(request), StateStack.SGLANG, 2.0)
    assert vllm is not None and sglang_default is not None
    assert vllm.recurrent_bytes == 524_288 * 4
    # SGLang: bf16 conv columns, float32 state unless told otherwise
    assert sglang_default.bytes_per_layer == 8192 * 3 * 2 + 524_288 * 4 == 2_146_304


# --- vLLM's hybrid allocator ----------------------------------------------------------------------


def test_vllm_raises_the_block_until_a_page_holds_a_state() -> None:
    spec = _next_spec()
    request = PlanRequest(model=spec, mode=Mode.INFER)
    state = state_layout(spec, layout(request), StateStack.VLLM, 2.0)
    assert state is not None
    # state page 8192·3·2 + 524,288·2 = 1,097,728 B; an attention token 2048 B:
    # 16 · ceil(1,097,728 / (16 · 2048)) = 16 · 34 = 544 tokens, page 544 · 2048 = 1,114,112 B
    pool = hybrid_pool(
        2048, 12, state, 1000 * 1_114_112 * 12, 16, 32_768, mode=MambaCacheMode.ALIGN
    )
    assert (pool.block_size, pool.page_bytes) == (544, 1_114_112)
    # groups of 12 layers: 1 attention, 3 state; one block id spans 12 pages
    assert (pool.group_size, pool.attention_groups, pool.state_groups) == (12, 1, 3)
    assert pool.blocks == 1000
    # a 32,768-token request: ceil(32,768 / 544) = 61 attention blocks + 2 per state group
    assert pool.blocks_per_sequence == 61 + 3 * 2
    assert pool.sequences == 1000 // 67 == 14
    assert pool.logged_tokens == 1000 // 4 * 544 == 136_000
    before_align = hybrid_pool(
        2048, 12, state, 1000 * 1_114_112 * 12, 16, 32_768, mode=MambaCacheMode.NONE
    )
    assert before_align.blocks_per_sequence == 64 and before_align.sequences == 15


def test_vllm_hybrid_pool_matches_a_logged_qwen35_start_up() -> None:
    """A vLLM v0.17.0 start-up of a 40-block Qwen3.5 hybrid (10 attention blocks, 2 KV heads of
    256, fp8 KV cache, mamba_ssm_dtype float32) logged "Setting attention block size to 2096
    tokens", 6.08 GiB of KV cache, "GPU KV cache size: 159,296 tokens" and "Maximum concurrency
    for 65,536 tokens per request: 8.00x" (a blog post reading v0.17.0's source, see the report)."""
    base = _next_spec(mamba_ssm_dtype="float32")
    spec = replace(base, num_layers=40, state=replace(NEXT_STATE, num_layers=30))
    request = PlanRequest(model=spec, mode=Mode.INFER, kv_cache_dtype="fp8")
    lay = layout(request)
    kv = kv_layout(request, lay, paged=True)
    state = state_layout(spec, lay, StateStack.VLLM, 2.0)
    assert state is not None and kv.full_layers == 10
    pool = hybrid_pool(
        kv.bytes_per_token_layer, 10, state, 6.08 * GIB, 16, 65_536, mode=MambaCacheMode.ALIGN
    )
    assert pool.block_size == 2096
    assert pool.blocks == 304
    assert pool.logged_tokens == 159_296
    assert pool.blocks_per_sequence == 38 and pool.sequences == 8


def test_newer_vllm_logs_concurrency_times_max_model_len() -> None:
    """From VLLM_CONCURRENCY_LOG_FROM the logged tokens are max concurrency × max_model_len,
    the concurrency counting one block per state group even under "align"."""
    spec = _next_spec()
    state = state_layout(
        spec, layout(PlanRequest(model=spec, mode=Mode.INFER)), StateStack.VLLM, 2.0
    )
    assert state is not None
    pool = hybrid_pool(
        2048,
        12,
        state,
        1000 * 1_114_112 * 12,
        16,
        32_768,
        mode=MambaCacheMode.ALIGN,
        concurrency_log=True,
    )
    # 61 attention blocks + 1 per state group (3): 1000 / 64 × 32,768
    assert pool.logged_tokens == 1000 * 32_768 // 64 == 512_000
    assert pool.sequences == 14  # admission still keeps two blocks per state group
    assert not vllm_logs_concurrency(
        PlanRequest(model=spec, mode=Mode.INFER, vllm_version="0.19.0")
    )
    assert vllm_logs_concurrency(PlanRequest(model=spec, mode=Mode.INFER, vllm_version="0.23.0"))


def test_vllm_023_logged_kv_tokens_of_qwen35_4b() -> None:
    """Held-out V362 (CALIBRATION: it guided the release cut): vLLM 0.23.0, Qwen3.5-4B, 10.21 GiB
    of KV memory logged, max_model_len 4096: "GPU KV cache size: 235,706 tokens"."""
    spec = resolve_model(str(HELDOUT / "Qwen3.5-4B.json"))
    request = PlanRequest(model=spec, mode=Mode.INFER, max_model_len=4096, vllm_version="0.23.0")
    lay = layout(request)
    kv = kv_layout(request, lay, paged=True)
    state = state_layout(spec, lay, StateStack.VLLM, 2.0)
    assert state is not None and kv.full_layers == 8
    pool = hybrid_pool(
        kv.bytes_per_token_layer,
        8,
        state,
        10.21 * GIB,
        16,
        4096,
        mode=vllm_cache_mode(request),
        concurrency_log=vllm_logs_concurrency(request),
    )
    assert (pool.block_size, pool.blocks) == (528, 633)
    assert pool.logged_tokens == 235_706  # 633 / (8 + 3) × 4096


def test_vllm_plan_of_a_hybrid_reports_the_state_blocks() -> None:
    spec = _next_spec()
    request = PlanRequest(
        model=spec,
        mode=Mode.INFER,
        gpu=resolve_gpu("H100"),
        gpu_memory_utilization=0.9,
        tp=4,
        num_gpus=4,
        max_model_len=32_768,
    )
    plan = plan_memory(request)
    cap = plan.inference
    assert cap is not None and cap.block_size == 272  # TP 4: state page 274,432 B, token 1 KiB
    # the pool: blocks × page (272 KiB) × 12 layers; the state share: 6 pages a sequence
    page_block = 272 * 1024 * 12
    assert cap.kv_pool_bytes % page_block == 0
    blocks = cap.kv_pool_bytes // page_block
    per_seq = -(-32_768 // 272) + 6
    assert cap.max_sequences == blocks // per_seq
    assert plan.component("recurrent_state") == cap.max_sequences * 6 * page_block
    assert plan.component("kv_cache") + plan.component("recurrent_state") == cap.kv_pool_bytes
    assert cap.sequence_bytes == per_seq * page_block
    assert "hybrid_pool" in plan.notes


# --- SGLang's MambaPool ---------------------------------------------------------------------------


def test_sglang_state_slots_take_their_ratio_and_cap_running_requests() -> None:
    request = PlanRequest(model=_next_spec(), mode=Mode.INFER, engine=Engine.SGLANG)
    pool = token_pool(
        10_000_000_000,
        0.9,
        5_000_000_000,
        24_576,
        1,
        32_768,
        1_000_000,
        lambda rest: sglang_state_slots(request, rest, 1_000_000),
    )
    # rest 4e9; state share 4e9 · 0.9 / 1.9 = 1,894,736,842 B → 1,894 slots of 1e6 B
    assert pool.state_slots == 1894 and pool.state_bytes == 1_894_000_000
    # the KV pool takes the rest: 2,106,000,000 // 24,576 tokens
    assert pool.tokens == 2_106_000_000 // 24_576 == 85_693
    assert pool.state_requests == 1894 // 3 == 631


def test_sglang_plan_of_a_hybrid_caps_requests_by_state_slots() -> None:
    spec = _next_spec()
    request = PlanRequest(
        model=spec,
        mode=Mode.INFER,
        gpu=resolve_gpu("H100"),
        engine=Engine.SGLANG,
        tp=4,
        num_gpus=4,
        max_model_len=4096,
    )
    plan = plan_memory(request)
    cap = plan.inference
    assert cap is not None and cap.max_sequences is not None
    per_seq = 36 * (8192 / 4 * 3 * 2 + 524_288 / 4 * 4)  # bf16 conv, fp32 state, TP 4
    slots = round(plan.component("recurrent_state") / per_seq)
    assert plan.component("recurrent_state") == int(slots * per_seq)
    assert cap.max_sequences == min(cap.kv_tokens // 4096, slots // 3)


# --- training -------------------------------------------------------------------------------------


def test_a_training_plan_of_a_hybrid_runs_with_the_deltanet_recipe() -> None:
    spec = _next_spec(deltanet_blocks=True)
    request = PlanRequest(model=spec, mode=Mode.LORA, gpu=resolve_gpu("H100"), seq_len=2048)
    plan = plan_memory(request)
    assert "fla" in plan.notes["state_blocks"]
    eager = plan_memory(replace(request, attention=Attention.EAGER))
    assert "torch fallbacks" in eager.notes["state_blocks"]
    # the torch fallback keeps fp32 chunk matrices and states the fla kernels recompute
    assert eager.component("activations") > plan.component("activations")


def test_a_hybrid_training_forward_with_use_cache_holds_the_states() -> None:
    spec = _next_spec(deltanet_blocks=True)
    request = PlanRequest(model=spec, mode=Mode.LORA, seq_len=1024, micro_batch=2)
    off = plan_memory(request)
    on = plan_memory(replace(request, use_cache=True))
    # grouped K/V of the 12 attention blocks are saved by attention itself under flash; the
    # 36 DeltaNets' states (2 sequences) are new tensors, alive until the outputs die
    states = 2 * 36 * (8192 * 4 * 2 + 524_288 * 4)
    assert on.component("kv_cache") - off.component("kv_cache") == states


def test_state_blocks_without_their_recipe_are_planned_as_attention_and_say_so() -> None:
    spec = _next_spec()  # attention Linears in every block: the mixer's are not named
    plan = plan_memory(PlanRequest(model=spec, mode=Mode.LORA, seq_len=1024))
    assert "approximated" in plan.notes["state_blocks"]


def test_the_fla_recipe_keeps_key_heads_and_the_wy_matrix() -> None:
    spec = _next_spec(deltanet_blocks=True)
    layer = spec.parameters.layers[0]
    items = mixers.gated_deltanet(
        NEXT_STATE,
        DeltaNetShape(16, 128, 128),
        Ctx(s=2048, eager=False, compile=False),
        wiring(layer, 2048),
    )
    widths = {it.what: (it.width, it.dtype) for it in items}
    assert widths["q, k l2-normalised (fla)"] == (2 * 16 * 128, Dt.ACT)
    assert widths["WY matrix A (fla)"] == (32 * 64, Dt.ACT)
    assert widths["conv input (causal-conv1d)"] == (8192, Dt.ACT)


@pytest.mark.torch
def test_the_torch_fallback_recipe_matches_a_trace_of_the_module() -> None:
    """Saved-tensor hooks around transformers' Qwen3NextGatedDeltaNet (torch fallback, bf16,
    CPU): bytes autograd keeps per extra token match the recipe (the module's input, the
    preceding norm's output, is the block's to count)."""
    h, nv, nk, dk, dv, kernel = 48, 4, 2, 16, 24, 4
    cfg = tiny_config(
        "Qwen3NextConfig",
        **TINY_REST,
        hidden_size=h,
        linear_num_value_heads=nv,
        linear_num_key_heads=nk,
        linear_key_head_dim=dk,
        linear_value_head_dim=dv,
        linear_conv_kernel_dim=kernel,
        head_dim=16,
        moe_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
    )
    mixer = tiny_module("qwen3_next.modeling_qwen3_next", "Qwen3NextGatedDeltaNet", cfg)
    traced = (traced_module_bytes(mixer, h, 256) - traced_module_bytes(mixer, h, 128)) / 128
    state = StateSpec("gated-DeltaNet", 1, 2 * nk * dk + nv * dv, kernel, nv * dk * dv, nv)
    layer = state_block(
        LinearShape("in_proj_qkvz", h, 2 * nk * dk + 2 * nv * dv, part="attention"),
        LinearShape("in_proj_ba", h, 2 * nv, part="attention"),
        LinearShape("out_proj", nv * dv, h, part="attention"),
    )
    items = mixers.gated_deltanet(
        state,
        DeltaNetShape(nk, dk, dv),
        Ctx(s=256, eager=True, compile=False, mixer_kernels=False),
        wiring(layer, h),
    )
    recipe = recipe_bytes(items)
    mixer_input = h * 2
    assert traced - mixer_input == pytest.approx(recipe, rel=0.002)


def test_a_model_without_state_blocks_plans_no_state() -> None:
    spec = resolve_model("Qwen/Qwen3-30B-A3B")
    request = PlanRequest(model=spec, mode=Mode.INFER, batch=2)
    kv = kv_layout(request, layout(request), paged=False)
    assert kv.full_layers == spec.num_layers == 48
    assert state_layout(spec, layout(request), StateStack.HF, 2.0) is None
    plan = plan_memory(request)
    assert all(c.key != "recurrent_state" for c in plan.components)
    assert "state_blocks" not in plan.notes and "hybrid_state" not in plan.notes


def test_a_deltanet_config_that_leaves_its_sizes_to_the_class_defaults_gets_the_recipe() -> None:
    # Qwen3NextConfig's linear_* defaults (16 key heads, 32 value heads, 128 wide): the catalog
    # fills them in, and the training recipe reads the same sizes (it read the raw config once)
    cfg = json.loads((HELDOUT / "arch" / "qwen3_next.json").read_text())
    bare = {k: v for k, v in cfg.items() if not k.startswith("linear_")}
    spec = normalise("qwen3_next-defaults", bare, "qwen3_next")
    assert spec.state is not None and spec.state.mixer_shape == DeltaNetShape(16, 128, 128)
    assert spec.state.num_heads == 32
    assert mixers.modelled_mixer(spec)
    plan = plan_memory(PlanRequest(model=spec, mode=Mode.TRAIN, seq_len=512))
    assert "fla" in plan.notes["state_blocks"]
