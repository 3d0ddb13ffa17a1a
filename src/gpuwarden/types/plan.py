"""What a memory plan asks (``PlanRequest``) and what it answers (``MemoryPlan``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.model import ModelSpec

# tokens per training sequence when none is asked for (the CLI caps it at the model's context)
DEFAULT_SEQ_LEN = 2048


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
    NF4 = "nf4"  # NF4 4-bit, block 64 (QLoRA); double quantization per PlanRequest.double_quant


class Optimizer(StrEnum):
    ADAMW = "adamw"
    ADAMW_8BIT = "adamw-8bit"
    PAGED_ADAMW_8BIT = "paged-adamw-8bit"
    # torchao.optim AdamW4bit / AdamWFp8 / AdamW8bit (planner/optimizer.py TORCHAO_STATES):
    # blockwise quantized states, tensors torchao leaves unquantized keep states in the
    # parameter's dtype, and a compiled per-parameter step with fp32 copies (not bitsandbytes'
    # fused 8-bit kernel: adamw-8bit)
    ADAMW_4BIT = "adamw-4bit"
    ADAMW_FP8 = "adamw-fp8"
    ADAMW_8BIT_TORCHAO = "adamw-8bit-torchao"
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
    # torchtitan `ac_mode = "selective"`, `selective_ac_option = "op"`: per block, keep the outputs
    # of every other matmul and of SDPA, recompute the rest (torchtitan llama3 parallelize.py)
    OP = "op"


class Attention(StrEnum):
    FLASH = "flash"
    SDPA = "sdpa"
    EAGER = "eager"


class Offload(StrEnum):
    NONE = "none"
    OPTIMIZER = "optimizer"  # ZeRO-Offload / FSDP CPUOffload of optimizer states (+ fp32 grads)
    OPTIMIZER_AND_PARAMS = "optimizer+params"  # ZeRO-Infinity style: params too


class LossImpl(StrEnum):
    """How the cross-entropy sees the logits (memory.md §2.5 "Logits and loss")."""

    FULL = "full"  # HF: full logits, upcast to fp32, log-softmax kept for backward
    CHUNKED = "chunked"  # torchtune CEWithChunkedOutputLoss: output layer + CE per sequence chunk
    FUSED = "fused"  # fused linear + CE (Liger, cut-cross-entropy): logits never materialised


class Kernels(StrEnum):
    """Which kernel library replaces the model's own norms, gated activations and RoPE: it
    decides what each block keeps for backward (planner/liger.py)."""

    NONE = "none"  # the framework's own modules (transformers' LlamaRMSNorm, act_fn(gate) * up)
    # Liger-Kernel's patch of a transformers model (apply_liger_kernel_to_<model_type>(), the HF
    # Trainer's use_liger_kernel, AutoLigerKernelForCausalLM) with its defaults: RMSNorm,
    # SwiGLU / GeGLU and RoPE kernels, and fused linear cross-entropy for the loss
    LIGER = "liger"


class LoraVariant(StrEnum):
    """Which of PEFT's LoRA variants the adapters are: PEFT names them so itself
    (``LoraLayer.lora_variant``, ``tuners/lora/variants.py``), and each adapted Linear keeps
    different tensors for backward (planner/dora.py)."""

    LORA = "lora"  # plain LoRA: W x + s · B A x
    # DoRA (PEFT's LoraConfig(use_dora=True), which LLaMA-Factory's use_dora sets): a trainable
    # magnitude per output feature rescales W + s · B A by its detached column norm
    DORA = "dora"


# how plans and notes name the adapters of each variant
LORA_VARIANT_NAMES = {LoraVariant.LORA: "LoRA", LoraVariant.DORA: "DoRA"}


class Framework(StrEnum):
    """Whose modelling code runs the model: where implementations keep different tensors."""

    HF = "hf"  # transformers as of 2025 (what `plan --exact` traces): SDPA groups GQA K/V itself
    HF_LEGACY = "hf-legacy"  # transformers of 2023-2024: SDPA attention repeats GQA K/V (repeat_kv)
    # torchtune's MultiHeadAttention: GQA K/V expanded to every head (expand + reshape copies)
    # before SDPA, which keeps them for backward
    TORCHTUNE = "torchtune"
    # LitGPT (litgpt 0.4-0.5, Lightning Fabric): fused QKV Linear, GQA K/V expanded before SDPA,
    # bf16-true, Block-wrapped FSDP, bitsandbytes quantize-on-load (planner/stacks.py)
    LITGPT = "litgpt"
    # torchtitan as of 2025-06 (@e7c0cae): FSDP2 per block, meta-device init, DCP sharded
    # checkpoints, op-level selective AC, float8 linears, the loss compiled with the model, PP local
    # batch split into microbatches of pipeline_parallel_microbatch_size (default 1)
    TORCHTITAN = "torchtitan"
    # torchtitan as of 2024-12 (@9dec370): the same, but the loss is never compiled (train.py:
    # "compiling loss function causes CUDA errors, turning off for now") and a PP local batch is
    # split into pipeline_parallel_microbatches (default: the number of pipeline stages)
    TORCHTITAN_2024 = "torchtitan-2024"
    # Megatron-LM / Megatron-core (and NeMo / Megatron-Bridge, which train through it): bf16 /
    # fp16 params, a contiguous main_grad buffer allocated with the model, fp32 main params and
    # Adam states in the (distributed) optimizer, vocab-parallel cross-entropy (planner/stacks.py)
    MEGATRON = "megatron"
    # Unsloth (unslothai/unsloth 2024.3-2025.x on transformers 4.x + TRL / HF Trainer): its own
    # cross-entropy kernel keeps the 16-bit logits and writes their gradient in place
    # (planner/stacks.py)
    UNSLOTH = "unsloth"


class SaveMode(StrEnum):
    """How a training checkpoint is written: it decides the save phase's peak (lifecycle.py)."""

    # consolidated, gathered one unit at a time and moved to CPU (accelerate / Lightning
    # FullStateDictConfig(offload_to_cpu=True, rank0_only=True), DeepSpeed 16-bit gather)
    FULL = "full"
    # FULL_STATE_DICT with torch's default FullStateDictConfig() (offload_to_cpu=False): every
    # unit's unsharded clone stays on the GPU until state_dict() returns
    FULL_GPU = "full-gpu"
    SHARDED = "sharded"  # SHARDED_STATE_DICT / DCP: each rank writes its own shards
    NONE = "none"


