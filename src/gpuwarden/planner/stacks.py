"""Stack profiles: what each training stack does that changes memory, read in its own code.

``--framework`` names whose code runs the job. Each profile lists the behaviours read at a stated
version; the planner's other modules ask the profile instead of testing framework names, so one
fact lives in one place. Where a combination of knobs meets a behaviour nobody here has read
(``unknowns``), the plan says so in a note instead of guessing silently.

Sources, per stack:

* transformers (``hf``: 5.x; ``hf-legacy``: 4.3x-4.57). ``from_pretrained`` without ``dtype``
  materialises float32 weights up to 4.57 and the checkpoint's dtype from 5.0 (transformers PR
  #42805 "Default auto", merged 2025-12-11; TRL #4770 shows 4.57.2 → float32). The bitsandbytes
  quantizer overrides ``torch_dtype=None`` with float16 ("due to requirements of
  bitsandbytes"), so a quantized load keeps the skipped modules (embedding, LM head, norms) in
  fp16. Checkpoints: Trainer + accelerate write FULL_STATE_DICT with
  ``FullStateDictConfig(offload_to_cpu=True, rank0_only=True)`` (accelerate ``get_state_dict``).
  The logits at the loss (``loss.py``), a bf16 / fp16 Llama-style head: up to 4.45 the model
  upcasts (``logits = logits.float()`` after the head, issue #30860; 4.45's
  ``self.lm_head(...).float()`` with its "Starting from v4.46" warning, find_string ids
  4999593282 / 18115998802), shifts a contiguous fp32 copy and returns fp32 logits: fp32
  logits, shift copy and log-softmax, 12 B per logit. 4.46 moved the upcast into the loss (PR
  #33902 "Remove logits.float()"): ``ForCausalLMLoss`` (``loss/loss_utils.py``) upcasts and,
  until PR #35646 (merged 2025-01-13, so 4.49), shifts a contiguous copy: 16-bit logits, fp32
  upcast, shift copy and log-softmax, 14 B (planned at 12: ``transformers_version`` is read by
  generate only, planner/inference.py). From 4.49 (read @0114da07, and in 5.x) it pads the
  labels instead: the 16-bit logits, their fp32 upcast and the log-softmax, 10 B;
  ``fixed_cross_entropy`` with ``num_items_in_batch`` only changes the reduction. The model
  returns its 16-bit logits, and under the Trainer's fp16 /
  bf16 accelerate's ``prepare_model`` (``native_amp``: fp16 off the CPU or bf16, not under
  DeepSpeed or Megatron-LM) wraps the forward in ``convert_outputs_to_fp32``, whose
  ``.float()`` copies them after the loss returned: log-softmax, 16-bit logits and the copy,
  10 B again. ``Trainer.compute_loss`` returns the loss alone and ``training_step`` runs
  ``accelerator.backward`` after it (``trainer.py`` @000945a9): the outputs, copy included, die
  before backward, whose start holds the log-softmax and two fp32 gradients, 12 B. The planned
  region (the saved log-softmax and the larger transient) is those 12 B: the copy is inside
  it (``tests/planner/test_trainer_logits.py`` runs the real loss through the real
  ``prepare_model`` under MemTracker), so ``trainer_fp32_logits`` stays off here. Not planned:
  ``label_smoothing_factor`` or ``compute_loss_func``, where the Trainer pops the labels and
  takes the loss on accelerate's fp32 copy.
* LitGPT 0.4-0.5 (``litgpt/finetune/lora.py`` @01fe959, ``litgpt/model.py``; Lightning Fabric
  2.x ``plugins/precision/bitsandbytes.py``): ``bf16-true`` (params, grads and AdamW states in
  bf16); one fused QKV Linear (``attn.attn`` / ``qkv``); GQA K/V ``expand`` + ``reshape``
  (copies: "training: flash attention requires it"); ``chunked_cross_entropy`` on bf16 logits
  chunked by 128 positions, the loop's ``logits`` alive until the next forward returns; on several
  GPUs ``FSDPStrategy(auto_wrap_policy={Block}, activation_checkpointing_policy={Block},
  state_dict_type="full")`` with ``use_orig_params=True``: a Block unit mixes frozen base weights
  and the LoRA adapters, so its gradient is as large as the whole unit (PyTorch FSDP docs on
  frozen parameters; LitGPT issue #1417 and PR #1538, whose warning reads "1451376640 numel
  instead of 106496 numel before sharding"), and gradient accumulation runs under
  ``fabric.no_backward_sync`` (FSDP ``no_sync``), which accumulates *unsharded* gradients:
  the whole model's size in bf16 on every GPU — the "as if the model were materialised per GPU"
  of multi-GPU LitGPT jobs; ``BitsandbytesPrecision`` swaps every ``nn.Linear`` (the LM head
  too) and quantizes each one as it is created and loaded, from an fp16 copy
  (``weight.to(device, torch.half)``), so dequantized weights come back fp16 and are cast to
  bf16; ``validate()`` runs the validation batch at the micro-batch size with full bf16 logits,
  then generates with a batch-1 KV cache of ``max_seq_length`` tokens. Its MLPs call
  ``torch.nn.functional.gelu(x, approximate=...)`` (``GptNeoxMLP``: one saved input where
  transformers' Python ``gelu_new`` of phi / GPT-2 keeps four); LoRA on the fused QKV Linear is
  one ``LoRAQKVLinear`` whose enabled q / k / v parts share one ``lora_A`` and one
  ``lora_dropout(x)`` (``lora.py``: ``F.linear(self.lora_dropout(x), self.lora_A)``); its
  quantization path pins bitsandbytes 0.42.0 ("LitGPT only supports bitsandbytes v0.42.0",
  ``finetune/lora.py`` and ``generate/base.py``), whose 4-bit Linears keep their input for
  backward (``quant_kernel.py``). Its ``GPT`` has an ``lm_head`` of its own, tied only under
  ``tie_embeddings`` (default off): ``convert_hf_checkpoint`` copies the embedding into it for
  models whose HF checkpoint ties the two (Gemma, Llama 3.2). Its attention builds q (and k) by
  ``torch.cat((q_roped, q[..., rope_n_elem:]), dim=-1)``, laid out (B, nh, T, hs), and merges
  the heads by ``y.transpose(1, 2)`` then ``y.reshape(B, T, head_size * n_head)``
  (``CausalSelfAttention.forward`` / ``scaled_dot_product_attention``, read @0420581; the
  2024-03 forward trace in ``extensions/thunder/README.md`` @ca6ecea saves both the SDPA output
  ``t68`` and its reshaped copy ``t73``): the flash kernel's output keeps q's layout, so the
  output projection's input is a copy (``heads_first_q``). Its one tensor-parallel path is
  generation (``generate/tp.py``, lit-gpt PR #835, 2023-12, read @0eb179c; the same
  ``tensor_parallel()`` in ``litgpt/generate/tp.py`` @0218047): it splits each Block's fused QKV
  and MLP Linears column-wise and the output projections row-wise, and nothing else — the token
  embedding, the LM head and the norms stay whole on every rank. Its ``--precision
  bf16-mixed`` / ``16-mixed`` is Fabric's ``MixedPrecision`` plugin (``plugins/precision/amp.py``:
  ``forward_context`` is ``torch.autocast``; unlike ``HalfPrecision`` it defines no
  ``module_init_context``, so ``fabric.init_module()`` builds float32 parameters and the bf16
  checkpoint is copied into them): under LoRA the frozen base is fp32 and runs under autocast.
  Whatever the plugin, ``_FabricModule.forward`` hands the model's outputs back through
  ``precision.convert_output``, which casts every floating tensor to ``torch.get_default_dtype()``
  (float32 outside the plugin's forward context: ``HalfPrecision``, ``MixedPrecision``,
  ``FSDPPrecision``, ``BitsandbytesPrecision``; Lightning ``fabric/wrappers.py``,
  ``plugins/precision/half.py``): the loop's logits, and the cross-entropy's log-softmax and
  gradients, are float32 (``fp32_outputs``).
* torchtitan (``models/llama3/infra/parallelize.py``; 2024-12 @9dec370 is ``torchtitan-2024``,
  2025-06 @e7c0cae ``torchtitan``; any other commit by ``--torchtitan-version``, its date, through
  ``TORCHTITAN_CHANGES``): FSDP2 ``fully_shard`` per TransformerBlock and on the root; up to PR
  #1094 (2025-07) the root unit holds the embedding, the final norm and the output projection,
  and FSDP2 keeps the root unsharded from forward to the end of backward (torch
  ``_fsdp_state._lazy_init``: "For the root, do not reshard after forward"), after it the
  embedding and [norm, output] are units of their own; meta-device init and DCP sharded load /
  save; ``ac_mode = "selective"``, ``selective_ac_option = "op"`` (``Checkpointing.OP``);
  Float8Linear with FSDP float8 all-gather; with PP ``apply_fsdp`` sets
  ``reshard_after_forward=False`` (no re-gather per microbatch) while the pipeline stage
  disables gradient sync until the last microbatch: the stage's units stay unsharded and its
  gradients accumulate unsharded in the fp32 reduce dtype; its logs print ``max_reserved``.
  Tensor parallelism is DTensor's: ``ColwiseParallel`` Linears all-gather a sequence-parallel
  input and their matmul keeps the gathered input for the weight gradient (Megatron keeps the
  shard and gathers again in backward), the output projection included; with TP the loss runs
  under ``loss_parallel()`` (``enable_loss_parallel`` defaults on): torch's
  ``tensor/parallel/loss.py`` computes the log-softmax of the vocabulary shard as ``x - max``,
  ``exp`` of it and ``shifted - log(sum)`` (three fp32 copies at once next to the bf16 logits)
  and fuses the NLL and log-softmax backward as ``(zeros + exp(x)) * grad`` (four).
  The two reads differ in their loss and their PP split, as read in their code (and in
  torchao's Float8Linear: ``TORCHTITAN_CHANGES``): 2024-12's ``train.py`` never compiles the
  loss ("TODO: compiling loss function causes CUDA errors, turning off for now") and splits a PP
  local batch into ``experimental.pipeline_parallel_microbatches`` (default: the number of
  pipeline stages, ``pipelining_utils.build_pipeline_schedule``); by 2025-06
  ``components/loss.py`` compiles the cross-entropy with ``training.compile`` (Inductor fuses the
  fp32 upcast, log-softmax and NLL: the bf16 logits and a logsumexp are kept, the bf16 gradient
  written directly) and the local batch is split into microbatches of
  ``pipeline_parallel_microbatch_size`` (default 1).
* Megatron-LM / Megatron-core (``megatron``; NeMo 2 and Megatron-Bridge train through it):
  ``DistributedDataParallel`` allocates one contiguous gradient buffer per dtype when the model
  is wrapped and points every parameter's ``main_grad`` into it, in fp32 when
  ``grad_reduce_in_fp32`` (``distributed_data_parallel.py``: ``grad_dtype = torch.float if
  self.ddp_config.grad_reduce_in_fp32 else param.dtype``; ``param_and_grad_buffer.py``
  ``_ParamAndGradBuffer``: ``self.grad_data = torch.zeros(self.numel, dtype=self.grad_dtype)``),
  which is forced on under bf16 (``megatron/training/arguments.py``: "accumulate and all-reduce
  gradients in fp32 for bfloat16 data type.") and off by default under fp16: the buffer lives
  from set-up to the end, so gradients exist through every forward, and it is all-reduced /
  reduce-scattered in place (no bucket copies). The optimizer keeps fp32 main params and Adam's
  two fp32 states, sharded over the data-parallel ranks under ``--use-distributed-optimizer``
  (``distrib_optimizer.py``; planned as ``--zero 1``: 6 + 12/N B per parameter with an fp32
  buffer, 18 without sharding, as ``theoretical_memory_usage.py`` counts). Without the
  distributed optimizer ``Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads``
  sets ``main_param.grad = model_param.main_grad.float()`` (``core/optimizer/optimizer.py``,
  read @0011998): an alias of an fp32 buffer, an fp32 copy of an fp16 / bf16 one, alive from
  the step to the next ``zero_grad(set_to_none=True)``. The loss is
  ``VocabParallelCrossEntropy`` (``core/tensor_parallel/cross_entropy.py``):
  ``calculate_logits_max`` takes ``vocab_parallel_logits.float()``, then subtracts the max,
  ``torch.exp(..., out=exp_logits)`` and ``exp_logits.div_(...)`` in place and saves that fp32
  softmax; backward writes the gradient into it (``grad_input = softmax``): one fp32 copy of the
  logits, kept, next to the 16-bit logits, and the 16-bit gradient autograd casts back. With
  ``gradient_accumulation_fusion`` (Megatron's default; ``--no-gradient-accumulation-fusion``
  turns it off) ``LinearWithGradAccumulationAndAsyncCommunication.backward``
  (``core/tensor_parallel/layers.py``) accumulates each weight gradient into ``main_grad`` with
  ``fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32`` and returns no ``grad_weight``: the
  output layer's gradient is never a tensor of its own. Its GPT layer is Transformer Engine's
  by default (``gpt_layer_specs.py`` ``get_gpt_layer_with_transformer_engine_spec``:
  ``input_layernorm`` / ``pre_mlp_layernorm`` are ``IdentityOp``, ``linear_qkv`` and
  ``linear_fc1`` are ``TELayerNormColumnParallelLinear``, ``q_layernorm`` / ``k_layernorm``
  ``TENorm``). TE's ``_LayerNormLinear.forward`` (``module/layernorm_linear.py``)
  ``ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, weight, ..., ln_out, ...)``: the
  norm's input as it comes (the bf16 residual stream), fp32 ``mu`` (LayerNorm) / ``rsigma``, and
  the norm's output for the weight gradient (its sequence shard under sequence parallelism:
  backward gathers it again, ``gather_along_first_dim(ln_out, ...)``); no fp32 copy, no x̂
  (``fused_norms``). ``SelfAttention.get_query_key_value_tensors`` splits ``mixed_qkv`` with TE's
  ``SplitAlongDim`` (``torch.split``: views) and reshapes the query (a copy under GQA); fused
  RoPE keeps no input; ``TEDotProductAttention`` (``maybe_contiguous`` copies only a tensor
  whose last stride is not 1) keeps q and k after RoPE, v — a view that keeps the whole QKV
  output alive, whatever the number of KV heads (``qkv_split_views``) — its output and the
  softmax statistics (fp32 per head per token); ``linear_proj`` keeps its input, the attention
  output. The MLP's ``bias_swiglu_impl`` (``core/fusions/fused_bias_swiglu.py``:
  ``SwiGLUFunction`` / ``BiasSwiGLUFunction`` ``ctx.save_for_backward(input_for_backward)``)
  keeps fc1's output (gate and up) only and recomputes SiLU in backward (``fused_glu``), and
  ``bias_gelu_impl`` (``GeLUFunction``: ``save_for_backward(input, bias)``, legacy and core)
  one input (``native_gelu``); ``linear_fc2`` keeps its input. Per token and block, bf16, TP 1:
  2 × (2h + 2h + 4) for the norms, (q + 2kv) × 2 + (q + kv) × 2 + 2q + 4 × heads for attention,
  2 ffn × 2 + ffn × 2 for the gated MLP (``tests/planner/test_megatron_te_activations.py``).
  The local spec (``transformer_impl local``: apex ``FusedLayerNorm`` + ``ColumnParallelLinear``)
  keeps the same norm tensors; it is not a knob here (TE, Megatron-core's default, is planned).
  ``--offload optimizer`` is ``--optimizer-cpu-offload --optimizer-offload-fraction 1.0``
  (``megatron/training/arguments.py`` refuses it without ``--use-precision-aware-optimizer``):
  the distributed optimizer then keeps no fp32 main params and passes each 16-bit shard's
  gradient as ``decoupled_grad``, a view of the main_grad buffer (``distrib_optimizer.py``
  ``_copy_model_grads_to_main_grads``; no ``.float()`` copy on the GPU), and
  ``HybridDeviceOptimizer`` (``core/optimizer/cpu_offloading/hybrid_optimizer.py``, built with
  ``param_update_in_fp32=True``) holds pinned fp32 params, Adam's states and a pinned fp32
  gradient copy per shard on the host, the gradient copied in at each step
  (``_set_sub_optimizer_grads``): 16 B per parameter of the rank's shard, whatever the buffer.
* Unsloth (``unsloth``: unslothai/unsloth 2024.3-2025.x on transformers 4.x, trained by TRL's
  SFTTrainer, i.e. HF Trainer's loop: the ``hf-legacy`` profile but for what follows).
  ``unsloth/kernels/cross_entropy_loss.py`` (read @0050c73) ``Fast_CrossEntropyLoss.forward``
  takes the logits as the head wrote them (16-bit: ``CausalLM_fast_forward`` runs
  ``self.lm_head(hidden_states.to(
  lm_head.dtype))`` then ``.to(config.torch_dtype)``, the dtype the embedding output is cast to
  as well), loads each row into the Triton kernel in fp32 and writes one fp32 loss and one fp32
  logsumexp per row; above ``MAX_FUSED_SIZE`` = 65,536 columns (Gemma's 256k) one logsumexp per
  65,536-column chunk, reduced by ``torch.logsumexp`` to one per row; then
  ``ctx.save_for_backward(logits, logsumexp, labels)``: the 16-bit logits themselves, 4 B and
  the int64 shifted label per row. ``_cross_entropy_backward`` stores ``dloss * y`` into
  ``logits_ptr`` and ``backward`` returns ``logits``: the gradient is written in place, no
  fp32 copy of the logits ever exists (``unsloth_ce``). Which ``CausalLM_fast_forward`` reaches
  it: the 2024 form (find_string ids 639579561 / 3701431846) always; the 2024.11-2025 form
  (id 19707054637, "Logits are empty from 2024.11 onwards") only when ``bsz*q_len <= 1024``,
  ``UNSLOTH_RETURN_LOGITS=1`` or not ``HAS_CUT_CROSS_ENTROPY`` — which that ``llama.py`` sets to
  ``False`` itself; later unsloth-zoo's ``loss_utils`` sets it from cut-cross-entropy's presence
  on compute capability >= 7.5 (id 827100241; ``cut_cross_entropy`` is an unsloth-zoo
  dependency, ``pyproject.toml`` @01e113c), and ``llama.py`` @00060af (2026) calls
  unsloth-zoo's ``unsloth_fused_ce_loss`` whenever labels are given (``fused_losses/
  cross_entropy_loss.py`` @002a0c9 ``UnslothFusedLoss``: per chunk of tokens
  ``torch.func.grad_and_value`` of an fp32 cross-entropy, the hidden states' gradient written
  during forward, chunks sized so 16 B per logit fit half the free memory, capped at 4 GB:
  a run-time quantity, not planned — ``unknowns``). ``use_gradient_checkpointing="unsloth"``
  (``Unsloth_Offloaded_Gradient_Checkpointer``, "released April 2024" per the copy in
  Unsloth's docs, find_string id 52597937492; copies of the class in find_string ids
  4452502023 / 66431543418): forward copies each decoder layer's input to the host
  (``hidden_states.to("cpu", non_blocking=True)``), runs the layer under ``no_grad`` and saves
  the host copy; backward copies it back, recomputes the layer and calls
  ``torch.autograd.backward(output, dY)`` (the recomputed output alive through the layer's
  backward, as reentrant checkpointing): ``--checkpointing full --activation-offload``;
  ``True`` is ``torch.utils.checkpoint.checkpoint(..., use_reentrant=True)``
  (``LlamaModel_fast_forward`` @00060af). Its LoRA fast paths (``kernels/fast_lora.py``
  @0050c73): ``LoRA_MLP`` saves X, the gate output e and the up output g (the SwiGLU / GeGLU
  output, down_proj's input, is recomputed in backward into e's and g's buffers), ``LoRA_QKV``
  one X for q, k and v, ``LoRA_W`` (o_proj) its X; dX is written into X (``out = X if
  ctx.inplace``) — not modelled: the block is planned with transformers' saved tensors, which
  under checkpointing is the one block recomputed in backward. ``fast_dequantize``
  (``kernels/utils.py`` @0050c73) makes one 16-bit weight per call in the quant state's dtype (a
  per-device buffer grown to the largest weight with ``use_global_buffer``): one copy at a time,
  ``dequant_copies = 1``. ``from_pretrained`` passes ``torch_dtype=dtype`` (fp16 where bf16 is
  unsupported): no fp32 load (``load_dtype`` None). A training forward builds no KV cache
  (``if past_key_values is None and self.training: use_cache = False``). Its "dynamic 4-bit"
  uploads keep the modules their ``quantization_config.llm_int8_skip_modules`` lists in 16 bit:
  not an input here (``unknowns``). Its notebooks train with TRL's SFTTrainer and
  ``fp16 = not is_bfloat16_supported(), bf16 = is_bfloat16_supported()``: the HF Trainer's
  accelerator runs native AMP, and accelerate's ``Accelerator.prepare_model`` then wraps the
  forward in ``convert_outputs_to_fp32`` (``accelerator.py``: ``model.forward =
  MethodType(convert_outputs_to_fp32(model.forward.__func__), model)``, from its 2023 form to
  its 2025 one, find_string ids 21392804382 / 466036003; ``utils/operations.py``
  ``ConvertOutputsToFp32.__call__`` returns ``convert_to_fp32(...)``, ``tensor.float()`` of every
  fp16 / bf16 tensor, ids 3725665944 / 328452011), so the
  16-bit logits Unsloth returns next to its loss get a float32 copy, alive until
  ``compute_loss`` drops the outputs, before backward (``trainer_fp32_logits``). The same
  wrapper runs for any HF Trainer job under fp16 / bf16; transformers' own loss upcasts the
  logits itself, so its planned region already holds the copy's bytes (transformers, above).
* torchtune (``recipes/*`` @1814feb): model built on the GPU in the recipe dtype, full checkpoint
  loaded on CPU and sharded param by param (``load_from_full_model_state_dict``: each full tensor
  moved to the GPU before its chunk is kept, ``full_tensor_load``; torchtune_load.py), saved by
  ``gather_cpu_state_dict`` param by param.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.versions import commit_date, names_day
from gpuwarden.types.plan import (
    Checkpointing,
    Framework,
    FsdpKind,
    LossImpl,
    Mode,
    Offload,
    PlanRequest,
    Precision,
    QuantKernel,
    SaveMode,
)

DTYPE_BYTES = {
    "fp32": 4,
    "float32": 4,
    "tf32": 4,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "float8": 1,
}


@dataclass(frozen=True, slots=True)
class StackProfile:
    """The memory behaviours of one stack (see the module docstring for where each is read)."""

    framework: Framework
    version: str
    # dtype from_pretrained / the loader materialises weights in when the user names none;
    # None: the checkpoint's own dtype (config torch_dtype), or the compute dtype
    load_dtype: str | None
    load_sharded: bool  # meta / zero.Init / sync_module_states: a sharded job loads per unit
    save: SaveMode
    fused_qkv: bool  # one Linear projects q, k and v
    quantizes_head: bool  # a bitsandbytes precision plugin swaps the LM head too
    dequant_copies: int  # bf16 copies of the largest 4-bit weight while it is used (fp16 + cast)
    fsdp_mixed_units: bool  # LoRA adapters share FSDP units with frozen weights (full-size grads)
    no_sync_accumulation: bool  # FSDP no_sync under accumulation: unsharded gradients kept
    holds_logits: bool  # the training loop keeps the previous step's logits until rebound
    shards_root: bool  # FSDP root (embedding, head) resharded after forward (own units)
    eval_generates: bool  # evaluation also generates with a KV cache of max_seq_length
    pp_keeps_units: bool  # with PP, FSDP units stay unsharded and gradients sync at the end
    default_eval_batch: int | None  # None: no evaluation unless --eval-batch; else micro_batch
    memory_reading: str  # what the stack prints as its peak memory
    native_gelu: bool = False  # F.gelu(approximate=...) in C++: one saved input, not gelu_new's 4
    lora_shared_qkv_input: bool = False  # LoRA on q/k/v of a fused QKV: one lora_A, one dropout
    bnb_pin: str | None = None  # the bitsandbytes release the stack's quantization requires
    compiled_loss: bool = False  # --compile compiles the cross-entropy too (fused upcast + NLL)
    pp_microbatches_are_stages: bool = False  # PP: microbatches default to the stage count
    loss_parallel: bool = False  # TP: DTensor loss_parallel() cross-entropy on vocabulary shards
    tp_gathers_inputs: bool = False  # DTensor TP: column-parallel matmuls keep gathered inputs
    unties_head: bool = False  # the model keeps an LM head of its own even when HF ties it
    # q reaches SDPA laid out (b, heads, s, d) (LitGPT: ``q = torch.cat((q_roped, ...))``), so
    # the flash kernel's output keeps that layout and merging the heads for the output
    # projection copies it: SDPA's saved output and the projection's input are two tensors
    heads_first_q: bool = False
    # torchao Float8Linear keeps the high-precision input and weight for backward (2025:
    # matmul_with_hp_or_float8_args); False: the fp8 input and fp8 weight (2024:
    # manual_float8_matmul_with_args_in_float8)
    float8_saves_hp: bool = False
    # full gradient checkpointing is reentrant (torch.utils.checkpoint use_reentrant=True):
    # transformers 4.x gradient_checkpointing_enable() passes it when given no kwargs.
    # CheckpointFunction.backward keeps the recomputed block's output while the block's backward
    # runs (training.recomputed_output), and under accelerate 1.x's FSDP1 a unit whose parameters
    # are all frozen (LoRA base blocks) keeps its checkpointed input and that input's gradient to
    # the end of backward (training.frozen_units_keep_checkpoints). Not read for other stacks.
    reentrant_checkpointing: bool = False
    # LoRA through PEFT (adapters fp32 on a half base by default: precision.peft_fp32_adapters);
    # False: the stack's own LoRA layers, adapters in the model dtype (LitGPT, torchtune)
    peft_lora: bool = True
    # TP splits the vocabulary (token embedding and LM head) across ranks, as Megatron's and
    # vLLM's VocabParallelEmbedding / ParallelLMHead do; False: every rank holds them whole
    # (LitGPT's generate/tp.py shards the blocks' Linears only; read for generation only)
    tp_shards_vocab: bool = True
    # under a *-mixed precision the stack builds the model in float32 and runs it under
    # torch.autocast (Lightning Fabric's MixedPrecision plugin: its init contexts leave the
    # default dtype alone, HalfPrecision's "*-true" set it): a frozen LoRA base stays fp32 and
    # every Linear's matmul keeps autocast's bf16 cast of its weight for the input's gradient
    mixed_builds_fp32: bool = False
    # the stack wraps the model so that its outputs come back in float32 whatever it computed
    # in (Lightning Fabric's ``precision.convert_output`` casts to torch's default dtype): the
    # loop holds float32 logits and the loss runs on them
    fp32_outputs: bool = False
    # Megatron DDP's contiguous main_grad buffer: allocated with the model (gradients alive
    # through every forward), reduced in place (no bucket copies); under mixed precision the
    # stack's recipe is Megatron's whatever the parallel layout (precision.stack_of)
    contiguous_grad_buffer: bool = False
    # Megatron's VocabParallelCrossEntropy: one fp32 copy of the logits turned into the softmax
    # in place and kept; backward writes the gradient into it (loss.py)
    vocab_parallel_loss: bool = False
    # Megatron's gradient_accumulation_fusion (on by default): Linear backward writes the weight
    # gradient straight into main_grad (wgrad_gemm_accum_fp32 / _fp16), no separate .grad
    fused_wgrad_accumulation: bool = False
    # Megatron-core's Transformer Engine layer (its GPT default): norms fused into the next
    # Linear or TENorm keep their 16-bit input and fp32 rsigma, no fp32 copy nor x̂
    # (tensors.Ctx.fused_norms); the bias-SwiGLU fusion keeps fc1's output only (Ctx.fused_glu);
    # q, k, v are split views of linear_qkv's output for any number of KV heads (Ctx.qkv_views)
    fused_norms: bool = False
    fused_glu: bool = False
    qkv_split_views: bool = False
    # Unsloth's Fast_CrossEntropyLoss: the 16-bit logits kept as they are with an fp32
    # logsumexp and the int64 label per row; backward writes the gradient into the logits (loss.py)
    unsloth_ce: bool = False
    # the HF Trainer's accelerator runs the model under fp16 / bf16 mixed precision, so
    # accelerate's convert_outputs_to_fp32 hands back a float32 copy of the 16-bit logits, alive
    # from the model's return to the end of compute_loss (loss.py); set for Unsloth, whose loss
    # makes no fp32 copy of its own (transformers' upcast in the loss already counts the copy's
    # bytes: module docstring, transformers)
    trainer_fp32_logits: bool = False
    # a sharded job loads each parameter's whole tensor onto the GPU and keeps this rank's chunk
    # of it (torchtune's load_from_full_model_state_dict: planner/torchtune_load.py), instead of
    # loading one FSDP unit at a time
    full_tensor_load: bool = False
    # the model keeps one float32 RoPE cos/sin table of its whole context as a buffer
    # (torchtune's build_rope_cache: torchtune_load.rope_table_bytes)
    fp32_rope_table: bool = False


HF = StackProfile(
    framework=Framework.HF,
    version="transformers 5.x, accelerate 1.x",
    load_dtype=None,
    load_sharded=True,
    save=SaveMode.FULL,
    fused_qkv=False,
    quantizes_head=False,
    dequant_copies=1,
    fsdp_mixed_units=False,
    no_sync_accumulation=False,
    holds_logits=False,
    shards_root=False,
    eval_generates=False,
    pp_keeps_units=False,
    default_eval_batch=None,
    memory_reading="torch.cuda.max_memory_allocated (what the user prints)",
)

PROFILES: dict[Framework, StackProfile] = {
    Framework.HF: HF,
    Framework.HF_LEGACY: replace(
        HF,
        framework=Framework.HF_LEGACY,
        version="transformers 4.3x-4.57",
        load_dtype="fp32",
        reentrant_checkpointing=True,
    ),
    Framework.TORCHTUNE: replace(
        HF,
        framework=Framework.TORCHTUNE,
        version="torchtune @1814feb (2024)",
        memory_reading="get_memory_stats: peak_memory_active / _alloc / _reserved",
        peft_lora=False,
        full_tensor_load=True,
        fp32_rope_table=True,
    ),
    Framework.LITGPT: StackProfile(
        framework=Framework.LITGPT,
        version="litgpt 0.4-0.5 (finetune/lora.py @01fe959), Lightning Fabric 2.x",
        load_dtype=None,
        load_sharded=True,
        save=SaveMode.FULL,
        fused_qkv=True,
        quantizes_head=True,
        dequant_copies=2,
        fsdp_mixed_units=True,
        no_sync_accumulation=True,
        holds_logits=True,
        shards_root=False,
        eval_generates=True,
        pp_keeps_units=False,
        default_eval_batch=0,
        memory_reading="'Memory used: X GB' = torch.cuda.max_memory_allocated() / 1e9",
        native_gelu=True,
        lora_shared_qkv_input=True,
        bnb_pin="0.42.0",
        unties_head=True,
        heads_first_q=True,
        peft_lora=False,
        tp_shards_vocab=False,
        mixed_builds_fp32=True,
        fp32_outputs=True,
    ),
}


PROFILES[Framework.UNSLOTH] = replace(
    PROFILES[Framework.HF_LEGACY],
    framework=Framework.UNSLOTH,
    version="unsloth 2024.3-2025.x (kernels @0050c73, llama.py 2024 / 2024.11 forms)",
    load_dtype=None,
    memory_reading="'Peak reserved memory = X GB.' = round(torch.cuda.max_memory_reserved() / "
    "1024**3, 3) (Unsloth's notebooks)",
    unsloth_ce=True,
    trainer_fp32_logits=True,
)


@dataclass(frozen=True, slots=True)
class DatedChange:
    """A torchtitan behaviour that changed at a dated commit (read in the PR named)."""

    since: tuple[int, int, int]  # the first commit date with ``value``
    field: str  # the StackProfile field it sets
    value: bool
    source: str


# torchtitan is versioned by its commits: each behaviour the planner keys to it, in date order.
# Before the first change (the 2024-12 read @9dec370): no compiled loss, PP microbatches = stages,
# torchao's 2024 Float8Linear, and tok_embeddings / norm / output in the FSDP root unit.
TORCHTITAN_CHANGES = (
    DatedChange(
        (2025, 2, 1),
        "float8_saves_hp",
        True,
        "torchao 0.10 (2025-02, torchtitan 0.0.2's float8 table) Float8Linear: "
        "matmul_with_hp_or_float8_args keeps the bf16 input (torchao issue #1850, 2025-03-07: "
        "'In Float8Linear forward input is saved in high precision'); the first such torchao "
        "commit not read",
    ),
    DatedChange(
        (2025, 4, 1),
        "compiled_loss",
        True,
        "PR #1033 (approved 2025-04-01): build_loss_fn compiles the cross-entropy when "
        "training.compile is set; from PR #755 (2024-12-19, 'turning off compile on loss "
        "function') through PR #859 (2025-02-19, 'TODO: compiling loss function causes CUDA "
        "errors') it ran eager",
    ),
    DatedChange(
        (2025, 4, 8),
        "pp_microbatches_are_stages",
        False,
        "PR #1073 (2025-04-08): pipeline_parallel_microbatch_size (default 1) replaces "
        "pipeline_parallel_microbatches (default: the stage count)",
    ),
    DatedChange(
        (2025, 7, 29),
        "shards_root",
        True,
        "PR #1094 'improve reshard_after_forward logic' (landed after its 2025-07-29 rebase, "
        "issue #1091): tok_embeddings and [norm, output] become FSDP units of their own; before "
        "it they sat in the root unit, which FSDP2 never reshards after forward ('For the root, "
        "do not reshard after forward', _fsdp_state._lazy_init): embedding and head stay "
        "unsharded from the start of forward to the end of backward",
    ),
)
# the oldest torchtitan read (PR #755, 2024-12-19): older commits are planned as of it
TORCHTITAN_EARLIEST = (2024, 12, 19)
# pytorch PR #155319 (2025-06-06): FSDP2 keeps the root unsharded only when fully_shard was given
# no reshard_after_forward; torchtitan before PR #1094 passes True, so with a torch from then on
# its root unit is resharded after forward (a torch release the request does not name)
TORCH_RESPECTS_ROOT_RESHARD = (2025, 6, 6)

# HF's profile (the baseline: profile() falls back to it) but for what torchtitan does its own
# way; TORCHTITAN_CHANGES then applies by commit date
_TORCHTITAN_BEFORE = replace(
    HF,
    framework=Framework.TORCHTITAN,
    version="torchtitan",
    save=SaveMode.SHARDED,
    pp_keeps_units=True,
    memory_reading="'memory: X GiB' = torch.cuda.max_memory_reserved",
    pp_microbatches_are_stages=True,
    loss_parallel=True,
    tp_gathers_inputs=True,
)


def _iso(date: tuple[int, int, int]) -> str:
    return "{:04d}-{:02d}-{:02d}".format(*date)


@cache
def torchtitan_profile(
    date: tuple[int, int, int], framework: Framework = Framework.TORCHTITAN, version: str = ""
) -> StackProfile:
    """torchtitan's profile at a commit date: every TORCHTITAN_CHANGES entry up to it applied."""
    # fields named by TORCHTITAN_CHANGES (a test checks each is a bool field of StackProfile)
    changes: dict[str, Any] = {c.field: c.value for c in TORCHTITAN_CHANGES if c.since <= date}
    label = version or f"torchtitan {_iso(date)} (--torchtitan-version)"
    return replace(_TORCHTITAN_BEFORE, framework=framework, version=label, **changes)


