"""The OOM playbook: each change re-planned, kept only when it applies and saves memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from enum import Enum
from itertools import chain

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import stacks
from gpuwarden.planner.dora import runs_dora
from gpuwarden.planner.layout import lora_targets, zero3_offloads_parameters
from gpuwarden.planner.liger import default_loss, offers_liger
from gpuwarden.planner.outputs import builds_cache
from gpuwarden.planner.plan import compute_plan
from gpuwarden.planner.precision import runs_on
from gpuwarden.planner.quant_kernel import BNB_FIX, fp32_compute, trains_through_nf4
from gpuwarden.planner.search import smallest_fit
from gpuwarden.planner.verdict import highest_utilization
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.plan import (
    Checkpointing,
    Engine,
    Fix,
    FsdpKind,
    Kernels,
    LoraVariant,
    LossImpl,
    MemoryPlan,
    Mode,
    ModuleLoading,
    Offload,
    Optimizer,
    PlanRequest,
    Precision,
    QuantKernel,
    SaveMode,
    TrainLoop,
)
from gpuwarden.units import GIB

ZERO3_FEW_LIVE = 100_000_000  # a tenth of DeepSpeed's default max_live
MIN_SHARE = 0.01  # a change that saves less than 1% of the peak is not worth offering
NEEDS_MORE_GPUS = "needs-more-gpus"  # the fix key of the --fit search's answer


@dataclass(frozen=True, slots=True)
class Candidate:
    """One change to try: the request with it applied (the knobs it sets are read off the
    difference, ``changed_knobs``, so no candidate writes them twice)."""

    key: str
    description: str
    request: PlanRequest
    tradeoff: str


def _knob_text(value: object) -> str:
    """A knob's value as a fix names it: enums by value, booleans in lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


def changed_knobs(before: PlanRequest, after: PlanRequest) -> dict[str, str]:
    """knob → new value, for every knob ``after`` sets differently from ``before``."""
    changed: dict[str, str] = {}
    for field in fields(after):
        old, new = getattr(before, field.name), getattr(after, field.name)
        if new is not old and new != old:
            changed[field.name] = _knob_text(new)
    return changed


def _nf4(r: PlanRequest) -> Iterator[Candidate]:
    """The 4-bit base itself: a bitsandbytes that keeps no Linear inputs, double quantization."""
    if trains_through_nf4(r) and r.quant_kernel is QuantKernel.BNB_LEGACY:
        yield Candidate(
            "upgrade-bitsandbytes",
            "bitsandbytes >= 0.43.2: its 4-bit Linears stop keeping their inputs for backward",
            replace(r, quant_kernel=QuantKernel.BNB),
            f"a package upgrade ({BNB_FIX}); same numerics",
        )
    if (
        r.precision is Precision.NF4
        and not r.double_quant
        and r.quant_kernel is not QuantKernel.TORCHAO
    ):
        yield Candidate(
            "nf4-double-quant",
            "NF4 double quantization (bnb_4bit_use_double_quant=True)",
            replace(r, double_quant=True),
            "absmax stored in 8 bit: ≈ 0.37 bit/weight less, a little more dequantization work",
        )
    if fp32_compute(r):
        yield Candidate(
            "bnb-compute-bf16",
            "compute the 4-bit Linears in bf16 (bnb_4bit_compute_dtype=torch.bfloat16)",
            replace(r, bnb_compute_dtype="bf16"),
            "16-bit matmuls on the dequantized weight, as QLoRA does: faster, no fp32 copies",
        )


def _lifecycle(r: PlanRequest) -> Iterator[Candidate]:
    """Changes to the phases around the step: how the weights load, how checkpoints are written,
    how large the evaluation batch is. Each is kept only when it lowers the peak, i.e. when its
    phase is (or ties) the peak."""
    if r.load_dtype != "bf16" and r.precision not in {Precision.FP32, Precision.TF32}:
        yield Candidate(
            "load-in-bf16",
            "load the weights in bf16: from_pretrained(..., torch_dtype=torch.bfloat16) "
            "(dtype='auto' for a bf16 checkpoint), low_cpu_mem_usage=True",
            replace(r, load_dtype="bf16"),
            "none for a bf16 job; the fp32 copy was only a loading default",
        )
    if stacks.save_mode(r) is not SaveMode.SHARDED and r.mode is not Mode.INFER:
        yield Candidate(
            "sharded-checkpoints",
            "write sharded checkpoints (FSDP SHARDED_STATE_DICT / torch.distributed.checkpoint)",
            replace(r, save=SaveMode.SHARDED),
            "consolidate offline for a single-file export "
            "(torch.distributed.checkpoint.format_utils)",
        )
    if stacks.eval_batch(r) > 1:
        yield Candidate(
            "smaller-eval-batch",
            f"evaluation batch {stacks.eval_batch(r)} → 1",
            replace(r, eval_batch=1),
            "slower evaluation; same numbers",
        )


