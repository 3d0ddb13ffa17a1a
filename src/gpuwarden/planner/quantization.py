"""Quantized Linear weights: bytes per weight with their scales, as inference engines store them.

Only the blocks' ``nn.Linear`` weights (and routed experts) are quantized; embeddings, the LM head,
norms and routers stay in the checkpoint's 16-bit dtype (vLLM's fp8/int8 methods and GPTQ/AWQ skip
them; DeepSeek-V3's fp8 checkpoint keeps them in bf16). The scales, read in vLLM's
``Fp8LinearMethod.create_weights`` and the compressed-tensors / fbgemm schemes:

* fp8 per-tensor: one fp32 ``weight_scale`` per logical Linear (vLLM's ``--quantization fp8`` on a
  16-bit checkpoint, and fp8 checkpoints without ``weight_block_size``);
* fp8 per-channel: fp32 ``weight_scale`` [out] (``fbgemm_fp8``, compressed-tensors ``channel``);
* fp8 block-wise: fp32 ``weight_scale_inv`` [⌈out/bn⌉, ⌈in/bk⌉] (``weight_block_size`` [128, 128]:
  DeepSeek-V3's checkpoint, compressed-tensors ``block``);
* int8: per-channel fp32 scales [out] (bitsandbytes ``Int8Params.SCB``, W8A8 per-channel);
* int4 GPTQ/AWQ, group 128: 4-bit weights, an fp16 scale and a 4-bit zero point (packed into
  int32 ``qzeros``) per 128 input rows per output column.

The scale bytes are summed over the model's own Linear shapes, so the average per weight is exact
for the model (memory.md §2.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpuwarden.planner.layout import ceil_div, distinct_layers
from gpuwarden.types.model import LinearShape, ModelSpec
from gpuwarden.types.plan import Mode, PlanRequest, Precision

FP32 = 4
FP16 = 2
INT4_GROUP = 128
INT4_PER_GROUP = FP16 + 0.5  # fp16 scale + 4-bit zero point per group and output column


class Scales(StrEnum):
    TENSOR = "per-tensor"
    CHANNEL = "per-channel"
    BLOCK = "block"
    GROUP = "group"


@dataclass(frozen=True, slots=True)
class WeightFormat:
    """How one quantized Linear weight is stored."""

    weight_bytes: float  # per weight, without scales
    scales: Scales
    block: tuple[int, int] = (128, 128)  # (out, in) rows and columns per block scale
    label: str = ""


def _pair(value: object) -> tuple[int, int] | None:
    """A block shape [rows, cols] of positive integers, or None (configs are user input)."""
    if isinstance(value, list) and len(value) == 2:
        rows, cols = value
        if isinstance(rows, int) and isinstance(cols, int) and rows > 0 and cols > 0:
            return rows, cols
    return None


def _compressed_tensors_fp8(config: dict[object, object]) -> WeightFormat | None:
    groups = config.get("config_groups")
    if not isinstance(groups, dict):
        return None
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            continue
        if weights.get("type") != "float" or weights.get("num_bits") != 8:
            continue  # an int8 / int4 group: not an fp8 layout
        strategy = weights.get("strategy")
        if strategy == "block" and (block := _pair(weights.get("block_structure"))) is not None:
            return WeightFormat(1.0, Scales.BLOCK, block)
        if strategy == "channel":
            return WeightFormat(1.0, Scales.CHANNEL)
        if strategy == "tensor":
            return WeightFormat(1.0, Scales.TENSOR)
    return None


def fp8_format(spec: ModelSpec) -> WeightFormat:
    """The fp8 layout of the model's checkpoint (its ``quantization_config``), else vLLM's online
    fp8 quantization of a 16-bit checkpoint: per-tensor scales."""
    config = spec.raw_config.get("quantization_config")
    if isinstance(config, dict):
        method = config.get("quant_method")
        if method == "fp8" and (block := _pair(config.get("weight_block_size"))) is not None:
            return WeightFormat(
                1.0, Scales.BLOCK, block, f"fp8, {block[0]}×{block[1]} block scales"
            )
        if method == "fbgemm_fp8":
            return WeightFormat(1.0, Scales.CHANNEL, label="fp8, per-channel scales (fbgemm_fp8)")
        if method == "compressed-tensors" and (fmt := _compressed_tensors_fp8(config)) is not None:
            return WeightFormat(
                fmt.weight_bytes, fmt.scales, fmt.block, f"fp8, {fmt.scales} scales"
            )
    return WeightFormat(1.0, Scales.TENSOR, label="fp8, per-tensor scales (vLLM online fp8)")


def weight_format(request: PlanRequest) -> WeightFormat | None:
    """How the Linear weights are stored, or None when they stay in the compute dtype (training
    at fp8 keeps bf16 weights and casts them per step; NF4 is priced in ``precision``)."""
    p = request.precision
    if p is Precision.FP8 and request.mode is Mode.INFER:
        return fp8_format(request.model)
    if p is Precision.INT8:
        return WeightFormat(1.0, Scales.CHANNEL, label="int8, per-channel fp32 scales")
    if p is Precision.INT4:
        return WeightFormat(0.5, Scales.GROUP, label="int4, group 128: fp16 scale + 4-bit zero")
    return None


def _scale_bytes(lin: LinearShape, fmt: WeightFormat) -> float:
    out, inp = lin.out_features, lin.in_features
    if fmt.scales is Scales.TENSOR:
        return FP32
    if fmt.scales is Scales.CHANNEL:
        return out * FP32
    if fmt.scales is Scales.BLOCK:
        return ceil_div(out, fmt.block[0]) * ceil_div(inp, fmt.block[1]) * FP32
    return ceil_div(inp, INT4_GROUP) * out * INT4_PER_GROUP


def bytes_per_weight(spec: ModelSpec, fmt: WeightFormat) -> float:
    """Average bytes per Linear weight of ``spec`` in ``fmt``, scales included."""
    weights = scales = 0.0
    for layer, times in distinct_layers(spec):
        for lin in layer.linears:
            weights += lin.in_features * lin.out_features * lin.count * times
            scales += _scale_bytes(lin, fmt) * lin.count * times
    if not weights:
        return fmt.weight_bytes
    return fmt.weight_bytes + scales / weights


def format_label(request: PlanRequest) -> str:
    """`` (fp8, 128×128 block scales; embedding, head and norms 16-bit)`` for a parameters
    detail line; empty when the Linears are not stored quantized this way."""
    fmt = weight_format(request)
    if fmt is None:
        return ""
    return f" ({fmt.label}; embedding, LM head, norms and routers 16-bit)"
