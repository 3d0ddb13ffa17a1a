"""Settings that cannot run together: a clear error naming the value and the constraint.

Settings that run but do nothing (ZeRO on one GPU) are warnings, not errors.
"""

from __future__ import annotations

import re

from gpuwarden.errors import SHOWN_CHARS, InvalidConfigError, shown
from gpuwarden.planner.activations import pipeline_microbatches
from gpuwarden.planner.context import context_warning
from gpuwarden.planner.dora import check_variant
from gpuwarden.planner.families import eager_only
from gpuwarden.planner.layout import (
    adapted_names,
    all_linear_names,
    lora_targets,
    zero3_offloads_parameters,
)
from gpuwarden.planner.liger import check_kernels
from gpuwarden.planner.precision import QUANTIZED, megatron_ddp
from gpuwarden.planner.quant_kernel import COMPUTE_DTYPE_BYTES
from gpuwarden.planner.quantization import check_checkpoint
from gpuwarden.planner.sglang import check_engine
from gpuwarden.planner.stacks import TORCHTITAN_FAMILY, profile, torchtitan_date
from gpuwarden.planner.state import state_stack
from gpuwarden.planner.versions import TRANSFORMERS_5, release
from gpuwarden.types.model import Mamba2Shape, ModelSpec, Structure
from gpuwarden.types.plan import (
    ZERO3_MAX_LIVE,
    ZERO3_MAX_REUSE,
    Attention,
    Checkpointing,
    Engine,
    Framework,
    Mode,
    Offload,
    PipelineSchedule,
    PlanRequest,
    Precision,
    QuantKernel,
    TrainLoop,
)

_KV_DTYPES = {
    "auto",
    "bf16",
    "bfloat16",
    "fp16",
    "float16",
    "fp32",
    "float32",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "e4m3",
    "e5m2",
    "int8",
    "int4",
    "nvfp4",
    "fp4",
}


# An error repeats a value cut to errors.SHOWN_CHARS, never the whole of a 5,000-character
# --kv-cache-dtype or of a 4,000-digit --tp (int() reads up to 4,300 digits). No count has more
# digits than that (int64 has 19): a longer run is a value to cut, and the products and
# quotients of one (tp × pp × cp) are as long.
_LONG_NUMBER = re.compile(rf"[0-9]{{{SHOWN_CHARS + 1},}}")


def _bad(message: str, hint: str, reference: str = "invalid-config") -> InvalidConfigError:
    return InvalidConfigError(
        _LONG_NUMBER.sub(lambda m: shown(m[0]), message),
        hint=_LONG_NUMBER.sub(lambda m: shown(m[0]), hint),
        reference=reference,
    )


def _positive(name: str, value: int, minimum: int = 1) -> None:
    if value < minimum:
        raise _bad(
            f"{name} must be at least {minimum}, got {value}",
            f"pass a whole number ≥ {minimum} for {name}",
            reference="value-out-of-range",
        )