class OptimizerImpl(StrEnum):
    """Which kernel runs ``optimizer.step()``: it decides the step's temporaries."""

    FUSED = "fused"  # torch fused=True, DeepSpeed FusedAdam, bitsandbytes: no model-sized temp
    FOREACH = "foreach"  # torch default on CUDA: one state-sized intermediate for the whole group
    FOR_LOOP = "for-loop"  # foreach=False: per-tensor intermediates (2 × the largest tensor)


class QuantKernel(StrEnum):
    """Which library runs the 4-bit (NF4) Linears: it decides what their backward keeps."""

    # bitsandbytes >= 0.43.2: MatMul4Bit keeps only the frozen 4-bit weight (PR #1270)
    BNB = "bnb"
    # bitsandbytes < 0.43.2: MatMul4Bit.forward also kept its input A for backward
    # (`ctx.tensors = (A, B)`) whenever A or B needed grad, although B is frozen
    BNB_LEGACY = "bnb-legacy"
    # torchao NF4Tensor (torchtune): linear_nf4 keeps the weight only; scalers always quantized
    TORCHAO = "torchao"


class TrainLoop(StrEnum):
    # HF Trainer, torchtune, Lightning: the step's outputs die with the function that made them
    TRAINER = "trainer"
    # a hand-written `outputs = model(**batch)` loop: the previous step's outputs (logits, and the
    # KV cache an HF model returns while use_cache is on) stay alive through the next forward,
    # until the name is rebound (PyTorch FAQ, "Don't hold onto tensors ... you don't need")
    SCRIPT = "script"


