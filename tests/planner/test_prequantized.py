"""Checkpoints stored quantized (AWQ, GPTQ, FP8, compressed-tensors, bitsandbytes) planned as they
are stored: every quantized Linear at its bytes with the scales the engines allocate for the
model's own shapes, the rest 16-bit; against published checkpoint sizes and measured loads."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import compute_plan
from gpuwarden.planner.layout import distinct_layers
from gpuwarden.planner.quantization import checkpoint_format, packed_checkpoint
from gpuwarden.planner.weight_formats import NF4_DOUBLE_QUANT, scale_bytes
from gpuwarden.types.model import LayerParameters, ModelSpec
from gpuwarden.types.plan import Mode, PlanRequest, Precision, Verdict
from gpuwarden.units import GIB

# Qwen's own AWQ checkpoints (Qwen2.5-*-Instruct-AWQ) and LDCC/Qwen2.5-72B-Instruct-ko-AWQ's
# config.json: AutoAWQ GEMM, 4-bit, group 128, zero points
AWQ = {
    "backend": "autoawq",
    "bits": 4,
    "do_fuse": False,
    "group_size": 128,
    "modules_to_not_convert": None,
    "quant_method": "awq",
    "version": "gemm",
    "zero_point": True,
}
# Qwen2.5-7B-Instruct-GPTQ-Int4's quantization_config (AutoGPTQ)
GPTQ = {
    "bits": 4,
    "damp_percent": 0.01,
    "desc_act": False,
    "group_size": 128,
    "quant_method": "gptq",
    "sym": True,
    "true_sequential": True,
}
# transformers' BitsAndBytesConfig.to_dict() of a 4-bit NF4 double-quantized upload
BNB_4BIT = {
    "_load_in_4bit": True,
    "_load_in_8bit": False,
    "bnb_4bit_compute_dtype": "bfloat16",
    "bnb_4bit_quant_storage": "uint8",
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "llm_int8_enable_fp32_cpu_offload": False,
    "llm_int8_has_fp16_weight": False,
    "llm_int8_skip_modules": None,
    "llm_int8_threshold": 6.0,
    "load_in_4bit": True,
    "load_in_8bit": False,
    "quant_method": "bitsandbytes",
}
# RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16 (llm-compressor): symmetric int4, group 128
W4A16 = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {
                "num_bits": 4,
                "type": "int",
                "symmetric": True,
                "strategy": "group",
                "group_size": 128,
                "actorder": None,
            },
            "input_activations": None,
        }
    },
    "ignore": ["lm_head"],
}
# llm-compressor FP8_DYNAMIC: fp8 weights with one fp32 scale per output channel
W8A8_FP8 = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float", "dynamic": True},
        }
    },
    "ignore": ["lm_head"],
}

# DeepSeek-V3's hub weight files (deepseek-ai/DeepSeek-V3 @afb92e1): 688,586,727,753 B in
# 163 safetensors files; the checkpoint also holds the multi-token-prediction module (layer 61:
# one more MoE block, its own embedding and head, eh_proj, 3 norms), which inference skips
DEEPSEEK_V3_FILE_BYTES = 688_586_727_753
# vllm-project/vllm#13882 (benchmarks V206): Qwen2.5-7B-Instruct-bnb-4bit served by vLLM 0.7.3,
# "Loading model weights took 5.2032 GB" (GiB: vLLM divides by 2**30)
QWEN_7B_BNB_4BIT_WEIGHTS = 5.2032 * GIB


def _with(name: str, config: object) -> ModelSpec:
    spec = resolve_model(name)
    return replace(spec, raw_config={**spec.raw_config, "quantization_config": config})


def _infer(spec: ModelSpec, **knobs: Any) -> PlanRequest:
    return PlanRequest(**{"model": spec, "mode": Mode.INFER, "precision": Precision.BF16, **knobs})


def _weights(spec: ModelSpec, **knobs: Any) -> int:
    return compute_plan(_infer(spec, **knobs)).component("parameters")


def _int_group_bytes(spec: ModelSpec, bits: int, group: int, *, g_idx: bool) -> float:
    """Bytes of the checkpoint from vLLM's GPTQ / AWQ create_weights shapes: ``bits``-wide codes
    and zeros packed in int32, an fp16 scale per group and output column, int32 g_idx per input
    row; biases, embedding, head and norms fp16."""
    total = 0.0
    for layer, times in distinct_layers(spec):
        for lin in layer.linears:
            i, o, n = lin.in_features, lin.out_features, lin.count * times
            groups = math.ceil(i / group) if group > 0 else 1
            packed = i * o * bits / 32 * 4  # qweight int32
            qzeros = groups * o * bits / 32 * 4
            scales = groups * o * 2
            total += n * (packed + qzeros + scales + (4 * i if g_idx else 0))
            total += n * (o if lin.bias else 0) * 2
    linear_params = sum(
        lin.parameters * t for layer, t in distinct_layers(spec) for lin in layer.linears
    )
    return total + 2 * (spec.total_parameters - linear_params)


def test_the_briefs_awq_qwen_7b_is_planned_at_its_stored_bytes() -> None:
    spec = _with("Qwen2.5-7B", AWQ)
    expected = _int_group_bytes(spec, 4, 128, g_idx=False)
    assert _weights(spec) == pytest.approx(expected, abs=64)
    assert expected / GIB == pytest.approx(5.19, abs=0.01)  # was 14.19 GiB at the torch_dtype
    dequantized = _weights(spec, dequantize=True)
    assert dequantized == 2 * spec.total_parameters


def test_an_awq_7b_fits_a_16_gb_gpu_unless_dequantized() -> None:
    spec = _with("Qwen2.5-7B", AWQ)
    t4 = resolve_gpu("T4")
    stored = compute_plan(_infer(spec, gpu=t4, precision=Precision.FP16))
    assert stored.verdict is Verdict.FITS
    note = stored.notes["checkpoint_weights"]
    assert "AWQ 4-bit, group 128" in note and "0.5195 B/weight" in note
    dequantized = compute_plan(_infer(spec, gpu=t4, precision=Precision.FP16, dequantize=True))
    assert dequantized.verdict is Verdict.DOES_NOT_FIT
    assert "as asked (the dequantized load)" in dequantized.notes["checkpoint_weights"]


@pytest.mark.parametrize(("bits", "group"), [(4, 128), (8, 128), (4, -1), (8, 32)])
def test_gptq_bits_and_groups_follow_vllm_create_weights(bits: int, group: int) -> None:
    spec = _with("Qwen2.5-7B", {**GPTQ, "bits": bits, "group_size": group, "desc_act": True})
    expected = _int_group_bytes(spec, bits, max(group, 0), g_idx=True)
    assert _weights(spec) == pytest.approx(expected, abs=64)


def test_gptq_8_bit_is_about_twice_the_4_bit_linears() -> None:
    four = _weights(_with("Qwen2.5-7B", GPTQ))
    eight = _weights(_with("Qwen2.5-7B", {**GPTQ, "bits": 8}))
    rest = 2 * (resolve_model("Qwen2.5-7B").total_parameters - _linear_params("Qwen2.5-7B"))
    assert (eight - rest) / (four - rest) == pytest.approx(2 * 1.0078 / 1.0234, rel=2e-3)


def _linear_params(name: str) -> int:
    spec = resolve_model(name)
    return sum(lin.parameters * t for layer, t in distinct_layers(spec) for lin in layer.linears)


def test_deepseek_v3_is_planned_as_its_fp8_checkpoint_files() -> None:
    spec = resolve_model("DeepSeek-V3")  # its own config.json: fp8, weight_block_size [128, 128]
    planned = _weights(spec)
    fmt = checkpoint_format(spec)
    assert fmt is not None and fmt.method == "fp8"
    # the multi-token-prediction module the files add, from the same shapes
    block = _block_bytes(spec.parameters.layers[-1], spec)
    h, p = spec.hidden_size, spec.parameters
    mtp = block + 2 * 2 * p.embedding + 2 * (2 * h * h) + 3 * 2 * h
    # what is left: the 163 files' safetensors JSON headers (~73 KB each)
    assert DEEPSEEK_V3_FILE_BYTES - (planned + mtp) == pytest.approx(0, abs=20e6)
    assert planned / GIB == pytest.approx(626.92, abs=0.01)  # at 2 B/param: 1,249.82 GiB


def _block_bytes(layer: LayerParameters, spec: ModelSpec) -> float:
    fmt = checkpoint_format(spec)
    assert fmt is not None
    linears = sum(lin.parameters for lin in layer.linears)
    stored = sum(
        lin.count * (lin.in_features * lin.out_features + scale_bytes(lin, fmt.weights))
        for lin in layer.linears
    )
    return stored + 2 * (layer.total - linears)


def test_the_explicit_fp8_precision_agrees_with_the_stored_fp8_plan() -> None:
    spec = resolve_model("DeepSeek-V3")
    stored = _weights(spec, tp=8, num_gpus=8)
    asked = _weights(spec, tp=8, num_gpus=8, precision=Precision.FP8, dequantize=True)
    assert stored == pytest.approx(asked, abs=8)


def test_a_prequantized_bnb_4bit_checkpoint_matches_vllms_loaded_weights() -> None:
    spec = _with("Qwen2.5-7B", BNB_4BIT)
    knobs = {"gpu_memory_utilization": 0.7, "max_model_len": 4096, "vllm_version": "0.7.3"}
    planned = _weights(spec, **knobs)
    assert planned == pytest.approx(QWEN_7B_BNB_4BIT_WEIGHTS, rel=0.01)  # -0.7 %
    # the same layout as --precision nf4 on the 16-bit model (double quantized absmax)
    nf4 = _weights(resolve_model("Qwen2.5-7B"), precision=Precision.NF4, **knobs)
    assert planned == pytest.approx(nf4, rel=1e-4)
    linears = _linear_params("Qwen2.5-7B")
    assert planned == pytest.approx(
        linears * NF4_DOUBLE_QUANT + 2 * (spec.total_parameters - linears), rel=1e-4
    )


def test_bnb_8_bit_and_single_quantized_4_bit() -> None:
    linears = _linear_params("Qwen2.5-0.5B")
    rest = 2 * (resolve_model("Qwen2.5-0.5B").total_parameters - linears)
    eight = _weights(_with("Qwen2.5-0.5B", {"quant_method": "bitsandbytes", "load_in_8bit": True}))
    assert linears < eight - rest < 1.01 * linears  # int8 + an fp32 SCB per row
    single = {**BNB_4BIT, "bnb_4bit_use_double_quant": False}
    assert _weights(_with("Qwen2.5-0.5B", single)) == pytest.approx(
        0.5625 * linears + rest, rel=1e-4
    )


def test_compressed_tensors_w4a16_and_fp8_dynamic() -> None:
    spec = _with("Llama-3.1-8B", W4A16)
    linears = _linear_params("Llama-3.1-8B")
    rest = 2 * (spec.total_parameters - linears)
    # int4 packed + one bf16 scale per 128 inputs per output (symmetric: no zero points)
    assert _weights(spec) == pytest.approx((0.5 + 2 / 128) * linears + rest, rel=1e-6)
    fp8 = _with("Llama-3.1-8B", W8A8_FP8)
    per_row = sum(
        lin.out_features * lin.count * t * 4
        for layer, t in distinct_layers(fp8)
        for lin in layer.linears
    )
    assert _weights(fp8) == pytest.approx(linears + per_row + rest, abs=64)


def test_a_skip_list_keeps_those_linears_16_bit() -> None:
    skipped = _with("Qwen2.5-7B", {**AWQ, "modules_to_not_convert": ["mlp.down_proj"]})
    down = sum(
        lin.parameters * t
        for layer, t in distinct_layers(skipped)
        for lin in layer.linears
        if lin.name == "down_proj"
    )
    full = _weights(_with("Qwen2.5-7B", AWQ))
    extra = _weights(skipped) - full
    assert extra == pytest.approx(down * (2 - 0.5 - 2.5 / 128), rel=1e-4)
    assert "16-bit: down_proj" in compute_plan(_infer(skipped)).notes["checkpoint_weights"]


def test_an_unknown_method_is_planned_at_the_dtype_with_a_warning() -> None:
    spec = _with("Qwen2.5-7B", {"quant_method": "hqq", "nbits": 4})
    plan = compute_plan(_infer(spec))
    assert plan.component("parameters") == 2 * spec.total_parameters
    assert any("quantization ('hqq') is not modelled" in w for w in plan.warnings)
    nameless = compute_plan(_infer(_with("Qwen2.5-7B", {"bits": 4})))
    assert any("names no quant_method" in w for w in nameless.warnings)
    assert not any(
        "not modelled" in w for w in compute_plan(_infer(_with("Qwen2.5-7B", AWQ))).warnings
    )


def test_lora_trains_over_the_quantized_base() -> None:
    spec = _with("Qwen2.5-7B", GPTQ)
    lora = PlanRequest(model=spec, mode=Mode.LORA)
    fmt = packed_checkpoint(lora)
    assert fmt is not None and fmt.method == "gptq"
    plan = compute_plan(lora)
    assert "PEFT trains the adapters over the quantized base" in plan.notes["checkpoint_weights"]
    dense = compute_plan(PlanRequest(model=resolve_model("Qwen2.5-7B"), mode=Mode.LORA))
    assert dense.component("parameters") - plan.component("parameters") > 8 * GIB


@pytest.mark.parametrize("config", [AWQ, GPTQ, W4A16, BNB_4BIT])
def test_full_fine_tuning_a_stored_int_checkpoint_is_refused_or_dequantized(
    config: dict[str, object],
) -> None:
    spec = _with("Qwen2.5-0.5B", config)
    train = PlanRequest(model=spec, mode=Mode.TRAIN)
    if (
        config is W4A16
    ):  # transformers decompresses it: CompressedTensorsConfig(run_compressed=False)
        assert "run_compressed=False" in compute_plan(train).notes["checkpoint_weights"]
        return
    with pytest.raises(InvalidConfigError) as refused:
        compute_plan(train)
    assert refused.value.reference == "prequantized-training"
    assert "--precision bf16-mixed" in (refused.value.hint or "")
    # an explicit precision plans the 16-bit model
    assert compute_plan(replace(train, dequantize=True)).component("parameters") > 0


def test_fp8_fine_tuning_loads_the_checkpoint_dequantized() -> None:
    spec = _with("Qwen2.5-0.5B", {"quant_method": "fp8", "weight_block_size": [128, 128]})
    for mode in (Mode.LORA, Mode.TRAIN):
        plan = compute_plan(PlanRequest(model=spec, mode=mode))
        assert "FineGrainedFP8Config(dequantize=True)" in plan.notes["checkpoint_weights"]


def test_qlora_on_a_stored_checkpoint() -> None:
    with pytest.raises(InvalidConfigError) as refused:
        compute_plan(
            PlanRequest(model=_with("Qwen2.5-0.5B", AWQ), mode=Mode.QLORA, precision=Precision.NF4)
        )
    assert refused.value.reference == "prequantized-qlora"
    bnb = compute_plan(
        PlanRequest(model=_with("Qwen2.5-0.5B", BNB_4BIT), mode=Mode.QLORA, precision=Precision.NF4)
    )
    assert "4-bit base planned as nf4" in bnb.notes["checkpoint_weights"]


def test_engines_that_refuse_the_format_on_the_gpu_warn() -> None:
    spec = resolve_model("DeepSeek-V3")
    a100 = resolve_gpu("A100-SXM4-80GB")
    hf = compute_plan(_infer(spec, gpu=a100, tp=8, num_gpus=8))
    assert any("compute capability 8.9" in w for w in hf.warnings)
    vllm = compute_plan(_infer(spec, gpu=a100, tp=8, num_gpus=8, gpu_memory_utilization=0.9))
    assert not any("compute capability" in w for w in vllm.warnings)
    v100 = compute_plan(_infer(_with("Qwen2.5-0.5B", AWQ), gpu=resolve_gpu("V100-SXM2-32GB")))
    assert any("AutoAWQ" in w and "7.0" in w for w in v100.warnings)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 300)
    | st.floats(allow_nan=True)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = [
    "bits", "w_bit", "group_size", "q_group_size", "zero_point", "desc_act", "sym",
    "modules_to_not_convert", "modules_in_block_to_quantize", "weight_block_size",
    "load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant",
    "llm_int8_skip_modules", "config_groups", "ignore",
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    method=st.sampled_from(
        [
            "awq",
            "gptq",
            "fp8",
            "fbgemm_fp8",
            "bitsandbytes",
            "compressed-tensors",
            "mxfp4",
            "hqq",
            7,
        ]
    ),
    fields=st.dictionaries(st.sampled_from(_KEYS), _JSON | st.sampled_from([4, 8, 128, -1, True])),
    weights=st.dictionaries(
        st.sampled_from(
            ["num_bits", "type", "strategy", "group_size", "symmetric", "block_structure"]
        ),
        _JSON | st.sampled_from([4, 8, 128, "int", "float", "group", "channel", "block"]),
    ),
)
def test_any_quantization_config_plans_or_exits_2(
    method: object, fields: dict[str, object], weights: dict[str, object]
) -> None:
    # Hub configs are user input: a plan, or InvalidConfigError naming the key; nothing else.
    for config in (
        {**fields, "quant_method": method},
        {**fields, "quant_method": method, "config_groups": {"g": {"weights": weights}}},
    ):
        spec = _with("Qwen2.5-0.5B", config)
        error: InvalidConfigError | None = None
        try:
            plan = compute_plan(_infer(spec))
        except InvalidConfigError as raised:
            error = raised
        if error is not None:
            assert error.reference == "invalid-quantization-config"
            assert "quantization_config." in str(error)
            continue
        assert 0 < plan.component("parameters") <= 2 * spec.total_parameters * 1.01