PROFILES[Framework.MEGATRON] = replace(
    HF,
    framework=Framework.MEGATRON,
    version="Megatron-core (NVIDIA/Megatron-LM @0011998; DDP, optimizer, cross_entropy)",
    save=SaveMode.SHARDED,
    memory_reading="'[Rank N] (after K iterations) memory (MB) | ... | max allocated: M' = "
    "torch.cuda.max_memory_allocated() / 2**20 (megatron/training/utils.py report_memory)",
    peft_lora=False,
    contiguous_grad_buffer=True,
    vocab_parallel_loss=True,
    fused_wgrad_accumulation=True,
    fused_qkv=True,
    qkv_split_views=True,
    fused_norms=True,
    fused_glu=True,
    native_gelu=True,
)


def megatron_grad_fp32(request: PlanRequest) -> bool:
    """Whether Megatron's main_grad buffer is fp32: as asked, else Megatron's default (forced
    on under bf16 and fp8, whose params are bf16; off under fp16)."""
    if request.grad_reduce_in_fp32 is not None:
        return request.grad_reduce_in_fp32
    return request.precision is not Precision.FP16_MIXED


PROFILES[Framework.TORCHTITAN] = torchtitan_profile(
    (2025, 6, 13), Framework.TORCHTITAN, "torchtitan 2025-06 @e7c0cae (torchao 0afa4c1)"
)
PROFILES[Framework.TORCHTITAN_2024] = torchtitan_profile(
    (2024, 12, 31), Framework.TORCHTITAN_2024, "torchtitan 2024-12 @9dec370 (torchao eab345c)"
)
TORCHTITAN_FAMILY = frozenset({Framework.TORCHTITAN, Framework.TORCHTITAN_2024})


