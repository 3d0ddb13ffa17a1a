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
  int32 ``qzeros``) per 128 input rows per output column;
* MXFP4 (OCP Microscaling Formats v1.0: E2M1 elements, a shared E8M0 scale per block of 32): 4-bit
  values two to a uint8 (``*_blocks``) and one uint8 exponent per 32 input columns (``*_scales``),
  0.53125 B/weight. A checkpoint's own format (``CHECKPOINT_FORMATS``): gpt-oss stores only its
  routed experts so; transformers' ``Mxfp4GptOssExperts`` and vLLM's ``Mxfp4MoEMethod`` load them
  packed (vLLM's ``Mxfp4Config`` leaves every ``LinearBase`` unquantized), the expert biases bf16.

The scale bytes are summed over the model's own Linear shapes, so the average per weight is exact
for the model (memory.md §2.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpuwarden.planner.layout import ceil_div, distinct_layers
from gpuwarden.types.hardware import GpuSpec
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
    MICRO = "microscaling"  # one 8-bit shared exponent per block of input columns (OCP MX)


@dataclass(frozen=True, slots=True)
class WeightFormat:
    """How one quantized Linear weight is stored."""

    weight_bytes: float  # per weight, without scales
    scales: Scales
    block: tuple[int, int] = (128, 128)  # (out, in) rows and columns per block scale
    label: str = ""
    scale_bytes: float = FP32  # bytes of one scale (block / microscaling formats)


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
    if fmt.scales in {Scales.BLOCK, Scales.MICRO}:
        return ceil_div(out, fmt.block[0]) * ceil_div(inp, fmt.block[1]) * fmt.scale_bytes
    return ceil_div(inp, INT4_GROUP) * out * INT4_PER_GROUP


def bytes_per_weight(spec: ModelSpec, fmt: WeightFormat, *, experts_only: bool = False) -> float:
    """Average bytes per Linear weight of ``spec`` in ``fmt``, scales included (of the routed
    experts' weights only with ``experts_only``)."""
    weights = scales = 0.0
    for layer, times in distinct_layers(spec):
        for lin in layer.linears:
            if experts_only and not lin.expert:
                continue
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


# --- a checkpoint's own quantized weights --------------------------------------------------------

MXFP4_BLOCK = 32  # OCP Microscaling Formats (MX) v1.0, Table 1: MXFP4 = E2M1 × 32, E8M0 scale
MXFP4 = WeightFormat(
    0.5,
    Scales.MICRO,
    (1, MXFP4_BLOCK),
    "MXFP4: 4-bit E2M1 + one E8M0 scale per 32",
    scale_bytes=1,
)


@dataclass(frozen=True, slots=True)
class CheckpointFormat:
    """How a checkpoint stores some of its weights (its ``quantization_config.quant_method``) and
    which GPUs the engines load them packed on."""

    method: str
    weights: WeightFormat
    # transformers loads them packed from this compute capability on, else dequantizes to bf16
    hf_min_capability: tuple[int, int]
    # vLLM serves them from this compute capability on (its QuantizationConfig refuses below)
    vllm_min_capability: tuple[int, int]
    source: str


CHECKPOINT_FORMATS = {
    "mxfp4": CheckpointFormat(
        "mxfp4",
        MXFP4,
        hf_min_capability=(7, 5),
        vllm_min_capability=(8, 0),
        source="transformers 5.24 Mxfp4HfQuantizer (compute capability >= 7.5, Triton >= 3.4 and "
        "the kernels package; else it dequantizes to bf16); vLLM Mxfp4Config.get_min_capability "
        "80 (Triton kernels on SM90-100, FlashInfer on SM100, Marlin otherwise)",
    ),
}

# Training and LoRA: transformers' Mxfp4HfQuantizer.is_trainable is False ("please consider
# dequantizing the model first by passing quantization_config=Mxfp4Config(dequantize=True)")
DEQUANTIZED_FOR_TRAINING = (
    "transformers cannot train through {method} weights (Mxfp4HfQuantizer.is_trainable is False): "
    "fine-tuning loads the checkpoint with Mxfp4Config(dequantize=True), planned in {precision}"
)

# an inference precision that leaves the Linears unquantized: the checkpoint's packed experts stay
SIXTEEN_BIT = frozenset(
    {Precision.BF16, Precision.FP16, Precision.BF16_MIXED, Precision.FP16_MIXED}
)


def checkpoint_format(spec: ModelSpec) -> CheckpointFormat | None:
    """The quantized format the model's checkpoint stores its routed experts in, from its config's
    ``quantization_config``; None for a 16-bit checkpoint or a method not modelled here."""
    config = spec.raw_config.get("quantization_config")
    if not isinstance(config, dict):
        return None
    method = config.get("quant_method")
    return CHECKPOINT_FORMATS.get(method) if isinstance(method, str) else None


def _capability(gpu: GpuSpec | None) -> tuple[int, int] | None:
    text = gpu.compute_capability if gpu is not None else None
    major, _, minor = (text or "").partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def loads_packed(request: PlanRequest, fmt: CheckpointFormat) -> bool:
    """Whether transformers loads the checkpoint's format packed on the job's GPU (a GPU of
    unknown compute capability is given the benefit of the doubt)."""
    cc = _capability(request.gpu)
    vllm = request.gpu_memory_utilization is not None
    return vllm or cc is None or cc >= fmt.hf_min_capability


def packed_experts(request: PlanRequest) -> CheckpointFormat | None:
    """The checkpoint format the routed experts are planned in: inference at a 16-bit precision
    on a checkpoint that stores them quantized, unless ``dequantize`` asks for the 16-bit load or
    transformers would dequantize on this GPU. None: every weight in the precision."""
    fmt = checkpoint_format(request.model)
    if fmt is None or request.mode is not Mode.INFER or request.dequantize:
        return None
    if request.precision not in SIXTEEN_BIT or not loads_packed(request, fmt):
        return None
    return fmt


def expert_bytes(request: PlanRequest, dtype_bytes: float) -> float | None:
    """Bytes per routed-expert parameter where the checkpoint keeps the experts packed: the
    weights in its format with their scales, the expert biases in the 16-bit dtype. None: the
    experts cost what the other Linears do."""
    fmt = packed_experts(request)
    if fmt is None:
        return None
    weights = biases = 0
    for layer, times in distinct_layers(request.model):
        for lin in layer.linears:
            if lin.expert:
                weights += lin.in_features * lin.out_features * lin.count * times
                biases += (lin.parameters - lin.in_features * lin.out_features * lin.count) * times
    if not weights:
        return None
    per_weight = bytes_per_weight(request.model, fmt.weights, experts_only=True)
    return (weights * per_weight + biases * dtype_bytes) / (weights + biases)


def checkpoint_notes(request: PlanRequest) -> dict[str, str]:
    """Plan notes on a checkpoint stored quantized: planned packed, or why not."""
    fmt = checkpoint_format(request.model)
    if fmt is None:
        return {}
    precision = request.precision.value
    if request.mode is not Mode.INFER:
        text = DEQUANTIZED_FOR_TRAINING.format(method=fmt.method.upper(), precision=precision)
        return {"checkpoint_weights": text}
    if packed_experts(request) is not None:
        per_weight = bytes_per_weight(request.model, fmt.weights, experts_only=True)
        return {
            "checkpoint_weights": (
                f"routed experts as the checkpoint stores them, {fmt.weights.label} "
                f"({per_weight:g} B/weight; biases {precision}); attention, router, embedding, "
                f"LM head and norms {precision} (quantization_config: {fmt.method}); "
                "--precision bf16 plans the dequantized load"
            )
        }
    if request.precision in SIXTEEN_BIT and not request.dequantize:
        gpu = request.gpu.name if request.gpu is not None else "this GPU"
        major, minor = fmt.hf_min_capability
        return {
            "checkpoint_weights": (
                f"transformers dequantizes the checkpoint's {fmt.method.upper()} experts to "
                f"bf16 on the {gpu} (compute capability below {major}.{minor}): planned in "
                f"{precision}"
            )
        }
    return {
        "checkpoint_weights": (
            f"the checkpoint's {fmt.method.upper()} experts planned in {precision}, as asked "
            "(the dequantized load)"
        )
    }


def vllm_refuses(request: PlanRequest) -> str:
    """A warning when vLLM cannot serve the checkpoint's format on the job's GPU (empty if it
    can)."""
    fmt = packed_experts(request)
    cc = _capability(request.gpu)
    if fmt is None or request.gpu_memory_utilization is None or cc is None:
        return ""
    if cc >= fmt.vllm_min_capability:
        return ""
    major, minor = fmt.vllm_min_capability
    return (
        f"vLLM serves {fmt.method} checkpoints on compute capability {major}.{minor} and newer "
        f"(Mxfp4Config.get_min_capability); the {request.gpu.name if request.gpu else 'GPU'} "
        f"is {cc[0]}.{cc[1]}"
    )
