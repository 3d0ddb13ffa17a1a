"""The model's context: a warning past it, and `--fit` stops at it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import instance_catalog, resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan, fit
from gpuwarden.planner.context import model_context
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Checkpointing, Mode, PlanRequest


def _rope(spec: ModelSpec, rope: object, table: int | None = None) -> ModelSpec:
    return replace(
        spec,
        raw_config={**spec.raw_config, "rope_scaling": rope},
        max_position_embeddings=table if table is not None else spec.max_position_embeddings,
    )


def test_context_of_the_bundled_configs() -> None:
    assert model_context(resolve_model("Llama-2-7b-hf")) == 4096
    assert model_context(resolve_model("gpt2")) == 1024  # n_positions
    # llama3 RoPE: max_position_embeddings already states the stretched length
    assert model_context(resolve_model("Llama-3.1-8B")) == 131072
    # YaRN: original_max_position_embeddings 4096 × factor 40 (vLLM's rule)
    assert model_context(resolve_model("DeepSeek-V3")) == 163840
    assert model_context(resolve_model("T0_3B")) is None  # relative positions, no table


def test_linear_and_dynamic_scaling_stretch_the_table() -> None:
    llama2 = resolve_model("Llama-2-7b-hf")
    assert model_context(_rope(llama2, {"type": "linear", "factor": 4.0})) == 16384
    assert model_context(_rope(llama2, {"rope_type": "dynamic", "factor": 2})) == 8192
    assert model_context(_rope(llama2, {"rope_type": "default"})) == 4096


def test_a_sequence_past_the_context_is_a_warning_not_an_error() -> None:
    llama2 = resolve_model("Llama-2-7b-hf")
    plan = compute_plan(PlanRequest(model=llama2, seq_len=100_000))
    [warning] = [w for w in plan.warnings if "context" in w]
    assert "100,000" in warning and "4,096" in warning
    assert compute_plan(PlanRequest(model=llama2, seq_len=4096)).warnings == ()
    served = PlanRequest(model=llama2, mode=Mode.INFER, prompt_tokens=4000, new_tokens=200)
    assert any("4,200" in w and "4,096" in w for w in compute_plan(served).warnings)
    vllm = replace(served, gpu_memory_utilization=0.9, max_model_len=8192, new_tokens=96)
    assert any("--max-model-len" in w for w in compute_plan(vllm).warnings)


def test_fit_caps_the_longest_sequence_at_the_context() -> None:
    # The walk-through: "max seq len 204,037" for Llama-2, whose positions end at 4,096.
    request = PlanRequest(
        model=resolve_model("Llama-2-7b-hf"), mode=Mode.LORA, checkpointing=Checkpointing.FULL
    )
    result = fit(request, [resolve_gpu("H200")], instance_catalog(), max_gpus=1, top=1)
    assert result.options[0].max_seq_len == 4096
    served = PlanRequest(model=resolve_model("Llama-3.1-8B"), mode=Mode.INFER)
    best = fit(served, [resolve_gpu("H200")], instance_catalog(), max_gpus=1, top=1).options[0]
    assert best.max_seq_len == 131072  # prompt + new tokens, at most the context


_VALUES = st.none() | st.booleans() | st.integers(-5, 10**7) | st.floats() | st.text(max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    rope=st.dictionaries(
        st.sampled_from(["type", "rope_type", "factor", "original_max_position_embeddings"]),
        _VALUES | st.sampled_from(["yarn", "linear", "dynamic", "llama3", "longrope"]),
    )
    | _VALUES,
    table=st.integers(1, 10**6),
)
def test_any_rope_scaling_gives_a_context_or_none(rope: object, table: int) -> None:
    # Configs are user input (local files, hub ids): a context, never a crash.
    spec = _rope(resolve_model("Llama-2-7b-hf"), rope, table)
    context = model_context(spec)
    assert context is None or (isinstance(context, int) and context > 0)