def _check_sizes(r: PlanRequest) -> None:
    for name, value in (
        ("num_gpus", r.num_gpus),
        ("gpus_per_node", r.gpus_per_node),
        ("tp", r.tp),
        ("pp", r.pp),
        ("cp", r.cp),
        ("ep", r.ep),
        ("micro_batch", r.micro_batch),
        ("seq_len", r.seq_len),
        ("grad_accum", r.grad_accum),
        ("batch", r.batch),
        ("prompt_tokens", r.prompt_tokens),
        ("kv_block_size", r.kv_block_size),
        ("virtual_stages", r.virtual_stages),
        ("max_num_batched_tokens", r.max_num_batched_tokens),
        ("max_num_seqs", r.max_num_seqs),
    ):
        _positive(name, value)
    # DeepSpeed takes 0 for both: release every parameter after its use, reuse none
    _positive("zero3_max_live", r.zero3_max_live, 0)
    _positive("zero3_max_reuse", r.zero3_max_reuse, 0)
    _positive("new_tokens", r.new_tokens, 0)
    if r.mode in {Mode.LORA, Mode.QLORA}:
        _positive("lora_rank", r.lora_rank)
    if r.max_model_len is not None:
        _positive("max_model_len", r.max_model_len)
    if r.target_len is not None:
        _positive("target_len", r.target_len)
    if r.gpu_memory_utilization is not None and not 0 < r.gpu_memory_utilization <= 1:
        raise _bad(
            f"gpu_memory_utilization must be in (0, 1], got {r.gpu_memory_utilization}",
            "vLLM's budget is a fraction of the GPU's memory, e.g. 0.9",
            reference="value-out-of-range",
        )
    if not 0 <= r.lora_dropout < 1:
        raise _bad(
            f"lora_dropout must be in [0, 1), got {r.lora_dropout}",
            "a dropout probability, e.g. 0.05",
            reference="value-out-of-range",
        )


def _kv_heads(spec: ModelSpec) -> set[int]:
    """The KV head counts TP must split or replicate: the model's and each KV group's (Gemma 4's
    full-attention blocks have fewer than its sliding ones)."""
    return {k for k in (spec.num_kv_heads, *(g.num_kv_heads for g in spec.kv_groups)) if k}


def _splits_state(spec: ModelSpec, tp: int) -> bool:
    state = spec.state
    return state is None or not state.num_heads or state.num_heads % tp == 0


def _mamba2_groups(spec: ModelSpec) -> int | None:
    scan = None if spec.state is None else spec.state.mixer_shape
    return scan.groups if isinstance(scan, Mamba2Shape) else None


def _splits_groups(spec: ModelSpec, tp: int) -> bool:
    """A Mamba-2 mixer's B/C groups split evenly over ``tp`` ranks, or there is one group that
    every rank keeps a copy of (vLLM's and SGLang's MambaMixer2 assert ``n_groups % tp == 0 or
    n_groups == 1``)."""
    groups = _mamba2_groups(spec)
    return groups is None or groups % tp == 0 or groups == 1


def tp_fits_heads(spec: ModelSpec, tp: int) -> bool:
    """Whether ``tp`` ranks can split this model's heads: the attention heads evenly, each KV
    head count evenly or by replication, a hybrid's state heads evenly. ``_check_parallel``
    refuses the rest; the ``--fit`` search offers only these."""
    kv_ok = all(k % tp == 0 or tp % k == 0 for k in _kv_heads(spec))
    state_ok = _splits_state(spec, tp) and _splits_groups(spec, tp)
    return spec.num_heads % tp == 0 and kv_ok and state_ok


def _check_tp_heads(spec: ModelSpec, tp: int) -> None:
    """Refuse what ``tp_fits_heads`` rules out, naming the heads ``tp`` cannot split."""
    if spec.num_heads % tp:
        raise _bad(
            f"tp={tp} does not divide the {spec.num_heads} attention heads of {spec.name}",
            f"pick a tensor-parallel degree that divides {spec.num_heads}",
            reference="tp-heads-mismatch",
        )
    kv = next((k for k in _kv_heads(spec) if k % tp and tp % k), None)
    if kv is not None:
        raise _bad(
            f"tp={tp} neither divides nor is a multiple of the {kv} KV heads of {spec.name}",
            "KV heads are split across TP ranks, or replicated when tp is a multiple of them",
            reference="tp-kv-heads-mismatch",
        )
    if not _splits_state(spec, tp):
        state = spec.state
        assert state is not None  # _splits_state is True without a state
        raise _bad(
            f"tp={tp} does not divide the {state.num_heads} {state.kind} heads of "
            f"{spec.name}'s state blocks",
            f"pick a tensor-parallel degree that divides {state.num_heads}: the state heads are "
            "split evenly, never replicated (vLLM's MambaMixer2 and gated-DeltaNet layers assert "
            "it, as Megatron's mixers do)",
            reference="tp-state-heads-mismatch",
        )
    if not _splits_groups(spec, tp):
        groups = _mamba2_groups(spec)
        raise _bad(
            f"tp={tp} does not divide the {groups} B/C groups of {spec.name}'s Mamba-2 blocks",
            f"pick a tensor-parallel degree that divides {groups}: the groups are split evenly, "
            "or copied to every rank only when there is one (vLLM's and SGLang's MambaMixer2 "
            "assert n_groups % tp == 0 or n_groups == 1)",
            reference="tp-state-groups-mismatch",
        )


