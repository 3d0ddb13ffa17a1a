"""Quantized Linear weights in a plan: the precision's layout, or the checkpoint's own.

Two sources. ``--precision fp8 / int8 / int4`` quantizes a 16-bit checkpoint's blocks' Linears
(vLLM's online fp8, per-tensor scales, or the fp8 layout of a checkpoint that is already fp8;
int8 per channel; int4 group 128). A checkpoint stored quantized (its config's
``quantization_config``: AWQ, GPTQ, FP8, compressed-tensors, bitsandbytes, gpt-oss's MXFP4
experts; ``checkpoint_formats.py``) is planned as it is stored, every quantized Linear at its
bytes with its scales from the model's own shapes and the rest at the 16-bit dtype, unless
``dequantize`` (the CLI sets it with ``--precision`` / ``--dequantize``) asks for the 16-bit load.

Fine-tuning over stored weights follows what the stacks do: PEFT trains LoRA over AWQ, GPTQ and
bitsandbytes bases kept quantized (QLoRA-like); FP8, compressed-tensors and MXFP4 load
dequantized for training (transformers' ``dequantize`` / ``run_compressed=False`` options);
full fine-tuning of AWQ / GPTQ / bitsandbytes weights is refused (exit 2) with the option to
plan the 16-bit model instead. Embeddings, the LM head, norms and routers stay 16-bit.
"""

from __future__ import annotations

from gpuwarden.catalog.gpus import compute_capability_of
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.checkpoint_formats import (
    Below,
    CheckpointFormat,
    read_checkpoint_format,
    unmodelled,
)
from gpuwarden.planner.layout import distinct_layers
from gpuwarden.planner.weight_formats import (
    INT4,
    INT8,
    Scales,
    WeightFormat,
    bytes_per_weight,
    scale_bytes,
)
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Mode, PlanRequest, Precision

# vLLM's --quantization fp8 on a 16-bit checkpoint: one fp32 scale per logical Linear
ONLINE_FP8 = WeightFormat(
    1.0, Scales.TENSOR, label="fp8, per-tensor scales (vLLM online fp8)", floating=True
)

# an inference precision that leaves the Linears unquantized: the checkpoint's stored ones stay
SIXTEEN_BIT = frozenset(
    {Precision.BF16, Precision.FP16, Precision.BF16_MIXED, Precision.FP16_MIXED}
)


def checkpoint_format(spec: ModelSpec) -> CheckpointFormat | None:
    """The quantized format the model's checkpoint stores (its config's ``quantization_config``);
    None for a 16-bit checkpoint or a method not modelled. Raises ``InvalidConfigError`` for a
    config its method cannot read."""
    return read_checkpoint_format(spec.raw_config.get("quantization_config"))


def fp8_format(spec: ModelSpec) -> WeightFormat:
    """The fp8 layout of the model's checkpoint, else vLLM's online fp8 quantization of a 16-bit
    checkpoint: per-tensor scales (an unreadable config is planned the online way too)."""
    try:
        fmt = checkpoint_format(spec)
    except InvalidConfigError:
        fmt = None
    if fmt is not None and fmt.weights.is_fp8:
        return fmt.weights
    return ONLINE_FP8


def weight_format(request: PlanRequest) -> WeightFormat | None:
    """How ``--precision`` stores the Linear weights, or None when they stay in the compute dtype
    (training at fp8 keeps bf16 weights and casts them per step; NF4 is priced in ``precision``)."""
    p = request.precision
    if p is Precision.FP8 and request.mode is Mode.INFER:
        return fp8_format(request.model)
    if p is Precision.INT8:
        return INT8
    if p is Precision.INT4:
        return INT4
    return None


def _capability(gpu: GpuSpec | None) -> tuple[int, int] | None:
    text = gpu.compute_capability if gpu is not None else None
    return compute_capability_of(text) if text else None


def loads_packed(request: PlanRequest, fmt: CheckpointFormat) -> bool:
    """Whether the engine keeps the format packed on the job's GPU: vLLM always (it refuses
    instead, ``checkpoint_warnings``), transformers unless it dequantizes below the format's
    compute capability (a GPU of unknown capability is given the benefit of the doubt)."""
    cc = _capability(request.gpu)
    vllm = request.gpu_memory_utilization is not None
    if vllm or cc is None or fmt.below is not Below.DEQUANTIZES:
        return True
    return cc >= fmt.hf_min_capability


