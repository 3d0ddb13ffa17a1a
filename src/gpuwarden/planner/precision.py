"""Bytes per parameter of each training recipe: which framework keeps which copy in which dtype.

A precision knob alone does not say how many bytes a parameter costs: "bf16 mixed" is 16 B/param
under PyTorch AMP (fp32 params, grads, states), 18 B/param under DeepSpeed or Megatron (bf16
params, fp32 grads, fp32 master, fp32 states) and 16/N under FSDP (sharded fp32 params as the
master). The sharding knobs name the framework, so the recipe is chosen from both (memory.md §2.4,
§2.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from gpuwarden.catalog.gpus import computes
from gpuwarden.planner.quantization import (
    checkpoint_linear_bytes,
    expert_bytes,
    weight_format,
)
from gpuwarden.planner.stacks import megatron_grad_fp32, profile
from gpuwarden.planner.versions import PEFT_ADAPTER_UPCAST
from gpuwarden.planner.weight_formats import (
    NF4_DOUBLE_QUANT,
    NF4_SINGLE_QUANT,
    NF4_TORCHAO,
    bytes_per_weight,
)
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.plan import Mode, PlanRequest, Precision, QuantKernel


class Stack(StrEnum):
    """Which framework's accounting applies (chosen from the parallelism knobs)."""

    PLAIN = "plain"  # one dtype for params, grads and states (torchtune `dtype`, pure fp32)
    AMP = "amp"  # torch.autocast over fp32 params (HF Trainer bf16=True on an fp32 model)
    DEEPSPEED = "deepspeed"  # ZeRO stages 1-3: bf16 params, fp32 grads/master/states partitions
    FSDP = "fsdp"  # sharded params in their own dtype; MixedPrecision casts units for compute
    MEGATRON = "megatron"  # bf16 params + fp32 main grads + fp32 master (distributed optimizer)


QUANTIZED = frozenset({Precision.INT8, Precision.INT4, Precision.NF4})
MIXED = frozenset({Precision.BF16_MIXED, Precision.FP16_MIXED, Precision.FP8})

# bytes per weight of a quantized nn.Linear (memory.md §2.2): weight_formats.py (NF4) and
# quantization.py (int8, int4 and fp8 inference weights, a checkpoint's stored layout)


@dataclass(frozen=True, slots=True)
class Recipe:
    """What one trainable / frozen parameter costs, before sharding."""

    stack: Stack
    weight_bytes: float  # bytes per (non-quantized) parameter as stored on the GPU
    linear_bytes: float  # bytes per weight of the blocks' nn.Linear layers (quantized or not)
    grad_bytes: float  # gradient in the param dtype (bf16 grads of DeepSpeed / FSDP units)
    grad32_bytes: float  # extra fp32 gradient copy (DeepSpeed partition, Megatron main_grad)
    master_bytes: float  # fp32 master weights kept by the optimizer (0 when params are fp32)
    state_dtype_bytes: float  # dtype of AdamW m and v (fp32 under mixed precision)
    act_bytes: int  # activations: linear outputs, attention tensors
    res_bytes: int  # residual stream and norm inputs (fp32 under autocast)
    autocast: bool  # per-Linear bf16 casts of fp32 inputs and weights are saved for backward
    adapter_bytes: int  # LoRA A/B weights, their gradients and AdamW states (adapter_dtype)
    fp8_linear_inputs: bool  # Transformer Engine keeps fp8 copies of Linear inputs
    compute: str  # key into GpuSpec.dense_tflops
    # bytes per routed-expert parameter where the checkpoint stores only them packed (gpt-oss's
    # MXFP4 experts at inference); None: the experts cost linear_bytes like the other Linears
    packed_expert_bytes: float | None = None
    # mixed precision (every MIXED recipe): LoRA's fp32 adapters run under autocast and compute
    # in bf16 (``activations._adapter_bytes``), and the loss is upcast to fp32 (``loss.py``).
    # False for PEFT's fp32 adapters on a pure bf16 / fp16 base (no autocast): fp32 compute.
    adapters_autocast: bool = False

    @property
    def adapter_compute_bytes(self) -> int:
        """Bytes per element the adapters' matmuls compute and keep in: the 16-bit compute dtype
        under autocast, else the adapter dtype (PEFT casts x to it)."""
        return self.act_bytes if self.adapters_autocast else self.adapter_bytes

    @property
    def expert_bytes(self) -> float:
        """Bytes per routed-expert parameter as stored on the GPU."""
        if self.packed_expert_bytes is None:
            return self.linear_bytes
        return self.packed_expert_bytes


