"""SGLang's token pool: the static fraction, the cell from kv_cache.py, the default fraction per
release, and what SGLang does when the pool is too small (planner/sglang.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.planner.sglang import check_engine, default_fraction, token_pool
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Engine, Mode, PlanRequest, Verdict
from gpuwarden.units import GIB

H100 = resolve_gpu("H100")

# Real SGLang start-up logs (public issues). Each row: what SGLang logged, and the launch.
# vllm-project/vllm#21348 (2025-07-22): Qwen3-235B-A22B-FP8, 4×H100, --tp 4
# --mem-fraction-static 0.93: "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size:
# 8.23 GB" (the FP8 checkpoint is planned as --precision fp8).
# xorbitsai/inference#3481 (2025-05-19): Qwen3-14B, one 48 GB GPU (model not named; "Load weight
# end ... avail mem=19.67 GB, mem usage=27.57 GB", so 47.24 GiB free before), SGLang default
# fraction of that time (0.88 at tp 1): "#tokens: 91749, K size: 7.00 GB, V size: 7.00 GB".
QWEN3_14B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "num_hidden_layers": 40,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 17408,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}


def _infer(model: str | ModelSpec, **knobs: object) -> PlanRequest:
    spec = resolve_model(model) if isinstance(model, str) else model
    return PlanRequest(model=spec, mode=Mode.INFER, **knobs)  # type: ignore[arg-type]


def test_pool_is_the_static_share_less_the_weights_in_whole_cells() -> None:
    plan = plan_memory(_infer("Qwen3-8B", gpu=H100, mem_fraction_static=0.85))
    cap = plan.inference
    assert cap is not None and cap.remainder_bytes is not None
    spec = plan.request.model
    # SGLang's MHA cell: kv_heads × head_dim × layers × 2 (K and V) × 2 bytes
    cell = spec.num_kv_heads * spec.head_dim * spec.num_layers * 2 * 2
    assert cap.kv_bytes_per_token == cell == 147_456
    static = plan.usable_bytes
    assert static is not None
    assert cap.kv_tokens == (static - cap.non_kv_bytes) // cell
    assert cap.kv_pool_bytes == cap.kv_tokens * cell
    # the static share and the remainder split the free memory 0.85 : 0.15
    assert static / (static + cap.remainder_bytes) == pytest.approx(0.85, abs=1e-9)
    assert plan.verdict is Verdict.FITS
    assert plan.notes["engine"].startswith("SGLang")
    assert "0.85 as passed" in plan.notes["sglang"]


def test_token_pool_rounds_to_pages_and_caps_the_request() -> None:
    pool = token_pool(10 * GIB, 0.5, 4 * GIB, 1000.0, 64, 8192)
    assert pool.static_bytes == 5 * GIB
    assert pool.tokens == (GIB // 1000) // 64 * 64
    assert pool.request_tokens == 8192
    empty = token_pool(10 * GIB, 0.3, 4 * GIB, 1000.0, 1, 8192)
    assert empty.tokens == 0 and empty.max_request_tokens == 0


@settings(max_examples=100, deadline=None)
@given(
    free=st.integers(0, 200 * GIB),
    fraction=st.floats(0.01, 0.99),
    weights=st.integers(0, 200 * GIB),
    cell=st.floats(1, 2e6),
    page=st.sampled_from([1, 16, 32, 64]),
    context=st.integers(1, 1_000_000),
)
def test_token_pool_never_exceeds_its_share(
    free: int, fraction: float, weights: int, cell: float, page: int, context: int
) -> None:
    pool = token_pool(free, fraction, weights, cell, page, context)
    assert pool.tokens >= 0 and pool.tokens % page == 0
    assert weights + pool.pool_bytes <= max(pool.static_bytes, weights)
    assert pool.static_bytes + pool.remainder_bytes == free
    assert pool.max_request_tokens <= context


def test_default_fraction_per_release() -> None:
    # 0.5.3+: (81559 − max(512 + 8192·1.5 + 256·2 + 1/8·1024, 10240)) / 81559 on an H100
    new = default_fraction(H100, 1, 1, "0.5.5")
    assert (new.chunked_prefill_size, new.cuda_graph_max_bs) == (8192, 256)
    assert new.fraction == round((81559 - 13440) / 81559, 3) == 0.835
    # tp 4 captures up to bs 512 and reserves 4/8 GiB for the parallel size
    assert default_fraction(H100, 4, 1, "0.5.5").fraction == round((81559 - 14336) / 81559, 3)
    # before: the TP-size table
    assert [default_fraction(H100, tp, 1, "0.4.3").fraction for tp in (1, 2, 4, 8, 16)] == [
        0.88,
        0.87,
        0.85,
        0.81,
        0.79,
    ]
    # a 24 GB card: chunk 2048, bs 24; the 10 GB floor applies only above 60 GiB
    a10g = default_fraction(resolve_gpu("A10G"), 1, 1, "0.5.5")
    assert a10g.fraction == round((23028 - (512 + 2048 * 1.5 + 24 * 2 + 128)) / 23028, 3)
    assert default_fraction(None, 1, 1, "0.5.5").fraction == 0.88


def test_default_fraction_is_named_in_the_notes() -> None:
    plan = plan_memory(_infer("Qwen3-8B", gpu=H100, engine=Engine.SGLANG))
    assert "mem_fraction_static 0.835" in plan.notes["sglang"]
    assert "_handle_gpu_memory_settings" in plan.notes["sglang"]


def test_mla_pool_caches_the_latent_once_per_rank() -> None:
    spec = resolve_model("DeepSeek-V2-Lite")
    assert spec.mla is not None
    plan = plan_memory(_infer(spec, gpu=H100, mem_fraction_static=0.85))
    cap = plan.inference
    assert cap is not None
    cell = (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) * spec.num_layers * 2
    assert cap.kv_bytes_per_token == cell
    assert plan.usable_bytes is not None
    assert cap.kv_tokens == (plan.usable_bytes - cap.non_kv_bytes) // cell > 0


def test_weights_filling_the_share_refuse_to_start() -> None:
    plan = plan_memory(_infer("Llama-3.1-70B", gpu=H100, mem_fraction_static=0.85))
    assert plan.inference is not None and plan.inference.kv_tokens == 0
    assert plan.verdict is Verdict.DOES_NOT_FIT
    assert "Not enough memory" in plan.notes["sglang_refusal"]


def test_pool_shorter_than_one_request_caps_its_length() -> None:
    request = _infer(
        "Qwen3-8B", gpu=resolve_gpu("L4"), mem_fraction_static=0.8, max_model_len=40960
    )
    plan = plan_memory(request)
    cap = plan.inference
    assert cap is not None and 0 < cap.kv_tokens < 40960
    assert plan.verdict is Verdict.DOES_NOT_FIT
    assert f"longer than {cap.kv_tokens - 1:,} tokens" in plan.notes["sglang_refusal"]


def test_fp8_kv_cache_halves_the_cell() -> None:
    bf16 = plan_memory(_infer("Qwen3-8B", gpu=H100, mem_fraction_static=0.85)).inference
    fp8 = plan_memory(
        _infer("Qwen3-8B", gpu=H100, mem_fraction_static=0.85, kv_cache_dtype="fp8_e4m3")
    ).inference
    assert bf16 is not None and fp8 is not None
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    assert fp8.kv_tokens == pytest.approx(2 * bf16.kv_tokens, abs=2)


@pytest.mark.parametrize(
    ("knobs", "reference"),
    [
        ({"mem_fraction_static": 1.2}, "value-out-of-range"),
        ({"mem_fraction_static": 0.0}, "value-out-of-range"),
        ({"mem_fraction_static": 0.8, "gpu_memory_utilization": 0.9}, "engine-budget-conflict"),
        ({"engine": Engine.VLLM, "mem_fraction_static": 0.8}, "engine-budget-conflict"),
        ({"engine": Engine.SGLANG, "sglang_version": "latest"}, "sglang-version-unreadable"),
        ({"engine": Engine.SGLANG, "page_size": 0}, "value-out-of-range"),
        ({"mode": Mode.TRAIN, "mem_fraction_static": 0.8}, "engine-needs-infer"),
    ],
)
def test_bad_settings_name_themselves(knobs: dict[str, object], reference: str) -> None:
    request = replace(_infer("Qwen3-8B", gpu=H100), **knobs)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError) as caught:
        check_engine(request)
    assert caught.value.reference == reference and caught.value.hint


def test_engine_follows_the_budget_knob() -> None:
    assert _infer("Qwen3-8B").serving_engine is Engine.HF
    assert _infer("Qwen3-8B", gpu_memory_utilization=0.9).serving_engine is Engine.VLLM
    assert _infer("Qwen3-8B", mem_fraction_static=0.9).serving_engine is Engine.SGLANG


# --- validation against logged pools (planned before any tuning; errors in h23h_readme.md) -------


def test_qwen3_235b_fp8_tp4_pool_against_the_log() -> None:
    from gpuwarden.types.plan import Precision

    request = _infer(
        "Qwen3-235B-A22B",
        gpu=H100,
        num_gpus=4,
        tp=4,
        mem_fraction_static=0.93,
        precision=Precision.FP8,
        dequantize=True,
    )
    cap = plan_memory(request).inference
    assert cap is not None
    # cell: 4 KV heads / tp 4 × 128 × 94 layers × 2 × 2 B, exactly the logged K size per token
    assert cap.kv_bytes_per_token == 48_128
    assert 367_404 * cap.kv_bytes_per_token / 2 / GIB == pytest.approx(8.23, abs=0.005)
    assert cap.kv_tokens == pytest.approx(367_404, rel=0.05)


def test_qwen3_14b_default_fraction_against_the_log(tmp_path: Path) -> None:
    import json

    from gpuwarden.types.plan import PlanRequest as Request

    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN3_14B))
    spec = resolve_model(str(path))
    request = Request(
        model=spec,
        mode=Mode.INFER,
        gpu=resolve_gpu("rtx-a6000-48gb"),
        engine=Engine.SGLANG,
        sglang_version="0.4.6",
        max_model_len=40960,
    )
    plan = plan_memory(request)
    cap = plan.inference
    assert cap is not None
    assert cap.kv_bytes_per_token * 91_749 / 2 / GIB == pytest.approx(7.00, abs=0.005)
    assert cap.non_kv_bytes / GIB == pytest.approx(27.57, rel=0.02)  # "mem usage=27.57 GB"
    assert cap.kv_tokens == pytest.approx(91_749, rel=0.05)
