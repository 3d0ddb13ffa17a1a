"""How one quantized ``nn.Linear`` weight is stored: its bytes and its scales' bytes.

A format is per weight (the packed values) plus per Linear (its scales, zero points and index
tensors), summed over the model's own Linear shapes so the average per weight is exact for the
model (memory.md §2.2). The layouts, as the engines allocate them:

* fp8: 1 B + fp32 scales per tensor, per output channel or per block (vLLM
  ``Fp8LinearMethod.create_weights``; DeepSeek-V3's ``weight_scale_inv`` [⌈out/128⌉, ⌈in/128⌉]);
* int8 per channel: 1 B + one fp32 scale per output row (bitsandbytes ``Int8Params.SCB``);
* group-wise integers (GPTQ, AWQ, compressed-tensors ``pack-quantized``): ``bits``/8 B per weight
  packed into int32, per group of ``group`` input rows and per output column a 16-bit scale and,
  when asymmetric, a ``bits``-wide zero point (packed into int32 ``qzeros``); GPTQ also stores
  ``g_idx``, one int32 per input row. ``group`` 0 is one group per output row (``group_size`` -1);
* bitsandbytes NF4 / FP4: 4-bit codes with a blockwise absmax per 64 weights (double quantization:
  8-bit absmax + one fp32 per 256 of them), counted in the per-weight bytes;
* MXFP4 (OCP Microscaling Formats v1.0: E2M1 elements, a shared E8M0 scale per block of 32).

vLLM does not hold MXFP4 experts as the checkpoint stores them: its MoE kernel backends pad the
hidden and per-GPU intermediate sizes, widen the biases and may keep a second, swizzled copy of
the scales (``MoeKernelLayout``; which backend a release picks on a GPU: checkpoint_formats.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpuwarden.planner.layout import ceil_div, distinct_layers
from gpuwarden.types.model import LinearShape, ModelSpec

# The planner's one definition of the fp32 width (optimizer states, losses, rotary tables and
# every other fp32 tensor import it from here)
FP32_BYTES = 4
FP16_BYTES = 2
INT4_GROUP = 128
G_IDX_BYTES = 4  # one GPTQ g_idx entry (int32) per input row

# bitsandbytes 4-bit (NF4 and FP4 alike, blocksize 64): memory.md §2.2
NF4_DOUBLE_QUANT = 0.5 + (8 / 64 + 32 / (64 * 256)) / 8  # 0.5159: 4-bit + 8-bit absmax + fp32/256
NF4_SINGLE_QUANT = 0.5 + 4 / 64  # 0.5625: 4-bit + one fp32 absmax per 64 (no double quant)
# torchao NF4Tensor: 4-bit + int8 scaler per 64 + one scaler factor per 256 scalers in the
# weight's dtype (bf16); its scalers are always quantized
NF4_TORCHAO = 0.5 + (8 / 64 + 16 / (64 * 256)) / 8


class Scales(StrEnum):
    TENSOR = "per-tensor"
    CHANNEL = "per-channel"
    BLOCK = "block"
    GROUP = "group"
    MICRO = "microscaling"  # one 8-bit shared exponent per block of input columns (OCP MX)
    INLINE = "inline"  # blockwise absmax counted in weight_bytes (bitsandbytes 4-bit)


@dataclass(frozen=True, slots=True)
class WeightFormat:
    """How one quantized Linear weight is stored."""

    weight_bytes: float  # per weight, without scales
    scales: Scales
    block: tuple[int, int] = (128, 128)  # (out, in) rows and columns per block scale
    label: str = ""
    scale_bytes: float = FP32_BYTES  # bytes of one scale
    group: int = INT4_GROUP  # input rows per group scale (GROUP); 0: one group per output row
    zero_bytes: float = 0.0  # zero point per scale (asymmetric integer formats)
    row_bytes: float = 0.0  # per input row (GPTQ g_idx)
    tensor_bytes: float = 0.0  # per Linear (a global scale, a shape tensor)
    floating: bool = False  # float codes (fp8, fp4), not integers

    @property
    def is_fp8(self) -> bool:
        """One-byte float weights: what ``--precision fp8`` reads from an fp8 checkpoint."""
        return self.floating and self.weight_bytes == 1.0


def scale_bytes(lin: LinearShape, fmt: WeightFormat) -> float:
    """Bytes of one Linear weight's scales, zero points and index tensors in ``fmt``."""
    out, inp = lin.out_features, lin.in_features
    if fmt.scales is Scales.INLINE:
        per = 0.0
    elif fmt.scales is Scales.TENSOR:
        per = fmt.scale_bytes
    elif fmt.scales is Scales.CHANNEL:
        per = out * (fmt.scale_bytes + fmt.zero_bytes)
    elif fmt.scales in {Scales.BLOCK, Scales.MICRO}:
        per = ceil_div(out, fmt.block[0]) * ceil_div(inp, fmt.block[1]) * fmt.scale_bytes
    else:
        groups = ceil_div(inp, fmt.group) if fmt.group > 0 else 1
        per = groups * out * (fmt.scale_bytes + fmt.zero_bytes)
    return per + inp * fmt.row_bytes + fmt.tensor_bytes