def profile(request: PlanRequest) -> StackProfile:
    return framework_profile(request.framework, request.torchtitan_version)


def model_checkpointing(request: PlanRequest) -> bool:
    """Whether the job checkpoints through the model's own switch (transformers'
    ``gradient_checkpointing_enable``: ``LlamaModel.forward`` turns ``use_cache`` off "if
    self.gradient_checkpointing and self.training", the 4.3x form as copied in find_string id
    6072359134; 4.31 itself is not in the index). torch's ``apply_activation_checkpointing``
    with ``checkpoint_wrapper`` (``--checkpoint-wrapper``: llama-recipes'
    ``apply_fsdp_checkpointing``, accelerate's ``fsdp_activation_checkpointing``) wraps each
    block and never sets that switch: the cache is built."""
    return request.checkpointing is not Checkpointing.NONE and not wrapper_checkpointing(request)


def wrapper_checkpointing(request: PlanRequest) -> bool:
    """Whether every block is checkpointed by torch's ``checkpoint_wrapper``: the wrapper
    checkpoints a whole block, so it describes ``--checkpointing full`` only; selective and op
    checkpointing stay the stack's own (as ``--exact`` applies them), whatever the flag says."""
    return request.checkpoint_wrapper and request.checkpointing is Checkpointing.FULL


