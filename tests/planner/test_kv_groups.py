"""Per-kind KV caches (ModelSpec.kv_groups) and the DSA indexer key, by hand from the real
configs in tests/data/model_configs_heldout/: Gemma-4-31B (50 sliding blocks of 16 KV heads ×
256 over 1024 tokens, 10 full blocks of 4 × 512), Gemma 3n (15 KV-shared blocks cache nothing),
DeepSeek-V3.2 (the latent plus the indexer key, vLLM and transformers), GLM-5 with "shared"
indexer blocks; vLLM's KV-cache groups and SGLang's hybrid SWA split; and that a spec without
groups plans as before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import configs, resolve_gpu, resolve_model
from gpuwarden.planner.kv_cache import kv_layout, paged_pool
from gpuwarden.planner.layout import layout
from gpuwarden.planner.memory import plan_memory
from gpuwarden.planner.outputs import held_outputs
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.sglang import swa_split
from gpuwarden.types.model import KvGroup, ModelSpec
from gpuwarden.types.plan import Engine, Mode, PlanRequest, Precision, TrainLoop

HELDOUT = Path(__file__).resolve().parent.parent / "data" / "model_configs_heldout"


def _config(file: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((HELDOUT / file).read_text(encoding="utf-8"))
    return cfg


def _gemma4_31b() -> ModelSpec:
    return resolve_model(str(HELDOUT / "gemma-4-31B-it.json"))


def _infer(spec: ModelSpec, **knobs: Any) -> PlanRequest:
    return PlanRequest(model=spec, mode=Mode.INFER, **knobs)


# --- Gemma 4 --------------------------------------------------------------------------------------

# bf16 K and V of one token: a sliding block 16 heads × (256 + 256) × 2 B, a full one 4 × 1024 × 2
SLIDING_31B = 16 * 512 * 2  # 16,384 B
FULL_31B = 4 * 1024 * 2  # 8,192 B


def test_gemma4_31b_caches_each_kind_at_its_own_width() -> None:
    request = _infer(_gemma4_31b())
    kv = kv_layout(request, layout(request), paged=False)
    assert (kv.full_layers, kv.window_layers) == (10, 50)
    assert kv.bytes_per_token == 50 * SLIDING_31B + 10 * FULL_31B == 901_120
    # 4096 tokens: the sliding blocks hold their last 1024, the full blocks all 4096
    assert kv.bytes_for(4096, 2) == 2 * (50 * SLIDING_31B * 1024 + 10 * FULL_31B * 4096)


def test_gemma4_31b_tensor_parallel_splits_and_replicates_heads_per_kind() -> None:
    request = _infer(_gemma4_31b(), tp=8, num_gpus=8)
    kv = kv_layout(request, layout(request), paged=False)
    # 16 sliding KV heads / 8 = 2 per rank; the 4 full ones replicate to 1 per rank
    assert kv.bytes_per_token == 50 * 2 * 512 * 2 + 10 * 1 * 1024 * 2 == 122_880


def test_gemma4_31b_pipeline_stages_share_each_kind_in_proportion() -> None:
    request = _infer(_gemma4_31b(), pp=4, num_gpus=4)
    kv = kv_layout(request, layout(request), paged=False)
    # 15 blocks a stage: 12.5 sliding and 2.5 full; all 15 cache, the tied half block goes to
    # the kind caching more per token (16 KiB sliding against 8 KiB full)
    assert (kv.window_layers, kv.full_layers) == (13, 2)
    staged = _infer(_gemma4_31b(), pp=7, num_gpus=7)
    # 9 blocks on the first stage: 7.5 sliding and 1.5 full
    assert kv_layout(staged, layout(staged), paged=False).layers == 9


def test_gemma4_31b_vllm_groups_raise_the_full_block_to_one_page() -> None:
    """vLLM: the full kind's page (16 tokens × 8 KiB) is half the sliding kind's (16 × 16 KiB),
    so its block is 32 tokens; 50 and 10 blocks group by 10 (50 ≥ 1.5 × 10): 5 sliding groups
    and 1 full group share one pool of 10 tensors."""
    request = _infer(_gemma4_31b())
    kv = kv_layout(request, layout(request), paged=True)
    page = 16 * SLIDING_31B  # 262,144 B
    pool = paged_pool(kv, 1000 * page * 10 + 123, 16, 4096)
    assert (pool.page_bytes, pool.tensors, pool.groups, pool.blocks) == (page, 10, 6, 1000)
    # a 4096-token request: each sliding group 65 blocks (1023 tokens + the one being written),
    # the full group 4096 / 32 = 128
    assert pool.blocks_per_sequence == 5 * 65 + 128 == 453
    assert pool.sequences == 1000 // 453
    # logged "GPU KV cache size": blocks // groups × the smallest block
    assert pool.tokens == 1000 // 6 * 16


def test_gemma4_31b_vllm_plan_spends_the_pool_on_whole_blocks() -> None:
    request = _infer(_gemma4_31b(), gpu=resolve_gpu("H100"), engine=Engine.VLLM, max_model_len=8192)
    plan = plan_memory(request)
    cap = plan.inference
    assert cap is not None
    block_bytes = 16 * SLIDING_31B * 10
    assert cap.kv_pool_bytes % block_bytes == 0
    blocks = cap.kv_pool_bytes // block_bytes
    per_seq = 5 * 65 + 8192 // 32
    assert cap.max_sequences == blocks // per_seq
    assert cap.sequence_bytes == per_seq * block_bytes
    assert cap.kv_bytes_per_token == 901_120


def test_sglang_hybrid_swa_split_by_hand() -> None:
    """set_num_tokens_hybrid_swa: memory = T · (F + S) re-split so that swa = 0.8 · full."""
    full, swa = swa_split(10_000, 81_920, 819_200, 1)
    assert full == int(10_000 * 901_120 / (81_920 + 0.8 * 819_200)) == 12_222
    assert swa == int(full * 0.8)
    # page-aligned, all-sliding and no-sliding pools
    assert swa_split(10_000, 81_920, 819_200, 64) == (12_160, 9_728)
    assert swa_split(10_000, 0, 819_200, 64) == (9_984, 9_984)
    assert swa_split(10_000, 81_920, 0, 64) == (10_000, 0)


def test_gemma4_31b_sglang_plan_counts_full_layer_tokens() -> None:
    request = _infer(_gemma4_31b(), gpu=resolve_gpu("H100"), engine=Engine.SGLANG)
    plan = plan_memory(request)
    cap = plan.inference
    assert cap is not None
    assert cap.kv_bytes_per_token == 901_120
    profiled = cap.kv_pool_bytes // 901_120  # the pool SGLang profiled, every layer every token
    assert cap.kv_tokens == swa_split(profiled, 10 * FULL_31B, 50 * SLIDING_31B, 1)[0]
    assert "sglang_swa" in plan.notes


# --- Gemma 3n: KV-shared blocks -------------------------------------------------------------------


def test_gemma3n_kv_shared_blocks_cache_nothing() -> None:
    """35 blocks; the last 15 reuse earlier K/V. Of the 20 others 16 slide over 512 tokens, 4
    are full; each caches 2 KV heads × (256 + 256) in bf16 = 2048 B per token."""
    spec = configs.normalise("3n", _config("arch/gemma3n_text.json"), "gemma3n_text.json")
    request = _infer(spec)
    kv = kv_layout(request, layout(request), paged=False)
    assert (kv.window_layers, kv.full_layers) == (16, 4)
    assert kv.bytes_per_token == 20 * 2048
    assert kv.bytes_for(4096, 1) == 16 * 2048 * 512 + 4 * 2048 * 4096
    assert "15 KV-shared blocks cache nothing" in kv.source


def test_gemma3n_vllm_groups_of_one_page_size() -> None:
    """One page for both kinds: 16 sliding and 4 full blocks group by 4 (16 ≥ 1.5 × 4)."""
    spec = configs.normalise("3n", _config("arch/gemma3n_text.json"), "gemma3n_text.json")
    request = _infer(spec)
    kv = kv_layout(request, layout(request), paged=True)
    pool = paged_pool(kv, 100 * 16 * 2048 * 4, 16, 2048)
    assert (pool.tensors, pool.groups, pool.blocks) == (4, 5, 100)
    # 4 sliding groups of ceil(511 / 16) + 1 = 33 blocks, 1 full group of 128
    assert pool.blocks_per_sequence == 4 * 33 + 128


# --- DeepSeek Sparse Attention: the indexer key ---------------------------------------------------


def _v32() -> ModelSpec:
    return resolve_model(str(HELDOUT / "DeepSeek-V3.2.json"))


def test_deepseek_v32_on_vllm_caches_the_latent_and_an_fp8_indexer_key() -> None:
    """61 blocks × (576 latent elements in the KV dtype + 128 fp8 + one fp32 scale = 132 B)."""
    request = _infer(_v32(), engine=Engine.VLLM)
    kv = kv_layout(request, layout(request), paged=True)
    assert kv.bytes_per_token == 61 * (576 * 2 + 132) == 78_324
    fp8 = _infer(_v32(), engine=Engine.VLLM, kv_cache_dtype="fp8")
    # the latent follows the KV dtype, the indexer key is fp8 + scale whatever it is
    assert kv_layout(fp8, layout(fp8), paged=True).bytes_per_token == 61 * (576 + 132)


def test_deepseek_v32_indexer_key_is_whole_on_every_tp_rank() -> None:
    request = _infer(_v32(), engine=Engine.VLLM, tp=8, num_gpus=8)
    assert kv_layout(request, layout(request), paged=True).bytes_per_token == 78_324


def test_deepseek_v32_in_transformers_keeps_the_key_in_the_activation_dtype() -> None:
    request = _infer(_v32())
    kv = kv_layout(request, layout(request), paged=False)
    assert kv.bytes_per_token == 61 * (576 * 2 + 128 * 2) == 85_888


def test_deepseek_v32_vllm_pool_is_one_group_of_latent_and_key_pages() -> None:
    request = _infer(_v32(), engine=Engine.VLLM)
    kv = kv_layout(request, layout(request), paged=True)
    pool = paged_pool(kv, 1_000 * 16 * 78_324 + 5, 16, 1024)
    assert (pool.groups, pool.blocks, pool.tokens) == (1, 1_000, 16_000)
    assert pool.sequences == 1_000 // 64


def _glm5_shared(indexed: int, layers: int = 78) -> dict[str, Any]:
    cfg = _config("arch/glm_moe_dsa.json")
    kinds = ["full"] * indexed + ["shared"] * (layers - indexed)
    return {**cfg, "num_hidden_layers": layers, "indexer_types": kinds}


def test_glm5_shared_indexer_blocks_cache_no_key() -> None:
    """GLM-5.1's layout: 21 of 78 blocks build an indexer; every block caches the latent
    (512 + 64 elements), only those 21 the 132-byte key."""
    cfg = _glm5_shared(21)
    cfg.pop("mlp_layer_types", None)
    spec = configs.normalise("glm5", cfg, "glm5")
    assert spec.mla is not None and spec.mla.indexed_layers == 21
    request = _infer(spec, engine=Engine.VLLM)
    kv = kv_layout(request, layout(request), paged=True)
    assert kv.bytes_per_token == 78 * 576 * 2 + 21 * 132
    staged = _infer(spec, engine=Engine.VLLM, pp=2, num_gpus=2)
    # 39 blocks a stage, 10.5 → 10 of them with the key
    assert kv_layout(staged, layout(staged), paged=True).bytes_per_token == 39 * 1152 + 10 * 132


# --- non-regression: a spec without groups --------------------------------------------------------


def test_a_spec_without_groups_keeps_the_single_shape_layout() -> None:
    spec = resolve_model("meta-llama/Llama-3.1-8B")
    assert spec.kv_groups == ()
    request = _infer(spec)
    kv = kv_layout(request, layout(request), paged=True)
    assert kv.kinds == ()
    assert kv.bytes_per_token == 32 * 2 * 8 * 128 * 2


@pytest.mark.parametrize("engine", [Engine.VLLM, Engine.SGLANG, Engine.HF])
def test_one_group_of_every_block_plans_what_no_groups_plan(engine: Engine) -> None:
    """Llama-3.1-8B stated as one group of its 32 blocks gives the same cache and capacity."""
    spec = resolve_model("meta-llama/Llama-3.1-8B")
    grouped = replace(spec, kv_groups=(KvGroup(32, 8, 128),))
    knobs: dict[str, Any] = {"gpu": resolve_gpu("H100"), "engine": engine, "max_model_len": 8192}
    one, two = (plan_memory(_infer(s, **knobs)) for s in (spec, grouped))
    assert one.inference is not None and two.inference is not None
    assert two.inference.kv_bytes_per_token == one.inference.kv_bytes_per_token
    assert two.inference.kv_tokens == one.inference.kv_tokens
    assert two.inference.max_sequences == one.inference.max_sequences
    assert two.component("kv_cache") == one.component("kv_cache")


def test_a_training_forward_with_use_cache_holds_each_kinds_width() -> None:
    """transformers' training forward returns its cache (the script loop holds it to the next
    step): per token the 31B holds 50 × 16 × 512 + 10 × 4 × 1024 bf16 elements, not 60 blocks
    of one width."""
    request = PlanRequest(
        model=_gemma4_31b(),
        precision=Precision.BF16,
        micro_batch=1,
        seq_len=1024,
        use_cache=True,
        loop=TrainLoop.SCRIPT,
    )
    held = held_outputs(request, recipe(request), layout(request), 0)
    assert held.cache == (50 * 16 * 512 + 10 * 4 * 1024) * 1024 * 2