class PeakStep(StrEnum):
    """Which training step sets the job's peak (what the forward has next to it)."""

    # every step alike: a loop that holds its outputs (TrainLoop.SCRIPT, LitGPT's `logits`) still
    # holds the previous step's, and their graph, through this forward
    STEADY = "steady"
    # the first step: a script that forces its longest sample into the first batch and draws
    # shorter ones after (lit-gpt 2023 finetune/lora.py and adapter*.py: `get_batch(...,
    # longest_seq_ix if iter_num == 0 else None)`, "force the longest sample at the beginning
    # so potential OOMs happen right away") peaks at step one, when no previous step exists
    FIRST = "first"


class ModuleLoading(StrEnum):
    """When the CUDA runtime loads kernel images into the context (CUDA_MODULE_LOADING)."""

    # on first use of each kernel: CUDA runtime >= 11.7 (with driver >= R515) under PyTorch
    # >= 1.13, which sets CUDA_MODULE_LOADING=LAZY when unset; CUDA's own default from 12.2
    LAZY = "lazy"
    # every kernel of every loaded library at initialization: a runtime before 11.7, a driver
    # before R515, or CUDA_MODULE_LOADING=EAGER (planner/overheads.py)
    EAGER = "eager"


class PipelineSchedule(StrEnum):
    ONE_F_ONE_B = "1f1b"  # first stage holds min(pp, micro-batches) micro-batches in flight
    INTERLEAVED = "interleaved"  # 1F1B with virtual stages: × (1 + (pp - 1) / (pp · v))
    GPIPE = "gpipe"  # all micro-batches' activations alive before the first backward


class MambaCacheMode(StrEnum):
    """vLLM --mamba-cache-mode (vllm/config/cache.py MambaCacheMode) as planned: "all" (a state
    at every block boundary, the block tied to the mamba chunk size) is not modelled."""

    NONE = "none"  # prefix caching off: one state block per request
    ALIGN = "align"  # prefix caching on: the running state and the last aligned boundary's


class Engine(StrEnum):
    """Who serves an inference plan: it decides how the KV cache is sized (planner/inference.py)."""

    HF = "hf"  # transformers generate: a static batch, the cache grows with the sequence
    VLLM = "vllm"  # a budget of gpu_memory_utilization × total; paged blocks fill what is left
    # mem_fraction_static × free memory holds the weights and a token pool (planner/sglang.py)
    SGLANG = "sglang"


class Verdict(StrEnum):
    """A plan against its GPU, with the planner's own error as the margin (planner/verdict.py)."""

    FITS = "fits"  # fits with at least the margin to spare
    TIGHT = "tight"  # fits as predicted, by less than the margin: the planner's error could flip it
    DOES_NOT_FIT = "does-not-fit"


ZERO3_MAX_LIVE = 1_000_000_000  # DeepSpeed's stage3_max_live_parameters default
ZERO3_MAX_REUSE = 1_000_000_000  # DeepSpeed's stage3_max_reuse_distance default