def reentrant_checkpointing(request: PlanRequest) -> bool:
    """Full checkpointing through the stack's reentrant path (``reentrant_checkpointing``:
    transformers 4.x). torch's ``checkpoint_wrapper`` defaults to ``CheckpointImpl.NO_REENTRANT``,
    which llama-recipes and accelerate also pass."""
    full = request.checkpointing is Checkpointing.FULL
    return profile(request).reentrant_checkpointing and full and not wrapper_checkpointing(request)


def framework_profile(framework: Framework, torchtitan_version: str | None = None) -> StackProfile:
    """The stack's profile; torchtitan's at the commit date named, else at its own read."""
    if framework in TORCHTITAN_FAMILY and torchtitan_version is not None:
        date = max(torchtitan_date(torchtitan_version), TORCHTITAN_EARLIEST)
        return torchtitan_profile(date, framework)
    return PROFILES.get(framework, HF)


def torchtitan_date(version: str) -> tuple[int, int, int]:
    """The commit date a ``torchtitan_version`` names, or InvalidConfigError."""
    date = commit_date(version)
    if date is None:
        raise InvalidConfigError(
            f"torchtitan_version {version!r} is not a commit date",
            hint="name the checkout by its commit date, YYYY-MM-DD or YYYY-MM (git log -1 "
            "--format=%cs in the torchtitan checkout)",
            reference="torchtitan-version-unreadable",
        )
    return date


