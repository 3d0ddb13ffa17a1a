"""`gpuwarden plan MODEL`: per-GPU memory of a job, whether it fits, and what to change."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Collection
from dataclasses import fields
from enum import Enum
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

from gpuwarden.cli.options import (
    add_json_flag,
    ascii_number_text,
    element_count,
    integer,
    naming,
    non_negative_int,
    positive_int,
    real,
)
from gpuwarden.errors import InvalidConfigError, quoted
from gpuwarden.types.plan import (
    DEFAULT_SEQ_LEN,
    DEFAULT_SGLANG_VERSION,
    DEFAULT_VLLM_VERSION,
    ZERO3_MAX_LIVE,
    ZERO3_MAX_REUSE,
    Attention,
    Checkpointing,
    Engine,
    Framework,
    FsdpKind,
    Kernels,
    LoraVariant,
    LossImpl,
    MambaCacheMode,
    Mode,
    ModuleLoading,
    Offload,
    Optimizer,
    OptimizerImpl,
    PeakStep,
    PipelineSchedule,
    PlanRequest,
    Precision,
    QuantKernel,
    SaveMode,
    TrainLoop,
)

if TYPE_CHECKING:
    from gpuwarden.planner.stacks import StackDefaults
    from gpuwarden.types.model import ModelSpec

_MODE_PRECISION = {Mode.QLORA: Precision.NF4, Mode.INFER: Precision.BF16}


def _values(enum: type[Enum]) -> list[str]:
    return [str(member.value) for member in enum]


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        type=naming("model", "give a catalog name, a path to a config.json or a hub id"),
        metavar="MODEL",
        help="catalog name or path to a config.json",
    )
    job = parser.add_argument_group("job")
    job.add_argument("--mode", choices=_values(Mode), default="train")
    job.add_argument(
        "--gpu",
        action="append",
        metavar="NAME",
        help="GPU from the catalog (repeat with --fit to choose candidates)",
    )
    job.add_argument(
        "--gpus", type=positive_int, metavar="N", help="world size (default: tp × pp × cp)"
    )
    job.add_argument("--gpus-per-node", type=positive_int, default=8, metavar="N")
    job.add_argument("--precision", choices=_values(Precision))
    job.add_argument("--optimizer", choices=_values(Optimizer))
    job.add_argument("--optimizer-impl", choices=_values(OptimizerImpl), default="fused")
    job.add_argument(
        "--optimizer-in-backward",
        action="store_true",
        help="step each parameter as its gradient is ready (torchtune optimizer_in_bwd)",
    )
    sharding = job.add_mutually_exclusive_group()
    sharding.add_argument(
        "--zero", type=integer, default=0, metavar="0-3", help="DeepSpeed ZeRO stage"
    )
    sharding.add_argument("--fsdp", choices=_values(FsdpKind))
    job.add_argument("--offload", choices=_values(Offload), default="none")
    job.add_argument(
        "--zero3-max-live",
        type=element_count,
        default=ZERO3_MAX_LIVE,
        metavar="N",
        help="DeepSpeed stage3_max_live_parameters: ZeRO-3 keeps up to N elements gathered "
        "(default 1e9, DeepSpeed's)",
    )
    job.add_argument(
        "--zero3-max-reuse",
        type=element_count,
        default=ZERO3_MAX_REUSE,
        metavar="N",
        help="DeepSpeed stage3_max_reuse_distance: a parameter used again within N elements "
        "stays gathered (default 1e9, DeepSpeed's)",
    )
    job.add_argument(
        "--fsdp-shard-embeddings",
        action="store_true",
        help="FSDP: embedding and LM head are units of their own (torchtune custom_sharded_layers)",
    )
    par = parser.add_argument_group("parallelism")
    par.add_argument("--tp", type=positive_int, default=1, metavar="N")
    par.add_argument("--pp", type=positive_int, default=1, metavar="N")
    par.add_argument("--pp-schedule", choices=_values(PipelineSchedule), default="1f1b")
    par.add_argument("--virtual-stages", type=positive_int, default=1, metavar="V")
    par.add_argument("--cp", type=positive_int, default=1, metavar="N", help="context parallel")
    par.add_argument("--ep", type=positive_int, default=1, metavar="N", help="expert parallel")
    par.add_argument("--sequence-parallel", action="store_true", help="Megatron SP with --tp")
    train = parser.add_argument_group("training")
    train.add_argument("--micro-batch", type=positive_int, default=1, metavar="N")
    train.add_argument(
        "--seq-len",
        type=positive_int,
        metavar="N",
        help=f"tokens per sequence (default {DEFAULT_SEQ_LEN}, or the model's context when "
        "shorter)",
    )
    train.add_argument(
        "--target-len",
        type=positive_int,
        metavar="N",
        help="encoder-decoder models (T5): decoder (label) tokens per sequence "
        "(default: --seq-len)",
    )
    train.add_argument("--grad-accum", type=positive_int, default=1, metavar="N")
    train.add_argument(
        "--checkpointing",
        choices=_values(Checkpointing),
        help="activation checkpointing: none, selective, full, op (torchtitan's op-level SAC); "
        "default none, or the --framework's (litgpt on several GPUs: full; torchtitan: op)",
    )
    train.add_argument("--activation-offload", action="store_true")
    train.add_argument(
        "--keep-grads",
        action="store_true",
        help="optimizer.zero_grad(set_to_none=False) (torch < 2.0's default, accelerate < "
        "0.28's): gradients stay allocated between steps",
    )
    train.add_argument(
        "--use-cache",
        action="store_true",
        help="transformers' config default use_cache=True: every training forward without "
        "gradient checkpointing builds a KV cache (default: planned as use_cache=False)",
    )
    train.add_argument(
        "--checkpoint-wrapper",
        action="store_true",
        help="--checkpointing applied by torch's apply_activation_checkpointing (checkpoint_wrapper"
        " on each block: llama-recipes, accelerate's fsdp_activation_checkpointing), not "
        "transformers' gradient_checkpointing_enable: use_cache stays on",
    )
    train.add_argument(
        "--loop",
        choices=_values(TrainLoop),
        default="trainer",
        help="script: a hand-written `outputs = model(**batch)` loop keeps the previous step's "
        "logits (and KV cache) through the next forward",
    )
    train.add_argument(
        "--peak-step",
        choices=_values(PeakStep),
        default="steady",
        help="first: the peak is the first step (a script that puts its longest sample in the "
        "first batch only, e.g. lit-gpt 2023 finetune/*.py), so no previous step's outputs are "
        "held at it (default: steady, every step alike)",
    )
    train.add_argument(
        "--deepspeed-version",
        metavar="X.Y.Z",
        help="your DeepSpeed version: before 0.9 ZeRO-3 all-gathers offloaded parameters even on "
        "one GPU, two copies of a tensor while it is gathered (default: a current release)",
    )
    train.add_argument("--attention", choices=_values(Attention), default="flash")
    train.add_argument(
        "--loss",
        choices=_values(LossImpl),
        help="full (HF: fp32 logits), chunked (torchtune), fused (Liger's fused linear "
        "cross-entropy) (default: fused with --kernels liger, else full)",
    )
    train.add_argument(
        "--kernels",
        choices=_values(Kernels),
        default="none",
        help="liger: a transformers model patched by Liger-Kernel (use_liger_kernel, "
        "apply_liger_kernel_to_*, AutoLigerKernelForCausalLM): its RMSNorm, SwiGLU / GeGLU and "
        "RoPE kernels keep less for backward (default: none, the model's own modules)",
    )
    train.add_argument("--compile", action="store_true", help="torch.compile fusions")
    train.add_argument(
        "--framework",
        choices=_values(Framework),
        default="hf",
        help="whose code runs the job (planner/stacks.py): hf (transformers 5, default), "
        "hf-legacy (transformers 4.x: fp32 loads, SDPA repeats GQA K/V, untied mT5 heads), "
        "torchtune (expands GQA K/V before SDPA), litgpt (bf16-true, fused QKV, Block-wrapped "
        "FSDP, quantize-on-load, bitsandbytes 0.42.0), torchtitan (2025: FSDP2, op-level SAC, "
        "float8, DCP, compiled loss), torchtitan-2024 (Dec 2024: loss not compiled, PP "
        "microbatches = stages), unsloth (Unsloth 2024-2025 on transformers 4.x: its "
        "cross-entropy keeps the 16-bit logits and writes their gradient in place)",
    )
    train.add_argument("--lora-rank", type=positive_int, default=8, metavar="R")
    train.add_argument(
        "--lora-targets",
        default=None,
        metavar="A,B",
        help="comma-separated Linear names, 'all-linear', 'lm_head' (default: PEFT's default for "
        "the model type, q_proj,v_proj where PEFT has none)",
    )
    train.add_argument("--lora-dropout", type=real, default=0.0)
    train.add_argument(
        "--lora-variant",
        choices=_values(LoraVariant),
        default="lora",
        help="dora: PEFT's DoRA (LoraConfig(use_dora=True)), a trainable magnitude per output "
        "feature; each adapted Linear keeps its base and adapter outputs for its gradient "
        "(default: lora, plain LoRA)",
    )
    train.add_argument(
        "--torchtitan-version",
        metavar="YYYY-MM[-DD]",
        help="your torchtitan checkout's commit date (git log -1 --format=%%cs): whether it "
        "compiles the loss, wraps the embedding and head in the FSDP root, splits PP batches "
        "by stage changed between commits (default: --framework torchtitan 2025-06, "
        "torchtitan-2024 2024-12)",
    )
    train.add_argument(
        "--peft-version",
        metavar="X.Y.Z",
        help="your PEFT version: before 0.12 LoRA adapters keep the base model's dtype (bf16 on a "
        "bf16 model), from 0.12 they are upcast to fp32 (default: a current release)",
    )
    train.add_argument(
        "--grad-reduce-in-fp32",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="--framework megatron: its main_grad buffer in fp32 (--accumulate-allreduce-grads-"
        "in-fp32 / grad_reduce_in_fp32; default: Megatron's, on under bf16, off under fp16)",
    )
    train.add_argument("--expandable-segments", action="store_true")
    train.add_argument(
        "--mixer-kernels",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="hybrids (DeltaNet, Mamba): fla / causal-conv1d / mamba-ssm kernels installed "
        "(--no-mixer-kernels: transformers' torch fallbacks; default: unless --attention eager)",
    )
    quant = parser.add_argument_group("4-bit (NF4) weights")
    kernel = quant.add_mutually_exclusive_group()
    kernel.add_argument(
        "--bnb-version",
        metavar="X.Y.Z",
        help="your bitsandbytes version: before 0.43.2 its 4-bit Linears keep their input for "
        "backward (default: a current release)",
    )
    kernel.add_argument(
        "--quant-kernel",
        choices=_values(QuantKernel),
        help="library of the NF4 Linears: bnb (bitsandbytes >= 0.43.2, default), bnb-legacy "
        "(< 0.43.2), torchao (torchtune)",
    )
    quant.add_argument(
        "--double-quant",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="NF4 absmax quantized to 8 bit (QLoRA's recipe, default; HF BitsAndBytesConfig's "
        "default is off: bnb_4bit_use_double_quant=False)",
    )
    quant.add_argument(
        "--bnb-compute-dtype",
        choices=["fp32", "bf16", "fp16"],
        help="dtype the bitsandbytes 4-bit Linears compute in (default: the job's 16-bit dtype, "
        "the QLoRA recipe's bnb_4bit_compute_dtype); fp32 is transformers' BitsAndBytesConfig "
        "default, which runs as fp32 under an fp16 model (torch_dtype unset or float16) and, from "
        "bitsandbytes 0.47, under any",
    )
    infer = parser.add_argument_group("inference")
    infer.add_argument("--batch", type=positive_int, default=1, metavar="N")
    infer.add_argument("--prompt-tokens", type=positive_int, default=512, metavar="N")
    infer.add_argument("--new-tokens", type=non_negative_int, default=512, metavar="N")
    infer.add_argument("--kv-cache-dtype", metavar="DTYPE", help="e.g. fp8 (default: compute)")
    infer.add_argument("--kv-block-size", type=positive_int, default=16, metavar="N")
    infer.add_argument(
        "--engine",
        choices=_values(Engine),
        help="who serves it: hf (generate, a static batch), vllm, sglang (default: vllm with "
        "--gpu-memory-utilization, sglang with --mem-fraction-static, else hf)",
    )
    budget = infer.add_mutually_exclusive_group()
    budget.add_argument(
        "--gpu-memory-utilization", type=real, metavar="F", help="vLLM budget, e.g. 0.9"
    )
    budget.add_argument(
        "--mem-fraction-static",
        type=real,
        metavar="F",
        help="SGLang: share of the free memory for weights + KV pool, e.g. 0.85 (default with "
        "--engine sglang: SGLang's own, from the GPU's memory, --tp and --sglang-version)",
    )
    infer.add_argument(
        "--sglang-version",
        metavar="X.Y.Z",
        help="your SGLang release: its default --mem-fraction-static changed in 0.5.3 "
        f"(default: the newest modelled, {DEFAULT_SGLANG_VERSION})",
    )
    infer.add_argument(
        "--page-size", type=positive_int, default=1, metavar="N", help="SGLang --page-size (tokens)"
    )
    infer.add_argument("--max-model-len", type=positive_int, metavar="N")
    infer.add_argument("--max-num-batched-tokens", type=positive_int, default=8192, metavar="N")
    infer.add_argument("--max-num-seqs", type=positive_int, default=256, metavar="N")
    infer.add_argument(
        "--vllm-version",
        metavar="X.Y.Z",
        help="your vLLM release: its profile run's sampler and what it counts as non-torch "
        f"memory changed between releases (default: the newest modelled, {DEFAULT_VLLM_VERSION})",
    )
    infer.add_argument(
        "--transformers-version",
        metavar="X.Y.Z",
        help="your transformers release (HF generate): before 4.45 the prefill computes every "
        "prompt position's logits, and Llama-style models copy them to fp32 (default: the "
        "--framework's newest, hf 5.x, hf-legacy 4.57)",
    )
    _add_state_knobs(infer)
    infer.add_argument(
        "--language-model-only",
        action="store_true",
        help="vLLM --language-model-only: a multimodal checkpoint (Llama 4, Qwen3.5) served text "
        "only, its vision tower not loaded (default: loaded; SGLang always loads it)",
    )
    infer.add_argument(
        "--enforce-eager",
        action="store_true",
        help="vLLM --enforce-eager: no CUDA graphs (default: the graphs the --vllm-version "
        "captures for --max-num-seqs, on top of the budget before 0.21, inside it from 0.21)",
    )
    infer.add_argument(
        "--dequantize",
        action="store_true",
        help="a checkpoint stored quantized (its config's quantization_config: AWQ, GPTQ, FP8, "
        "compressed-tensors, bitsandbytes, gpt-oss's MXFP4 experts) loaded dequantized to the "
        "precision; default: planned as stored, unless --precision is given",
    )
    life = parser.add_argument_group("lifecycle (load, evaluation, checkpoint save)")
    life.add_argument(
        "--load-dtype",
        choices=["fp32", "bf16", "fp16"],
        help="dtype the loader materialises the weights in (default: the stack's; "
        "transformers < 5 without torch_dtype: fp32)",
    )
    life.add_argument(
        "--save",
        choices=_values(SaveMode),
        help="checkpoint format: full (consolidated, offloaded per unit), full-gpu (FSDP "
        "FULL_STATE_DICT without offload_to_cpu), sharded (SHARDED_STATE_DICT / DCP), none "
        "(default: the stack's)",
    )
    life.add_argument(
        "--eval-batch",
        type=non_negative_int,
        metavar="N",
        help="evaluation batch during training (0: none; default: the stack's, LitGPT "
        "validates at the micro-batch and generates a sample)",
    )
    par.add_argument(
        "--float8-all-gather",
        action="store_true",
        help="torchtitan: FSDP all-gathers Float8Linear weights in fp8",
    )
    par.add_argument(
        "--float8-recompute-weight",
        action="store_true",
        help="torchtitan float8.force_recompute_fp8_weight_in_bwd: recompute the fp8 weight in "
        "backward instead of saving it",
    )
    par.add_argument(
        "--float8-precompute-scales",
        action="store_true",
        help="torchtitan float8.precompute_float8_dynamic_scale_for_fsdp (scales only)",
    )
    microbatch = par.add_mutually_exclusive_group()
    microbatch.add_argument(
        "--pp-microbatch-size",
        type=positive_int,
        metavar="N",
        help="pipeline: --micro-batch is the local batch, split into microbatches of N "
        "(torchtitan pipeline_parallel_microbatch_size; default 1 with --framework torchtitan)",
    )
    microbatch.add_argument(
        "--pp-microbatches",
        type=positive_int,
        metavar="N",
        help="pipeline: --micro-batch is the local batch, split into N microbatches "
        "(torchtitan-2024 pipeline_parallel_microbatches; default: the number of stages)",
    )
    runtime = parser.add_argument_group("CUDA runtime").add_mutually_exclusive_group()
    runtime.add_argument(
        "--cuda-version",
        metavar="X.Y",
        help="the CUDA your PyTorch was built with (python -c 'import torch; "
        "print(torch.version.cuda)'): before 11.7 every kernel is loaded into the CUDA context, "
        "several hundred MiB more (default: a current build, lazy loading)",
    )
    runtime.add_argument(
        "--module-loading",
        choices=_values(ModuleLoading),
        help="CUDA_MODULE_LOADING as the job runs it: eager on a driver older than R515 or with "
        "CUDA_MODULE_LOADING=EAGER (default: lazy, or the --cuda-version's)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--exact", action="store_true", help="also trace the real model (needs torch)")
    out.add_argument("--fit", action="store_true", help="search GPUs and settings that fit")
    out.add_argument(
        "--max-gpus", type=positive_int, default=64, metavar="N", help="--fit: largest count"
    )
    out.add_argument("--top", type=positive_int, default=10, metavar="N", help="--fit: rows shown")
    add_json_flag(parser)


def _release(value: str, flag: str, package: str, example: str) -> tuple[int, int, int]:
    """A ``--<package>-version`` value as (major, minor, patch), or exit 2 naming it."""
    from gpuwarden.errors import InvalidConfigError
    from gpuwarden.planner.versions import release

    parts = release(value)
    if parts is None:
        raise InvalidConfigError(
            f"--{flag} {quoted(value)} is not a version number",
            hint=f"pass it as pip shows it, e.g. {example} (python -m pip show {package})",
            reference=f"{flag}-unreadable",
        )
    return parts


def _quant_kernel(args: argparse.Namespace, stack: StackDefaults) -> QuantKernel:
    """--quant-kernel, else the kernel of --bnb-version, else the stack's own library (torchtune:
    torchao), else the kernel of the bitsandbytes release the stack pins."""
    if args.quant_kernel:
        return QuantKernel(args.quant_kernel)
    if args.bnb_version is None and stack.quant_kernel is not None:
        return stack.quant_kernel
    version = args.bnb_version or stack.bnb_version
    if version is None:
        return QuantKernel.BNB
    from gpuwarden.planner.quant_kernel import kernel_for_bnb_release

    return kernel_for_bnb_release(_release(version, "bnb-version", "bitsandbytes", "0.43.1"))


def _peft_version(args: argparse.Namespace) -> tuple[int, int, int] | None:
    """--peft-version as (major, minor, patch); None when not given."""
    if args.peft_version is None:
        return None
    return _release(args.peft_version, "peft-version", "peft", "0.10.0")


def _pp_microbatch_size(args: argparse.Namespace, default: int | None) -> int | None:
    """Sequences per pipeline microbatch: --pp-microbatch-size, or the local batch over
    --pp-microbatches (torchtitan refuses a batch the count does not divide), or the stack's."""
    from gpuwarden.errors import InvalidConfigError

    if args.pp_microbatches is not None:
        count = int(args.pp_microbatches)
        local = int(args.micro_batch)
        if local % count:
            raise InvalidConfigError(
                f"--pp-microbatches {count} does not divide --micro-batch {local}",
                hint="torchtitan splits the local batch evenly: pick a count that divides it",
                reference="pp-microbatches-uneven",
            )
        return max(1, local // count)
    size: int | None = args.pp_microbatch_size
    return size or default


def _deepspeed_legacy(args: argparse.Namespace) -> bool:
    if args.deepspeed_version is None:
        return False
    from gpuwarden.planner.versions import DEEPSPEED_ONE_RANK_PATH

    parts = _release(args.deepspeed_version, "deepspeed-version", "deepspeed", "0.8.3")
    return parts < DEEPSPEED_ONE_RANK_PATH


def _module_loading(args: argparse.Namespace) -> ModuleLoading:
    """--module-loading, else the loading of the --cuda-version's runtime, else lazy."""
    if args.module_loading:
        return ModuleLoading(args.module_loading)
    if args.cuda_version is None:
        return ModuleLoading.LAZY
    from gpuwarden.errors import InvalidConfigError
    from gpuwarden.planner.overheads import module_loading_for_cuda
    from gpuwarden.planner.versions import release

    parts = release(args.cuda_version)
    if parts is None:
        raise InvalidConfigError(
            f"--cuda-version {quoted(args.cuda_version)} is not a version number",
            hint="pass the CUDA PyTorch was built with, e.g. 11.2 "
            "(python -c 'import torch; print(torch.version.cuda)')",
            reference="cuda-version-unreadable",
        )
    return module_loading_for_cuda(parts)


def _mamba_dtype(option: str) -> Callable[[str], str]:
    """argparse type of a vLLM Mamba cache dtype (planner/state.py says which)."""

    def parse(text: str) -> str:
        from gpuwarden.planner.state import mamba_dtype

        return mamba_dtype(option, text)

    return parse


def _mamba_cache_mode(text: str) -> MambaCacheMode:
    from gpuwarden.planner.state import mamba_cache_mode

    return mamba_cache_mode(text)


def _out_of_range(option: str, text: str, must: str, hint: str) -> InvalidConfigError:
    return InvalidConfigError(
        f"{option} {quoted(text)} must be {must}", hint=hint, reference="value-out-of-range"
    )


def _state_slots(text: str) -> int:
    ascii_number_text(text, "an integer")  # that refusal says the rule
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise _out_of_range(
            "--max-mamba-cache-size",
            text,
            "a whole number of state slots, at least 1",
            "SGLang holds 3 slots per running request; leave it out to size them by "
            "--mamba-full-memory-ratio",
        ) from None


def _memory_ratio(text: str) -> float:
    try:
        value = float(ascii_number_text(text))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise _out_of_range(
            "--mamba-full-memory-ratio",
            text,
            "a positive number",
            "the state memory over the KV memory, e.g. 0.9 (SGLang's default)",
        )
    return value


def _add_state_knobs(infer: argparse._ArgumentGroup) -> None:
    """Hybrids' state blocks (planner/state.py): vLLM's and SGLang's options of the same names."""
    infer.add_argument(
        "--mamba-cache-dtype",
        type=_mamba_dtype("--mamba-cache-dtype"),
        metavar="DTYPE",
        help="vLLM: the conv states' dtype, auto|float32|float16|bfloat16 (default auto: the "
        "model's)",
    )
    infer.add_argument(
        "--mamba-ssm-cache-dtype",
        type=_mamba_dtype("--mamba-ssm-cache-dtype"),
        metavar="DTYPE",
        help="vLLM: the SSM states' dtype (default auto: the config's mamba_ssm_dtype, "
        "Nemotron-H's float32, else the conv dtype)",
    )
    infer.add_argument(
        "--mamba-cache-mode",
        type=_mamba_cache_mode,
        metavar="MODE",
        help="vLLM: none (1 state block per request) or align (2, prefix caching; the default "
        "from vLLM 0.17)",
    )
    infer.add_argument(
        "--max-mamba-cache-size",
        type=_state_slots,
        metavar="N",
        help="SGLang: state slots, 3 per running request (default: by the memory ratio)",
    )
    infer.add_argument(
        "--mamba-full-memory-ratio",
        type=_memory_ratio,
        default=0.9,
        metavar="R",
        help="SGLang: state memory / KV memory of what the weights leave (default 0.9)",
    )


def _as_knob(hint: object, value: object) -> object:
    """An option's value as the ``PlanRequest`` field typed ``hint`` takes it: enum options
    arrive as their strings."""
    if value is None:
        return None
    for kind in get_args(hint) or (hint,):
        if isinstance(kind, type) and issubclass(kind, Enum):
            return kind(value)
    return value


def _same_named_knobs(args: argparse.Namespace, skip: Collection[str]) -> dict[str, Any]:
    """Every ``PlanRequest`` knob an option of the same name sets as it is (a new knob with a
    same-named option needs no edit here)."""
    hints = get_type_hints(PlanRequest)
    return {
        field.name: _as_knob(hints[field.name], getattr(args, field.name))
        for field in fields(PlanRequest)
        if field.name not in skip and hasattr(args, field.name)
    }


def _loss(args: argparse.Namespace, model: ModelSpec) -> LossImpl:
    """--loss, else the loss the kernels bring (planner.liger.default_loss)."""
    from gpuwarden.planner.liger import default_loss

    return LossImpl(args.loss) if args.loss else default_loss(Kernels(args.kernels), model)


def _lora_targets(text: str | None) -> tuple[str, ...] | None:
    """--lora-targets as names; None when absent (the planner takes PEFT's default)."""
    if text is None:
        return None
    return tuple(t.strip() for t in text.split(",") if t.strip())


def build_request(args: argparse.Namespace) -> PlanRequest:
    from gpuwarden.catalog import resolve_gpu, resolve_model
    from gpuwarden.planner.context import default_seq_len
    from gpuwarden.planner.stacks import stack_defaults

    mode = Mode(args.mode)
    # `--tp 2` alone means two GPUs, as vLLM's --tensor-parallel-size and torchrun's ranks do
    num_gpus = args.gpus if args.gpus is not None else args.tp * args.pp * args.cp
    # a torchtitan_version with another framework, or no date: planner/validate.py refuses it
    stack = stack_defaults(Framework(args.framework), mode, num_gpus, args.torchtitan_version)
    if args.optimizer:
        optimizer = Optimizer(args.optimizer)
    else:
        optimizer = Optimizer.NONE if mode is Mode.INFER else Optimizer.ADAMW
    fsdp = FsdpKind(args.fsdp) if args.fsdp else None
    # Knobs read from another option, from several, or from the stack's defaults when unset.
    model = resolve_model(args.model)
    derived: dict[str, Any] = {
        "model": model,
        "seq_len": args.seq_len if args.seq_len is not None else default_seq_len(model),
        "gpu": resolve_gpu(args.gpu[0]) if args.gpu and not args.fit else None,
        "num_gpus": num_gpus,
        "zero_stage": args.zero,
        "precision": Precision(args.precision)
        if args.precision
        else stack.precision or _MODE_PRECISION.get(mode, Precision.BF16_MIXED),
        "optimizer": optimizer,
        "checkpointing": Checkpointing(args.checkpointing)
        if args.checkpointing
        else stack.checkpointing or Checkpointing.NONE,
        "fsdp": fsdp if fsdp or args.zero else stack.fsdp,
        "lora_targets": _lora_targets(args.lora_targets),
        "loss": _loss(args, model),
        "quant_kernel": _quant_kernel(args, stack),
        "deepspeed_legacy": _deepspeed_legacy(args),
        "peft_version": _peft_version(args),
        "pp_microbatch_size": _pp_microbatch_size(args, stack.pp_microbatch_size),
        "vllm_version": args.vllm_version or DEFAULT_VLLM_VERSION,
        "sglang_version": args.sglang_version or DEFAULT_SGLANG_VERSION,
        "module_loading": _module_loading(args),
        # an explicit precision is the one the weights are planned in
        "dequantize": bool(args.dequantize or args.precision),
    }
    return PlanRequest(**_same_named_knobs(args, skip=derived), **derived)


def run(args: argparse.Namespace) -> int:
    from gpuwarden.catalog import gpu_catalog, instance_catalog, resolve_gpu

    request = build_request(args)
    if args.fit:
        from gpuwarden.planner import fit
        from gpuwarden.report import fit as fit_report

        candidates = [resolve_gpu(name) for name in args.gpu] if args.gpu else gpu_catalog()
        result = fit(request, candidates, instance_catalog(), max_gpus=args.max_gpus, top=args.top)
        if args.json:
            fit_report.print_fit_json(result)
        else:
            fit_report.print_fit(result)
        return 0

    from gpuwarden.planner import plan_memory
    from gpuwarden.report import plan as report

    plan = plan_memory(request, gpus=gpu_catalog() if request.gpu is not None else ())
    exact = None
    if args.exact:
        from gpuwarden.planner.exact import run_exact

        exact = run_exact(request, progress=None if args.json else report.progress)
    if args.json:
        report.print_plan_json(plan, exact)
    else:
        report.print_plan(plan, exact)
    return 0
