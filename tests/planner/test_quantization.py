"""Quantized inference weights: 1 byte (fp8, int8) or half a byte (int4) per Linear weight plus
the scales vLLM / GPTQ store, and the modules quantizers skip at 16 bits."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan
from gpuwarden.planner.layout import distinct_layers
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.quantization import Scales, bytes_per_weight, fp8_format
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Mode, PlanRequest, Precision, Verdict
from gpuwarden.units import GIB


def _linears(spec: ModelSpec) -> list[tuple[int, int, int]]:
    """(in, out, how many) of every Linear weight in the blocks, experts included."""
    return [
        (lin.in_features, lin.out_features, lin.count * times)
        for layer, times in distinct_layers(spec)
        for lin in layer.linears
    ]


def _weights(spec: ModelSpec, precision: Precision, **knobs: object) -> int:
    request = PlanRequest(model=spec, mode=Mode.INFER, precision=precision)
    return compute_plan(replace(request, **knobs)).component("parameters")  # type: ignore[arg-type]


def test_fp8_llama_weights_are_one_byte_plus_a_scale_per_linear() -> None:
    # A 16-bit checkpoint served with vLLM's online fp8: each Linear 1 B/weight + one fp32
    # per-tensor scale; embedding, LM head and norms stay bf16.
    spec = resolve_model("Llama-3.1-8B")
    linears = _linears(spec)
    linear_weights = sum(i * o * n for i, o, n in linears)
    scales = 4 * sum(n for _, _, n in linears)
    rest = spec.total_parameters - linear_weights
    expected = linear_weights + scales + 2 * rest
    fp8 = _weights(spec, Precision.FP8)
    assert fp8 == pytest.approx(expected, abs=2)
    assert fp8 / GIB == pytest.approx(8.46, abs=0.01)  # bf16: 14.96 GiB
    assert _weights(spec, Precision.BF16) / GIB == pytest.approx(14.96, abs=0.01)


def test_int8_and_int4_carry_their_scales() -> None:
    spec = resolve_model("Llama-3.1-8B")
    linears = _linears(spec)
    weights = sum(i * o * n for i, o, n in linears)
    rest = spec.total_parameters - weights
    # int8: per-channel fp32 scales, one per output row
    int8 = weights + 4 * sum(o * n for _, o, n in linears) + 2 * rest
    assert _weights(spec, Precision.INT8) == pytest.approx(int8, abs=2)
    # int4 (GPTQ/AWQ, group 128): 0.5 B + an fp16 scale and a 4-bit zero per 128 inputs per output
    groups = sum(math.ceil(i / 128) * o * n for i, o, n in linears)
    int4 = weights / 2 + 2.5 * groups + 2 * rest
    assert _weights(spec, Precision.INT4) == pytest.approx(int4, abs=2)


def test_deepseek_v3_checkpoint_is_fp8_with_128_block_scales() -> None:
    spec = resolve_model("DeepSeek-V3")
    fmt = fp8_format(spec)  # its config.json: quant_method fp8, weight_block_size [128, 128]
    assert (fmt.scales, fmt.block) == (Scales.BLOCK, (128, 128))
    linears = _linears(spec)
    weights = sum(i * o * n for i, o, n in linears)
    blocks = sum(math.ceil(o / 128) * math.ceil(i / 128) * n for i, o, n in linears)
    assert bytes_per_weight(spec, fmt) == pytest.approx(1 + 4 * blocks / weights, rel=1e-12)


def test_deepseek_v3_fp8_fits_eight_h200() -> None:
    # It is served this way in practice (vLLM / SGLang, TP 8 on one H200 node). Priced at 2 B per
    # weight it "did not fit by 21 GiB"; at 1 B + block scales it leaves > 50 GiB per GPU.
    request = PlanRequest(
        model=resolve_model("DeepSeek-V3"),
        mode=Mode.INFER,
        precision=Precision.FP8,
        gpu=resolve_gpu("H200"),
        num_gpus=8,
        tp=8,
    )
    plan = compute_plan(request)
    assert plan.verdict is Verdict.FITS
    # ≈ 671 B parameters / 8 at ≈ 1 B, the 16-bit embedding split by TP, norms and routers whole
    assert plan.component("parameters") / GIB == pytest.approx(78.54, abs=0.01)
    vllm = compute_plan(replace(request, gpu_memory_utilization=0.9, max_model_len=32768))
    assert vllm.verdict is Verdict.FITS
    assert vllm.inference is not None and (vllm.inference.max_sequences or 0) >= 1


def test_fp8_training_keeps_16_bit_weights() -> None:
    # Transformer Engine trains fp8 GEMMs over bf16 parameters: no 1-byte storage to price.
    spec = resolve_model("Qwen2.5-0.5B")
    assert recipe(PlanRequest(model=spec, precision=Precision.FP8)).linear_bytes == 2
    assert (
        recipe(PlanRequest(model=spec, precision=Precision.FP8, mode=Mode.LORA)).linear_bytes == 2
    )


def _with_quant(spec: ModelSpec, config: Mapping[str, object]) -> ModelSpec:
    return replace(spec, raw_config={**spec.raw_config, "quantization_config": config})


def test_fp8_layout_is_read_from_the_checkpoint_config() -> None:
    spec = resolve_model("Llama-3.1-8B")
    assert fp8_format(spec).scales is Scales.TENSOR  # no quantization_config: vLLM online fp8
    assert fp8_format(_with_quant(spec, {"quant_method": "fbgemm_fp8"})).scales is Scales.CHANNEL
    channel = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}
        },
    }
    assert fp8_format(_with_quant(spec, channel)).scales is Scales.CHANNEL
    block = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {
                "weights": {
                    "num_bits": 8,
                    "type": "float",
                    "strategy": "block",
                    "block_structure": [64, 256],
                }
            }
        },
    }
    fmt = fp8_format(_with_quant(spec, block))
    assert (fmt.scales, fmt.block) == (Scales.BLOCK, (64, 256))
    int4 = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "strategy": "group"}}},
    }
    assert fp8_format(_with_quant(spec, int4)).scales is Scales.TENSOR  # not an fp8 layout


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    config=st.dictionaries(
        st.sampled_from(["quant_method", "weight_block_size", "config_groups", "fmt"]),
        _JSON | st.sampled_from(["fp8", "fbgemm_fp8", "compressed-tensors"]),
        max_size=4,
    ),
    weights=st.dictionaries(
        st.sampled_from(["num_bits", "type", "strategy", "block_structure"]),
        _JSON | st.sampled_from([8, "float", "block", "channel", "tensor"]),
        max_size=4,
    ),
)
def test_any_quantization_config_gives_a_layout(
    config: dict[str, object], weights: dict[str, object]
) -> None:
    # Hub configs are user input: whatever they hold, the planner prices fp8 weights somehow.
    nested = {
        **config,
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": weights}},
    }
    for quant in (config, nested):
        _check_layout(_with_quant(resolve_model("Qwen2.5-0.5B"), quant))


def _check_layout(spec: ModelSpec) -> None:
    fmt = fp8_format(spec)
    assert fmt.weight_bytes == 1.0 and fmt.block[0] > 0 and fmt.block[1] > 0
    # at worst one fp32 scale per weight (a 1×1 block)
    assert 1.0 <= bytes_per_weight(spec, fmt) <= 5.0