def _check_parallel(r: PlanRequest) -> None:
    spec = r.model
    if r.zero_stage not in {0, 1, 2, 3}:
        raise _bad(
            f"zero_stage must be 0, 1, 2 or 3, got {r.zero_stage}",
            "DeepSpeed ZeRO has stages 1-3 (0 = off)",
            reference="value-out-of-range",
        )
    if r.zero_stage and r.fsdp is not None:
        raise _bad(
            f"ZeRO stage {r.zero_stage} and FSDP {r.fsdp.value} are two sharding frameworks",
            "choose --zero or --fsdp, not both",
        )
    model_parallel = r.tp * r.pp * r.cp
    if r.num_gpus % model_parallel:
        raise _bad(
            f"tp × pp × cp = {r.tp} × {r.pp} × {r.cp} = {model_parallel} does not divide "
            f"the {r.num_gpus} GPUs",
            f"--gpus must be a multiple of tp · pp · cp = {model_parallel} (the rest is data "
            "parallel); without --gpus, tp · pp · cp GPUs are planned",
            reference="parallelism-mismatch",
        )
    _check_tp_heads(spec, r.tp)
    if r.pp > spec.num_layers + spec.num_encoder_layers:
        raise _bad(
            f"pp={r.pp} exceeds the {spec.num_layers + spec.num_encoder_layers} layers of "
            f"{spec.name}",
            "each pipeline stage needs at least one layer",
            reference="pp-exceeds-layers",
        )
    if r.ep > 1:
        if spec.moe is None:
            raise _bad(
                f"ep={r.ep} but {spec.name} has no experts",
                "expert parallelism applies to mixture-of-experts models only",
                reference="ep-without-experts",
            )
        if spec.moe.num_experts % r.ep:
            raise _bad(
                f"ep={r.ep} does not divide the {spec.moe.num_experts} experts of {spec.name}",
                f"pick an expert-parallel degree that divides {spec.moe.num_experts}",
                reference="ep-experts-mismatch",
            )
        dp = r.num_gpus // model_parallel
        if (dp * r.cp) % r.ep:
            raise _bad(
                f"ep={r.ep} does not divide the {dp * r.cp} data-parallel ranks",
                "expert-parallel groups are carved out of the data-parallel ranks",
                reference="parallelism-mismatch",
            )
    if r.mode is not Mode.INFER and r.seq_len % r.cp:
        raise _bad(
            f"cp={r.cp} does not divide seq_len={r.seq_len}",
            "context parallelism splits each sequence evenly across ranks",
            reference="parallelism-mismatch",
        )
    _check_context_parallel_attention(r)
    if r.pp > 1 and r.zero_stage >= 2:
        raise _bad(
            f"ZeRO stage {r.zero_stage} with pp={r.pp}",
            "DeepSpeed's pipeline engine supports ZeRO stage 1 only; use --zero 1 or FSDP",
            reference="zero-with-pipeline",
        )
    if r.offload is not Offload.NONE and not r.zero_stage and r.fsdp is None:
        raise _bad(
            f"offload={r.offload.value} needs DeepSpeed ZeRO or FSDP",
            "add --zero 2/3 (ZeRO-Offload) or --fsdp full (CPUOffload)",
        )
    if r.offload is Offload.OPTIMIZER_AND_PARAMS and r.zero_stage and r.zero_stage < 3:
        raise _bad(
            f"offloading parameters needs ZeRO stage 3, got stage {r.zero_stage}",
            "use --zero 3 or offload only the optimizer",
        )
    if r.virtual_stages > 1 and (r.pp == 1 or r.pp_schedule is not PipelineSchedule.INTERLEAVED):
        raise _bad(
            f"virtual_stages={r.virtual_stages} needs the interleaved schedule and pp > 1",
            "set the interleaved pipeline schedule, or leave virtual stages at 1",
        )


