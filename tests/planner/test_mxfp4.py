"""gpt-oss as its checkpoint stores it: routed experts in MXFP4 (4-bit E2M1 values, one E8M0
scale per 32), everything else bf16, against the published checkpoints' sizes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan, plan_memory
from gpuwarden.planner.layout import distinct_layers
from gpuwarden.planner.quantization import checkpoint_format, packed_checkpoint
from gpuwarden.planner.weight_formats import MXFP4, bytes_per_weight
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Mode, ParameterFacts, PlanRequest, Precision, Verdict

# metadata.total_size of the hub's model.safetensors.index.json (huggingface.co/openai/
# gpt-oss-20b): the bytes of every tensor of the MXFP4 checkpoint (the 13.8 GB download)
GPT_OSS_20B_TENSOR_BYTES = 13_761_264_768
# the same sum over gpt-oss-120b's 15 safetensors files (65,248,893,184 B with their headers)
GPT_OSS_120B_TENSOR_BYTES = 65_248_815_744


def _infer(name: str, **knobs: Any) -> PlanRequest:
    return PlanRequest(
        model=resolve_model(name), mode=Mode.INFER, precision=Precision.BF16, **knobs
    )


def _expert_weights(spec: ModelSpec) -> int:
    return sum(
        lin.in_features * lin.out_features * lin.count * times
        for layer, times in distinct_layers(spec)
        for lin in layer.linears
        if lin.expert
    )


@pytest.mark.parametrize(
    ("name", "published"),
    [("gpt-oss-20b", GPT_OSS_20B_TENSOR_BYTES), ("gpt-oss-120b", GPT_OSS_120B_TENSOR_BYTES)],
)
def test_the_planned_weights_are_the_checkpoints_bytes(name: str, published: int) -> None:
    request = _infer(name)
    spec = request.model
    # from the model's own shapes: expert weights at 4 bits + 1 byte per 32, the rest bf16
    experts = _expert_weights(spec)
    expected = experts // 2 + experts // 32 + 2 * (spec.total_parameters - experts)
    assert expected == published
    assert compute_plan(request).component("parameters") == pytest.approx(published, abs=8)


def test_mxfp4_costs_17_bytes_per_32_weights() -> None:
    spec = resolve_model("gpt-oss-20b")
    assert bytes_per_weight(spec, MXFP4, experts_only=True) == 0.53125  # 2880 = 90 × 32
    fmt = checkpoint_format(spec)
    assert fmt is not None and fmt.method == "mxfp4"


def test_the_default_inference_plans_fit_where_the_model_card_says() -> None:
    # "gpt-oss-20b runs within 16GB of memory", "gpt-oss-120b fits a single 80GB GPU"
    small = plan_memory(_infer("gpt-oss-20b", gpu=resolve_gpu("RTX-4090")), gpus=())
    big = plan_memory(_infer("gpt-oss-120b", gpu=resolve_gpu("H100")), gpus=())
    assert small.verdict is Verdict.FITS and small.predicted.nvidia_smi_used_bytes < 16 * 2**30
    assert big.verdict is Verdict.FITS
    facts = next(c.facts for c in small.components if c.key == "parameters")
    assert isinstance(facts, ParameterFacts) and facts.linear_bytes is None
    assert facts.expert_bytes == pytest.approx(0.5318, abs=1e-4)  # the expert biases are bf16
    assert "MXFP4" in small.notes["checkpoint_weights"]


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b"])
def test_dequantize_plans_every_weight_in_bf16(name: str) -> None:
    request = _infer(name, gpu=resolve_gpu("RTX-4090"), dequantize=True)
    plan = compute_plan(request)
    assert plan.component("parameters") == 2 * request.model.total_parameters
    assert plan.verdict is Verdict.DOES_NOT_FIT
    assert "dequantized" in plan.notes["checkpoint_weights"]


def test_training_and_lora_load_the_checkpoint_dequantized() -> None:
    # transformers' Mxfp4HfQuantizer.is_trainable is False: fine-tuning dequantizes
    for mode in (Mode.LORA, Mode.TRAIN):
        request = replace(_infer("gpt-oss-20b"), mode=mode)
        assert packed_checkpoint(request) is None
        assert "dequantize=True" in compute_plan(request).notes["checkpoint_weights"]


def test_explicit_quantization_of_the_whole_model_wins() -> None:
    request = _infer("gpt-oss-20b", dequantize=True)
    int4 = compute_plan(replace(request, precision=Precision.INT4))
    assert packed_checkpoint(replace(request, precision=Precision.INT4)) is None
    assert int4.component("parameters") < compute_plan(request).component("parameters") / 3


def test_transformers_dequantizes_below_compute_capability_7_5() -> None:
    v100 = _infer("gpt-oss-20b", gpu=resolve_gpu("V100-SXM2-32GB"))
    plan = compute_plan(v100)
    assert plan.component("parameters") == 2 * v100.model.total_parameters
    assert "compute capability below 7.5" in plan.notes["checkpoint_weights"]
    # a T4 (7.5) loads it packed
    t4 = compute_plan(replace(v100, gpu=resolve_gpu("T4")))
    assert t4.component("parameters") == pytest.approx(GPT_OSS_20B_TENSOR_BYTES, abs=8)


def test_vllm_below_compute_capability_8_warns() -> None:
    request = _infer("gpt-oss-20b", gpu=resolve_gpu("T4"), gpu_memory_utilization=0.9)
    assert any("Mxfp4Config.get_min_capability" in w for w in compute_plan(request).warnings)
    ada = replace(request, gpu=resolve_gpu("RTX-4090"))
    assert not any("get_min_capability" in w for w in compute_plan(ada).warnings)


def test_a_16_bit_or_fp8_checkpoint_is_not_mxfp4() -> None:
    assert checkpoint_format(resolve_model("Mixtral-8x7B-v0.1")) is None
    fp8 = checkpoint_format(resolve_model("DeepSeek-V3"))
    assert fp8 is not None and fp8.method == "fp8" and not fp8.experts_only


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=100, deadline=None)
@given(config=_JSON, method=st.sampled_from(["mxfp4", "", None, 4, "hqq"]))
def test_any_quantization_config_is_read_without_error(config: object, method: object) -> None:
    spec = resolve_model("gpt-oss-20b")
    for value in (config, {"quant_method": method, "extra": config}):
        raw = {**spec.raw_config, "quantization_config": value}
        fmt = checkpoint_format(replace(spec, raw_config=raw))
        named = isinstance(value, dict) and value.get("quant_method") == "mxfp4"
        assert (fmt is not None and fmt.method == "mxfp4") if named else fmt is None