def packed_checkpoint(request: PlanRequest) -> CheckpointFormat | None:
    """The checkpoint format the weights are planned in, as stored: inference at a 16-bit
    precision, or LoRA over a base PEFT trains quantized; never with ``dequantize``, for full
    training, or where transformers dequantizes on this GPU. None: every weight in the precision."""
    if request.dequantize or request.mode is Mode.TRAIN:
        return None
    fmt = checkpoint_format(request.model)
    if fmt is None:
        return None
    if request.mode is not Mode.INFER and not fmt.lora:
        return None
    if request.mode is Mode.QLORA:
        return None  # a bitsandbytes 4-bit base: --mode qlora's NF4 is its layout (validated)
    if request.precision not in SIXTEEN_BIT or not loads_packed(request, fmt):
        return None
    return fmt


def stored_linears(request: PlanRequest) -> bool:
    """The blocks' Linears arrive quantized from the checkpoint (no quantize-on-load)."""
    fmt = packed_checkpoint(request)
    return fmt is not None and not fmt.experts_only


def _average_bytes(
    request: PlanRequest, fmt: CheckpointFormat, dtype_bytes: float, *, experts: bool
) -> float | None:
    """Bytes per parameter of the Linears the format covers (all of them, or the routed experts):
    quantized weights with their scales, biases and the Linears the config skips 16-bit."""
    total = params = 0.0
    for layer, times in distinct_layers(request.model):
        for lin in layer.linears:
            if experts and not lin.expert:
                continue
            weights = lin.in_features * lin.out_features * lin.count * times
            biases = lin.parameters * times - weights
            params += weights + biases
            if fmt.keeps_16_bit(lin.name):
                total += (weights + biases) * dtype_bytes
                continue
            stored = fmt.weights.weight_bytes * weights
            total += stored + scale_bytes(lin, fmt.weights) * lin.count * times
            total += biases * dtype_bytes
    return total / params if params else None


def checkpoint_linear_bytes(request: PlanRequest, dtype_bytes: float) -> float | None:
    """Bytes per blocks' Linear parameter (experts included) where the checkpoint stores them
    quantized and they are planned so; None otherwise."""
    fmt = packed_checkpoint(request)
    if fmt is None or fmt.experts_only:
        return None
    return _average_bytes(request, fmt, dtype_bytes, experts=False)


def expert_bytes(request: PlanRequest, dtype_bytes: float) -> float | None:
    """Bytes per routed-expert parameter where the checkpoint stores only the experts packed
    (gpt-oss's MXFP4; biases 16-bit). None: the experts cost what the other Linears do."""
    fmt = packed_checkpoint(request)
    if fmt is None or not fmt.experts_only:
        return None
    return _average_bytes(request, fmt, dtype_bytes, experts=True)


def _scope(fmt: CheckpointFormat) -> str:
    if fmt.experts_only:
        return "routed experts"
    kept = sorted(fmt.skipped | (set() if fmt.only is None else {"those not listed"}))
    return "block Linears" + (f" (16-bit: {', '.join(kept)})" if kept else "")


def format_label(request: PlanRequest) -> str:
    """`` (fp8, 128×128 block scales; embedding, head and norms 16-bit)`` for a parameters
    detail line; empty when the Linears are not stored quantized this way."""
    fmt = weight_format(request)
    if fmt is None and stored_linears(request):
        stored = packed_checkpoint(request)
        fmt = stored.weights if stored is not None else None
    if fmt is None:
        return ""
    return f" ({fmt.label}; embedding, LM head, norms and routers 16-bit)"


def _stored_note(request: PlanRequest, fmt: CheckpointFormat) -> str:
    precision = request.precision.value
    per_weight = bytes_per_weight(request.model, fmt.weights, experts_only=fmt.experts_only)
    rest = (
        "attention, router, embedding, LM head and norms"
        if fmt.experts_only
        else "embedding, LM head, norms and routers"
    )
    text = (
        f"{_scope(fmt)} as the checkpoint stores them, {fmt.weights.label} "
        f"({per_weight:.4f} B/weight with scales; biases {precision}); {rest} {precision} "
        f"(quantization_config: {fmt.method}); --precision bf16 plans the dequantized load"
    )
    if request.mode is not Mode.INFER:
        text = "PEFT trains the adapters over the quantized base (QLoRA-like): " + text
    return text