def _check_context_parallel_attention(r: PlanRequest) -> None:
    """Context parallelism splits a fused attention kernel across ranks: torch's
    context_parallel swaps scaled_dot_product_attention for ring attention (transformers'
    Trainer refuses any other attn_implementation: "Context parallelism is supported only with
    SDPA attention"), Megatron's asserts Transformer Engine's DotProductAttention. Eager
    attention, a plain matmul-softmax-matmul, has no split: no framework trains it with cp > 1."""
    if r.cp == 1 or r.mode is Mode.INFER:
        return
    if r.attention is Attention.EAGER or eager_only(r.model):
        raise _bad(
            f"cp={r.cp} with eager attention"
            + (f" (the only one {r.model.model_type} has)" if eager_only(r.model) else ""),
            "context parallelism splits SDPA or flash attention (ring attention); use "
            "--attention sdpa or flash, or drop --cp",
            reference="cp-needs-fused-attention",
        )


def _check_pipeline_split(r: PlanRequest) -> None:
    """torchtitan of 2024 splits the local batch into one microbatch per stage and raises when
    the stages do not divide it (``build_pipeline_schedule``)."""
    stages = r.pp * r.virtual_stages
    split_by_stages = profile(r).pp_microbatches_are_stages and r.pp_microbatch_size is None
    if r.pp > 1 and r.mode is not Mode.INFER and split_by_stages and r.micro_batch % stages:
        raise _bad(
            f"local batch {r.micro_batch} does not split into {stages} pipeline microbatches "
            f"(torchtitan-2024: one per stage)",
            "pass a local batch (--micro-batch) that the stage count divides, or "
            "--pp-microbatches N",
            reference="pp-microbatches-uneven",
        )


def _check_torchtitan_version(r: PlanRequest) -> None:
    """A torchtitan_version dates a torchtitan checkout: refused with another framework, and
    unless it is a commit date (``torchtitan_date``)."""
    if r.torchtitan_version is None:
        return
    if r.framework not in TORCHTITAN_FAMILY:
        raise _bad(
            f"--torchtitan-version {shown(r.torchtitan_version)} given with --framework "
            f"{r.framework.value}",
            "it dates a torchtitan checkout: add --framework torchtitan",
            reference="torchtitan-version-without-torchtitan",
        )
    torchtitan_date(r.torchtitan_version)  # InvalidConfigError torchtitan-version-unreadable


def _check_transformers_version(r: PlanRequest) -> None:
    """A transformers_version names the release of a transformers stack: refused unless it is
    a version number, with another framework, or outside the framework's major release (hf is
    5.x, hf-legacy 4.x)."""
    if r.transformers_version is None:
        return
    option = f"--transformers-version {shown(repr(r.transformers_version))}"
    parts = release(r.transformers_version)
    if parts is None:
        raise _bad(
            f"{option} is not a version number",
            "pass it as pip shows it, e.g. 4.38.2 (python -m pip show transformers)",
            reference="transformers-version-unreadable",
        )
    if r.framework not in {Framework.HF, Framework.HF_LEGACY}:
        raise _bad(
            f"{option} given with --framework {r.framework.value}",
            "it names the release of --framework hf (transformers 5) or hf-legacy (4.x)",
            reference="transformers-version-without-transformers",
        )
    legacy = parts < TRANSFORMERS_5
    if legacy != (r.framework is Framework.HF_LEGACY):
        wanted = "hf-legacy" if legacy else "hf"
        raise _bad(
            f"{option} given with --framework {r.framework.value}",
            f"transformers {'4.x' if legacy else '5'} is --framework {wanted}",
            reference="transformers-version-framework",
        )