def torchtitan_release_notes(version: str) -> dict[str, str]:
    """Plan notes for a torchtitan commit date the behaviour table cannot place exactly."""
    date = torchtitan_date(version)
    notes: dict[str, str] = {}
    if date < TORCHTITAN_EARLIEST:
        notes["stack_unknown"] = (
            f"torchtitan before {_iso(TORCHTITAN_EARLIEST)} was not read: planned as of then"
        )
    own_units = next(c.since for c in TORCHTITAN_CHANGES if c.field == "shards_root")
    if TORCH_RESPECTS_ROOT_RESHARD <= date < own_units:
        respects = datetime.date(*TORCH_RESPECTS_ROOT_RESHARD)
        notes["torchtitan_root"] = (
            "the FSDP root unit (embedding, final norm, output) is planned unsharded from forward "
            f"to backward, as torch up to {respects - datetime.timedelta(days=1)} keeps it; a "
            f"torch from {respects} on (pytorch PR #155319) reshards it after forward as this "
            "torchtitan asks (reshard_after_forward=True): its peak can be lower by the embedding"
        )
    # a change on the 1st is one dated by its month only: the whole month has it
    inside = [c for c in TORCHTITAN_CHANGES if c.since[:2] == date[:2] and c.since[2] > 1]
    if inside and not names_day(version):
        names = ", ".join(f"{c.field} on {_iso(c.since)}" for c in inside)
        notes["torchtitan_release"] = (
            f"torchtitan changed during {version.strip()} ({names}): planned as at the month's "
            "end; name the day (YYYY-MM-DD) for a checkout from before it"
        )
    return notes


