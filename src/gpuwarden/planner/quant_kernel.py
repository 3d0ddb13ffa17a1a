"""What the 4-bit (NF4) Linear kernels keep for backward, and what their weights cost.

bitsandbytes' ``MatMul4Bit.forward`` kept its input ``A`` for backward whenever ``A`` or the weight
needed a gradient (``ctx.tensors = (A, B)``), although the frozen 4-bit weight never gets one and
``∂L/∂A = ∂L/∂out · dequant(B)`` does not read ``A``. bitsandbytes PR #1270 (merged 2024-07-16,
released in 0.43.2) stopped it: "This is the bug that caused a lot of memory issues with QLoRA"
(Tim Dettmers). torchao's ``linear_nf4`` (torchtune QLoRA) keeps only the weight.
"""

from __future__ import annotations

from gpuwarden.types.plan import Mode, PlanRequest, Precision, QuantKernel

BNB_FIX = "bitsandbytes PR #1270 (merged 2024-07-16, released in 0.43.2)"
LEGACY_TERM = (
    "bitsandbytes < 0.43.2: MatMul4Bit.forward keeps the input of every 4-bit Linear whose "
    f"input requires grad (ctx.tensors = (A, B)); fixed by {BNB_FIX}"
)
_FIXED_IN = (0, 43, 2)

KERNEL_DESCRIPTIONS = {
    QuantKernel.BNB: "bitsandbytes >= 0.43.2 (MatMul4Bit keeps the 4-bit weight only)",
    QuantKernel.BNB_LEGACY: "bitsandbytes < 0.43.2 (MatMul4Bit also keeps each Linear's input)",
    QuantKernel.TORCHAO: "torchao NF4Tensor (linear_nf4 keeps the weight only)",
}


def kernel_for_bnb_release(parts: tuple[int, int, int]) -> QuantKernel:
    """``bnb`` or ``bnb-legacy`` for a bitsandbytes release (major, minor, patch)."""
    return QuantKernel.BNB_LEGACY if parts < _FIXED_IN else QuantKernel.BNB


def unsharded_quant_state(request: PlanRequest, linear_bytes: float) -> float:
    """Bytes per NF4 Linear weight that FSDP and ZeRO-3 never shard nor offload.

    bitsandbytes keeps a 4-bit weight's quantization state (absmax and its own scales) on the
    Linear4bit module, outside the packed parameter the frameworks shard and offload: every rank
    holds it whole (bnb's fix_4bit_weight_quant_state_from_module restores it "for fsdp").
    torchao's NF4Tensor shards its scalers along with the weight.
    """
    if request.precision is not Precision.NF4 or request.quant_kernel is QuantKernel.TORCHAO:
        return 0.0
    return max(0.0, linear_bytes - 0.5)


def trains_through_nf4(request: PlanRequest) -> bool:
    """An NF4 base with a backward pass through it (QLoRA, or LoRA on an NF4 base)."""
    return request.precision is Precision.NF4 and request.mode in {Mode.LORA, Mode.QLORA}


def input_keeping_linears(request: PlanRequest, names: frozenset[str]) -> frozenset[str]:
    """The blocks' Linears whose kernel keeps their input for backward although their weight is
    frozen: every 4-bit Linear under bitsandbytes < 0.43.2, none otherwise."""
    if trains_through_nf4(request) and request.quant_kernel is QuantKernel.BNB_LEGACY:
        return names
    return frozenset()


def nf4_notes(request: PlanRequest) -> dict[str, str]:
    """Plan notes naming the NF4 layout and kernel a job was priced with (empty without NF4)."""
    if request.precision is not Precision.NF4:
        return {}
    if request.quant_kernel is QuantKernel.TORCHAO:
        layout = "torchao NF4: 4-bit + int8 scaler per 64 + bf16 factor per 256 scalers"
    elif request.double_quant:
        layout = "NF4 with double quantization: 4-bit + uint8 absmax per 64 + fp32 per 256 absmax"
    else:
        layout = "NF4 without double quantization: 4-bit + fp32 absmax per 64 (0.5625 B/weight)"
    notes = {"nf4_weights": layout}
    if trains_through_nf4(request):
        legacy = request.quant_kernel is QuantKernel.BNB_LEGACY
        notes["quant_kernel"] = LEGACY_TERM if legacy else KERNEL_DESCRIPTIONS[request.quant_kernel]
    return notes


def nf4_label(request: PlanRequest) -> str:
    """`` (NF4, …)`` for a parameters detail line; empty without NF4."""
    if request.precision is not Precision.NF4:
        return ""
    if request.quant_kernel is QuantKernel.TORCHAO:
        return " (torchao NF4)"
    return " (NF4, double quantization)" if request.double_quant else " (NF4, no double quant)"