# vLLM's --gpu-memory-utilization default (vllm/config: CacheConfig.gpu_memory_utilization)
VLLM_DEFAULT_UTILIZATION = 0.9
# the vLLM release a plan assumes when none is named: the newest whose memory is modelled
DEFAULT_VLLM_VERSION = "0.19.0"
# the SGLang release a plan assumes when none is named: the newest whose memory is modelled
DEFAULT_SGLANG_VERSION = "0.5.5"


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
    seq_len: int = DEFAULT_SEQ_LEN
    # encoder-decoder models: decoder (label) tokens per sequence; None = seq_len
    target_len: int | None = None
    grad_accum: int = 1
    checkpointing: Checkpointing = Checkpointing.NONE
    attention: Attention = Attention.FLASH
    lora_rank: int = 8
    # None: the stack's default for the model type, as PEFT applies it when target_modules is None
    # (PEFT's per-type mapping; planner/layout.py lora_target_choice)
    lora_targets: tuple[str, ...] | None = None
    # inference
    batch: int = 1
    prompt_tokens: int = 512
    new_tokens: int = 512
    kv_cache_dtype: str | None = None  # None: the compute dtype; "fp8" halves bf16
    kv_block_size: int = 16  # paged-attention block (vLLM default)
    gpu_memory_utilization: float | None = None  # vLLM-style budget; None = static batch
    # framework behaviours that change memory a lot (all off = plain HF / PyTorch defaults)
    optimizer_in_backward: bool = False  # torchtune optimizer_in_bwd: step each grad when ready
    # optimizer.zero_grad(set_to_none=False), torch < 2.0's default and accelerate < 0.28's
    # (AcceleratedOptimizer, accelerate#2471): gradients stay allocated (zeroed) between steps,
    # so they exist through the next forward
    keep_grads: bool = False
    loop: TrainLoop = TrainLoop.TRAINER
    # the step whose forward is the peak: "first" holds no previous step's outputs (nor their
    # graph) at it; "steady" (default) plans every step alike (PeakStep)
    peak_step: PeakStep = PeakStep.STEADY
    # DeepSpeed < 0.9 (before 2023-04) all-gathers ZeRO-3 parameters even on one GPU: an offloaded
    # tensor is copied to the GPU next to the gathered buffer, two copies while it is gathered
    # (0.9.0 added the one-rank path that copies it once)
    deepspeed_legacy: bool = False
    # DeepSpeed stage3_max_live_parameters: ZeRO-3 prefetches until this many elements are gathered
    zero3_max_live: int = ZERO3_MAX_LIVE
    # stage3_max_reuse_distance: a parameter used again within this many elements stays gathered
    zero3_max_reuse: int = ZERO3_MAX_REUSE
    # HF config use_cache: True plans transformers' default, a KV cache built in every training
    # forward without gradient checkpointing; False (planned by default) is what fine-tuning
    # recipes set, `model.config.use_cache = False`
    use_cache: bool = False
    # activation checkpointing applied by torch's apply_activation_checkpointing (checkpoint_wrapper
    # on each block: llama-recipes' apply_fsdp_checkpointing; non-reentrant, torch's default), not
    # transformers' gradient_checkpointing_enable: the model's own switch stays off, so use_cache
    # stays on, and under FSDP the checkpoint runs inside each unit (planner/stacks.py
    # model_checkpointing)
    checkpoint_wrapper: bool = False
    activation_offload: bool = False  # saved activations to CPU (torchtune, FSDP offload hooks)
    loss: LossImpl = LossImpl.FULL
    # the kernels that run the blocks' norms, gated MLP activation and RoPE (Kernels)
    kernels: Kernels = Kernels.NONE
    framework: Framework = Framework.HF
    compile: bool = False  # torch.compile: fused norms/activations save fewer tensors
    optimizer_impl: OptimizerImpl = OptimizerImpl.FUSED
    lora_dropout: float = 0.0  # > 0 keeps a dropped copy of each adapted Linear's input
    lora_variant: LoraVariant = LoraVariant.LORA  # PEFT's plain LoRA, or DoRA (LoraVariant)
    quant_kernel: QuantKernel = QuantKernel.BNB  # library of the NF4 Linears (precision nf4)
    double_quant: bool = True  # NF4 absmax quantized to 8 bit (QLoRA's recipe; HF default: off)
    # the dtype bitsandbytes' 4-bit Linears compute in (bnb_4bit_compute_dtype as Linear4bit runs
    # it: input cast to it, weight dequantized and cast to it); None: the job's 16-bit dtype (the
    # QLoRA recipe, LitGPT's plugin). "fp32" is transformers' BitsAndBytesConfig default, run as
    # such under fp16 activations, and under any from bitsandbytes 0.47 (planner/quant_kernel.py)
    bnb_compute_dtype: str | None = None
    pp_schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    virtual_stages: int = 1  # interleaved pipeline: model chunks per rank
    expandable_segments: bool = False  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    # FSDP: embedding and LM head wrapped as units of their own (torchtune custom_sharded_layers),
    # gathered only around their own forward/backward instead of with the root for the whole step
    fsdp_shard_embeddings: bool = False
    # inference engine (vLLM) settings, used when gpu_memory_utilization is set
    max_num_batched_tokens: int = 8192  # tokens in the profile forward (chunked-prefill budget)
    max_num_seqs: int = 256  # sequences the sampler is profiled with
    max_model_len: int | None = None  # None: prompt_tokens + new_tokens
    # the vLLM release: its profile run's sampler and what it counts as non-torch memory changed
    # between releases (planner/vllm_profile.py); default: the newest release modelled there
    vllm_version: str = DEFAULT_VLLM_VERSION
    # the job's lifecycle (planner/lifecycle.py): None = the stack's default (planner/stacks.py)
    load_dtype: str | None = None  # dtype the weights are materialised in while loading
    save: SaveMode | None = None  # how checkpoints are written
    eval_batch: int | None = None  # evaluation / generation batch during training (0: none)
    # torchtitan float8: FSDP all-gathers Float8Linear weights in fp8
    float8_all_gather: bool = False
    # torchao Float8LinearConfig.force_recompute_fp8_weight_in_bwd: the fp8 weight is recomputed
    # in backward instead of saved (without it an unsharded fp8 copy of every Float8Linear weight
    # is saved for backward wherever no activation checkpointing recomputes the block)
    float8_recompute_weight: bool = False
    # torchtitan float8.precompute_float8_dynamic_scale_for_fsdp: one all-reduce of every weight's
    # amax after the optimizer step instead of one per all-gather; one fp32 scale per weight
    float8_precompute_scales: bool = False
    # torchtitan pipeline parallelism: micro_batch is the local batch, split into microbatches of
    # this many sequences (pipeline_parallel_microbatch_size); None: micro_batch is one microbatch
    pp_microbatch_size: int | None = None
    # how the CUDA context loads kernels (planner/overheads.py): eager contexts hold every kernel
    # image of PyTorch and its libraries, several hundred MiB more; default: the modern lazy case
    module_loading: ModuleLoading = ModuleLoading.LAZY
    # a checkpoint that stores weights quantized (gpt-oss: routed experts in MXFP4, its config's
    # quantization_config) is planned as stored at a 16-bit inference precision; True plans the
    # dequantized load (transformers' Mxfp4Config(dequantize=True)); the CLI sets it whenever
    # --precision is given, so an explicit precision wins
    dequantize: bool = False
    # the serving engine; None: vLLM when gpu_memory_utilization is set, SGLang when
    # mem_fraction_static is, else HF generate (``serving_engine``)
    engine: Engine | None = None
    # SGLang --mem-fraction-static: the share of the free memory (measured before the weights
    # load) that holds the weights and the KV pool; None: SGLang's own default for the GPU's
    # memory, the TP size and the release (planner/sglang.py)
    mem_fraction_static: float | None = None
    sglang_version: str = DEFAULT_SGLANG_VERSION  # its default fraction changed between releases
    page_size: int = 1  # SGLang --page-size: the pool is a whole number of pages
    # the PEFT release that adds the LoRA adapters, (major, minor, patch): before 0.12 LoRA's
    # update_layer gives the adapters the base layer's float dtype (bf16 on a bf16 model); from
    # 0.12 get_peft_model(autocast_adapter_dtype=True) upcasts 16-bit adapters to fp32 (PEFT PR
    # #1706, planner/precision.py). None: not given, a current release (fp32 adapters) assumed
    peft_version: tuple[int, int, int] | None = None
    # the transformers release that runs HF generate, as pip shows it (``4.38.2``): before 4.45
    # generate computes every prompt position's logits at the prefill (planner/inference.py);
    # None: the --framework's own (hf: 5.x, hf-legacy: 4.57)
    transformers_version: str | None = None
    # hybrids' state blocks (planner/state.py). vLLM --mamba-cache-dtype (vllm/config/cache.py
    # MambaDType: auto, float32, float16, bfloat16): the conv state's dtype, and every state's of
    # the mixers with one dtype (short convolutions, Kimi delta attention); None: "auto", the
    # model dtype
    mamba_cache_dtype: str | None = None
    # vLLM --mamba-ssm-cache-dtype: the temporal (SSM / delta-rule) state's dtype; None: "auto",
    # what the model's config hook sets (Nemotron-H mamba_ssm_cache_dtype, default float32;
    # Qwen3.5 mamba_ssm_dtype), else the conv state's
    mamba_ssm_cache_dtype: str | None = None
    # vLLM --mamba-cache-mode: state blocks a request holds (none: 1; align: 2, the last block
    # boundary's state kept for prefix caching); None: the release's default (planner/state.py)
    mamba_cache_mode: MambaCacheMode | None = None
    # SGLang --max-mamba-cache-size: state slots (3 per running request); None: sized by
    # --mamba-full-memory-ratio (model_runner_kv_cache_mixin.py handle_max_mamba_cache)
    max_mamba_cache_size: int | None = None
    # SGLang --mamba-full-memory-ratio: state memory / KV memory of what the weights leave
    mamba_full_memory_ratio: float = 0.9
    # training a hybrid: the mixer kernels (fla, causal-conv1d, mamba-ssm) are installed and run;
    # False: transformers' torch fallbacks; None: as --attention implies (eager: the fallbacks)
    mixer_kernels: bool | None = None
    # vLLM --language-model-only: a multimodal checkpoint served text only, its vision tower not
    # loaded ("prevents loading multimodal modules": vLLM docs 'Multimodal models'; Llama 4,
    # Qwen3.5); False: the engine loads the tower (ModelSpec.engine_tower_parameters)
    language_model_only: bool = False
    # vLLM --enforce-eager: no CUDA graphs captured (planner/vllm_graphs.py); False: the graphs
    # each release captures for max_num_seqs / max_num_batched_tokens
    enforce_eager: bool = False
    # the torchtitan checkout, by its commit date (YYYY-MM = the end of that month, or
    # YYYY-MM-DD): what it compiles, how FSDP wraps the root and splits PP batches changed between
    # commits (planner/stacks.py TORCHTITAN_CHANGES); None: the --framework's own read
    # (torchtitan: 2025-06 @e7c0cae, torchtitan-2024: 2024-12 @9dec370)
    torchtitan_version: str | None = None
    # Megatron's main_grad buffer dtype (DistributedDataParallelConfig.grad_reduce_in_fp32,
    # --accumulate-allreduce-grads-in-fp32): None = Megatron's default for the precision (forced
    # on under bf16, off under fp16); only --framework megatron reads it
    grad_reduce_in_fp32: bool | None = None

    @property
    def vllm_utilization(self) -> float:
        """vLLM's --gpu-memory-utilization: the one asked for, else vLLM's default."""
        return self.gpu_memory_utilization or VLLM_DEFAULT_UTILIZATION

    @property
    def serving_engine(self) -> Engine:
        """The engine the job is served by: the one named, else the one its budget implies."""
        if self.engine is not None:
            return self.engine
        if self.mem_fraction_static is not None:
            return Engine.SGLANG
        if self.gpu_memory_utilization is not None:
            return Engine.VLLM
        return Engine.HF