def vocab_shards(request: PlanRequest) -> int:
    """Ranks one copy of the token embedding and LM head is split over: the TP degree, or 1
    where the stack's TP path keeps them whole on every rank (LitGPT's generation; LitGPT has
    no TP training, which stays planned Megatron-style with a ``stack_unknown`` note)."""
    whole = not profile(request).tp_shards_vocab and request.mode is Mode.INFER
    return 1 if whole else request.tp


def dtype_bytes(name: str) -> float:
    """Bytes per element of a dtype name as users write it (``bf16``, ``torch.float32``)."""
    key = name.lower().removeprefix("torch.")
    return DTYPE_BYTES[key]


def checkpoint_dtype(request: PlanRequest) -> str | None:
    """The dtype the model's config says its checkpoint is stored in (``torch_dtype``, read by
    the catalog), when it is one whose size is known."""
    stored = request.model.checkpoint_dtype
    name = None if stored is None else stored.lower().removeprefix("torch.")
    return name if name in DTYPE_BYTES else None


def load_dtype(request: PlanRequest, compute_bytes: float) -> tuple[float, str]:
    """(bytes per weight while loading, why): the request's ``--load-dtype``, else the stack's.

    A bitsandbytes (int8 / NF4) load under transformers turns ``torch_dtype=None`` into fp16.
    """
    if request.load_dtype is not None:
        return dtype_bytes(request.load_dtype), f"--load-dtype {request.load_dtype}"
    prof = profile(request)
    quantized = request.precision in {Precision.NF4, Precision.INT8, Precision.INT4}
    hf = request.framework in {Framework.HF, Framework.HF_LEGACY}
    if hf and quantized:
        return 2, "bitsandbytes load: torch_dtype=None becomes float16 (transformers quantizer)"
    if prof.load_dtype is not None:
        return dtype_bytes(prof.load_dtype), (
            f"{prof.version}: from_pretrained without torch_dtype loads {prof.load_dtype}"
        )
    if hf and (stored := checkpoint_dtype(request)) is not None:
        return dtype_bytes(stored), f"{prof.version}: the checkpoint's dtype ({stored})"
    return compute_bytes, f"{prof.version}: built in the compute dtype"


