"""Held-out batch 21 (benchmarks/data/validation.csv V450-V452): SGLang start-up logs read
against planner/sglang.py's pool formula and kv_cache.py's cell. Every figure below is what
the log printed (SGLang's "GB" is bytes / 2**30, printed to two decimals)."""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.sglang import token_pool
from gpuwarden.types.plan import Engine, Mode, PlanRequest
from gpuwarden.units import GIB

# The logged free memory is rounded to 0.01 GB, so the pool derived from it carries about
# (fraction + 1) × 0.005 GiB of rounding: under 0.2 % of these pools.
ROUNDING = 0.002


def _cell(model: str, tp: int = 1) -> int:
    """One token's K and V over a rank's layers, as the plan computes it."""
    request = PlanRequest(
        model=resolve_model(model),
        mode=Mode.INFER,
        engine=Engine.SGLANG,
        tp=tp,
        num_gpus=tp,
        mem_fraction_static=0.88,
    )
    capacity = plan_memory(request).inference
    assert capacity is not None
    return capacity.kv_bytes_per_token


def test_r1_distill_qwen_7b_pool_from_the_logged_free_memory() -> None:
    # jerryzsj/my-deepseek-r1 README (2025-02-04, RTX 3090, V450): "Load weight begin. avail
    # mem=22.76 GB", "Load weight end. ... avail mem=8.37 GB", "KV Cache is allocated. K size:
    # 2.82 GB, V size: 2.82 GB.", "max_total_num_tokens=105531", mem_fraction_static=0.88.
    cell = _cell("Qwen2.5-7B")  # DeepSeek-R1-Distill-Qwen-7B has Qwen2.5-7B's shapes
    assert cell == 28 * 4 * 128 * 2 * 2 == 57_344
    assert 105_531 * cell / 2 / GIB == pytest.approx(2.82, abs=0.005)
    pool = token_pool(
        free_before=int(22.76 * GIB),
        fraction=0.88,
        weights=int((22.76 - 8.37) * GIB),
        cell=cell,
        page=1,
        context=131_072,
    )
    assert pool.tokens == pytest.approx(105_531, rel=ROUNDING)
    # the pool is shorter than the model's 131,072-token context and SGLang started: it caps
    # the request length (tp_worker.py max_req_len), it does not refuse
    assert 0 < pool.tokens < pool.request_tokens
    assert pool.max_request_tokens == pool.tokens - 1


def test_qwen3_32b_pool_from_the_logged_free_memory() -> None:
    # RyanRosario/llm-d GKE snapshot guide (SGLang v0.5.19, 1x H100, V451): "Load weight end.
    # ... avail mem=17.40 GB, mem usage=61.07 GB.", "9.54 GB for 39,078 tokens",
    # --mem-fraction-static 0.90 (the guide's manifest).
    cell = _cell("Qwen3-32B")
    assert cell == 64 * 8 * 128 * 2 * 2 == 262_144
    assert 39_078 * cell / GIB == pytest.approx(9.54, abs=0.005)
    pool = token_pool(
        free_before=int((17.40 + 61.07) * GIB),
        fraction=0.90,
        weights=int(61.07 * GIB),
        cell=cell,
        page=1,
        context=8192,
    )
    assert pool.tokens == pytest.approx(39_078, rel=ROUNDING)


def test_qwen3_32b_tp4_cell_is_a_quarter_of_the_kv_heads() -> None:
    # 4x RTX 5090 report (SGLang 0.5.13.post1, V452): TP 4 leaves 2 of the 8 KV heads per rank
    full, quarter = _cell("Qwen3-32B"), _cell("Qwen3-32B", tp=4)
    assert quarter * 4 == full
    request = PlanRequest(
        model=resolve_model("Qwen3-32B"),
        mode=Mode.INFER,
        engine=Engine.SGLANG,
        tp=4,
        num_gpus=4,
        gpu=resolve_gpu("rtx-5090-32gb"),
        mem_fraction_static=0.88,
        max_model_len=40960,
        sglang_version="0.5.13",
    )
    capacity = plan_memory(request).inference
    assert capacity is not None and capacity.kv_bytes_per_token == quarter