def _compute_key(precision: Precision) -> str:
    return {
        Precision.FP32: "fp32",
        Precision.TF32: "tf32",
        Precision.FP16: "fp16",
        Precision.FP16_MIXED: "fp16",
        Precision.FP8: "fp8",
    }.get(precision, "bf16")


def stack_of(request: PlanRequest) -> Stack:
    if request.fsdp is not None:
        return Stack.FSDP
    if megatron_ddp(request):
        return Stack.MEGATRON  # whatever the layout: Megatron's DDP and optimizer (stacks.py)
    if request.zero_stage > 0 and request.tp == 1 and request.pp == 1:
        return Stack.DEEPSPEED
    if request.tp > 1 or request.pp > 1 or request.zero_stage > 0:
        return Stack.MEGATRON if request.precision in MIXED else Stack.DEEPSPEED
    if request.precision is Precision.FP8 and request.mode is Mode.TRAIN:
        return Stack.MEGATRON  # Transformer Engine fp8 trains bf16 params with an fp32 master
    if request.precision in MIXED and request.mode is Mode.TRAIN:
        return Stack.AMP
    return Stack.PLAIN


def megatron_ddp(request: PlanRequest) -> bool:
    """Megatron's own DDP and (distributed) optimizer run the job: ``--framework megatron``
    mixed-precision training without FSDP or DeepSpeed ZeRO-2/3 (its
    --use-distributed-optimizer is ``--zero 1``); the jobs that read ``grad_reduce_in_fp32``."""
    return (
        profile(request).contiguous_grad_buffer
        and request.fsdp is None
        and request.zero_stage <= 1
        and request.precision in MIXED
        and request.mode is Mode.TRAIN
    )


def nf4_bytes(request: PlanRequest) -> float:
    """Bytes per weight of an NF4 Linear: the library's layout and double quantization."""
    if request.quant_kernel is QuantKernel.TORCHAO:
        return NF4_TORCHAO
    return NF4_DOUBLE_QUANT if request.double_quant else NF4_SINGLE_QUANT


def _linear_bytes(request: PlanRequest, fallback: float) -> float:
    stored = checkpoint_linear_bytes(request, fallback)
    if stored is not None:
        return stored
    if request.precision is Precision.NF4:
        return nf4_bytes(request)
    fmt = weight_format(request)
    return fallback if fmt is None else bytes_per_weight(request.model, fmt)


# Stacks whose LoRA is their own, not PEFT's: the adapters are built in the model's dtype
# (LitGPT ``lora.py``, torchtune ``LoRALinear``). Every other stack runs PEFT (torchtitan ships
# no LoRA: planned as PEFT, ``stacks.unknowns``).
def peft_fp32_adapters(request: PlanRequest) -> bool:
    """PEFT's ``get_peft_model(..., autocast_adapter_dtype=True)``, the default since PR #1706
    (released in 0.12, July 2024; its troubleshooting page says 0.11), upcasts fp16 / bf16
    adapter weights to fp32 (``tuners_utils.cast_adapter_dtype``), and LoRA's forward casts each
    adapter's input to the adapter dtype before its dropout (``x.to(lora_A.weight.dtype)``,
    ``_cast_input_dtype`` from 0.15): on a half-precision base without autocast the adapters
    compute in fp32. Read in PEFT 0.21.2; the validation runs name 0.13.2 and 0.15.2. PEFT
    before 0.12 (``request.peft_version``) keeps the base layer's dtype (``versions.py``)."""
    if not profile(request).peft_lora:
        return False
    return request.peft_version is None or request.peft_version >= PEFT_ADAPTER_UPCAST


