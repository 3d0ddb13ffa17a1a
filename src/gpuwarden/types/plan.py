"""What a memory plan asks (``PlanRequest``) and what it answers (``MemoryPlan``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.model import ModelSpec


class Mode(StrEnum):
    TRAIN = "train"
    LORA = "lora"
    QLORA = "qlora"
    INFER = "infer"


class Precision(StrEnum):
    FP32 = "fp32"
    TF32 = "tf32"  # fp32 storage, TF32 tensor-core math
    BF16 = "bf16"  # pure: params, grads and optimizer states in bf16
    FP16 = "fp16"
    BF16_MIXED = (
        "bf16-mixed"  # fp32 master weights + fp32 optimizer states (AMP / DeepSpeed / Megatron)
    )
    FP16_MIXED = "fp16-mixed"
    FP8 = "fp8"  # fp8 linears (Transformer Engine) with bf16 master copy
    INT8 = "int8"  # weight-only (LLM.int8 / per-channel)
    INT4 = "int4"  # GPTQ / AWQ, group 128
    NF4 = "nf4"  # bitsandbytes NF4 with double quantization (QLoRA)


class Optimizer(StrEnum):
    ADAMW = "adamw"
    ADAMW_8BIT = "adamw-8bit"
    PAGED_ADAMW_8BIT = "paged-adamw-8bit"
    SGD = "sgd"
    SGD_MOMENTUM = "sgd-momentum"
    ADAFACTOR = "adafactor"
    NONE = "none"


class FsdpKind(StrEnum):
    FULL = "full"  # FULL_SHARD / FSDP2 fully_shard ≈ ZeRO-3
    HYBRID = "hybrid"  # HYBRID_SHARD: ZeRO-3 inside a node, replicated across nodes
    GRAD_OP = "grad-op"  # SHARD_GRAD_OP ≈ ZeRO-2


class Checkpointing(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class Attention(StrEnum):
    FLASH = "flash"
    SDPA = "sdpa"
    EAGER = "eager"


class Offload(StrEnum):
    NONE = "none"
    OPTIMIZER = "optimizer"  # ZeRO-Offload / FSDP CPUOffload of optimizer states (+ fp32 grads)
    OPTIMIZER_AND_PARAMS = "optimizer+params"  # ZeRO-Infinity style: params too


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """Every knob of a job. Defaults are what a user gets when they pass nothing."""

    model: ModelSpec
    mode: Mode = Mode.TRAIN
    gpu: GpuSpec | None = None
    num_gpus: int = 1  # world size
    gpus_per_node: int = 8
    precision: Precision = Precision.BF16_MIXED
    optimizer: Optimizer = Optimizer.ADAMW
    zero_stage: int = 0
    fsdp: FsdpKind | None = None
    offload: Offload = Offload.NONE
    tp: int = 1
    pp: int = 1
    cp: int = 1  # context / sequence parallel across ranks
    ep: int = 1
    sequence_parallel: bool = False  # Megatron SP (shards LayerNorm/dropout activations over TP)
    micro_batch: int = 1
    seq_len: int = 2048
    grad_accum: int = 1
    checkpointing: Checkpointing = Checkpointing.NONE
    attention: Attention = Attention.FLASH
    lora_rank: int = 8
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    # inference
    batch: int = 1
    prompt_tokens: int = 512
    new_tokens: int = 512
    kv_cache_dtype: str | None = None  # None: the compute dtype; "fp8" halves bf16
    kv_block_size: int = 16  # paged-attention block (vLLM default)
    gpu_memory_utilization: float | None = None  # vLLM-style budget; None = static batch


@dataclass(frozen=True, slots=True)
class MemoryComponent:
    """One named term of the per-GPU memory, with where its formula comes from."""

    key: str  # "parameters", "gradients", "optimizer_states", "activations", ...
    bytes: int
    source: str  # formula reference, e.g. "Korthikanti et al. 2022 Table 2" or "traced"
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PredictedReadings:
    """What each measuring tool would show at the peak of the job on one GPU."""

    max_allocated_bytes: int  # torch.cuda.max_memory_allocated()
    max_reserved_bytes: int  # torch.cuda.max_memory_reserved()
    nvidia_smi_used_bytes: int  # nvidia-smi / NVML "used": + CUDA context, NCCL, cuBLAS handles


@dataclass(frozen=True, slots=True)
class Fix:
    """One change from the OOM playbook, with what it saves and whether the job then fits."""

    key: str  # stable id, e.g. "enable-checkpointing"
    description: str
    changes: dict[str, str]  # knob → new value, e.g. {"checkpointing": "full"}
    saved_bytes: int
    total_bytes: int  # per-GPU peak after the change
    fits: bool | None
    tradeoff: str = ""


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    request: PlanRequest
    components: tuple[MemoryComponent, ...]
    peak_bytes: int  # per-GPU peak (max over phases, plus overheads)
    peak_phase: str  # "forward", "backward", "optimizer-step", "decode", ...
    predicted: PredictedReadings
    usable_bytes: int | None  # GPU memory a job can use (None without a GPU)
    fits: bool | None
    warnings: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()
    host_bytes: int = 0  # CPU RAM needed per node for offloaded states
    trainable_parameters: int = 0
    notes: dict[str, str] = field(default_factory=dict)

    def component(self, key: str) -> int:
        return sum(c.bytes for c in self.components if c.key == key)


@dataclass(frozen=True, slots=True)
class ExactReport:
    """Bytes counted by running the real model under torch's FakeTensorMode (``plan --exact``).

    ``components`` uses the same keys as ``MemoryPlan.components`` where they mean the same thing
    (parameters, gradients, optimizer_states, activations, temporaries, kv_cache) so the two can be
    compared term by term.
    """

    components: dict[str, int]
    peak_bytes: int  # peak of tensors alive over the simulated step (≈ max_memory_allocated)
    peak_phase: str
    saved_activation_bytes: int  # unique storages saved for backward (0 for inference)
    method: str  # e.g. "FakeTensorMode + saved_tensors_hooks" / "MemTracker"
    versions: dict[str, str]  # torch, transformers
    elapsed_seconds: float
    notes: tuple[str, ...] = ()