def _dora(r: PlanRequest) -> Iterator[Candidate]:
    """DoRA's own tensors (planner/dora.py): the recomputed base output, the variant itself."""
    if not runs_dora(r):
        return
    if r.lora_dropout > 0:
        yield Candidate(
            "dora-without-dropout",
            "DoRA without adapter dropout (lora_dropout=0): PEFT >= 0.14 reuses the base "
            "layer's output instead of recomputing it with a weight copy",
            replace(r, lora_dropout=0.0),
            "no dropout on the adapters' input (PEFT issue #2107: not crucial for DoRA)",
        )
    yield Candidate(
        "plain-lora",
        "plain LoRA instead of DoRA (use_dora=False)",
        replace(r, lora_variant=LoraVariant.LORA),
        "no trainable magnitude: a different method, not a memory setting",
    )


def _training(r: PlanRequest) -> Iterator[Candidate]:
    yield from _lifecycle(r)
    yield from _nf4(r)
    yield from _dora(r)
    if r.keep_grads:
        yield Candidate(
            "free-gradients-between-steps",
            "optimizer.zero_grad(set_to_none=True): no gradients through the forward",
            replace(r, keep_grads=False),
            "none (torch >= 2.0's default); code that reads .grad after zero_grad must expect None",
        )
    if r.zero_stage >= 3 and max(r.zero3_max_live, r.zero3_max_reuse) > ZERO3_FEW_LIVE:
        yield Candidate(
            "zero3-fewer-live-parameters",
            f"DeepSpeed stage3_max_live_parameters and stage3_max_reuse_distance → "
            f"{ZERO3_FEW_LIVE:.0e}: ZeRO-3 prefetches and keeps fewer parameters gathered",
            replace(r, zero3_max_live=ZERO3_FEW_LIVE, zero3_max_reuse=ZERO3_FEW_LIVE),
            "less all-gather overlap with compute: slower steps on slow interconnects",
        )
    if r.deepspeed_legacy and zero3_offloads_parameters(r):
        yield Candidate(
            "upgrade-deepspeed",
            "DeepSpeed >= 0.9: one GPU copies each offloaded tensor once instead of all-gathering "
            "it from a second copy",
            replace(r, deepspeed_legacy=False),
            "a package upgrade (DeepSpeed 0.9.0, 2023-04); same numerics",
        )
    if builds_cache(r):
        yield Candidate(
            "use-cache-off",
            "model.config.use_cache = False: no KV cache built in the training forward",
            replace(r, use_cache=False),
            "none for training; turn it back on for generation",
        )
    if r.loop is TrainLoop.SCRIPT:
        yield Candidate(
            "drop-previous-outputs",
            "`del outputs` after backward (or take the loss inside a function): the previous "
            "step's logits and KV cache no longer live through the next forward",
            replace(r, loop=TrainLoop.TRAINER),
            "none; read what you log (loss.item()) before dropping the outputs",
        )
    if r.micro_batch > 1:
        mb = max(1, r.micro_batch // 2)
        ga = r.grad_accum * (r.micro_batch // mb)
        yield Candidate(
            "smaller-micro-batch",
            f"micro-batch {r.micro_batch} → {mb}, gradient accumulation {r.grad_accum} → {ga}",
            replace(r, micro_batch=mb, grad_accum=ga),
            "same global batch; more, smaller steps (lower GPU efficiency)",
        )
    if r.checkpointing is not Checkpointing.FULL:
        yield Candidate(
            "activation-checkpointing",
            "full activation checkpointing (keep each block's input, recompute in backward)",
            replace(r, checkpointing=Checkpointing.FULL),
            "≈ 33% more compute (one extra forward)",
        )
    if r.precision in {Precision.FP32, Precision.TF32}:
        yield Candidate(
            "bf16-mixed",
            "bf16 mixed precision (autocast over fp32 master weights)",
            replace(r, precision=Precision.BF16_MIXED),
            "needs bf16 hardware (Ampere or newer); numerics of 16-bit matmuls",
        )
    if r.precision is Precision.BF16_MIXED and r.mode is Mode.TRAIN:
        yield Candidate(
            "bf16-pure",
            "pure bf16: parameters, gradients and AdamW states in bf16",
            replace(r, precision=Precision.BF16),
            "no fp32 master copy: small updates can round away (use Kahan summation / "
            "stochastic rounding)",
        )
    if r.optimizer is Optimizer.ADAMW:
        yield Candidate(
            "8bit-optimizer",
            "bitsandbytes 8-bit AdamW",
            replace(r, optimizer=Optimizer.ADAMW_8BIT),
            "blockwise-quantized states; usually matches AdamW quality",
        )
    if offers_liger(r):
        # the loss Liger's patch of this model type brings (granite's keeps the full logits)
        liger_loss = default_loss(Kernels.LIGER, r.model)
        loss_text = (
            "linear cross-entropy"
            if liger_loss is LossImpl.FUSED
            else "cross-entropy (full logits)"
        )
        yield Candidate(
            "liger-kernels",
            f"Liger-Kernel (use_liger_kernel=True): fused RMSNorm / SwiGLU and {loss_text}",
            replace(r, kernels=Kernels.LIGER, loss=liger_loss),
            "pip install liger-kernel (Triton, CUDA / ROCm): the model's norms, MLP activation, "
            "RoPE and loss run Liger's kernels",
        )
    if r.loss is LossImpl.FULL and r.model.vocab_size >= 32_000:
        yield Candidate(
            "chunked-loss",
            "chunked cross-entropy (no full fp32 logits)",
            replace(r, loss=LossImpl.CHUNKED),
            "needs a chunked or fused loss (torchtune CEWithChunkedOutputLoss, Liger)",
        )
    yield from _sharding(r)
    if r.mode is Mode.TRAIN:
        base = Precision.BF16 if r.precision in {Precision.BF16, Precision.FP16} else r.precision
        if base is Precision.FP8:
            base = Precision.BF16_MIXED
        targets = ", ".join(lora_targets(r.model, r))
        yield Candidate(
            "lora",
            f"LoRA (rank {r.lora_rank} on {targets}) instead of full fine-tuning",
            replace(r, mode=Mode.LORA, precision=base),
            "trains adapters only: a different method, not a memory setting",
        )
    if r.mode in {Mode.TRAIN, Mode.LORA}:
        yield Candidate(
            "qlora",
            "QLoRA: NF4 base (double quantization) + LoRA adapters",
            replace(r, mode=Mode.QLORA, precision=Precision.NF4),
            "4-bit base weights: slower matmuls (dequantize), small quality loss",
        )


def _sharding(r: PlanRequest) -> Iterator[Candidate]:
    dp = r.num_gpus // (r.tp * r.pp * r.cp) * r.cp
    if dp > 1 and r.fsdp is None:
        for stage in (2, 3):
            if r.zero_stage < stage and not (r.pp > 1 and stage >= 2):
                yield Candidate(
                    f"zero-{stage}",
                    f"DeepSpeed ZeRO stage {stage} over {dp} data-parallel GPUs",
                    replace(r, zero_stage=stage),
                    "more communication: reduce-scatter / all-gather per step"
                    + (" and per layer" if stage == 3 else ""),
                )
        if r.zero_stage == 0:
            yield Candidate(
                "fsdp-full",
                f"FSDP FULL_SHARD over {dp} GPUs",
                replace(r, fsdp=FsdpKind.FULL),
                "all-gather per layer in forward and backward",
            )
    sharded = r.zero_stage >= 2 or r.fsdp is not None
    if sharded and r.offload is Offload.NONE and r.mode is not Mode.INFER:
        yield Candidate(
            "offload-optimizer",
            "offload optimizer states (and fp32 gradients) to CPU RAM",
            replace(r, offload=Offload.OPTIMIZER),
            "CPU Adam step and PCIe traffic every step; needs host RAM",
        )
    if (r.zero_stage == 3 or r.fsdp in {FsdpKind.FULL, FsdpKind.HYBRID}) and (
        r.offload is not Offload.OPTIMIZER_AND_PARAMS
    ):
        yield Candidate(
            "offload-params",
            "offload parameters and optimizer states to CPU RAM",
            replace(r, offload=Offload.OPTIMIZER_AND_PARAMS),
            "parameters stream over PCIe every layer: much slower",
        )


def _inference(r: PlanRequest) -> Iterator[Candidate]:
    yield from _lifecycle(r)
    yield from _nf4(r)
    if r.batch > 1:
        b = max(1, r.batch // 2)
        yield Candidate(
            "smaller-batch",
            f"batch {r.batch} → {b}",
            replace(r, batch=b),
            "lower throughput",
        )
    if r.serving_engine is Engine.VLLM and not r.enforce_eager:
        # from vLLM 0.21 the KV budget leaves room for the graphs (vllm_graphs.py): eager frees it
        yield Candidate(
            "enforce-eager",
            "vLLM --enforce-eager (no CUDA graphs)",
            replace(r, enforce_eager=True),
            "slower decode: every kernel launched from the CPU, most at small batches and TP > 1",
        )
    if not (r.kv_cache_dtype or "").lower().startswith("fp8"):
        yield Candidate(
            "fp8-kv-cache",
            "fp8 KV cache",
            replace(r, kv_cache_dtype="fp8"),
            "small accuracy cost; needs kernel support (vLLM, TensorRT-LLM)",
        )
    for precision, text in ((Precision.INT8, "int8"), (Precision.INT4, "int4 (GPTQ/AWQ)")):
        if r.precision not in {Precision.INT8, Precision.INT4, Precision.NF4}:
            yield Candidate(
                f"weights-{precision.value}",
                f"{text} weight quantization",
                replace(r, precision=precision),
                "quantized checkpoint needed; some quality loss",
            )


def _lower_utilization(plan: MemoryPlan) -> Iterator[Candidate]:
    """vLLM: the highest gpu_memory_utilization whose budget leaves room beside it for the CUDA
    context and graphs it does not count (kept only when that is lower than the request's)."""
    r, cap = plan.request, plan.inference
    if r.gpu is None or cap is None or cap.budget_bytes is None or not cap.outside_budget_bytes:
        return
    highest = highest_utilization(r.gpu.usable_bytes, cap.outside_budget_bytes)
    if 0 < highest < r.vllm_utilization:
        yield Candidate(
            "lower-gpu-memory-utilization",
            f"vLLM --gpu-memory-utilization {r.vllm_utilization:g} → {highest:g}: room beside the "
            "budget for the CUDA context and graphs it does not count",
            replace(r, gpu_memory_utilization=highest),
            "a smaller KV pool: fewer tokens cached at once",
        )


def _runtime(r: PlanRequest) -> Iterator[Candidate]:
    """The CUDA context itself: an eager one holds every kernel image (planner/overheads.py)."""
    if r.module_loading is ModuleLoading.EAGER:
        yield Candidate(
            "lazy-module-loading",
            "load CUDA kernels lazily: a PyTorch built with CUDA >= 11.7 (PyTorch >= 1.13 sets "
            "CUDA_MODULE_LOADING=LAZY) on a driver >= R515, and CUDA_MODULE_LOADING not EAGER",
            replace(r, module_loading=ModuleLoading.LAZY),
            "a PyTorch / driver upgrade on an old stack; a kernel's first call takes longer",
        )


def _scale_out(r: PlanRequest) -> Iterator[Candidate]:
    if r.mode is Mode.INFER:
        for tp in (2 * r.tp, 4 * r.tp):
            yield Candidate(
                f"tensor-parallel-{tp}",
                f"tensor parallelism over {tp} GPUs",
                replace(r, tp=tp, num_gpus=r.num_gpus * tp // r.tp),
                "more GPUs; all-reduce per layer",
            )
        return
    if r.zero_stage == 3 or r.fsdp is not None:
        n = r.num_gpus * 2
        yield Candidate(
            "more-gpus",
            f"{n} GPUs with the same sharding",
            replace(r, num_gpus=n),
            "twice the GPUs",
        )


def _bigger_gpu(plan: MemoryPlan, gpus: Sequence[GpuSpec]) -> Fix | None:
    r = plan.request
    if r.gpu is None:
        return None
    for gpu in sorted(gpus, key=lambda g: g.usable_bytes):
        if gpu.usable_bytes <= r.gpu.usable_bytes or not runs_on(gpu, r):
            continue
        try:
            other = compute_plan(replace(r, gpu=gpu))
        except InvalidConfigError:
            continue
        if other.fits:
            # A bigger GPU frees no bytes of the job; what it buys is capacity, reported as the
            # extra memory it brings.
            return Fix(
                key="bigger-gpu",
                description=f"a GPU with more memory: {gpu.name}",
                changes={"gpu": gpu.key},
                saved_bytes=gpu.usable_bytes - r.gpu.usable_bytes,
                total_bytes=other.peak_bytes,
                fits=True,
                tradeoff=f"{gpu.usable_bytes / GIB:.1f} GiB usable instead of "
                f"{r.gpu.usable_bytes / GIB:.1f} GiB (saved = capacity gained)",
                verdict=other.verdict,
            )
    return None


def _layout_text(changes: dict[str, str]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in changes.items()) or "same settings"


def needs_more_gpus(plan: MemoryPlan) -> Fix | None:
    """When no single change fits: the fewest GPUs of this type, and the layout, that do (the
    ``--fit`` search on this GPU alone), or None when none of up to 128 does."""
    r = plan.request
    if r.gpu is None:
        return None
    option = smallest_fit(r, r.gpu)
    if option is None:
        return None
    changes = {"num_gpus": str(option.num_gpus), **option.changes}
    changes.pop("parallel", None)  # "ddp": the default layout of several GPUs
    return Fix(
        key=NEEDS_MORE_GPUS,
        description=f"{option.num_gpus}× {r.gpu.name}: {_layout_text(option.changes)}",
        changes=changes,
        saved_bytes=plan.peak_bytes - option.plan.peak_bytes,
        total_bytes=option.plan.peak_bytes,
        fits=True,
        tradeoff="no single change fits: the --fit search's fewest GPUs of this type "
        "(`--fit` ranks GPU types and layouts by count, price and speed)",
        verdict=option.plan.verdict,
    )


def _engine_need(plan: MemoryPlan) -> int | None:
    """What a serving engine's verdict weighs (plan.py ``_judge``): its budget less the headroom,
    i.e. the weights, the profile's peak and non-torch memory and one max-length request's KV
    blocks and state; None without a GPU."""
    if plan.usable_bytes is None or plan.headroom_bytes is None:
        return None
    return plan.usable_bytes - plan.headroom_bytes


def _beside_need(plan: MemoryPlan) -> int | None:
    """vLLM's budget and what it keeps outside it (the GPU must hold both); None without one."""
    cap = plan.inference
    if cap is None or cap.budget_bytes is None:
        return None
    return cap.budget_bytes + cap.outside_budget_bytes


def _engine_saving(plan: MemoryPlan, other: MemoryPlan, peak_saving: int) -> int:
    """A serving engine fills its budget either way, so a change saves what the verdict weighs:
    a smaller KV dtype shrinks the one request it must hold, more TP or lighter weights the
    rest (without a GPU, the non-KV bytes); when the budget and what vLLM keeps outside it do not
    fit the GPU, a lower utilization or no CUDA graphs."""
    if plan.beside_budget:
        before, after = _beside_need(plan), _beside_need(other)
        if before is not None and after is not None:
            return before - after
    before, after = _engine_need(plan), _engine_need(other)
    if before is not None and after is not None:
        return before - after
    if plan.inference is not None and other.inference is not None:
        return plan.inference.non_kv_bytes - other.inference.non_kv_bytes
    return peak_saving


def fixes_for(plan: MemoryPlan, gpus: Sequence[GpuSpec] = ()) -> tuple[Fix, ...]:
    """Changes that lower this plan's per-GPU peak, each with its savings and new verdict."""
    r = plan.request
    sources: list[Callable[[PlanRequest], Iterator[Candidate]]] = (
        [_inference, _runtime, _scale_out]
        if r.mode is Mode.INFER
        else [_training, _runtime, _scale_out]
    )
    fixes: list[Fix] = []
    candidates = chain((cand for source in sources for cand in source(r)), _lower_utilization(plan))
    for cand in candidates:
        try:
            other = compute_plan(cand.request)
        except InvalidConfigError:
            continue  # the change is not possible for this model / layout
        saved = plan.peak_bytes - other.peak_bytes
        if r.mode is Mode.INFER and r.serving_engine is not Engine.HF:
            saved = _engine_saving(plan, other, saved)
        if saved <= 0 or saved < MIN_SHARE * plan.peak_bytes:
            continue  # does not apply, or too little to matter
        fixes.append(
            Fix(
                key=cand.key,
                description=cand.description,
                changes=changed_knobs(r, cand.request),
                saved_bytes=int(saved),
                total_bytes=other.peak_bytes,
                fits=other.fits,
                tradeoff=cand.tradeoff,
                verdict=other.verdict,
            )
        )
    bigger = _bigger_gpu(plan, gpus)
    fixes.sort(key=lambda f: (not f.fits, -f.saved_bytes))
    if bigger is not None:
        fixes.append(bigger)
    if not any(f.fits for f in fixes) and (scale := needs_more_gpus(plan)) is not None:
        fixes.append(scale)
    return tuple(fixes)
