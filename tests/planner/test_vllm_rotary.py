"""vLLM's rotary cos/sin tables: rows × rotary_dim × dtype per distinct rope, built on every GPU
with the model and so inside "Loading model weights took X GiB". Expected sizes are rebuilt from
each config's own fields and vLLM's ``_compute_cos_sin_cache`` shapes (rotary_embedding/*.py),
not from the validation logs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan, inference
from gpuwarden.planner.context import model_context
from gpuwarden.planner.rotary import RotaryTables, sglang_rotary_tables, vllm_rotary_tables
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Mode, PlanRequest, Precision


def _with_config(spec: ModelSpec, **raw: Any) -> ModelSpec:
    return replace(spec, raw_config={**spec.raw_config, **raw})


def test_llama3_scaling_keeps_the_stated_positions() -> None:
    # Llama3RotaryEmbedding only rescales the inverse frequencies: max_position rows
    spec = resolve_model("Llama-3.1-8B")
    tables = vllm_rotary_tables(spec, 2)
    assert [(t.rows, t.width) for t in tables.tables] == [(131_072, 128)]
    assert tables.bytes == 131_072 * 128 * 2  # 0.031 GiB in bf16
    assert vllm_rotary_tables(spec, 4).bytes == 131_072 * 128 * 4  # --dtype float32


def test_yarn_counts_from_the_original_positions_and_gpt_oss_keeps_fp32() -> None:
    # get_rope passes original_max_position_embeddings; YaRN builds original × factor rows;
    # gpt_oss.py passes dtype=torch.float32 whatever the model dtype
    spec = resolve_model("gpt-oss-20b")
    (table,) = vllm_rotary_tables(spec, 2).tables
    assert (table.rows, table.width, table.dtype_bytes) == (4096 * 32, 64, 4)


def test_deepseek_mla_ropes_only_the_rope_part() -> None:
    spec = resolve_model("DeepSeek-V2-Lite")
    assert spec.mla is not None
    (table,) = vllm_rotary_tables(spec, 2).tables
    assert (table.rows, table.width) == (4096 * 40, spec.mla.qk_rope_head_dim)


@pytest.mark.parametrize(("name", "factor"), [("phi-2", 0.4), ("stablelm-base-alpha-3b", 0.25)])
def test_partial_rotary_narrows_the_table(name: str, factor: float) -> None:
    spec = resolve_model(name)
    (table,) = vllm_rotary_tables(spec, 2).tables
    assert table.width == int(spec.head_dim * factor)
    assert table.rows == spec.max_position_embeddings


def test_gemma3_has_a_local_and_a_linearly_scaled_global_table() -> None:
    spec = resolve_model("gemma-3-27b-it")
    tables = vllm_rotary_tables(spec, 2).tables
    assert [(t.rows, t.width) for t in tables] == [(131_072, 128), (131_072 * 8, 128)]
    # gemma-3-1b: no scaling, but the bases differ (10k local, 1M global): still two tables
    small = resolve_model("gemma-3-1b-it")
    assert [t.rows for t in vllm_rotary_tables(small, 2).tables] == [32_768, 32_768]


def test_longrope_holds_a_short_and_a_long_table() -> None:
    spec = _with_config(
        resolve_model("Phi-3-mini-4k-instruct"),
        rope_scaling={
            "type": "longrope",
            "short_factor": [1.0],
            "long_factor": [1.0],
            "original_max_position_embeddings": 4096,
        },
    )
    (table,) = vllm_rotary_tables(replace(spec, max_position_embeddings=131_072), 2).tables
    assert table.rows == 4096 + 131_072


def test_models_without_rotary_positions_have_no_table() -> None:
    for name in ("gpt2", "bloomz-7b1", "T0_3B"):
        assert vllm_rotary_tables(resolve_model(name), 2).tables == ()


def test_a_rope_type_not_read_from_vllm_is_named_not_guessed() -> None:
    spec = _with_config(resolve_model("Qwen2.5-7B"), rope_scaling={"type": "ntk", "factor": 4.0})
    tables = vllm_rotary_tables(spec, 2)
    assert tables.tables == ()
    assert tables.unmodelled is not None and "ntk" in tables.unmodelled


def _vllm_plan(model: str, **knobs: Any) -> Any:
    return compute_plan(
        PlanRequest(
            model=resolve_model(model),
            mode=Mode.INFER,
            precision=Precision.BF16,
            gpu=resolve_gpu("H100"),
            gpu_memory_utilization=0.9,
            max_model_len=8192,
            **knobs,
        )
    )


def test_the_plan_shows_the_tables_apart_from_the_checkpoint_parameters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_tables = _vllm_plan("Llama-3.1-8B")
    monkeypatch.setattr(inference, "vllm_rotary_tables", lambda spec, dtype: RotaryTables(()))
    without = _vllm_plan("Llama-3.1-8B")
    rotary = 131_072 * 128 * 2
    assert with_tables.component("buffers") == rotary
    assert without.component("buffers") == 0
    # parameters stay the checkpoint's tensors; the budget's non-KV share counts the tables once
    assert with_tables.component("parameters") == without.component("parameters")
    assert with_tables.inference.non_kv_bytes - without.inference.non_kv_bytes == rotary
    assert with_tables.inference.kv_tokens < without.inference.kv_tokens


def test_tensor_parallelism_does_not_split_the_table() -> None:
    one = _vllm_plan("Llama-3.1-8B").component("buffers")
    four = _vllm_plan("Llama-3.1-8B", tp=4, num_gpus=4).component("buffers")
    assert one == four == 131_072 * 128 * 2


def test_hf_generate_plans_no_vllm_buffers() -> None:
    plan = compute_plan(
        PlanRequest(model=resolve_model("Llama-3.1-8B"), mode=Mode.INFER, gpu=resolve_gpu("H100"))
    )
    assert plan.component("buffers") == 0


@settings(max_examples=80, deadline=None)
@given(
    kind=st.sampled_from(["linear", "dynamic", "yarn", "llama3", "default", "longrope", "weird"]),
    factor=st.one_of(st.none(), st.floats(-4, 64), st.booleans(), st.text(max_size=3)),
    original=st.one_of(st.none(), st.integers(-10, 1 << 20), st.floats(allow_nan=True)),
    partial=st.one_of(st.none(), st.floats(allow_nan=True), st.integers(-2, 3)),
)
def test_any_rope_config_gives_a_size_or_a_reason(
    kind: str, factor: object, original: object, partial: object
) -> None:
    spec = _with_config(
        resolve_model("Qwen2.5-0.5B"),
        rope_scaling={
            "rope_type": kind,
            "factor": factor,
            "original_max_position_embeddings": original,
        },
        partial_rotary_factor=partial,
    )
    tables = vllm_rotary_tables(spec, 2)
    assert (tables.unmodelled is None) == bool(tables.tables)
    assert all(t.rows >= 0 and 0 <= t.width <= spec.head_dim for t in tables.tables)


_DAMAGED_NUMBER = st.one_of(
    st.floats(min_value=1e300),  # past the table or int range, inf
    st.integers(min_value=1 << 1100, max_value=1 << 1400),  # JSON ints past float range
    st.integers(min_value=1 << 31, max_value=1 << 62),
)


@settings(max_examples=60, deadline=None)
@given(
    kind=st.one_of(
        st.sampled_from(["linear", "dynamic", "yarn", "longrope", "default"]),
        st.lists(st.text(max_size=2), max_size=2),  # JSON arrays and objects are no type name
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    ),
    factor=st.one_of(st.floats(1, 64), _DAMAGED_NUMBER),
    original=st.one_of(st.integers(1, 1 << 20), _DAMAGED_NUMBER),
)
def test_damaged_rope_numbers_give_a_reason_not_an_error(
    kind: object, factor: object, original: object
) -> None:
    """A config.json with a rope type that is no string, or numbers past any real context
    (``1e308``, a 400-digit integer), is read as a rope not modelled, never as an overflow."""
    spec = _with_config(
        resolve_model("Qwen2.5-0.5B"),
        rope_scaling={
            "rope_type": kind,
            "factor": factor,
            "original_max_position_embeddings": original,
        },
    )
    for tables in (vllm_rotary_tables(spec, 2), sglang_rotary_tables(spec, 2, "0.4.9")):
        assert (tables.unmodelled is None) == bool(tables.tables)
        assert all(0 <= t.rows <= 2**31 for t in tables.tables)
    context = model_context(spec)
    assert context is None or context >= 1