def adapter_notes(request: PlanRequest, rc: Recipe) -> dict[str, str]:
    """The plan note naming the PEFT release assumed and the adapter dtype it gives (empty
    without PEFT LoRA)."""
    if request.mode not in {Mode.LORA, Mode.QLORA} or not profile(request).peft_lora:
        return {}
    dtype = "fp32" if rc.adapter_bytes == 4 else "the 16-bit compute dtype"
    if request.peft_version is None:
        release = "PEFT >= 0.12 assumed (no --peft-version)"
    else:
        release = "PEFT " + ".".join(str(part) for part in request.peft_version)
    if rc.adapter_bytes != 4 and request.precision in QUANTIZED and peft_fp32_adapters(request):
        # recipe(): a quantized base keeps the adapters 16-bit although this PEFT upcasts them
        dtype += (
            " (this PEFT upcasts them to fp32 on a quantized base too; planned 16-bit: whether "
            "its step runs under autocast is not in the request)"
        )
    return {"lora_adapters": f"{release}: adapters, their gradients and states in {dtype}"}


def recipe(request: PlanRequest) -> Recipe:
    p = request.precision
    stack = stack_of(request)
    wide = p in {Precision.FP32, Precision.TF32}
    half = 4 if wide else 2
    compute = _compute_key(p)
    if fp32_base_under_autocast(request):
        return _autocast_frozen_base(stack, compute)
    if request.mode is not Mode.TRAIN or p in QUANTIZED:
        # Frozen base (LoRA / QLoRA / inference): weights in the compute dtype or quantized;
        # adapters fp32 under mixed precision and where PEFT's default upcasts them on a bf16 /
        # fp16 base, else in the compute dtype (LitGPT, torchtune). A quantized base keeps them
        # in the compute dtype here: PEFT upcasts them too, but whether its step runs under
        # autocast is not in the request (exact mode assumes it does).
        upcast = p not in QUANTIZED and peft_fp32_adapters(request)
        adapter = 4 if (wide or p in MIXED or upcast) else 2
        return Recipe(
            stack=stack,
            weight_bytes=half,
            linear_bytes=_linear_bytes(request, half),
            grad_bytes=adapter,
            grad32_bytes=0,
            master_bytes=0,
            state_dtype_bytes=adapter,
            act_bytes=half,
            res_bytes=half,
            autocast=False,
            adapter_bytes=adapter,
            fp8_linear_inputs=False,
            compute=compute,
            packed_expert_bytes=expert_bytes(request, half),
            adapters_autocast=p in MIXED,
        )
    if p not in MIXED:
        return Recipe(
            stack=stack,
            weight_bytes=half,
            linear_bytes=half,
            grad_bytes=half,
            grad32_bytes=0,
            master_bytes=0,
            state_dtype_bytes=half,
            act_bytes=half,
            res_bytes=half,
            autocast=False,
            adapter_bytes=half,
            fp8_linear_inputs=False,
            compute=compute,
        )
    # Mixed precision: fp32 optimizer states and 16-bit activations everywhere; where the fp32
    # copy and the gradients live depends on the framework (table below).
    m = _MIXED.get(stack, _MIXED[Stack.DEEPSPEED])
    if megatron_ddp(request) and not megatron_grad_fp32(request):
        # a 16-bit main_grad buffer; Float16Optimizer copies it to fp32 at the step (stacks.py)
        m = m._replace(grad=2, grad32=4)
    return Recipe(
        stack=stack,
        weight_bytes=m.weight,
        linear_bytes=m.weight,
        grad_bytes=m.grad,
        grad32_bytes=m.grad32,
        master_bytes=m.master,
        state_dtype_bytes=4,
        act_bytes=2,
        res_bytes=m.residual,
        autocast=m.autocast,
        adapter_bytes=4,
        # torchao of 2025 keeps the high-precision input of a Float8Linear (stacks.py)
        fp8_linear_inputs=p is Precision.FP8
        and not m.autocast
        and not profile(request).float8_saves_hp,
        compute=compute,
        adapters_autocast=True,
    )