def bytes_per_weight(spec: ModelSpec, fmt: WeightFormat, *, experts_only: bool = False) -> float:
    """Average bytes per Linear weight of ``spec`` in ``fmt``, scales included (of the routed
    experts' weights only with ``experts_only``)."""
    weights = scales = 0.0
    for layer, times in distinct_layers(spec):
        for lin in layer.linears:
            if experts_only and not lin.expert:
                continue
            weights += lin.in_features * lin.out_features * lin.count * times
            scales += scale_bytes(lin, fmt) * lin.count * times
    if not weights:
        return fmt.weight_bytes
    return fmt.weight_bytes + scales / weights


MXFP4_BLOCK = 32  # OCP Microscaling Formats (MX) v1.0, Table 1: MXFP4 = E2M1 × 32, E8M0 scale
MXFP4 = WeightFormat(
    0.5,
    Scales.MICRO,
    (1, MXFP4_BLOCK),
    "MXFP4: 4-bit E2M1 + one E8M0 scale per 32",
    scale_bytes=1,
)
# --precision int4 on a 16-bit checkpoint: GPTQ / AWQ at group 128, fp16 scale + 4-bit zero
INT4 = WeightFormat(
    0.5,
    Scales.GROUP,
    label="int4, group 128: fp16 scale + 4-bit zero",
    scale_bytes=FP16_BYTES,
    zero_bytes=0.5,
)
INT8 = WeightFormat(1.0, Scales.CHANNEL, label="int8, per-channel fp32 scales")


def round_up(value: int, multiple: int) -> int:
    return ceil_div(value, multiple) * multiple


@dataclass(frozen=True, slots=True)
class MoeKernelLayout:
    """How one vLLM MXFP4 MoE backend holds the routed experts once loaded, per GPU.

    ``Mxfp4MoEMethod.create_weights`` allocates per layer ``w13`` [E, 2·I', H'/2] (gate and up
    fused) and ``w2`` [E, H', I'/2] uint8 values, [.., ·/32] uint8 E8M0 scales and [E, 2·I'] /
    [E, H'] biases, H' = H rounded up to ``hidden_multiple`` and I' = the per-GPU intermediate
    size rounded up to ``intermediate_multiple``; ``process_weights_after_loading`` then re-lays
    them out for the kernel."""

    backend: str
    hidden_multiple: int = 1
    intermediate_multiple: int = 1
    bias_bytes: int = FP16_BYTES  # the biases after loading (fp32 where the kernel converts them)
    # (rows, byte columns) the value swizzle pads each expert's [out, in/2] matrix to
    value_multiple: tuple[int, int] = (1, 1)
    # a swizzled copy of each [out, in/32] scale matrix kept beside the loaded one: the (rows,
    # columns) it is padded to; None when the scales are replaced in place
    scale_copy: tuple[int, int] | None = None


def _is_row_parallel(lin: LinearShape) -> bool:
    """The expert's down projection (input: the intermediate size, output: the hidden size);
    the others (gate, up, fused gate_up) map the hidden size to multiples of the intermediate."""
    return "down" in lin.name or lin.name.endswith("w2")


def padded_moe_sizes(spec: ModelSpec, kernel: MoeKernelLayout, tp: int) -> tuple[int, int]:
    """(hidden, per-GPU expert intermediate) sizes as ``kernel`` pads them (TP splits the
    intermediate size)."""
    inter = spec.moe.expert_intermediate_size if spec.moe is not None else 0
    return (
        round_up(spec.hidden_size, kernel.hidden_multiple),
        round_up(ceil_div(inter, tp), kernel.intermediate_multiple),
    )


def padded_expert_shape(
    spec: ModelSpec, lin: LinearShape, kernel: MoeKernelLayout, tp: int
) -> tuple[int, int]:
    """(out, in) of one routed expert's weight on one GPU as ``kernel`` allocates it: the hidden
    side padded, the intermediate side split by TP and padded per part (fused gate_up: two)."""
    hidden, inter = padded_moe_sizes(spec, kernel, tp)
    width = spec.moe.expert_intermediate_size if spec.moe is not None else 0
    if _is_row_parallel(lin):
        parts = lin.in_features // width if width and lin.in_features % width == 0 else 1
        return hidden, parts * inter
    parts = lin.out_features // width if width and lin.out_features % width == 0 else 1
    return parts * inter, hidden


def _kernel_expert_bytes(out: int, inp: int, kernel: MoeKernelLayout, bias: bool) -> int:
    """One expert's MXFP4 weight as the kernel holds it: values, E8M0 scales (and their kept
    swizzled copy), bias."""
    rows, columns = kernel.value_multiple
    values = round_up(out, rows) * round_up(ceil_div(inp, 2), columns)
    blocks = ceil_div(inp, MXFP4_BLOCK)
    scales = out * blocks
    if kernel.scale_copy is not None:
        scales += round_up(out, kernel.scale_copy[0]) * round_up(blocks, kernel.scale_copy[1])
    return values + scales + (out * kernel.bias_bytes if bias else 0)


def kernel_expert_bytes(spec: ModelSpec, kernel: MoeKernelLayout, *, tp: int, ep: int) -> int:
    """Bytes of all routed experts on one GPU (TP splits the intermediate size, EP the experts)
    as ``kernel`` holds them."""
    total = 0
    for layer, times in distinct_layers(spec):
        for lin in layer.linears:
            if not lin.expert:
                continue
            out, inp = padded_expert_shape(spec, lin, kernel, tp)
            experts = ceil_div(lin.count, ep)
            total += _kernel_expert_bytes(out, inp, kernel, lin.bias) * experts * times
    return total