@dataclass(frozen=True, slots=True)
class ParameterFacts:
    """What the parameters component holds on one GPU (``report.plan`` words it)."""

    count: int  # parameters on this GPU, LoRA adapters included, before sharding
    shards: int  # ranks they are split over (ZeRO-3 / FSDP)
    linear_bytes: float | None  # bytes per Linear weight where stored quantized; None: not
    offloaded: bool  # moved to host memory
    # bitsandbytes NF4 quantization state, whole on every GPU (never sharded or offloaded)
    unsharded_quant_state_bytes: float = 0.0
    # bytes per routed-expert parameter where the checkpoint keeps the experts packed (MXFP4)
    expert_bytes: float | None = None


@dataclass(frozen=True, slots=True)
class GradientFacts:
    """What the gradients component holds at its peak."""

    trainable: int
    # parameters holding a gradient: more than the trainable ones where an FSDP unit mixes
    # frozen and trainable parameters (its flat gradient covers the whole unit)
    with_grad: int
    grad_bytes: float  # per parameter with a gradient, in the gradient dtype
    fp32_copy_bytes: float  # an extra fp32 copy per parameter (DeepSpeed partition, main_grad)
    shards: int  # ranks the gradients are split over while alive (1 under FSDP no_sync)
    # DeepSpeed ZeRO-3: the 16-bit partition through backward, converted to the fp32 one at the
    # step; one of them alive at a time
    one_at_a_time: bool = False


