"""What the 4-bit (NF4) Linear kernels keep for backward, and what their weights cost.

bitsandbytes' ``MatMul4Bit.forward`` kept its input ``A`` for backward whenever ``A`` or the weight
needed a gradient (``ctx.tensors = (A, B)``), although the frozen 4-bit weight never gets one and
``∂L/∂A = ∂L/∂out · dequant(B)`` does not read ``A``. bitsandbytes PR #1270 (merged 2024-07-16,
released in 0.43.2) stopped it: "This is the bug that caused a lot of memory issues with QLoRA"
(Tim Dettmers). torchao's ``linear_nf4`` (torchtune QLoRA) keeps only the weight.

It keeps ``A`` as a plain attribute of ``ctx``, not through ``ctx.save_for_backward``: backward
frees a graph's saved tensors ("Saved intermediate values of the graph are freed when you call
.backward()"), not the attributes of a custom Function's ``ctx``, which live as long as the
graph's nodes. PyTorch's ``FunctionCtx.save_for_backward`` docs: tensors used in backward
"should be saved with save_for_backward (as opposed to directly on ctx) to prevent incorrect
gradients and memory leaks". A training loop that keeps a tensor of the graph past backward
(LitGPT's ``logits``, a script loop's ``outputs``) so keeps every 4-bit Linear's input of the
step through the optimizer step, the evaluation and the next step's forward (read in the 0.42.0
wheel's ``autograd/_functions.py``: ``ctx.tensors = (A, B)``, never ``save_for_backward``).

The compute dtype (``bnb_4bit_compute_dtype``). ``Linear4bit.forward`` casts its input to
``compute_dtype`` (``x = x.to(self.compute_dtype)``, alive until it returns) and
``MatMul4Bit.forward`` runs ``linear(A, dequantize_4bit(B).to(A.dtype).t())``: the weight is
dequantized in the dtype it was quantized from (16-bit: transformers' bitsandbytes quantizer
loads in fp16 when no ``torch_dtype`` is given) and cast to the compute dtype, both alive during the
cast; the output comes out in the compute dtype and is cast back to the input's
(``out.to(inp_dtype)``). A one-token input without autograd takes ``gemv_4bit`` instead (decode):
no dequantized weight. Read in the 0.41.1, 0.45.5, 0.46.1 and 0.47.0 wheels' ``nn/modules.py`` and
``autograd/_functions.py``. transformers' ``BitsAndBytesConfig`` sets ``bnb_4bit_compute_dtype``
to ``torch.float32`` when none is given (every release through 5.24; it never derives it from
``torch_dtype``) and ``replace_with_bnb_linear`` passes it to every ``Linear4bit``. Up to 0.46.1
``Linear4bit`` still replaces it on the first forward with the input's dtype when that is bf16 or
fp32 (``set_compute_type``; fp16 keeps the configured one and warns "bnb_4bit_compute_dtype=
torch.float32 (default). This will lead to slow inference"); from 0.47.0 (bitsandbytes PR #1623,
``compute_type_is_set = False if compute_dtype is None else True``) a configured dtype is final, so
transformers' default computes in fp32 whatever the model's dtype (bitsandbytes PR #2077).
"""

from __future__ import annotations

from gpuwarden.types.plan import Mode, PlanRequest, Precision, QuantKernel

BNB_FIX = "bitsandbytes PR #1270 (merged 2024-07-16, released in 0.43.2)"
LEGACY_TERM = (
    "bitsandbytes < 0.43.2: MatMul4Bit.forward keeps the input of every 4-bit Linear whose "
    f"input requires grad (ctx.tensors = (A, B)); fixed by {BNB_FIX}"
)
_FIXED_IN = (0, 43, 2)
GRAPH_HELD_TERM = (
    "bitsandbytes < 0.43.2 keeps each 4-bit Linear's input on ctx (ctx.tensors, not "
    "save_for_backward): backward does not free it; it dies with the graph the loop's held "
    "outputs reference"
)

KERNEL_DESCRIPTIONS = {
    QuantKernel.BNB: "bitsandbytes >= 0.43.2 (MatMul4Bit keeps the 4-bit weight only)",
    QuantKernel.BNB_LEGACY: "bitsandbytes < 0.43.2 (MatMul4Bit also keeps each Linear's input)",
    QuantKernel.TORCHAO: "torchao NF4Tensor (linear_nf4 keeps the weight only)",
}


# bytes per element of the compute dtypes a Linear4bit can be given
COMPUTE_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# the dtype a 4-bit weight is dequantized in: the 16-bit dtype it was quantized from
QUANTIZED_FROM_BYTES = 2
FP32_COMPUTE_TERM = (
    "bitsandbytes 4-bit Linears compute in fp32 (bnb_4bit_compute_dtype): each input is cast to "
    "fp32, a prefill matmul's weight is dequantized to 16 bit and cast to fp32, its output is fp32 "
    "until cast back; transformers' BitsAndBytesConfig default"
)


def fp32_compute(request: PlanRequest) -> bool:
    """bitsandbytes 4-bit Linears that compute in fp32 (``bnb_compute_dtype`` fp32 on NF4)."""
    return (
        request.precision is Precision.NF4
        and request.quant_kernel is not QuantKernel.TORCHAO
        and request.bnb_compute_dtype == "fp32"
    )


def fp32_matmul_bytes(weight: float, inputs: float, outputs: float) -> float:
    """Transient bytes of one fp32-compute 4-bit Linear forward over ``weight`` elements reading
    ``inputs`` and writing ``outputs`` elements: the fp32 input copy and the fp32 weight live
    through the matmul, next to the 16-bit dequantized weight while it is cast, then next to the
    fp32 output (the 16-bit weight is freed when the cast returns)."""
    fp32 = COMPUTE_DTYPE_BYTES["fp32"]
    return (inputs + weight) * fp32 + max(weight * QUANTIZED_FROM_BYTES, outputs * fp32)


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
    if fp32_compute(request):
        notes["compute_dtype"] = FP32_COMPUTE_TERM
    return notes


def nf4_label(request: PlanRequest) -> str:
    """`` (NF4, …)`` for a parameters detail line; empty without NF4."""
    if request.precision is not Precision.NF4:
        return ""
    if request.quant_kernel is QuantKernel.TORCHAO:
        return " (torchao NF4)"
    return " (NF4, double quantization)" if request.double_quant else " (NF4, no double quant)"