def _check_mode(r: PlanRequest) -> None:
    if r.target_len is not None and r.model.structure is not Structure.ENCODER_DECODER:
        raise _bad(
            f"target_len applies to encoder-decoder models; {r.model.name} is "
            f"{r.model.structure.value}",
            "a decoder-only model scores its input: set --seq-len only",
            reference="target-len-needs-encoder-decoder",
        )
    spec = r.model
    if r.mode is Mode.QLORA and r.precision not in {Precision.NF4, Precision.INT4}:
        raise _bad(
            f"QLoRA needs a 4-bit base, got precision {r.precision.value}",
            "use --precision nf4 (bitsandbytes, QLoRA) or int4, or --mode lora for a 16-bit base",
            reference="qlora-needs-4bit-base",
        )
    if r.mode is Mode.TRAIN and r.precision in QUANTIZED:
        raise _bad(
            f"full training cannot update {r.precision.value} weights",
            "quantized bases are for --mode qlora / lora (adapters train) or --mode infer",
            reference="quantized-full-training",
        )
    targets = lora_targets(spec, r)
    if (
        r.mode in {Mode.LORA, Mode.QLORA}
        and not adapted_names(spec, r)
        and "lm_head" not in targets
    ):
        names = ", ".join(sorted(all_linear_names(spec)))
        raise _bad(
            f"LoRA targets {shown(', '.join(targets)) or '(none)'} match no Linear of {spec.name}",
            f"its Linears are: {names} (or all-linear)",
            reference="lora-targets-unknown",
        )
    if r.optimizer_in_backward and r.grad_accum > 1:
        raise _bad(
            f"optimizer_in_backward steps during backward, so grad_accum={r.grad_accum} cannot "
            "accumulate",
            "use --grad-accum 1 with --optimizer-in-backward (torchtune's rule)",
        )
    if r.kv_cache_dtype is not None and r.kv_cache_dtype.lower() not in _KV_DTYPES:
        raise _bad(
            f"unknown KV-cache dtype {shown(repr(r.kv_cache_dtype))}",
            f"one of {', '.join(sorted(_KV_DTYPES))}",
            reference="value-out-of-range",
        )
    if r.gpu_memory_utilization is not None and release(r.vllm_version) is None:
        raise _bad(
            f"vllm_version {shown(repr(r.vllm_version))} is not a version number",
            "pass it as pip shows it, e.g. 0.7.3 (python -m pip show vllm)",
            reference="vllm-version-unreadable",
        )
    if r.gpu_memory_utilization is not None and r.mode is not Mode.INFER:
        raise _bad(
            "gpu_memory_utilization is a vLLM serving budget; it needs --mode infer",
            "drop --gpu-memory-utilization, or plan inference with --mode infer",
        )