def save_mode(request: PlanRequest) -> SaveMode:
    if request.save is not None:
        return request.save
    return profile(request).save


def eval_batch(request: PlanRequest) -> int:
    """Sequences per evaluation forward during training (0: no evaluation phase)."""
    if request.mode is Mode.INFER:
        return 0
    if request.eval_batch is not None:
        return request.eval_batch
    default = profile(request).default_eval_batch
    if default is None:
        return 0
    return default or request.micro_batch


def unknowns(request: PlanRequest) -> dict[str, str]:
    """Plan notes for knob combinations whose behaviour in this stack nobody here has read."""
    fw = request.framework
    notes: dict[str, str] = {}
    lora = request.mode in {Mode.LORA, Mode.QLORA}
    if fw in TORCHTITAN_FAMILY:
        if lora:
            notes["stack_unknown"] = (
                "torchtitan ships no LoRA / QLoRA recipe: planned with transformers' PEFT "
                "behaviour, not read in torchtitan"
            )
        if request.zero_stage:
            notes["stack_unknown"] = "torchtitan shards with FSDP2, not DeepSpeed: ZeRO not read"
        if request.model.moe is not None and request.checkpointing is Checkpointing.OP:
            notes["stack_unknown"] = (
                "op-level SAC on MoE blocks (grouped-mm experts are not in torchtitan's save "
                "list): planned with the dense blocks' rule"
            )
        if request.compile and request.tp > 1 and profile(request).compiled_loss:
            notes["stack_unknown"] = (
                "a compiled loss under loss_parallel() (TP) was not read: planned as the eager "
                "loss_parallel cross-entropy"
            )
    if fw is Framework.LITGPT:
        # generate/tp.py is LitGPT's tensor-parallel path, read for inference (module docstring)
        tp_training = request.tp > 1 and request.mode is not Mode.INFER
        if tp_training or request.pp > 1 or request.zero_stage:
            notes["stack_unknown"] = (
                "LitGPT's finetune scripts use FSDP only (no TP / PP / DeepSpeed): this layout "
                "was not read in LitGPT"
            )
        if request.mode is Mode.QLORA and request.num_gpus > 1:
            notes["stack_unknown"] = (
                "LitGPT raises NotImplementedError for quantization on several GPUs "
                "(finetune/lora.py): planned as if it ran"
            )
    if fw is Framework.MEGATRON:
        if unread := _megatron_unread(request):
            notes["stack_unknown"] = "; ".join(unread)
        if request.precision is Precision.FP8 and request.mode is not Mode.INFER:
            notes["float8"] = (
                "Transformer Engine fp8 planned without --fp8-param-gather: bf16 params, and TE's "
                "fp8 weight and its transpose per Linear; fp8 params (DDP's uint8 param buffer) "
                "were not planned"
            )
    if request.precision is Precision.FP8 and fw in TORCHTITAN_FAMILY:
        notes["float8"] = _float8_note(request)
    if fw in TORCHTITAN_FAMILY and request.torchtitan_version is not None:
        notes.update(torchtitan_release_notes(request.torchtitan_version))
    if fw is Framework.UNSLOTH:
        notes.update(_unsloth_unread(request))
    return notes


def _unsloth_unread(request: PlanRequest) -> dict[str, str]:
    """What an Unsloth plan leaves out (module docstring): its losses other than
    Fast_CrossEntropyLoss and the 16-bit modules of its dynamic 4-bit uploads."""
    notes: dict[str, str] = {}
    if request.mode is Mode.INFER:
        return notes
    if request.loss is LossImpl.FULL:
        notes["unsloth_loss"] = (
            "Unsloth's Fast_CrossEntropyLoss on the full 16-bit logits (Unsloth 2024.x, the "
            "2024.11-2025 llama.py that sets HAS_CUT_CROSS_ENTROPY = False, or "
            "UNSLOTH_RETURN_LOGITS=1); later releases may take cut-cross-entropy or unsloth-zoo's "
            "unsloth_fused_ce_loss, whose chunks follow the free memory at run time: not planned"
        )
    else:
        other = "torchtune's chunked" if request.loss is LossImpl.CHUNKED else "Liger's fused"
        notes["stack_unknown"] = (
            f"Unsloth's fused losses (cut-cross-entropy, unsloth_fused_ce_loss) were not planned:"
            f" --loss {request.loss.value} planned as {other} loss"
        )
    if request.mode is Mode.QLORA:
        notes["unsloth_dynamic_4bit"] = (
            "every block Linear planned in 4 bit: an Unsloth 'dynamic 4-bit' upload keeps the "
            "modules its quantization_config.llm_int8_skip_modules lists in 16 bit (more memory)"
        )
    return notes


