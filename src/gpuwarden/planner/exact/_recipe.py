"""Turn a ``PlanRequest`` into the concrete framework recipe exact mode runs (pure, no torch).

Every choice that a real job could make differently is written into ``Recipe.notes`` so the report
says which behaviour was traced.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.dora import runs_dora
from gpuwarden.planner.exact._quant import DESCRIPTIONS
from gpuwarden.planner.inference import keeps_prompt_logits
from gpuwarden.planner.layout import lora_targets
from gpuwarden.planner.optimizer import TORCHAO_STATES
from gpuwarden.planner.stacks import wrapper_checkpointing
from gpuwarden.types.plan import (
    LORA_VARIANT_NAMES,
    Attention,
    Checkpointing,
    Engine,
    Mode,
    Offload,
    Optimizer,
    PlanRequest,
    Precision,
    QuantKernel,
)

UNSUPPORTED = "exact-unsupported"
_HINT = "run the formula planner instead (without --exact)"

# precision → (dtype of trainable weights, autocast compute dtype or None)
_FLOAT_RECIPES: dict[Precision, tuple[str, str | None]] = {
    Precision.FP32: ("float32", None),
    Precision.TF32: ("float32", None),  # TF32 changes matmul arithmetic, not storage
    Precision.BF16: ("bfloat16", None),
    Precision.FP16: ("float16", None),
    Precision.BF16_MIXED: ("float32", "bfloat16"),
    Precision.FP16_MIXED: ("float32", "float16"),
}
_QUANTIZED = {Precision.INT8: "int8", Precision.INT4: "int4", Precision.NF4: "nf4"}
_KV_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}
_KV_BYTES |= {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1}
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# adapter dtypes get_peft_model(autocast_adapter_dtype=True), its default, makes fp32 (PEFT >= 0.12,
# tuners_utils.cast_adapter_dtype); exact mode traces the HF stack, which runs PEFT
_PEFT_UPCASTS = frozenset({"bfloat16", "float16"})


@dataclass(frozen=True, slots=True)
class Recipe:
    """What exact mode builds and runs for one request."""

    mode: Mode
    weight_dtype: str  # full fine-tuning: the trainable weights; otherwise the frozen base
    adapter_dtype: str | None  # LoRA adapters (lora / qlora)
    autocast_dtype: str | None  # torch.autocast compute dtype (mixed precision)
    attention: str  # transformers attn_implementation: "sdpa" or "eager"
    checkpointing: bool
    optimizer: Optimizer
    quantization: str | None  # frozen nn.Linear weights modelled in this format
    kv_bytes: int | None  # KV-cache element size when it differs from the compute dtype
    notes: tuple[str, ...]
    optimizer_impl: str = "fused"  # "fused", "foreach" or "for-loop" (torch optimizers)
    lora_dropout: float = 0.0
    dora: bool = False  # PEFT's DoRA adapters (LoraConfig(use_dora=True))
    # bitsandbytes < 0.43.2: the 4-bit Linears keep their input for backward (``_bnb_legacy``)
    keeps_linear_inputs: bool = False
    # torchtitan's op-level selective AC on every decoder layer (``_build.op_sac_context``)
    op_sac: bool = False
    # full checkpointing applied by torch's checkpoint_wrapper on each decoder layer, not
    # transformers' switch (``_build.wrap_decoder_layers``): use_cache stays as the config says
    checkpoint_wrapper: bool = False

    @property
    def compute_dtype(self) -> str:
        return self.autocast_dtype or self.weight_dtype

    @property
    def trains(self) -> bool:
        return self.mode is not Mode.INFER


def unsupported(what: str) -> InvalidConfigError:
    """The error for a job exact mode cannot trace (the formula planner still can): the flags
    asked for a combination exact mode does not run, so it is the user's input (exit 2)."""
    return InvalidConfigError(f"exact mode cannot trace {what}", reference=UNSUPPORTED, hint=_HINT)