def _not_stored_note(request: PlanRequest, fmt: CheckpointFormat) -> str:
    """Why the checkpoint's quantized weights are planned in the precision instead."""
    precision = request.precision.value
    name = fmt.method.upper()
    asked = request.dequantize or request.precision not in SIXTEEN_BIT
    if request.mode is Mode.QLORA and not request.dequantize:
        return f"--mode qlora: the checkpoint's {name} 4-bit base planned as {precision}"
    if request.mode is not Mode.INFER and not fmt.lora and not request.dequantize:
        return (
            f"transformers cannot train through {name} weights ({fmt.not_trainable}): "
            f"fine-tuning loads the checkpoint with {fmt.dequantize_option}, planned in {precision}"
        )
    if not asked and fmt.below is Below.DEQUANTIZES:
        gpu = request.gpu.name if request.gpu is not None else "this GPU"
        major, minor = fmt.hf_min_capability
        return (
            f"transformers dequantizes the checkpoint's {name} {_scope(fmt)} to bf16 on the "
            f"{gpu} (compute capability below {major}.{minor}): planned in {precision}"
        )
    return (
        f"the checkpoint's {name} {_scope(fmt)} planned in {precision}, as asked "
        "(the dequantized load)"
    )


def checkpoint_notes(request: PlanRequest) -> dict[str, str]:
    """Plan notes on a checkpoint stored quantized: planned as stored, or why not."""
    try:
        fmt = checkpoint_format(request.model)
    except InvalidConfigError:
        fmt = None  # unreadable: only an explicit precision gets here (check_checkpoint)
    if fmt is None:
        return {}
    stored = packed_checkpoint(request)
    text = _stored_note(request, stored) if stored else _not_stored_note(request, fmt)
    return {"checkpoint_weights": text}


def check_checkpoint(request: PlanRequest) -> None:
    """Raise ``InvalidConfigError`` for an unreadable ``quantization_config`` and for fine-tuning
    stored weights the stacks cannot train and cannot dequantize on load; an explicit precision
    (``dequantize``) plans every weight in it, whatever the checkpoint says."""
    if request.dequantize:
        return
    fmt = checkpoint_format(request.model)
    if fmt is None or request.mode is Mode.INFER:
        return
    name = fmt.method.upper()
    if request.mode is Mode.QLORA and not (
        fmt.method == "bitsandbytes" and fmt.weights.scales is Scales.INLINE
    ):
        raise InvalidConfigError(
            f"--mode qlora quantizes a 16-bit base to NF4 with bitsandbytes; this checkpoint is "
            f"stored {name} (its quantization_config)",
            hint="--mode lora trains adapters over it as stored; --precision nf4 plans QLoRA "
            "from the 16-bit model",
            reference="prequantized-qlora",
        )
    trainable = request.mode is not Mode.TRAIN and fmt.lora
    if trainable or fmt.dequantize_option:
        return
    what = "full fine-tuning" if request.mode is Mode.TRAIN else "LoRA"
    raise InvalidConfigError(
        f"{what} cannot go through the checkpoint's {name} weights ({fmt.not_trainable})",
        hint="plan the 16-bit model it was quantized from: pass --precision bf16-mixed (every "
        "weight planned dequantized)"
        + ("; or --mode lora, which trains adapters over the quantized base" if fmt.lora else ""),
        reference="prequantized-training",
    )


def checkpoint_warnings(request: PlanRequest) -> list[str]:
    """A checkpoint quantization the plan does not model, and an engine that refuses the
    checkpoint's format on the job's GPU."""
    config = request.model.raw_config.get("quantization_config")
    if why := unmodelled(config):
        return [
            f"the checkpoint's quantization is not modelled: {why}; its weights are planned in "
            f"{request.precision.value}, not as stored (pass --precision int4 / int8 / fp8 for a "
            "close layout)"
        ]
    fmt = packed_checkpoint(request)
    cc = _capability(request.gpu)
    if fmt is None or cc is None:
        return []
    gpu = request.gpu.name if request.gpu is not None else "GPU"
    if request.gpu_memory_utilization is not None:
        if cc >= fmt.vllm_min_capability:
            return []
        major, minor = fmt.vllm_min_capability
        return [
            f"vLLM serves {fmt.method} checkpoints on compute capability {major}.{minor} and "
            f"newer ({fmt.vllm_config}.get_min_capability); the {gpu} is {cc[0]}.{cc[1]}"
        ]
    if cc >= fmt.hf_min_capability:
        return []
    major, minor = fmt.hf_min_capability
    return [
        f"transformers loads {fmt.method} checkpoints on compute capability {major}.{minor} and "
        f"newer ({fmt.hf_check}); the {gpu} is {cc[0]}.{cc[1]}; vLLM (--gpu-memory-utilization) "
        "serves it from its own minimum"
    ]