@dataclass(frozen=True, slots=True)
class ActivationFacts:
    """What the activations component keeps for backward."""

    per_block_bytes: dict[str, int]  # block kind → bytes per block per micro-batch
    in_flight: float  # micro-batches whose activations are held at once
    loss_saved_bytes: int  # kept by the loss until its backward
    weight_copy_bytes: float  # autocast's bf16 (Float8Linear's fp8) weight copies, saved
    offloaded_bytes: int  # moved to host by activation offloading
    # Linear inputs kept only by bitsandbytes < 0.43.2's 4-bit kernel: of all the saved
    # activations, and of the block recomputed under full checkpointing
    kernel_saved_bytes: int = 0
    kernel_recomputed_bytes: int = 0


ComponentFacts = ParameterFacts | GradientFacts | ActivationFacts


@dataclass(frozen=True, slots=True)
class MemoryComponent:
    """One named term of the per-GPU memory, with where its formula comes from."""

    key: str  # "parameters", "gradients", "optimizer_states", "activations", ...
    bytes: int
    source: str  # formula reference, e.g. "Korthikanti et al. 2022 Table 2" or "traced"
    detail: str = ""  # a line for people, where ``facts`` does not carry the numbers
    facts: ComponentFacts | None = None  # the numbers the report words as the detail