def _check_quantization(r: PlanRequest) -> list[str]:
    """NF4 knobs: torchao always quantizes its scalers; the knobs do nothing without NF4."""
    if r.quant_kernel is QuantKernel.TORCHAO and not r.double_quant:
        raise _bad(
            "torchao's NF4Tensor always quantizes its scalers: double_quant cannot be off with the "
            "torchao kernel",
            "drop --no-double-quant, or pick the bitsandbytes kernel (--quant-kernel bnb)",
            reference="nf4-double-quant-torchao",
        )
    if r.bnb_compute_dtype is not None and r.bnb_compute_dtype not in COMPUTE_DTYPE_BYTES:
        raise _bad(
            f"bnb_compute_dtype {shown(repr(r.bnb_compute_dtype))} is not a compute dtype "
            "bitsandbytes runs",
            "pass fp32, bf16 or fp16 (BitsAndBytesConfig's bnb_4bit_compute_dtype)",
            reference="bnb-compute-dtype-unknown",
        )
    warnings: list[str] = []
    if r.bnb_compute_dtype is not None and (
        r.precision is not Precision.NF4 or r.quant_kernel is QuantKernel.TORCHAO
    ):
        warnings.append(
            "bnb_compute_dtype applies to bitsandbytes NF4 weights only; it has no effect here"
        )
    if r.precision is not Precision.NF4:
        if r.quant_kernel is not QuantKernel.BNB:
            warnings.append(
                f"quant_kernel {r.quant_kernel.value} applies to NF4 weights only; it has no "
                f"effect with precision {r.precision.value}"
            )
        if not r.double_quant:
            warnings.append(
                f"double_quant applies to NF4 weights only; it has no effect with precision "
                f"{r.precision.value}"
            )
    return warnings


# the hybrid serving knobs by the engine that reads them (planner/state.py): vLLM keeps the state
# dtypes and cache mode, SGLang sizes its MambaPool; HF generate reads none of them
_STATE_KNOBS = {
    Engine.VLLM: ("mamba_cache_dtype", "mamba_ssm_cache_dtype", "mamba_cache_mode"),
    Engine.SGLANG: ("max_mamba_cache_size", "mamba_full_memory_ratio"),
}


def _unused_state_knobs(r: PlanRequest) -> list[str]:
    """A hybrid serving knob the plan does not read: another engine's, or any on a model without
    state blocks (the plan is the same with or without it)."""
    defaults = PlanRequest(model=r.model)
    warnings = []
    for engine, knobs in _STATE_KNOBS.items():
        for knob in knobs:
            if getattr(r, knob) == getattr(defaults, knob):
                continue
            option = "--" + knob.replace("_", "-")
            if r.model.state is None:
                warnings.append(
                    f"{knob} ({option}) has no effect: {r.model.name} has no state blocks "
                    "(only hybrids keep a recurrent state)"
                )
            elif r.mode is not Mode.INFER or r.serving_engine is not engine:
                served = r.serving_engine.value if r.mode is Mode.INFER else r.mode.value
                warnings.append(
                    f"{knob} ({option}) is a {state_stack(engine)} setting; it has no effect "
                    f"with {served}"
                )
    return warnings


def _unread_transformers_version(r: PlanRequest) -> list[str]:
    """A transformers_version the plan does not read: only HF generate's prefill logits depend
    on it (planner/inference.py); training plans the loss's logits the same for every release
    (stacks.py), and vLLM and SGLang run their own forward."""
    if r.transformers_version is None or (r.mode is Mode.INFER and r.serving_engine is Engine.HF):
        return []
    return [
        "--transformers-version is read by HF generate only (--mode infer --engine hf): with "
        f"{_served_by(r)} it has no effect"
    ]


def _served_by(r: PlanRequest) -> str:
    """The option that says who runs the job, for a warning that a knob is not read."""
    return (
        f"--engine {r.serving_engine.value}" if r.mode is Mode.INFER else f"--mode {r.mode.value}"
    )


def _unread_enforce_eager(r: PlanRequest) -> list[str]:
    """--enforce-eager outside vLLM: only vLLM's CUDA graphs are planned (vllm_graphs.py)."""
    if not r.enforce_eager or (r.mode is Mode.INFER and r.serving_engine is Engine.VLLM):
        return []
    return [f"--enforce-eager turns off vLLM's CUDA graphs: with {_served_by(r)} it has no effect"]