def _megatron_unread(request: PlanRequest) -> list[str]:
    """``--framework megatron`` knobs that are not Megatron's own, or not read in it: each is
    planned with another stack's behaviour (Megatron's buffer, loss and TE layer stay)."""
    unread = []
    if request.mode in {Mode.LORA, Mode.QLORA}:
        unread.append(
            "Megatron's own LoRA (NeMo / Megatron-Bridge PEFT) was not read: planned with "
            "LoRA adapters in the model dtype"
        )
    if request.mode is Mode.INFER:
        unread.append(
            "Megatron's inference engines were not read: planned as transformers' generate"
        )
        return unread
    if request.fsdp is not None or request.zero_stage >= 2:
        unread.append(
            "Megatron shards optimizer states (--use-distributed-optimizer = --zero 1); its "
            "FSDP paths were not read: planned with torch FSDP's / DeepSpeed's sharding around "
            "Megatron's gradient buffer, loss and layer"
        )
    if request.precision in {Precision.BF16, Precision.FP16} and request.mode is Mode.TRAIN:
        unread.append(
            "Megatron's --bf16 / --fp16 keep fp32 main params (Float16OptimizerWithFloat16Params)"
            ": this pure 16-bit plan has none; bf16-mixed / fp16-mixed plans Megatron's"
        )
    if request.compile:
        unread.append(
            "Megatron does not torch.compile its model (TE kernels, its own fusions): "
            "--compile planned as Inductor's"
        )
    if request.loss is not LossImpl.FULL:
        other = "torchtune's chunked" if request.loss is LossImpl.CHUNKED else "Liger's fused"
        unread.append(
            "Megatron's loss is VocabParallelCrossEntropy (--loss full): --loss "
            f"{request.loss.value} planned as {other} loss"
        )
    if request.offload is not Offload.NONE:
        unread.append(
            "Megatron's --optimizer-cpu-offload planned at --optimizer-offload-fraction 1.0 "
            "(HybridDeviceOptimizer: main params, Adam states and fp32 gradient copies on the "
            "host, the main_grad buffer on the GPU); a fraction below 1 was not read, and the "
            "step's per-parameter fp32 conversion of a 16-bit gradient before its copy to the "
            "host (one shard at a time) is not counted"
        )
    if request.optimizer_in_backward:
        unread.append(
            "Megatron does not step the optimizer in backward: planned as torchtune's "
            "optimizer_in_bwd"
        )
    return unread


def _float8_note(request: PlanRequest) -> str:
    """What torchao's Float8Linear of the stack's date keeps for backward, as planned."""
    if profile(request).float8_saves_hp:
        text = (
            "torchao Float8Linear (2025, matmul_with_hp_or_float8_args) keeps the bf16 input "
            "and a view of the weight for backward"
        )
    else:
        text = (
            "torchao Float8Linear (2024, manual_float8_matmul_with_args_in_float8) keeps the "
            "fp8 input and the fp8 weight for backward"
        )
        if saves_fp8_weights(request):
            text += (
                "; without activation checkpointing that is an unsharded fp8 copy of every "
                "Float8Linear weight (float8.force_recompute_fp8_weight_in_bwd recomputes it)"
            )
    if request.float8_precompute_scales:
        text += "; precomputed scales: one fp32 per weight, no memory to plan"
    return text


def saves_fp8_weights(request: PlanRequest) -> bool:
    """torchao of 2024 saves each Float8Linear's fp8 weight for backward: a copy of the whole
    weight (unsharded) unless activation checkpointing recomputes the block, the weight is
    gathered in fp8 already (a view of FSDP's buffer, freed at reshard), or
    ``force_recompute_fp8_weight_in_bwd`` recomputes it (torchao config docstring: "the entire
    fp8_weight, instead of the sharded weight may be saved")."""
    return (
        request.precision is Precision.FP8
        and request.framework in TORCHTITAN_FAMILY
        and not profile(request).float8_saves_hp
        and request.checkpointing is Checkpointing.NONE
        and not request.float8_recompute_weight
        and not request.float8_all_gather
    )


@dataclass(frozen=True, slots=True)
class StackDefaults:
    """Knobs a user of the stack gets without naming them; None: the stack sets nothing."""

    precision: Precision | None = None
    checkpointing: Checkpointing | None = None
    fsdp: FsdpKind | None = None
    bnb_version: str | None = None  # the bitsandbytes release the stack pins
    pp_microbatch_size: int | None = None
    # the library of its 4-bit Linears where the stack brings its own (torchtune: torchao)
    quant_kernel: QuantKernel | None = None


def stack_defaults(
    framework: Framework, mode: Mode, num_gpus: int, torchtitan_version: str | None = None
) -> StackDefaults:
    """Knobs a user of the stack gets without naming them (the CLI fills only unset knobs).

    LitGPT: ``bf16-true`` (``get_default_supported_precision(training=True)``); on several GPUs
    its scripts build ``FSDPStrategy`` with ``activation_checkpointing_policy={Block}``; its
    bitsandbytes is the release it pins (``bnb_version``).
    torchtitan: its llama3 train configs set ``ac_mode = "selective"``,
    ``selective_ac_option = "op"`` and shard with FSDP2; as of 2025-06 a PP local batch is split
    into microbatches of ``pipeline_parallel_microbatch_size = 1`` (2024-12: into as many
    microbatches as there are stages, ``activations.pipeline_microbatches``).
    """
    training = mode is not Mode.INFER
    sharded = FsdpKind.FULL if num_gpus > 1 and training else None
    if framework is Framework.LITGPT:
        return StackDefaults(
            precision=Precision.BF16 if mode in {Mode.TRAIN, Mode.LORA} else None,
            checkpointing=Checkpointing.FULL if sharded else None,
            fsdp=sharded,
            bnb_version=PROFILES[framework].bnb_pin,
        )
    if framework is Framework.TORCHTUNE and mode is Mode.QLORA:
        # its QLoRA builders quantize with torchao (modules/peft/lora.py: to_nf4 / linear_nf4)
        return StackDefaults(quant_kernel=QuantKernel.TORCHAO)
    if framework in TORCHTITAN_FAMILY and training:
        by_stages = framework_profile(framework, torchtitan_version).pp_microbatches_are_stages
        return StackDefaults(
            checkpointing=Checkpointing.OP,
            fsdp=sharded,
            pp_microbatch_size=None if by_stages else 1,
        )
    return StackDefaults()