def _check_parallelism(request: PlanRequest, notes: list[str]) -> None:
    """Exact mode traces one process holding a whole replica: no sharding of any kind."""
    sharded = {
        "tensor parallelism (tp)": request.tp > 1,
        "pipeline parallelism (pp)": request.pp > 1,
        "context parallelism (cp)": request.cp > 1,
        "expert parallelism (ep)": request.ep > 1,
        f"ZeRO stage {request.zero_stage}": request.zero_stage > 0,
        "FSDP": request.fsdp is not None,
        "CPU offload": request.offload is not Offload.NONE,
    }
    used = [name for name, on in sharded.items() if on]
    if used:
        raise unsupported(
            ", ".join(used) + ": it traces one process holding a whole replica of the model"
        )
    if request.num_gpus > 1 and request.mode is not Mode.INFER:
        notes.append(
            "data parallel: one replica traced; DDP's gradient buckets (a second copy of the "
            "gradients unless gradient_as_bucket_view=True) and NCCL buffers are not included"
        )


def _attention(request: PlanRequest, notes: list[str]) -> str:
    if request.attention is Attention.EAGER:
        return "eager"
    if request.attention is Attention.FLASH:
        notes.append(
            "attention 'flash' traced with PyTorch SDPA's CPU flash kernel, which saves the same "
            "tensors as FlashAttention on CUDA (q, k, v, output, logsumexp)"
        )
    return "sdpa"


def _op_sac(request: PlanRequest, attention: str, notes: list[str]) -> bool:
    """torchtitan's op-level SAC applied to the HF decoder layers."""
    if request.checkpointing is not Checkpointing.OP:
        return False
    if attention == "eager":
        raise unsupported(
            "op-level SAC with eager attention: torchtitan's policy saves the fused SDPA "
            "kernel's outputs, which eager attention does not call"
        )
    notes.append(
        "op-level SAC as torchtitan applies it (parallelize.py _custom_policy): per decoder "
        "layer, the outputs of the 1st, 3rd, ... aten.mm and of the SDPA kernel are saved, the "
        "rest recomputed (non-reentrant torch.utils.checkpoint with a selective-checkpoint "
        "context); CPU's SDPA op stands in for CUDA's flash / efficient ones. "
        "saved_activation_bytes is what is alive at the end of the forward (the checkpoint's "
        "cache is invisible to saved-tensor hooks)"
    )
    return True


def _wrapper_notes(request: PlanRequest, notes: list[str]) -> None:
    """torch's checkpoint wrapper on each decoder layer. With the cache on, the recomputation
    reruns the layer with the same cache object, which transformers' ``DynamicCache.update``
    grows in place: the layer's keys become 2 × seq_len long (a CPU run of a 2-layer Llama,
    transformers 5.24; transformers 4.31 returned a new (k, v) tuple instead). SDPA's causal mask
    is aligned top-left, so the first seq_len keys give the same gradients (the same CPU run);
    eager attention adds its seq_len × seq_len mask to seq_len × 2·seq_len scores and fails (the
    same CPU run). FlashAttention is traced with CPU's SDPA kernel, which runs; a CUDA run whose
    FlashAttention-2 saves the K/V stops on their recomputed shape (huggingface/transformers
    #28056: 4,096 tokens saved, 8,192 recomputed)."""
    cached = request.use_cache and request.model.returns_cache
    if cached and request.attention is Attention.EAGER:
        raise unsupported(
            "torch's checkpoint wrapper with use_cache on and eager attention: the recomputed "
            "layer appends its K/V to the same cache again, and eager attention's mask no "
            "longer matches the keys (transformers 4.31 returned a new (k, v) tuple)"
        )
    notes.append(
        "full activation checkpointing: torch's apply_activation_checkpointing "
        "(checkpoint_wrapper, CheckpointImpl.NO_REENTRANT, on each decoder layer); "
        "transformers' own switch stays off, so use_cache is the config's"
    )
    if cached:
        notes.append(
            "each layer's recomputation appends its K/V to the cache again (transformers' "
            "DynamicCache; 2 × seq_len tokens after backward)"
            + (
                "; a CUDA run with FlashAttention-2 stops there on the recomputed K/V's shape "
                "(transformers#28056)"
                if request.attention is Attention.FLASH
                else ""
            )
        )