@dataclass(frozen=True, slots=True)
class PredictedReadings:
    """What each measuring tool would show at the peak of the job on one GPU."""

    max_allocated_bytes: int  # torch.cuda.max_memory_allocated()
    max_reserved_bytes: int  # torch.cuda.max_memory_reserved()
    nvidia_smi_used_bytes: int  # nvidia-smi / NVML "used": + CUDA context, NCCL, cuBLAS handles
    # torch's active_bytes peak: allocated blocks plus freed ones a pending stream still uses;
    # the planner models no such stream overlap, so it equals max_allocated_bytes.
    max_active_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Phase:
    """Bytes alive on one GPU at one moment of the step, by component (they sum to ``total``)."""

    name: str  # "forward", "loss", "backward", "optimizer-step", "prefill", "decode", ...
    bytes_by_component: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.bytes_by_component.values())


@dataclass(frozen=True, slots=True)
class InferenceCapacity:
    """KV-cache sizing of an inference plan: per token, held, and (vLLM budget) what fits."""

    kv_bytes_per_token: int  # per GPU, all local layers, K and V
    kv_tokens: int  # tokens the plan holds (static batch) or the pool can hold (vLLM)
    kv_pool_bytes: int
    non_kv_bytes: int  # weights + activation peak + non-torch (vLLM's profile)
    max_sequences: int | None = None  # full-length requests that fit in the pool (vLLM)
    block_size: int | None = None
    # vLLM: the KV blocks of one max_model_len request, the least pool the engine starts with
    sequence_bytes: int | None = None
    # SGLang: (1 − mem_fraction_static) × the free memory, left for activations and CUDA graphs
    remainder_bytes: int | None = None
    # vLLM from 0.21: the CUDA graphs its profile leaves room for, inside non_kv_bytes
    budgeted_graph_bytes: int = 0
    # vLLM: its budget (gpu_memory_utilization × usable), and what the GPU holds beside it: the
    # CUDA context its baseline snapshot already contains, the graphs captured after the pool
    budget_bytes: int | None = None
    outside_context_bytes: int = 0
    outside_graph_bytes: int = 0

    @property
    def outside_budget_bytes(self) -> int:
        return self.outside_context_bytes + self.outside_graph_bytes