def validate(r: PlanRequest) -> tuple[str, ...]:
    """Raise ``InvalidConfigError`` for impossible settings; return warnings for no-ops."""
    _check_sizes(r)
    _check_torchtitan_version(r)
    _check_transformers_version(r)
    _check_parallel(r)
    _check_pipeline_split(r)
    _check_mode(r)
    check_checkpoint(r)
    check_engine(r)
    warnings = _check_quantization(r)
    warnings += _unused_state_knobs(r)
    warnings += _unread_transformers_version(r)
    warnings += _unread_enforce_eager(r)
    warnings += check_kernels(r)
    warnings += check_variant(r)
    dp_ranks = r.num_gpus // (r.tp * r.pp * r.cp) * r.cp
    if r.zero_stage and dp_ranks == 1 and r.offload is Offload.NONE:
        warnings.append(
            f"ZeRO stage {r.zero_stage} with one data-parallel rank is a no-op: nothing to shard"
        )
    tuned = (r.zero3_max_live, r.zero3_max_reuse) != (ZERO3_MAX_LIVE, ZERO3_MAX_REUSE)
    if tuned and r.zero_stage < 3:
        warnings.append(
            "zero3_max_live / zero3_max_reuse are DeepSpeed ZeRO-3 settings; they have no effect "
            "without --zero 3"
        )
    if r.deepspeed_legacy and not zero3_offloads_parameters(r):
        warnings.append(
            "deepspeed_legacy changes how DeepSpeed gathers offloaded ZeRO-3 parameters; it has "
            "no effect without --zero 3 --offload optimizer+params"
        )
    if r.grad_reduce_in_fp32 is not None and not megatron_ddp(r):
        warnings.append(
            "grad_reduce_in_fp32 (--[no-]grad-reduce-in-fp32) sets Megatron's main_grad buffer; "
            "it has no effect without --framework megatron mixed-precision training (bf16-mixed,"
            " fp16-mixed, fp8) and no FSDP / ZeRO-2/3"
        )
    if r.fsdp is not None and dp_ranks == 1:
        warnings.append(f"FSDP {r.fsdp.value} with one data-parallel rank shards nothing")
    if r.sequence_parallel and r.tp == 1:
        warnings.append("sequence parallelism needs tp > 1; it has no effect here")
    if r.checkpoint_wrapper and r.checkpointing is not Checkpointing.FULL:
        warnings.append(
            "--checkpoint-wrapper says how --checkpointing full is applied (torch's "
            "checkpoint_wrapper checkpoints whole blocks); with --checkpointing "
            f"{r.checkpointing.value}, no effect"
        )
    if (
        r.checkpointing is Checkpointing.SELECTIVE
        and r.attention is not Attention.EAGER
        and not eager_only(r.model)
    ):
        warnings.append(
            "selective recomputation only drops the attention s² tensors; flash/SDPA keep none"
        )
    if eager_only(r.model) and r.attention is not Attention.EAGER:
        warnings.append(
            f"{r.model.model_type} has no SDPA/flash path in transformers: planned with eager "
            "attention"
        )
    if r.mode is Mode.INFER and (r.target_len is not None or r.loop is TrainLoop.SCRIPT):
        warnings.append(
            "--target-len and --loop describe a training step; inference is sized by "
            "--prompt-tokens and --new-tokens"
        )
    microbatches = pipeline_microbatches(r)[1]
    if r.pp > 1 and microbatches < r.pp and r.mode is not Mode.INFER:
        warnings.append(
            f"{microbatches} micro-batch(es) for {r.pp} pipeline stages: the bubble idles "
            f"{(r.pp - 1) / (microbatches + r.pp - 1):.0%} of the step"
        )
    if r.mode is Mode.INFER and (r.zero_stage or r.fsdp is not None):
        warnings.append("ZeRO/FSDP settings are ignored for inference")
    if r.gpu_memory_utilization is not None and r.gpu is None:
        warnings.append("vLLM budget needs a GPU: the KV pool is sized for the request itself")
    if (too_long := context_warning(r)) is not None:
        warnings.append(too_long)
    return tuple(warnings)