def _checkpointing(request: PlanRequest, attention: str, notes: list[str]) -> bool:
    if wrapper_checkpointing(request):
        _wrapper_notes(request, notes)
        return True
    if request.checkpointing is Checkpointing.FULL:
        notes.append(
            "full activation checkpointing: transformers' activation_checkpointing_enable "
            "(per decoder layer, non-reentrant torch.utils.checkpoint)"
        )
        return True
    if request.checkpointing is Checkpointing.SELECTIVE:
        if attention == "eager":
            raise unsupported(
                "selective recomputation with eager attention: transformers has no switch to "
                "recompute only the attention core"
            )
        notes.append(
            "selective recomputation only drops the attention core's s² tensors, which "
            "SDPA/flash never saves: traced without checkpointing"
        )
    return False


def _optimizer_impl(request: PlanRequest, notes: list[str]) -> str:
    """Which kernel runs step(): fused (HF Trainer's default), foreach (torch's CUDA default)."""
    impl = str(getattr(request, "optimizer_impl", "fused"))
    optimizer = request.optimizer
    if optimizer is Optimizer.ADAMW:
        notes.append(
            {
                "fused": "AdamW: torch.optim.AdamW(fused=True), HF Trainer's default "
                "(adamw_torch_fused): the update runs in place, no step() temporaries",
                "foreach": "AdamW: torch.optim.AdamW(foreach=True), PyTorch's CUDA default: "
                "step() holds one more optimizer-state-sized temporary",
            }.get(impl, "AdamW: torch.optim.AdamW(foreach=False): per-tensor temporaries")
        )
    elif optimizer in (Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        notes.append(
            "8-bit AdamW states modelled, not run (bitsandbytes has no kernels on this CPU): "
            "uint8 m and v + one fp32 absmax per 256 values, fp32 states for tensors under 4,096 "
            "values; the in-place 8-bit update adds no temporaries"
        )
        if optimizer is Optimizer.PAGED_ADAMW_8BIT:
            notes.append(
                "paged optimizer: states live in CUDA unified memory and can spill to host RAM "
                "under pressure; counted here as GPU memory"
            )
    elif optimizer is Optimizer.ADAFACTOR:
        notes.append(
            "Adafactor modelled on torch.optim.Adafactor, whose step() reads tensor values "
            "(.item()) and cannot run under FakeTensorMode: factored row/column second moments "
            "(full-size for 1-D tensors), no first moment; step() temporaries of one "
            + ("parameter at a time" if impl == "for-loop" else "full parameter set (foreach)")
        )
    elif optimizer is Optimizer.SGD_MOMENTUM:
        notes.append(f"SGD with momentum 0.9: torch.optim.SGD ({impl})")
    elif optimizer is Optimizer.SGD:
        notes.append("SGD without momentum: no optimizer states")
    else:
        notes.append("no optimizer: forward and backward only")
    return impl


def _check_framework(request: PlanRequest) -> None:
    """Framework behaviours HF transformers' eager training loop does not have."""
    # Newer PlanRequest knobs are read defensively: absent means the plain HF/PyTorch default.
    loss = str(getattr(request, "loss", "full"))
    refused = {
        "chunked/fused cross-entropy (transformers keeps full fp32 logits)": loss != "full",
        "torch.compile (exact mode traces eager kernels)": getattr(request, "compile", False),
        "activation offloading": getattr(request, "activation_offload", False),
        "Liger-Kernel's kernels (exact mode traces transformers' own modules)": str(
            getattr(request, "kernels", "none")
        )
        != "none",
        "torchao's low-bit optimizers (their states are not traced)": (
            request.optimizer in TORCHAO_STATES
        ),
        "optimizer-in-backward": getattr(request, "optimizer_in_backward", False),
        f"--framework {getattr(request, 'framework', 'hf')} (exact mode traces the installed "
        "transformers' model code)": str(getattr(request, "framework", "hf")) != "hf",
    }
    used = [name for name, on in refused.items() if on]
    if used:
        raise unsupported(", ".join(used))


def _kv_bytes(request: PlanRequest, compute_dtype: str, notes: list[str]) -> int | None:
    if request.kv_cache_dtype is None:
        return None
    size = _KV_BYTES.get(request.kv_cache_dtype.lower())
    if size is None:
        raise InvalidConfigError(
            f"unknown KV-cache dtype {request.kv_cache_dtype!r}",
            hint="use one of: " + ", ".join(sorted(_KV_BYTES)),
        )
    if size == DTYPE_BYTES[compute_dtype]:
        return None
    notes.append(
        f"{request.kv_cache_dtype} KV cache modelled: transformers keeps its cache in the compute "
        f"dtype, so the traced {compute_dtype} cache is scaled to {size} B per element"
    )
    return size


def _check_positions(request: PlanRequest) -> None:
    """A fake run cannot notice an out-of-range position id; a real one would crash."""
    spec = request.model
    tokens = (
        request.prompt_tokens + request.new_tokens
        if request.mode is Mode.INFER
        else request.seq_len
    )
    limit = spec.max_position_embeddings
    if spec.parameters.position_embedding and limit is not None and tokens > limit:
        raise InvalidConfigError(
            f"{spec.name} has learned position embeddings for {limit} tokens; "
            f"the job needs {tokens}",
            hint=f"use at most {limit} tokens per sequence",
        )


def _nf4_scheme(request: PlanRequest) -> str:
    """The NF4 layout the request names: torchao's, or bitsandbytes' with / without double quant."""
    if request.quant_kernel is QuantKernel.TORCHAO:
        return "nf4-torchao"
    return "nf4" if request.double_quant else "nf4-single"


def resolve(request: PlanRequest) -> Recipe:
    """The recipe exact mode runs for ``request``; raises ``exact-unsupported`` when it cannot."""
    notes: list[str] = []
    if not request.model.raw_config:
        raise unsupported(f"{request.model.name}: it has no HF config to build the model from")
    _check_parallelism(request, notes)
    _check_positions(request)
    if request.mode is not Mode.INFER:
        _check_framework(request)
    if request.precision is Precision.FP8:
        raise unsupported("fp8 (Transformer Engine has no CPU kernels to trace)")
    quantization = _QUANTIZED.get(request.precision)
    if request.mode is Mode.QLORA and quantization is None:
        quantization = "nf4"
    if quantization == "nf4":
        quantization = _nf4_scheme(request)
    keeps_inputs = (
        request.mode in {Mode.LORA, Mode.QLORA}
        and quantization in {"nf4", "nf4-single"}
        and request.quant_kernel is QuantKernel.BNB_LEGACY
    )
    if request.mode is Mode.TRAIN and quantization is not None:
        raise unsupported(
            f"full fine-tuning with {request.precision.value} weights (use lora/qlora for a "
            "quantized frozen base)"
        )

    if quantization is not None:
        # A quantized base computes in bf16; with PEFT's defaults the adapters are fp32 under
        # autocast (HF Trainer bf16=True), unless the request names a float precision itself.
        float_dtype, autocast = _FLOAT_RECIPES.get(request.precision, ("float32", "bfloat16"))
        compute = autocast or float_dtype
        notes.append(
            f"{quantization} frozen weights modelled ({DESCRIPTIONS[quantization]}); the trace "
            f"runs a {compute} stand-in, which saves the same tensors; the per-matmul dequantized "
            "weight (one matrix at a time) is not included; embeddings, norms and lm_head stay "
            f"in {compute}"
        )
    else:
        float_dtype, autocast = _FLOAT_RECIPES[request.precision]
        compute = autocast or float_dtype

    attention = _attention(request, notes)
    checkpointing = op_sac = False
    adapter_dtype: str | None = None
    kv_bytes: int | None = None
    optimizer_impl = "fused"
    lora_dropout = float(getattr(request, "lora_dropout", 0.0))
    if request.mode is Mode.TRAIN:
        weight_dtype = float_dtype
        if autocast is not None:
            notes.append(
                f"{request.precision.value} traced as PyTorch AMP: fp32 parameters, gradients and "
                f"optimizer states, {autocast} compute under torch.autocast (its CPU op policy); "
                "the low-precision weight copies autocast keeps for backward count as "
                "activations. DeepSpeed/Megatron keep 16-bit parameters and an fp32 master copy "
                "instead (18 B/param)"
            )
    elif request.mode is Mode.INFER:
        weight_dtype = compute
        autocast = None  # inference runs with the weights already in the compute dtype
        kv_bytes = _kv_bytes(request, compute, notes)
        if request.serving_engine is not Engine.HF:
            notes.append(
                f"{request.serving_engine.value}'s memory budget ignored: exact mode traces a "
                "static batch with HF transformers' DynamicCache, not a paged KV pool"
            )
        if keeps_prompt_logits(request):
            notes.append(
                f"transformers {request.transformers_version}'s generate computes every prompt "
                "position's logits (before 4.45); exact mode traces the installed transformers "
                "with logits_to_keep=1, the last position's only"
            )
    else:
        weight_dtype = compute
        # PEFT's default (autocast_adapter_dtype=True) upcasts fp16 / bf16 adapters to fp32
        adapter_dtype = "float32" if float_dtype in _PEFT_UPCASTS else float_dtype
        notes.append(
            f"{LORA_VARIANT_NAMES[request.lora_variant]} (PEFT): rank {request.lora_rank} on "
            f"{', '.join(lora_targets(request.model, request))}, "
            f"lora_dropout {lora_dropout:g}, {adapter_dtype} adapters over a frozen "
            f"{compute} base" + (f" under {autocast} autocast" if autocast else "")
        )
        if quantization is not None:
            notes.append(
                "prepare_model_for_kbit_training not applied (it would upcast the "
                "non-quantized weights to fp32)"
            )
        if keeps_inputs:
            notes.append(
                "bitsandbytes < 0.43.2 reproduced: each 4-bit Linear keeps its input for "
                "backward when it requires grad (MatMul4Bit ctx.tensors = (A, B); dropped by "
                "bitsandbytes PR #1270, 0.43.2)"
            )
    if request.mode is not Mode.INFER:
        checkpointing = _checkpointing(request, attention, notes)
        op_sac = _op_sac(request, attention, notes)
        optimizer_impl = _optimizer_impl(request, notes)
        if request.grad_accum > 1:
            notes.append(
                "gradient accumulation: the last micro-batch is traced with the accumulated "
                "gradients already alive"
            )
        elif request.keep_grads:
            notes.append(
                "zero_grad(set_to_none=False): the step is traced with every gradient alive"
            )
    notes.append(
        "not included: CUDA context, cuBLAS workspaces, NCCL buffers, caching-allocator rounding "
        "and fragmentation (compare with torch.cuda.max_memory_allocated, not nvidia-smi)"
    )
    return Recipe(
        mode=request.mode,
        weight_dtype=weight_dtype,
        adapter_dtype=adapter_dtype,
        autocast_dtype=autocast,
        attention=attention,
        checkpointing=checkpointing,
        optimizer=request.optimizer,
        quantization=quantization,
        kv_bytes=kv_bytes,
        notes=tuple(notes),
        optimizer_impl=optimizer_impl,
        lora_dropout=lora_dropout,
        dora=runs_dora(request),
        keeps_linear_inputs=keeps_inputs,
        op_sac=op_sac,
        checkpoint_wrapper=checkpointing and wrapper_checkpointing(request),
    )