@dataclass(frozen=True, slots=True)
class Fix:
    """One change from the OOM playbook, with what it saves and whether the job then fits."""

    key: str  # stable id, e.g. "enable-checkpointing"
    description: str
    changes: dict[str, str]  # knob → new value, e.g. {"checkpointing": "full"}
    saved_bytes: int
    total_bytes: int  # per-GPU peak after the change
    fits: bool | None  # verdict after the change is FITS (with the margin)
    tradeoff: str = ""
    verdict: Verdict | None = None  # after the change


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    request: PlanRequest
    components: tuple[MemoryComponent, ...]
    peak_bytes: int  # per-GPU peak (max over phases, plus overheads)
    peak_phase: str  # "forward", "backward", "optimizer-step", "decode", ...
    predicted: PredictedReadings
    usable_bytes: int | None  # GPU memory a job can use (None without a GPU)
    fits: bool | None  # verdict is FITS (with the margin); None without a GPU
    warnings: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()
    host_bytes: int = 0  # CPU RAM needed per node for offloaded states
    trainable_parameters: int = 0
    notes: dict[str, str] = field(default_factory=dict)
    total_parameters: int = 0
    phases: tuple[Phase, ...] = ()  # the peak is the largest of these (memory.md §2.11)
    inference: InferenceCapacity | None = None
    verdict: Verdict | None = None  # None without a GPU
    headroom_bytes: int | None = None  # usable − what the job needs (negative: short by)
    margin_bytes: int | None = None  # headroom below this is "tight" (planner/verdict.py)
    # vLLM: the verdict weighs its budget and what it keeps outside it against the GPU
    beside_budget: bool = False

    def component(self, key: str) -> int:
        """A component's own peak size per GPU (its largest over the phases of the step)."""
        return sum(c.bytes for c in self.components if c.key == key)

    def at_peak(self) -> dict[str, int]:
        """Bytes by component at the peak phase; they sum to ``peak_bytes``."""
        for phase in self.phases:
            if phase.name == self.peak_phase:
                return dict(phase.bytes_by_component)
        return {c.key: c.bytes for c in self.components}


@dataclass(frozen=True, slots=True)
class FitOption:
    """One configuration that fits, with its estimated speed and price (``plan --fit``)."""

    gpu: GpuSpec
    num_gpus: int
    changes: dict[str, str]  # knob → value, relative to the request (e.g. {"zero_stage": "3"})
    plan: MemoryPlan
    step_seconds: float | None  # roofline estimate; None without the GPU's TFLOPS
    tokens_per_second: float | None
    usd_per_hour: float | None  # num_gpus × usd_per_gpu_hour; None: no known price (ranked last)
    instance: str | None  # the instance type the price is taken from ("aws p5en.48xlarge")
    max_micro_batch: int | None = None  # largest micro-batch (or inference batch) that fits
    max_seq_len: int | None = None  # longest sequence (inference: context) that fits
    bottleneck: str = ""  # "compute", "memory" or "communication"
    usd_per_gpu_hour: float | None = None  # the instance's on-demand price / its GPU count
    instance_gpus: int | None = None  # GPUs in that instance type


@dataclass(frozen=True, slots=True)
class FitResult:
    request: PlanRequest
    options: tuple[FitOption, ...]  # ranked: GPU count, then step time, then $/h
    considered: int  # configurations planned
    assumptions: tuple[str, ...] = ()
    # the request's own, whatever the GPU (a knob that changes nothing, a checkpoint format the
    # plan does not model): what ``plan`` without --fit warns of
    warnings: tuple[str, ...] = ()


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
    # peak of live bytes within each phase ("forward", "backward", "optimizer-step"; "prefill",
    # "decode"): the largest is peak_bytes
    phase_peaks: dict[str, int] = field(default_factory=dict)
    trainable_parameters: int = 0  # parameters with requires_grad (LoRA: the adapters)
