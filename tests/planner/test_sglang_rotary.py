"""SGLang's rotary cos/sin tables (planner/rotary.py ``sglang_rotary_tables``): fp32 on CUDA
since PR #3169, built with the model and so inside "Load weight end ... mem usage" and inside the
static share SGLang cuts its token pool from. Table sizes are rebuilt from each config's own
fields and SGLang's layers/rotary_embedding.py shapes; the one logged figure below is a batch-10
row (V312) that guided the term."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from benchmarks.measured_rows import logged_kv_tokens
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.rotary import sglang_rotary_tables, vllm_rotary_tables
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Engine, Mode, PlanRequest
from gpuwarden.units import GIB

H100 = resolve_gpu("H100")


def _with_config(spec: ModelSpec, **raw: Any) -> ModelSpec:
    return replace(spec, raw_config={**spec.raw_config, **raw})


def _sglang(model: str | ModelSpec, version: str = "0.4.9", **knobs: Any) -> PlanRequest:
    spec = resolve_model(model) if isinstance(model, str) else model
    return PlanRequest(
        model=spec, mode=Mode.INFER, engine=Engine.SGLANG, sglang_version=version, **knobs
    )


def test_llama3_table_is_fp32_and_matches_the_logged_load() -> None:
    # V312 (MaxUhl98/Thesis inference_server/readme.md, SGLang of 2025-07-14): "Load weight end.
    # type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=7.37 GB, mem usage=15.02 GB."
    plan = plan_memory(_sglang("Llama-3.1-8B"))
    buffers = plan.component("buffers")
    assert buffers == 131_072 * 128 * 4  # one llama3 table, fp32: 0.0625 GiB
    loaded = (plan.component("parameters") + buffers) / GIB
    assert loaded == pytest.approx(15.02, abs=0.005)
    (component,) = (c for c in plan.components if c.key == "buffers")
    assert "fp32 on CUDA" in component.source
    assert "131,072 positions × 128 × 4 B" in component.detail


def test_releases_before_the_sgl_kernel_rope_keep_the_model_dtype() -> None:
    spec = resolve_model("Llama-3.1-8B")
    assert sglang_rotary_tables(spec, 2, "0.4.1.post7").bytes == 131_072 * 128 * 2
    assert sglang_rotary_tables(spec, 2, "0.4.2").bytes == 131_072 * 128 * 4


def test_the_table_comes_out_of_the_static_share_before_the_pool() -> None:
    plan = plan_memory(_sglang("Qwen3-8B", gpu=H100, mem_fraction_static=0.85))
    cap = plan.inference
    assert cap is not None and plan.usable_bytes is not None
    loaded = plan.component("parameters") + plan.component("buffers")
    assert plan.component("buffers") == 40_960 * 128 * 4
    assert cap.non_kv_bytes == loaded
    assert cap.kv_tokens == (plan.usable_bytes - loaded) // cap.kv_bytes_per_token


def test_gemma3_keeps_two_unstretched_tables_where_vllm_stretches_the_global_one() -> None:
    # gemma3_causal.py Gemma3Attention: rope_scaling {"rope_type": "default"} for both ropes
    spec = resolve_model("gemma-3-27b-it")
    sglang = sglang_rotary_tables(spec, 2, "0.5.5")
    rows = spec.max_position_embeddings
    assert [(t.rows, t.width, t.dtype_bytes) for t in sglang.tables] == [(rows, 128, 4)] * 2
    vllm_rows = sorted(t.rows for t in vllm_rotary_tables(spec, 2).tables)
    assert vllm_rows == [rows, rows * 8]  # vLLM: the global rope's linear factor 8


def test_longrope_keeps_short_long_and_their_concatenation_in_the_model_dtype() -> None:
    spec = _with_config(
        resolve_model("Phi-3-mini-4k-instruct"),
        rope_scaling={
            "type": "longrope",
            "original_max_position_embeddings": 4096,
            "short_factor": [1.0] * 48,
            "long_factor": [1.0] * 48,
        },
    )
    (table,) = sglang_rotary_tables(spec, 2, "0.5.5").tables
    assert (table.rows, table.dtype_bytes) == (2 * (4096 + spec.max_position_embeddings), 2)


def test_mrope_is_named_not_guessed() -> None:
    spec = _with_config(
        resolve_model("Qwen2.5-7B"), rope_scaling={"type": "default", "mrope_section": [16, 24, 24]}
    )
    plan = plan_memory(_sglang(spec))
    assert plan.component("buffers") == 0
    assert "not modelled" in plan.notes["rotary"]


def test_models_without_rope_have_no_table() -> None:
    assert sglang_rotary_tables(resolve_model("bert-large-uncased"), 2, "0.5.5").bytes == 0


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from(["0.3.6", "0.4.1", "0.4.2", "0.4.9", "0.5.5", "1.0"]),
    dtype_bytes=st.sampled_from([1.0, 2.0, 4.0]),
    positions=st.integers(min_value=1, max_value=2_000_000),
)
def test_a_table_is_positions_times_width_times_one_dtype(
    version: str, dtype_bytes: float, positions: int
) -> None:
    spec = replace(resolve_model("Qwen2.5-7B"), max_position_embeddings=positions)
    (table,) = sglang_rotary_tables(spec, dtype_bytes, version).tables
    assert table.rows == positions and table.width == spec.head_dim
    assert table.dtype_bytes in (4, dtype_bytes)


@pytest.mark.parametrize(
    ("notes", "tokens"),
    [
        ("'KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB'", 46_611),
        ("'max_total_num_tokens=38141, chunked_prefill_size=2048'", 38_141),
    ],
)
def test_validation_reads_sglang_pool_lines_in_tokens(notes: str, tokens: int) -> None:
    logged = logged_kv_tokens(notes, 16, "sglang")  # SGLang logs tokens, never pages
    assert logged is not None and logged[0] == tokens
    assert logged_kv_tokens(notes, 16, "vllm") is None
