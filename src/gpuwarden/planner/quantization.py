"""Quantized Linear weights in a plan: the precision's layout, or the checkpoint's own.

Two sources. ``--precision fp8 / int8 / int4`` quantizes a 16-bit checkpoint's blocks' Linears
(vLLM's online fp8, per-tensor scales, or the fp8 layout of a checkpoint that is already fp8;
int8 per channel; int4 group 128). A checkpoint stored quantized (its config's
``quantization_config``: AWQ, GPTQ, FP8, compressed-tensors, bitsandbytes, gpt-oss's MXFP4
experts; ``checkpoint_formats.py``) is planned as it is stored, every quantized Linear at its
bytes with its scales from the model's own shapes and the rest at the 16-bit dtype, unless
``dequantize`` (the CLI sets it with ``--precision`` / ``--dequantize``) asks for the 16-bit load.
Under vLLM, MXFP4 experts are held as the release's default MoE backend lays them out on the GPU
(padded sizes, fp32 biases, kept scale copies: ``checkpoint_formats.VLLM_MXFP4_BACKENDS``).

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
    VLLM_MXFP4_VERIFIED_UNTIL,
    Below,
    CheckpointFormat,
    VllmMoeBackend,
    read_checkpoint_format,
    unmodelled,
    vllm_mxfp4_backend,
)
from gpuwarden.planner.layout import distinct_layers, layout
from gpuwarden.planner.versions import release
from gpuwarden.planner.weight_formats import (
    FP16_BYTES,
    INT4,
    INT8,
    Scales,
    WeightFormat,
    bytes_per_weight,
    kernel_expert_bytes,
    padded_moe_sizes,
    scale_bytes,
)
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import DEFAULT_VLLM_VERSION, Engine, Mode, PlanRequest, Precision
from gpuwarden.units import GIB

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
    """Whether the engine keeps the format packed on the job's GPU: a serving engine (vLLM,
    SGLang) always (vLLM refuses instead, ``checkpoint_warnings``), transformers unless it
    dequantizes below the format's compute capability (a GPU of unknown capability is given
    the benefit of the doubt)."""
    cc = _capability(request.gpu)
    served = request.serving_engine is not Engine.HF
    if served or cc is None or fmt.below is not Below.DEQUANTIZES:
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


def vllm_moe_backend(request: PlanRequest, fmt: CheckpointFormat) -> VllmMoeBackend | None:
    """The MoE backend vLLM holds the checkpoint's MXFP4 experts in on the job's GPU; None for
    another engine or format, a GPU of unknown compute capability, or an unreadable release."""
    if request.serving_engine is not Engine.VLLM or fmt.method != "mxfp4" or not fmt.experts_only:
        return None
    cc = _capability(request.gpu)
    version = release(request.vllm_version)
    if cc is None or version is None:
        return None
    return vllm_mxfp4_backend(version, cc)


def _experts_per_gpu(request: PlanRequest) -> float:
    """Routed-expert parameters (biases included) on one GPU, split as stage_params splits them."""
    lay = layout(request)
    return request.model.parameters.expert_parameters / (lay.ep * lay.tp)


def _kernel_bytes(request: PlanRequest, backend: VllmMoeBackend) -> int:
    lay = layout(request)
    return kernel_expert_bytes(request.model, backend.layout, tp=lay.tp, ep=lay.ep)


def expert_bytes(request: PlanRequest, dtype_bytes: float) -> float | None:
    """Bytes per routed-expert parameter where the checkpoint stores only the experts packed
    (gpt-oss's MXFP4; biases 16-bit): as vLLM's MoE backend holds them on the job's GPU, else as
    stored. None: the experts cost what the other Linears do."""
    fmt = packed_checkpoint(request)
    if fmt is None or not fmt.experts_only:
        return None
    backend = vllm_moe_backend(request, fmt)
    params = _experts_per_gpu(request)
    if backend is not None and params:
        return _kernel_bytes(request, backend) / params
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
    return text + _vllm_layout_note(request, fmt)


def _padding(before: int, after: int) -> str:
    return f"{before}" if before == after else f"{before} → {after}"


def _vllm_layout_note(request: PlanRequest, fmt: CheckpointFormat) -> str:
    """How vLLM holds the MXFP4 experts on this GPU (its MoE backend's padding and copies), or
    why they are planned as stored."""
    if request.serving_engine is not Engine.VLLM or not fmt.experts_only or fmt.method != "mxfp4":
        return ""
    version = request.vllm_version + (
        " (the default release planned)" if request.vllm_version == DEFAULT_VLLM_VERSION else ""
    )
    backend = vllm_moe_backend(request, fmt)
    if backend is None:
        why = (
            "no MXFP4 MoE backend of that release serves this GPU"
            if _capability(request.gpu) is not None
            else "its MXFP4 MoE backend, and the padding it allocates, depends on the GPU's "
            "compute capability, not known here"
        )
        return f". vLLM {version}: {why}; the experts are planned as stored"
    kernel = backend.layout
    spec = request.model
    lay = layout(request)
    hidden, inter = padded_moe_sizes(spec, kernel, lay.tp)
    per_gpu = -(-(spec.moe.expert_intermediate_size if spec.moe is not None else 0) // lay.tp)
    extras = []
    if kernel.bias_bytes != FP16_BYTES:
        extras.append(f"biases {kernel.bias_bytes * 8}-bit")
    if kernel.scale_copy is not None:
        extras.append("a swizzled copy of the E8M0 scales kept beside them")
    stored = _average_bytes(request, fmt, FP16_BYTES, experts=True) or 0.0
    held = _kernel_bytes(request, backend)
    params = _experts_per_gpu(request)
    gpu = request.gpu.name if request.gpu is not None else "GPU"
    cc = _capability(request.gpu) or (0, 0)
    text = (
        f". vLLM {version} on the {gpu} (compute capability {cc[0]}.{cc[1]}) holds them in its "
        f"{kernel.backend} MoE layout: hidden {_padding(spec.hidden_size, hidden)}, "
        f"intermediate per GPU {_padding(per_gpu, inter)}"
        + "".join(f", {e}" for e in extras)
        + f": {held / GIB:.2f} GiB of routed experts per GPU vs {stored * params / GIB:.2f} GiB "
        f"as stored ({backend.source}; VLLM_MXFP4_USE_MARLIN / VLLM_USE_FLASHINFER_MOE_MXFP4_* "
        "select another backend)"
    )
    checked = release(request.vllm_version)
    if checked is not None and checked > VLLM_MXFP4_VERIFIED_UNTIL:
        newest = ".".join(map(str, VLLM_MXFP4_VERIFIED_UNTIL))
        text += f"; layouts read up to vLLM {newest}, assumed unchanged in {request.vllm_version}"
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
    if request.serving_engine is Engine.VLLM:
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