def fp32_base_under_autocast(request: PlanRequest) -> bool:
    """LoRA under a mixed precision in a stack that builds the model in float32
    (``StackProfile.mixed_builds_fp32``: Lightning Fabric's MixedPrecision): the frozen base is
    fp32, not the 16-bit compute dtype, and torch.autocast runs every block."""
    return (
        request.mode is Mode.LORA
        and request.precision in MIXED
        and profile(request).mixed_builds_fp32
    )


def _autocast_frozen_base(stack: Stack, compute: str) -> Recipe:
    """An fp32 frozen base under torch.autocast: fp32 weights, adapters, their gradients and
    AdamW states; 16-bit Linear outputs with an fp32 residual stream, and each matmul keeps
    autocast's 16-bit casts of its input and weight for backward (the weight cast is not cached
    for a frozen weight, but ``mm`` saves it for the input's gradient) — PyTorch AMP's accounting
    (``_MIXED[Stack.AMP]``) on a model whose only trainable parameters are the adapters."""
    amp = _MIXED[Stack.AMP]
    return Recipe(
        stack=stack,
        weight_bytes=amp.weight,
        linear_bytes=amp.weight,
        grad_bytes=amp.grad,
        grad32_bytes=0,
        master_bytes=0,
        state_dtype_bytes=4,
        act_bytes=2,
        res_bytes=amp.residual,
        autocast=amp.autocast,
        adapter_bytes=4,
        fp8_linear_inputs=False,
        compute=compute,
        adapters_autocast=True,
    )


class _MixedBytes(NamedTuple):
    weight: int
    grad: int
    grad32: int  # extra fp32 gradient partition
    master: int
    residual: int  # residual stream dtype
    autocast: bool  # weights cast per Linear by torch.autocast (saved for backward)


_MIXED: dict[Stack, _MixedBytes] = {
    # torch.autocast: fp32 params/grads/states; bf16 compute on saved per-Linear casts.
    Stack.AMP: _MixedBytes(weight=4, grad=4, grad32=0, master=0, residual=4, autocast=True),
    # FSDP MixedPrecision(param_dtype=bf16): the sharded fp32 parameter is the master copy.
    Stack.FSDP: _MixedBytes(weight=4, grad=4, grad32=0, master=0, residual=2, autocast=False),
    # Megatron accumulates gradients straight into fp32 main_grad buffers (no bf16 .grad):
    # 2 + 4 + 4 + 8 = 18 B/param, or 6 + 12/N with the distributed optimizer.
    Stack.MEGATRON: _MixedBytes(weight=2, grad=4, grad32=0, master=4, residual=2, autocast=False),
    # DeepSpeed: bf16 params and grads, an fp32 gradient partition, fp32 master and states
    # (estimate_zero2_model_states_mem_needs: 2 + 18/N).
    Stack.DEEPSPEED: _MixedBytes(weight=2, grad=2, grad32=4, master=4, residual=2, autocast=False),
}


def runs_on(gpu: GpuSpec, request: PlanRequest) -> bool:
    """Whether the GPU has the math for the job's compute dtype (no BF16 before Ampere, no FP8
    before Ada/Hopper: ``catalog.gpus.computes``). A GPU the catalog cannot tell about is given
    the benefit of the doubt."""
    return computes(gpu, recipe(request).compute) is not False


def kv_dtype_bytes(request: PlanRequest) -> float:
    """KV-cache element size: fp8 caches take one byte (+ scales, small); default is 16-bit."""
    text = (request.kv_cache_dtype or "").lower()
    if text.startswith(("fp8", "int8", "e4m3", "e5m2")):
        return 1.0
    if text in {"fp32", "float32"} or (
        not text and request.precision in {Precision.FP32, Precision.TF32}
    ):
        return 4.0
    if text in {"int4", "nvfp4", "fp4"}:
        return 0.5 + 1 / 16  # packed 4-bit + one fp8 scale per 16 values
    return 2.0
