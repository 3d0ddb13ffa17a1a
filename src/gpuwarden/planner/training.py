"""Training and fine-tuning: bytes alive per GPU at each phase of a step.

The peak is the largest phase, not the sum of the components (memory.md §2.11, §5.4):

* forward: all activations alive, the loss and its backward (fp32 log-softmax gradients);
* backward-end: all gradients (but the first block's and an untied embedding's), one block's
  activations (recomputed under checkpointing) and their gradients;
* embedding-backward (tied embedding): the lookup's dense gradient is added to the one the LM
  head started at the beginning of backward (out of place), next to every other gradient;
* optimizer-step: parameters, gradients, states and the step's temporaries.

Gradients exist during the forward only under gradient accumulation or ``zero_grad(set_to_none=
False)`` (otherwise ``zero_grad`` sets them to None between steps); AdamW states exist from the
first step on and are counted throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwarden.planner import mixers, stacks
from gpuwarden.planner.activations import SOURCE as ACT_SOURCE
from gpuwarden.planner.activations import (
    Activations,
    activations,
    pipeline_microbatches,
    training_of,
)
from gpuwarden.planner.dora import weight_norm_peak
from gpuwarden.planner.layout import (
    Layout,
    StageParams,
    adapted_names,
    all_linear_names,
    largest_block_tensor,
    largest_tensor,
    layout,
    lora_parameters,
    pipeline_stages,
    stage_groups,
    stage_layers,
    stage_params,
)
from gpuwarden.planner.lifecycle import (
    EVALUATION,
    LOAD,
    SAVE,
    dequant_bytes,
    eval_phase,
    load_phase,
    packed_head,
    save_phase,
)
from gpuwarden.planner.loss import LossBuffers, chunks_head, head_calls, loss_buffers
from gpuwarden.planner.optimizer import (
    StateCost,
    parameter_step_temporaries,
    state_cost,
    step_temporaries,
)
from gpuwarden.planner.outputs import (
    HeldOutputs,
    held_outputs,
    label_len,
    peak_step_notes,
    previous_outputs,
)
from gpuwarden.planner.precision import Recipe, Stack
from gpuwarden.planner.quant_kernel import (
    GRAPH_HELD_TERM,
    nf4_notes,
    unsharded_quant_state,
)
from gpuwarden.planner.torchtune_load import (
    ROPE_TABLE_SOURCE,
    rope_table_bytes,
    rope_table_detail,
)
from gpuwarden.types.model import ModelSpec, Structure
from gpuwarden.types.plan import (
    ActivationFacts,
    Checkpointing,
    ComponentFacts,
    FsdpKind,
    GradientFacts,
    Mode,
    Offload,
    Optimizer,
    ParameterFacts,
    PeakStep,
    Phase,
    PlanRequest,
    TrainLoop,
)
from gpuwarden.units import GIB, MIB

# DeepSpeed ZeRO defaults (deepspeed/runtime/zero/config.py, in elements; memory.md §2.6):
ZERO_BUCKET = 500_000_000  # reduce_bucket_size / allgather_bucket_size
ZERO3_PERSISTENCE = 100_000  # stage3_param_persistence_threshold: smaller tensors stay gathered
# ZeRO-1/2 offload_optimizer: set_norm_for_param_grad_in_gpu takes each gradient slice's norm on a
# float64 copy of it (``.double().norm(2)``, stage_1_and_2.py)
NORM_COPY_BYTES = 8


@dataclass(frozen=True, slots=True)
class Assembled:
    phases: tuple[Phase, ...]
    sources: dict[str, tuple[str, str]]  # component → (source, detail)
    host_bytes: int
    unified_bytes: int  # paged optimizer states: CUDA unified memory, outside the allocator
    dynamic_bytes: int  # allocated and freed every step (drives allocator slack)
    tensors: int  # large tensors alive at the peak (segment rounding)
    trainable: int
    stage: int
    notes: dict[str, str]
    facts: dict[str, ComponentFacts] = field(default_factory=dict)  # component → its numbers


def _quantized_weight_bytes(request: PlanRequest, sp: StageParams, rc: Recipe) -> float:
    """Weights as stored: quantized Linears, the rest in the compute (or load) dtype; a plugin
    that swaps every nn.Linear packs the LM head too (LitGPT)."""
    head = _packed_head(request, sp, rc)
    linear = sp.linear + sp.expert + head
    return linear * rc.linear_bytes + (sp.other + sp.embedding + sp.head - head) * rc.weight_bytes


def _packed_head(request: PlanRequest, sp: StageParams, rc: Recipe) -> float:
    """LM-head parameters a quantizer packs on this stage (0 where it keeps the head 16-bit)."""
    return min(sp.head, packed_head(request, layout(request), rc))


def _gradient_params(request: PlanRequest, lay: Layout, sp: StageParams, trainable: float) -> float:
    """Parameters that get a gradient buffer. FSDP with use_orig_params=True gives a unit that
    mixes frozen and trainable parameters one gradient for the whole flat parameter (PyTorch
    FSDP docs, "frozen parameters"): LitGPT wraps each Block with its LoRA adapters inside."""
    lora = request.mode in {Mode.LORA, Mode.QLORA}
    mixed = stacks.profile(request).fsdp_mixed_units and request.fsdp is not None
    if lora and mixed and lay.param_shard > 1:
        return trainable + sp.total - sp.embedding - sp.head
    return trainable


def _grad_shard(request: PlanRequest, lay: Layout) -> int:
    """Ranks a gradient is split over while it is alive: FSDP's no_sync accumulates unsharded
    gradients between optimizer steps (LitGPT's fabric.no_backward_sync)."""
    accumulating = request.grad_accum > 1 and request.fsdp is not None
    if accumulating and stacks.profile(request).no_sync_accumulation:
        return 1
    if _pp_keeps_units(request):
        return 1  # the PP schedule syncs gradients at the last microbatch only
    return lay.grad_shard


def _pp_keeps_units(request: PlanRequest) -> bool:
    """torchtitan with pipeline parallelism: apply_fsdp(reshard_after_forward=False) so that
    microbatches do not re-gather, and the pipeline stage runs every backward but the last with
    set_requires_gradient_sync(False): the stage's units stay unsharded through the step and
    its gradients accumulate unsharded (in the fp32 reduce dtype)."""
    prof = stacks.profile(request)
    return prof.pp_keeps_units and request.pp > 1 and request.fsdp is not None


def frozen_units_keep_checkpoints(request: PlanRequest) -> bool:
    """FSDP1 reshards a unit whose parameters are all frozen (LoRA / QLoRA base blocks: PEFT's
    ``fsdp_auto_wrap_policy`` gives each adapter Linear a unit of its own) from a multi-grad hook
    on the unit's *input* (torch ``_runtime_utils._register_post_backward_reshard_only_hook``,
    PR #101982). ``register_multi_grad_hook`` keeps the inputs' grad_fns in its closure until
    FSDP removes the hook at the end of backward; under reentrant checkpointing each input is
    the recompute's detached leaf, whose grad_fn is an ``AccumulateGrad`` that owns it, and
    ``CheckpointFunction.backward`` accumulates the block's input gradient into its ``.grad``.
    So every block's checkpointed input and its gradient stay alive until backward ends.
    That needs the checkpoint around the unit's call (transformers' loop checkpoints
    ``decoder_layer.__call__``); torch's ``checkpoint_wrapper`` applied after FSDP runs inside the
    unit, whose input is then the previous block's output and keeps nothing (a CPU trace with
    gloo, 2 ranks, 6 frozen blocks: 11 more block-stream tensors alive at the end of backward
    with the reentrant checkpoint outside the units, none with either wrapper inside)."""
    if request.fsdp is None or not stacks.reentrant_checkpointing(request):
        return False
    return request.mode in {Mode.LORA, Mode.QLORA}


def frozen_unit_inputs(request: PlanRequest, rc: Recipe, lay: Layout, blocks: int) -> float:
    """Bytes the hooks of ``frozen_units_keep_checkpoints`` add at the end of backward: the input
    (residual stream) of every block on this stage but the first, which is being recomputed, and
    its gradient (same shape and dtype). An encoder-decoder's decoder blocks see its labels."""
    if not frozen_units_keep_checkpoints(request) or blocks < 2:
        return 0.0
    spec = request.model
    b = pipeline_microbatches(request)[0]
    width = spec.hidden_size * rc.res_bytes / (lay.tp if request.sequence_parallel else 1)
    n_enc = spec.num_encoder_layers if spec.structure is Structure.ENCODER_DECODER else 0
    n_enc = min(n_enc, blocks)
    per_block_tokens = [request.seq_len * b / lay.cp] * n_enc + [
        label_len(request) * b / lay.cp
    ] * (blocks - n_enc)
    return 2 * width * (sum(per_block_tokens) - per_block_tokens[0])


def block_stream_bytes(request: PlanRequest, rc: Recipe, lay: Layout, *, decoder: bool) -> float:
    """One residual-stream tensor of a block (an encoder-decoder's decoder blocks see its
    labels), for the first micro-batch of this stage."""
    width = request.model.hidden_size * rc.res_bytes / (lay.tp if request.sequence_parallel else 1)
    enc_dec = request.model.structure is Structure.ENCODER_DECODER
    tokens = label_len(request) if decoder and enc_dec else request.seq_len
    return width * tokens * pipeline_microbatches(request)[0] / lay.cp


def recomputed_output(request: PlanRequest, rc: Recipe, lay: Layout, *, decoder: bool) -> float:
    """The recomputed block's output, alive through the block's backward under reentrant full
    checkpointing (the stack's ``reentrant_checkpointing``); 0 otherwise."""
    if not stacks.reentrant_checkpointing(request):
        return 0.0
    return block_stream_bytes(request, rc, lay, decoder=decoder)


def zero3_persistent(spec: ModelSpec, lay: Layout, stage: int) -> float:
    """Parameters of one GPU that DeepSpeed ZeRO-3 keeps gathered for the whole step.

    Tensors of fewer than ``stage3_param_persistence_threshold`` (1e5) elements are marked
    ``ds_persist`` and never released after their first all-gather: the blocks' norm weights and
    biases (hidden-size vectors), Linear biases, small routers and the final norm.
    """
    blocks = spec.parameters.layers
    start = sum(stage_layers(len(blocks), lay.pp, s) for s in range(stage))
    count = stage_layers(len(blocks), lay.pp, stage)
    small = spec.hidden_size < ZERO3_PERSISTENCE  # norm weights / biases are hidden-size vectors
    total = 0.0
    for first, times, _ in stage_groups(blocks, start, count, 0):
        layer = blocks[first]
        kept = (layer.norms + layer.other) if small else 0.0
        if 0 < layer.router < ZERO3_PERSISTENCE:
            kept += layer.router
        for lin in layer.linears:
            if lin.bias and lin.out_features / lay.tp < ZERO3_PERSISTENCE:
                kept += lin.count * lin.out_features / (lay.tp * (lay.ep if lin.expert else 1))
        total += kept * times
    if stage == lay.pp - 1 and small:
        total += spec.parameters.final_norm
    return total


def zero3_largest_tensor(
    spec: ModelSpec,
    lay: Layout,
    stage: int,
    *,
    linear_bytes: float = 1.0,
    other_bytes: float = 1.0,
) -> float:
    """Size of the largest single parameter tensor of one GPU of ``stage``: elements by default,
    bytes when given the bytes per parameter of the blocks' Linears and of the rest.

    DeepSpeed gathers whole tensors: this is how far a gather can overshoot
    stage3_max_live_parameters. Routed experts stored as one 3-D parameter per projection
    (transformers ≥ 5, "experts.*") are one tensor; older per-expert Linears are one each.
    """
    blocks = spec.parameters.layers
    start = sum(stage_layers(len(blocks), lay.pp, s) for s in range(stage))
    count = stage_layers(len(blocks), lay.pp, stage)
    largest = 0.0
    for first, _, _ in stage_groups(blocks, start, count, 0):
        for lin in blocks[first].linears:
            size = lin.in_features * lin.out_features / lay.tp
            if lin.expert and lin.name.startswith("experts."):
                size *= lin.count / lay.ep
            largest = max(largest, size * linear_bytes)
    p = spec.parameters
    if stage == 0:
        largest = max(largest, p.embedding / lay.tp * other_bytes)
    if stage == lay.pp - 1:
        largest = max(largest, (p.lm_head or p.embedding) / lay.tp * other_bytes)
    return largest


def _zero3_element_bytes(rc: Recipe) -> float:
    """Bytes of one stored element of the gathered weights: the param dtype, or for 4-bit weights
    the bf16/fp16 storage they are packed into (bnb_4bit_quant_storage), int8 for 8-bit."""
    if rc.linear_bytes >= rc.weight_bytes:
        return rc.weight_bytes
    return float(rc.act_bytes) if rc.linear_bytes < 1 else 1.0


@dataclass(frozen=True, slots=True)
class _Comm:
    forward: float
    backward: float
    step: float
    detail: str


def _sharded_weights(st: ModelStates) -> float:
    """The weight bytes the sharding stack gathers: all but the replicated ones."""
    return st.weights - st.replicated


def _comm(
    request: PlanRequest, rc: Recipe, lay: Layout, sp: StageParams, st: ModelStates, stage: int
) -> _Comm:
    """Communication buffers and gathered parameters of the sharding stack, per phase."""
    stack = rc.stack
    if stack is Stack.FSDP:
        return _fsdp_comm(request, rc, lay, sp, st, stage == lay.pp - 1)
    if stack is Stack.DEEPSPEED and request.zero_stage >= 3:
        return _zero3_comm(request, rc, lay, sp, st, stage)
    if stack is Stack.DEEPSPEED and request.zero_stage >= 1 and lay.state_shard > 1:
        return _zero12_comm(rc, st.trainable)
    if lay.dp * lay.cp > 1 and st.trainable and stack in {Stack.PLAIN, Stack.AMP}:
        copy = st.trainable * rc.grad_bytes
        detail = "DDP buckets: a second copy of the gradients (gradient_as_bucket_view=False)"
        return _Comm(copy, copy, copy, detail)
    return _Comm(0.0, 0.0, 0.0, "")


def _fsdp_comm(
    request: PlanRequest, rc: Recipe, lay: Layout, sp: StageParams, st: ModelStates, last: bool
) -> _Comm:
    """FSDP: the unsharded units in forward, + one block's unsharded gradients in backward (+ the
    LM head's, where its unit is reduced only at the end of backward: ``_fsdp_head_grad``)."""
    trainable, weights = st.trainable, _sharded_weights(st)
    # weights holds the LoRA adapters too (trainable, when they are all that trains)
    held = sp.total + (trainable if request.mode in {Mode.LORA, Mode.QLORA} else 0.0)
    unit_bytes = weights / held if held else rc.weight_bytes

    # MixedPrecision(param_dtype=bf16) gathers units in bf16; a block's bytes are its
    # (possibly packed 4-bit) Linears and the rest, the root's (embedding, head) are unquantized
    def cast(per_param: float) -> float:
        return min(per_param, 2.0) if rc.act_bytes == 2 else per_param

    in_blocks = held - sp.embedding - sp.head  # blocks' params (+ adapters)
    block_bytes = weights - (sp.embedding + sp.head) * rc.weight_bytes
    if request.float8_all_gather:
        # torchtitan enable_fsdp_float8_all_gather: Float8Linear weights gathered in fp8
        block_bytes -= (sp.linear + sp.expert) * (cast(rc.linear_bytes) - 1)
    compute = cast(block_bytes / in_blocks if in_blocks > 0 else unit_bytes)
    if request.float8_all_gather:
        compute = block_bytes / in_blocks if in_blocks > 0 else unit_bytes
    root_bytes = cast(rc.weight_bytes)
    own_units = request.fsdp_shard_embeddings or stacks.profile(request).shards_root
    if lay.param_shard > 1 and own_units:
        gathered = _fsdp_gathered_own_root_units(request, lay, sp, in_blocks, compute, root_bytes)
        detail = (
            "FSDP: embedding and head wrapped on their own (custom_sharded_layers): a block "
            "and the larger of {block, embedding, head} unsharded, root (final norm) "
            "unsharded, + one block's unsharded gradients"
        )
    else:
        gathered = 0.0
        if lay.param_shard > 1:
            # Current and prefetched block unsharded; FSDP leaves the root (embedding, head)
            # unsharded from forward to backward.
            gathered = 2 * sp.largest_layer * compute + sp.root * root_bytes
        if lay.param_shard > 1 and _pp_keeps_units(request):
            gathered = in_blocks * compute + sp.root * root_bytes
        detail = "FSDP: 2 blocks + root unsharded in forward, + one block's unsharded gradients"
    grad_params = _gradient_params(request, lay, sp, trainable)
    unit_grads = (grad_params / max(1, sp.layers)) * 2 * rc.grad_bytes if trainable else 0.0
    head_grad = _fsdp_head_grad(request, lay, last, bool(own_units), root_bytes)
    if head_grad:
        detail += f", + the LM head's unsharded gradient ({head_grad / GIB:.2f} GiB) to the end"
    return _Comm(gathered, gathered + unit_grads + head_grad, 0.0, detail)


def _fsdp_head_grad(
    request: PlanRequest, lay: Layout, last: bool, own_units: bool, unsharded_bytes: float
) -> float:
    """The LM head's unsharded gradient where FSDP reduces it only at the end of backward. The
    head's backward runs first, but its unit's gradient is reduce-scattered (and the unsharded
    one freed) only once the unit's whole gradient is in (torch 2.13 sources):

    * FSDP1 (``fsdp/_runtime_utils.py``): ``_register_post_backward_hook`` hooks the flat
      parameter's ``AccumulateGrad``, which "only runs after its entire gradient computation has
      finished"; the module parameters are ``torch.split`` views of it, so the head's view
      gradient waits in autograd until the embedding's, in the same root unit, arrives at the
      end of backward; ``_reduce_grad`` then takes ``flat_param.grad`` and frees it.
    * FSDP2 (``fsdp/_fully_shard``): a group's ``post_backward`` is hooked on its forward inputs
      (``FSDPParamGroup._register_post_backward_hook``); the root's are token ids, which need no
      gradient, so it runs from ``_root_post_backward_final_callback`` after backward, and
      ``foreach_reduce`` frees the unsharded gradients after their copy-in.

    A head wrapped as its own unit (torchtitan's ``[norm, output]``, torchtune's
    ``custom_sharded_layers``) is reduced as soon as its backward ends: nothing is kept, unless
    it is tied to the embedding, whose lookup adds the last part of the gradient. The gradient
    has the unsharded parameter's dtype (MixedPrecision's ``param_dtype``)."""
    p = request.model.parameters
    sharded = lay.param_shard > 1 and _grad_shard(request, lay) > 1
    if request.mode is not Mode.TRAIN or not last or not sharded:
        return 0.0
    tied = not p.lm_head
    if own_units and not tied:
        return 0.0
    return (p.lm_head or p.embedding) / lay.tp * unsharded_bytes


def _fsdp_gathered_own_root_units(
    request: PlanRequest,
    lay: Layout,
    sp: StageParams,
    in_blocks: float,
    compute: float,
    root_bytes: float,
) -> float:
    """Bytes unsharded at once when the embedding and the output projection are FSDP units of
    their own (torchtune `custom_sharded_layers: ['tok_embeddings', 'output']`): each is gathered
    around its own forward / backward and resharded after, so at most two adjacent units are
    unsharded at once (current + prefetched): a block and the larger of {block, embedding, head}.
    The root keeps only what is left (final norm) unsharded."""
    p = request.model.parameters
    emb_unit = p.embedding / lay.tp if sp.embedding else 0.0
    head_unit = (p.lm_head or p.embedding) / lay.tp if sp.head else 0.0
    if sp.embedding and sp.head and not p.lm_head:
        head_unit = 0.0  # tied: the head is the embedding unit itself
    unit = max(emb_unit, head_unit)
    rest = max(0.0, sp.root - emb_unit - head_unit)
    if _pp_keeps_units(request):
        return in_blocks * compute + (unit + rest) * root_bytes
    return (
        sp.largest_layer * compute
        + max(sp.largest_layer * compute, unit * root_bytes)
        + rest * root_bytes
    )


def _zero3_comm(
    request: PlanRequest, rc: Recipe, lay: Layout, sp: StageParams, st: ModelStates, stage: int
) -> _Comm:
    """DeepSpeed ZeRO-3: the prefetcher's gathered parameters, the persistent small tensors,
    an offloaded tensor's staged partition and the IPG reduce bucket, all step."""
    trainable, weights, offload_params = st.trainable, _sharded_weights(st), st.offload_params
    # DeepSpeed ZeRO-3 gathers a submodule's parameters before it runs, and every submodule
    # hook (Dropout and norms included) prefetches up to stage3_prefetch_bucket_size more
    # elements along the recorded trace while fewer than stage3_max_live_parameters are
    # gathered: the prefetcher runs ahead until max_live is reached, for the whole forward
    # and backward. It stops at a whole tensor, so one tensor can overshoot the cap (the
    # vocabulary matrix prefetched at the loss). Tensors below
    # stage3_param_persistence_threshold stay gathered for the whole step.
    # The caps count stored elements: a 4-bit weight packed into bf16 storage
    # (bnb_4bit_quant_storage, which ZeRO-3 needs) is 4 parameters per element.
    persistent = min(sp.total, zero3_persistent(request.model, lay, stage)) * rc.weight_bytes
    packed = rc.linear_bytes - unsharded_quant_state(request, rc.linear_bytes)
    largest = zero3_largest_tensor(
        request.model, lay, stage, linear_bytes=packed, other_bytes=rc.weight_bytes
    )
    element = _zero3_element_bytes(rc)
    # At the turn into backward a parameter whose next use is within
    # stage3_max_reuse_distance elements is not released: the last ≈ max_reuse / 2 elements
    # of the forward (each comes back after the rest of the forward and as much backward).
    # With the defaults (1e9, 1e9) max_live + the largest tensor is the larger.
    live = min(
        max(0.0, weights - persistent),
        max(request.zero3_max_live * element + largest, request.zero3_max_reuse / 2 * element),
    )
    gathered = live + persistent
    # An offloaded tensor is gathered from a copy of its partition on the GPU, made next to
    # the full buffer: + the largest tensor / ranks at its gather. One rank skips the
    # all-gather since DeepSpeed 0.9 (one copy); before, it paid the whole tensor twice.
    staged = 0.0
    if offload_params and (lay.param_shard > 1 or request.deepspeed_legacy):
        staged = largest / lay.param_shard
    # contiguous_gradients (on by default) allocates the IPG bucket when the optimizer is set
    # up: reduce_bucket_size elements of the trainable parameters' dtype, on the GPU for the
    # whole run however few parameters train (stage3.py _setup_for_real_optimizer).
    bucket = ZERO_BUCKET * rc.grad_bytes if trainable else 0.0
    detail = (
        f"ZeRO-3: {live / GIB:,.2f} GiB gathered = stage3_max_live_parameters "
        f"{request.zero3_max_live:.3g} elements "
        f"of {element:g} B + the largest tensor ({largest / GIB:,.2f} GiB), at least "
        f"stage3_max_reuse_distance {request.zero3_max_reuse:.3g} / 2, at most the model "
        "(the prefetcher fills up to max_live and stops after a whole tensor); "
        f"{persistent / MIB:,.1f} MiB persistent (stage3_param_persistence_threshold 1e5); "
        "IPG reduce bucket (reduce_bucket_size 5e8, allocated once, held all step)"
    )
    if staged:
        detail += (
            f"; + {staged / GIB:.2f} GiB: the largest tensor's partition copied to the GPU "
            "for its all-gather"
        )
        if lay.param_shard == 1:
            detail += " (DeepSpeed < 0.9 all-gathers on one GPU too)"
    held = gathered + staged + bucket
    return _Comm(held, held, bucket, detail)


def _zero12_comm(rc: Recipe, trainable: float) -> _Comm:
    """DeepSpeed ZeRO-1/2: the IPG reduce bucket from the first backward on, the allgather
    bucket at the step."""
    # backward() allocates the IPG buffer (contiguous_gradients): reduce_bucket_size elements
    # whatever the trainable count, kept until the next backward (stage_1_and_2.py)
    bucket = ZERO_BUCKET * rc.grad_bytes if trainable else 0.0
    gather = min(ZERO_BUCKET, trainable) * rc.weight_bytes
    detail = "ZeRO-1/2: reduce bucket (reduce_bucket_size 5e8), allgather bucket at the step"
    return _Comm(bucket, bucket, bucket + gather, detail)


def _block_linear_weights(
    spec: ModelSpec, lay: Layout, stage: int, *, routers: bool = False
) -> float:
    """Weights of the blocks' Linears on one GPU of ``stage`` (unsharded by FSDP / ZeRO), with
    ``routers`` the MoE routers' too (replicated: every rank routes its own tokens)."""
    blocks = spec.parameters.layers
    n = len(blocks)
    start = sum(stage_layers(n, lay.pp, st) for st in range(stage))
    weights = 0.0
    for first, times, _ in stage_groups(blocks, start, stage_layers(n, lay.pp, stage), 0):
        for lin in blocks[first].linears:
            split = lay.ep * lay.tp if lin.expert else lay.tp
            weights += lin.count * lin.in_features * lin.out_features / split * times
        if routers:
            weights += blocks[first].router * times
    return weights


def _weight_casts(
    spec: ModelSpec, lay: Layout, stage: int, checkpointed: bool, head_casts: int = 1
) -> float:
    """bf16 copies autocast makes of the Linear/Conv1D weights the stage's matmuls keep.

    Weights only (addmm does not keep its bias), and the head's vocab × hidden weight even when
    it is tied to the embedding: the lookup reads the fp32 table, the head's matmul a bf16 cast
    of it (a tied head's own parameters may be its bias alone: BERT's decoder). Inside
    checkpointed blocks the casts are saved tensors like any other, dropped and recomputed: only
    the head's stays (the exact trace shows it, tests/planner/test_stacks_vs_exact.py). An MoE
    router's matmul keeps its weight's cast too (its parameters stay fp32 outside autocast).
    ``head_casts``: casts of the head's weight kept (``_head_casts``).
    """
    weights = 0.0 if checkpointed else _block_linear_weights(spec, lay, stage, routers=True)
    if stage == lay.pp - 1:
        weights += head_casts * spec.vocab_size * spec.hidden_size / lay.tp
    return 2 * weights


def _head_casts(request: PlanRequest) -> int:
    """bf16 casts of the head's fp32 weight its matmuls keep: one per call of a frozen head.

    autocast caches a cast only for a leaf that requires grad (``cached_cast``: ``can_try_cache``
    needs ``arg.requires_grad() && arg.is_leaf()``), so a trainable head is cast once per forward
    and a frozen one (LoRA: the base head, adapted or not) once per call; LitGPT calls it per
    128 positions (``loss.head_calls``) and each call's matmul keeps its own cast for the input's
    gradient.
    """
    if request.mode is Mode.TRAIN:
        return 1
    return head_calls(request, request.seq_len)


def _saved_weight_copies(request: PlanRequest, rc: Recipe, lay: Layout, stage: int) -> float:
    """Weight copies the stage's matmuls keep for backward: autocast's bf16 casts, or the fp8
    weights torchao's 2024 Float8Linear saves (stacks.saves_fp8_weights; not the output layer,
    which torchtitan keeps in bf16)."""
    if rc.autocast:
        checkpointed = request.checkpointing in {Checkpointing.FULL, Checkpointing.OP}
        return _weight_casts(request.model, lay, stage, checkpointed, _head_casts(request))
    if stacks.saves_fp8_weights(request):
        return _block_linear_weights(request.model, lay, stage)
    return 0.0


def _host_grads(rc: Recipe, lay: Layout, trainable: float, grads32: float) -> float:
    """The gradient copies an optimizer offload keeps on the host: DeepSpeed's fp32 partition;
    under Megatron's --optimizer-cpu-offload, HybridDeviceOptimizer's pinned copy of this rank's
    shard in its host params' dtype (fp32 main params; the 16-bit shard reaches it as the
    precision-aware optimizer's ``decoupled_grad``, a view of the main_grad buffer, so no fp32
    copy is made on the GPU; stacks.py), whatever the buffer's dtype."""
    if rc.stack is not Stack.MEGATRON:
        return grads32
    return trainable * (rc.master_bytes or rc.weight_bytes) / lay.state_shard


def zero12_offloads_optimizer(request: PlanRequest, rc: Recipe) -> bool:
    """DeepSpeed ZeRO-1/2 with offload_optimizer: DeepSpeedZeroOptimizer's ``cpu_offload`` path
    (stage_1_and_2.py), which handles gradients otherwise than ZeRO-3's."""
    return (
        rc.stack is Stack.DEEPSPEED
        and 1 <= request.zero_stage <= 2
        and request.offload is Offload.OPTIMIZER
    )


def _zero12_offload_grads(request: PlanRequest, grads: float) -> tuple[float, float]:
    """The 16-bit gradients DeepSpeed ZeRO-1/2 keeps on the GPU under offload_optimizer: (through
    backward, at the step). ``copy_grads_in_partition`` returns before it would allocate the
    16-bit partition (``grads_in_partition``): each reduced gradient's slice is copied to the
    host fp32 buffer and its ``.grad`` dropped ("offload only"). ZeRO-2 reduces from backward
    hooks, so no gradient outlives its reduce bucket (communication); ZeRO-1 (overlap_comm off,
    DeepSpeed's default) reduces in ``reduce_gradients`` after backward, so every 16-bit
    ``.grad`` lives to the end of backward. The epilogue drops them all before the step."""
    through_backward = grads if request.zero_stage == 1 else 0.0
    return through_backward, 0.0


def _largest_trainable(request: PlanRequest, lay: Layout, trainable: float) -> float:
    """Elements of the largest trainable tensor on one GPU (adapters: at most all of them)."""
    largest = largest_tensor(request.model) / lay.tp if request.mode is Mode.TRAIN else trainable
    return min(largest, trainable)


def _offload_grad_staging(request: PlanRequest, rc: Recipe, lay: Layout, trainable: float) -> float:
    """DeepSpeed ZeRO-1/2 offload_optimizer's ``temp_grad_buffer_for_gpu_offload``: ``__init__``
    allocates the largest trainable parameter's numel in the trainable parameters' 16-bit dtype on
    the GPU (it stages gradient accumulation from the host), held for the whole run."""
    if not zero12_offloads_optimizer(request, rc):
        return 0.0
    return _largest_trainable(request, lay, trainable) * rc.grad_bytes


def _offload_norm_copy(request: PlanRequest, rc: Recipe, lay: Layout, trainable: float) -> float:
    """The largest transient of DeepSpeed ZeRO-1/2 offloading a reduced gradient
    (``copy_grads_in_partition`` at the accumulation boundary): the float64 copy of the rank's
    slice ``set_norm_for_param_grad_in_gpu`` takes the norm of, freed before
    ``async_inplace_copy_grad_to_fp32_buffer_from_gpu`` makes the smaller fp32 copy it sends to
    the host. The largest slice is the largest trainable tensor, at most this rank's partition.
    (The overflow check of the whole gradient, ``_has_inf_or_nan``, allocated 11 B per element
    before DeepSpeed PR #8325 of 2026-08 and nothing proportional since; the planner assumes a
    current release, as ``--deepspeed-version`` says.)"""
    if not zero12_offloads_optimizer(request, rc):
        return 0.0
    partition = trainable / lay.state_shard
    return min(_largest_trainable(request, lay, trainable), partition) * NORM_COPY_BYTES


@dataclass(frozen=True, slots=True)
class ModelStates:
    """Model states on one GPU of a pipeline stage (bytes), and what went to the host."""

    weights: float  # parameters as stored (adapters included), before sharding
    replicated: float  # bitsandbytes NF4 quantization state: whole on every rank, on the GPU
    params: float  # on the GPU, after sharding and offload
    grads: float  # in the gradient dtype, after sharding and offload
    grads32: float  # DeepSpeed's fp32 gradient partition
    states: float  # optimizer states + fp32 master weights
    host: float  # offloaded parameters, gradients and states
    unified: float  # paged optimizer states: CUDA unified memory, outside the allocator
    all_grads: float  # gradients alive through backward
    step_grads: float  # gradients at the optimizer step
    trainable: float
    adapters_local: float
    offload_params: bool
    state: StateCost


def _model_states(
    request: PlanRequest, rc: Recipe, lay: Layout, sp: StageParams, adapters_total: int
) -> ModelStates:
    lora = request.mode in {Mode.LORA, Mode.QLORA}
    share = sp.layers / max(1, len(request.model.parameters.layers))
    weights = _quantized_weight_bytes(request, sp, rc)
    adapters_local = adapters_total * share / lay.tp if lora else 0.0
    weights += adapters_local * rc.adapter_bytes
    trainable = adapters_local if lora else sp.total
    offload_params = request.offload is Offload.OPTIMIZER_AND_PARAMS and (
        lay.param_shard > 1 or request.zero_stage >= 3
    )
    if request.fsdp is not None and request.offload is not Offload.NONE:
        offload_params = True  # FSDP CPUOffload moves parameters; grads and step follow them
    # a bitsandbytes NF4 weight's quantization state stays whole on every rank, and on the GPU
    replicated = (sp.linear + sp.expert) * unsharded_quant_state(request, rc.linear_bytes)
    host = 0.0
    params = (weights - replicated) / lay.param_shard
    if offload_params:
        host += params
        params = 0.0
    params += replicated
    if rc.fp8_linear_inputs and request.framework not in stacks.TORCHTITAN_FAMILY:
        params += (sp.linear + sp.expert) * 2  # Transformer Engine's fp8 weight + transpose

    state = state_cost(request, rc)
    grads = (
        _gradient_params(request, lay, sp, trainable) * rc.grad_bytes / _grad_shard(request, lay)
    )
    # DeepSpeed's fp32 gradient partition; Megatron's Float16Optimizer copy of a 16-bit main_grad
    # buffer (none with an fp32 buffer or outside Megatron's DDP), of the params this rank steps
    grad_shard32 = lay.state_shard if rc.stack in {Stack.DEEPSPEED, Stack.MEGATRON} else 1
    grads32 = trainable * rc.grad32_bytes / grad_shard32
    states = trainable * (rc.master_bytes + state.per_param) / lay.state_shard
    if request.optimizer is Optimizer.NONE:
        states = trainable * rc.master_bytes / lay.state_shard
    if request.offload is not Offload.NONE:
        host += states + _host_grads(rc, lay, trainable, grads32)
        states = grads32 = 0.0
        if offload_params:
            host += grads
            grads = 0.0
    all_grads = grads + grads32
    step_grads = all_grads
    if zero12_offloads_optimizer(request, rc):
        all_grads, step_grads = _zero12_offload_grads(request, grads)
    if rc.stack is Stack.MEGATRON:
        # Float16Optimizer's fp32 copy exists from the step to the next
        # zero_grad(set_to_none=True) (stacks.py)
        all_grads = grads
    if rc.stack is Stack.DEEPSPEED and request.zero_stage >= 3:
        # ZeRO-3 keeps the bf16 gradient partition through backward and converts it to the fp32
        # partition at the step, releasing the bf16 copy ("release all the gradient since we have
        # already created a necessary copy", stage3.py): one or the other, 18 B/param over N in
        # all (DeepSpeed's estimate_zero3_model_states_mem_needs).
        all_grads = grads
        step_grads = max(grads, grads32)
    return ModelStates(
        weights=weights,
        replicated=replicated,
        params=params,
        grads=grads,
        grads32=grads32,
        states=states,
        host=host,
        unified=states if state.paged else 0.0,
        all_grads=all_grads,
        step_grads=step_grads,
        trainable=trainable,
        adapters_local=adapters_local,
        offload_params=offload_params,
        state=state,
    )


def _communication(
    request: PlanRequest, rc: Recipe, lay: Layout, sp: StageParams, st: ModelStates, stage: int
) -> _Comm:
    """Sharding buffers and gathered parameters (``_comm``), + pipeline, context and expert
    parallel exchange buffers of this stage's tokens."""
    spec = request.model
    tokens = request.seq_len * pipeline_microbatches(request)[0] / lay.cp
    sharding = _comm(request, rc, lay, sp, st, stage)
    detail = sharding.detail
    extra = 0.0
    if lay.pp > 1:
        extra += 2 * spec.hidden_size * tokens * rc.act_bytes
    if lay.cp > 1:
        extra += 4 * spec.kv_width * tokens * rc.act_bytes / lay.tp
    if lay.ep > 1 and spec.moe is not None:
        # all-to-all dispatch and combine buffers: k copies of each token's hidden state, each
        # (memory.md §2.8)
        extra += 2 * spec.moe.experts_per_token * tokens * spec.hidden_size * rc.act_bytes
    staging = _offload_grad_staging(request, rc, lay, st.trainable)
    if staging:
        detail += (
            f"; offload_optimizer: temp_grad_buffer_for_gpu_offload {staging / GIB:.2f} GiB "
            "(the largest trainable parameter, 16-bit), held all run"
        )
    return _Comm(
        sharding.forward + extra + staging,
        sharding.backward + extra + staging,
        sharding.step + staging,
        detail,
    )


@dataclass(frozen=True, slots=True)
class StepParts:
    """What the phases of one stage's training step are built from."""

    request: PlanRequest
    rc: Recipe
    lay: Layout
    sp: StageParams
    stage: int
    st: ModelStates
    act: Activations
    lb: LossBuffers | None
    kept: HeldOutputs
    casts: float  # autocast's bf16 weight copies, saved for backward
    head_grad: float  # the LM head's gradient, started first in backward
    dequant: float
    scored: float  # positions this micro-batch scores on this rank (its logits' rows)
    comm: _Comm
    offload_copy: float  # ZeRO-1/2 offload: the largest transient of offloading a gradient
    grads_alive: bool  # .grad of every parameter alive through the forward
    in_bwd: bool  # optimizer stepped in backward
    buffers: float = 0.0  # module buffers built with the model (torchtune's RoPE table)
    dora_norm: float = 0.0  # the largest DoRA weight-norm transient of one Linear (dora.py)

    @property
    def resident(self) -> dict[str, float]:
        """What the model itself holds from its construction on: parameters and buffers."""
        return {"parameters": self.st.params, "buffers": self.buffers}

    @property
    def persistent(self) -> dict[str, float]:
        return {**self.resident, "optimizer_states": self.st.states}

    @property
    def grads_forward(self) -> float:
        return self.st.all_grads if self.grads_alive else 0.0

    @property
    def saved(self) -> float:
        return self.act.saved + (self.lb.saved if self.lb else 0) + self.casts

    @property
    def tied_here(self) -> bool:
        """A tied embedding on this stage is the LM head too."""
        return not self.request.model.parameters.lm_head and self.lay.pp == 1


def _step(
    request: PlanRequest, rc: Recipe, lay: Layout, stage: int, adapters_total: int
) -> StepParts:
    spec = request.model
    sp = stage_params(spec, lay, stage)
    last = stage == lay.pp - 1
    st = _model_states(request, rc, lay, sp, adapters_total)
    tr = training_of(request, rc, adapted_names(spec, request), all_linear_names(spec))
    scored = label_len(request) * pipeline_microbatches(request)[0] / lay.cp
    head_grad = 0.0
    prof = stacks.profile(request)
    # Megatron's fused wgrad accumulation writes the head's gradient into main_grad (stacks.py)
    fused_wgrad = prof.fused_wgrad_accumulation
    if request.mode is Mode.TRAIN and last and lay.param_shard == 1 and not fused_wgrad:
        head_grad = (spec.parameters.lm_head or spec.parameters.embedding) / lay.tp * rc.grad_bytes
    accumulating = request.grad_accum > 1 and lay.pp == 1
    in_bwd = request.optimizer_in_backward and request.optimizer is not Optimizer.NONE
    act = activations(request, rc, lay, tr, stage)
    return StepParts(
        request=request,
        rc=rc,
        lay=lay,
        sp=sp,
        stage=stage,
        st=st,
        act=act,
        lb=loss_buffers(request, rc, scored, lay.tp) if last else None,
        kept=held_outputs(request, rc, lay, stage, act.kernel_inputs),
        # autocast caches bf16 casts of the fp32 weights (torchao 2024: fp8 casts); matmuls
        # keep them for backward
        casts=_saved_weight_copies(request, rc, lay, stage),
        head_grad=head_grad,
        scored=scored,
        dequant=dequant_bytes(
            request, rc, lay.tp, request.seq_len * pipeline_microbatches(request)[0] / lay.cp
        ),
        comm=_communication(request, rc, lay, sp, st, stage),
        offload_copy=_offload_norm_copy(request, rc, lay, st.trainable),
        # an accumulation window's earlier micro-batches, or zero_grad(set_to_none=False)
        # (stepping in backward frees them instead); none before the first backward
        # Megatron's contiguous main_grad buffer is allocated with the model: always there
        buffers=rope_table_bytes(request) if prof.fp32_rope_table else 0.0,
        grads_alive=prof.contiguous_grad_buffer
        or (
            (accumulating or request.keep_grads)
            and not in_bwd
            and request.peak_step is not PeakStep.FIRST
        ),
        in_bwd=in_bwd,
        dora_norm=weight_norm_peak(request, rc),
    )


def _loss_peak(s: StepParts) -> float:
    """The loss's transient peak: upcast logits and their gradient, or the LM head's gradient
    copies next to the logits' gradient, whichever is larger."""
    if s.lb is None:
        return 0.0
    head_peak = s.head_grad * s.lb.head_grad_copies + s.lb.grad_logits
    return max(s.lb.transient_forward, s.lb.transient_backward, head_peak)


def _forward(s: StepParts) -> dict[str, float]:
    """End of forward: every activation, the step's outputs and the largest of three moments:
    the last dequantizing matmul (``_last_dequant``), the last DoRA weight norm
    (``_last_weight_norm``) or the loss around its peak."""
    at_loss = {"activations": s.saved, "logits": _loss_peak(s), "temporaries": 0.0}
    in_blocks = _larger(_last_dequant(s), _last_weight_norm(s))
    return {
        **s.persistent,
        "gradients": s.grads_forward,
        **_larger(in_blocks, at_loss),
        "kv_cache": s.kept.unsaved_cache,  # this step's, until the outputs die
        # the previous step's, until `outputs` is rebound (none before the first step)
        "held_outputs": previous_outputs(s.request, s.kept),
        "communication": s.comm.forward,
    }


def _last_dequant(s: StepParts) -> dict[str, float]:
    """The forward's last matmul over a dequantized weight. bitsandbytes dequantizes inside the
    Linear's forward and frees the 16-bit weight after the matmul (only the packed weight is
    saved), so the dequantized copies never meet the loss. Where the stack packs the LM head too
    (LitGPT's BitsandbytesPrecision), the head's last call dequantizes it next to the logit
    chunks of the calls before, in the compute dtype (the largest packed weight is the head's,
    ``vocab × hidden``); elsewhere the largest packed weight is a block's, before any logits."""
    if not s.dequant:
        return {}
    packed = s.lb is not None and stacks.profile(s.request).quantizes_head
    return {
        "activations": s.act.saved + s.casts,
        "logits": _head_output(s) if packed else 0.0,
        "temporaries": s.dequant,
    }


def _last_weight_norm(s: StepParts) -> dict[str, float]:
    """The last DoRA Linear's weight norm (``dora.weight_norm_peak``), next to the blocks'
    saved tensors, before the head runs."""
    if not s.dora_norm:
        return {}
    return {"activations": s.act.saved + s.casts, "logits": 0.0, "temporaries": s.dora_norm}


def _larger(moment: dict[str, float], other: dict[str, float]) -> dict[str, float]:
    """Of two moments of one phase (the components they differ in), the one holding more bytes;
    ``other`` on a tie (an empty ``moment``: the stack has no such moment)."""
    return moment if sum(moment.values()) > sum(other.values()) else other


def _head_output(s: StepParts) -> float:
    """The micro-batch's logits in the head's (compute) dtype, on this rank's vocabulary share."""
    return s.scored * s.request.model.vocab_size / s.lay.tp * s.rc.act_bytes


def _backward(s: StepParts) -> dict[str, float]:
    """Backward of the last block: the loss is done, every block's saved tensors (or checkpoint)
    are still alive, the last block is recomputed (checkpointing) and its gradients flow."""
    recomputes = s.request.checkpointing in {Checkpointing.FULL, Checkpointing.OP}
    recompute = s.act.one_layer if recomputes else 0.0
    recompute += recomputed_output(s.request, s.rc, s.lay, decoder=True)
    # (sharded: the unsharded copy of the block's gradients is in the communication buffers)
    last_grads = 0.0
    if not s.grads_alive and s.st.grads:
        block_grads = s.st.trainable / max(1, s.sp.layers) * s.rc.grad_bytes / s.lay.grad_shard
        last_grads = _head_grad_in_blocks(s) + block_grads
    script = s.request.loop is TrainLoop.SCRIPT
    # ZeRO-2 reduces and offloads gradients from backward hooks: the head's (first in backward)
    # while the last block runs; ZeRO-1 only after backward (backward-end)
    offload_copy = s.offload_copy if s.request.zero_stage >= 2 else 0.0
    last_block = {
        "activations": s.act.saved + s.casts + recompute,
        "logits": 0.0,
        "temporaries": s.act.grad_working + s.dequant + offload_copy + _block_step(s),
    }
    blocks = {
        "gradients": s.grads_forward + last_grads,
        **_larger(_chunked_head_backward(s), last_block),
    }
    return {
        **s.persistent,
        **_larger(_head_step(s), blocks),
        # this step's outputs: the cache's K/V are still saved tensors, except grouped ones;
        # LitGPT's `logits` (its chunks) through backward
        "held_outputs": s.kept.logits + (s.kept.unsaved_cache if script else 0.0),
        "communication": s.comm.backward,
    }


def _head_grad_in_blocks(s: StepParts) -> float:
    """The LM head's gradient while the blocks' backward runs. Stepping in backward, an untied
    head's post-accumulate-grad hook has stepped it and freed it before the last block's
    backward (torchtune ``training/memory.py`` ``register_optim_in_bwd_hooks``: ``step()`` then
    ``zero_grad()``, which sets ``.grad`` to None; ``_head_step``); a tied head's waits for the
    lookup's part."""
    return 0.0 if s.in_bwd and not s.tied_here else s.head_grad


def _in_backward_step(s: StepParts, elements: float) -> float:
    """The temporaries of one parameter's step when the optimizer steps in backward (none
    otherwise, nor when the step runs on the host)."""
    if not s.in_bwd or s.request.offload is not Offload.NONE or s.st.trainable <= 0:
        return 0.0
    return float(parameter_step_temporaries(s.request, s.rc, elements))


def _block_step(s: StepParts) -> float:
    """Stepping in backward, the last block's parameters step as their gradients complete,
    during its backward: the largest one's step temporaries, on this rank's gradient shard
    (adapters: one block's)."""
    if s.request.mode is Mode.TRAIN:
        largest = largest_block_tensor(s.request.model) / s.lay.tp / s.lay.grad_shard
    else:
        largest = s.st.trainable / max(1, s.sp.layers)
    return _in_backward_step(s, largest)


def _head_step(s: StepParts) -> dict[str, float]:
    """Stepping in backward, an untied LM head's gradient is complete first of all (its
    AccumulateGrad runs as soon as the head's matmul backward has): its post-accumulate-grad
    hook steps it next to every block's saved tensors, before the last block's backward. A tied
    head's gradient waits for the lookup's (``_embedding_backward``)."""
    if s.tied_here or not s.head_grad:
        return {}
    temporaries = _in_backward_step(s, s.head_grad / s.rc.grad_bytes)
    if not temporaries:
        return {}
    return {
        "gradients": s.grads_forward + s.head_grad,
        "activations": s.act.saved + s.casts,
        "logits": 0.0,
        "temporaries": temporaries,
    }


def _chunked_head_backward(s: StepParts) -> dict[str, float]:
    """The backward of LitGPT's chunked head, as its first call's runs: autograd runs the ready
    node with the highest sequence number first, and every chunk's cross-entropy, log-softmax
    and cast were made after every head call, so every chunk's gradient (in the head's dtype)
    waits before any head call's backward starts, and that backward dequantizes a packed head
    again (``_last_dequant``). The log-softmax is freed by then; the held float32 logits are
    not (``held_outputs``)."""
    if s.lb is None or not chunks_head(s.request):
        return {}
    packed = stacks.profile(s.request).quantizes_head
    return {
        "activations": s.act.saved + s.casts,
        "logits": _head_output(s),
        "temporaries": s.dequant if packed else 0.0,
    }


def _backward_end(s: StepParts, notes: dict[str, str]) -> dict[str, float]:
    """End of backward: all gradients but the first block's (and an untied embedding's), which
    are being computed, next to that block's activations."""
    spec, st = s.request.model, s.st
    trainable = st.trainable
    # First block (and the embedding) produce their gradients last. A tied embedding is the LM
    # head too: the head's backward, first of all, starts its gradient (autograd holds it in the
    # shared leaf's input buffer until the lookup's part is added at the end).
    first_grads = trainable / max(1, s.sp.layers) if s.sp.layers else 0.0
    if s.stage == 0 and s.request.mode is Mode.TRAIN and not s.tied_here:
        first_grads += s.sp.embedding
    late = first_grads * st.all_grads / trainable if trainable else 0.0
    # with .grad alive, the last blocks' new gradients are computed next to it, then added
    end_grads = st.all_grads + late if s.grads_alive else max(0.0, st.all_grads - late)
    if s.in_bwd:
        # Each gradient is stepped and freed as soon as it is complete; a tied embedding's
        # gradient completes only at the end of backward.
        tied = not spec.parameters.lm_head and s.request.mode is Mode.TRAIN
        tied_emb = spec.parameters.embedding / s.lay.tp if tied else 0
        end_grads = (trainable / max(1, s.sp.layers) + tied_emb) * s.rc.grad_bytes
        notes["optimizer_in_backward"] = "gradients stepped and freed per parameter"
    in_flight = s.act.in_flight
    others = s.act.saved * (in_flight - 1) / in_flight if in_flight > 1 else 0.0
    kept = frozen_unit_inputs(s.request, s.rc, s.lay, s.sp.layers)
    # (an encoder-decoder's first block is an encoder block)
    reentrant_output = recomputed_output(s.request, s.rc, s.lay, decoder=False)
    if kept:
        notes["fsdp_frozen_units"] = (
            f"FSDP reshard hooks on frozen units keep every checkpointed block input and its "
            f"gradient to the end of backward: {kept / GIB:.2f} GiB"
        )
    return {
        **s.persistent,
        "gradients": end_grads,
        "activations": s.act.one_layer + others + kept + reentrant_output,
        "logits": 0.0,
        "held_outputs": s.kept.total,
        "communication": s.comm.backward,
        # the reduction at the end of backward (ZeRO-2's epilogue: the last bucket, the
        # embedding's among it; ZeRO-1's reduce_gradients) offloads its gradients here
        "temporaries": s.act.grad_working + s.dequant + s.offload_copy,
    }


def _embedding_backward(s: StepParts) -> dict[str, float] | None:
    """A tied embedding's lookup gradient added to the one the LM head started, out of place:
    three embedding-sized tensors (the head's part, the lookup's, their sum) after the first
    block's backward, as a real run and MemTracker show (accumulating micro-batches: next to the
    .grad of the ones before). Stepping in backward, the sum then steps alone, with its step
    temporaries (``_in_backward_step``)."""
    st, lay = s.st, s.lay
    unsharded = lay.param_shard == lay.grad_shard == 1
    training = s.request.mode is Mode.TRAIN and st.trainable
    if not (s.tied_here and s.stage == 0 and training and unsharded):
        return None
    emb = s.sp.embedding * (s.rc.grad_bytes if s.in_bwd else st.all_grads / st.trainable)
    held = 3 * emb if s.in_bwd else st.all_grads + (3 if s.grads_alive else 2) * emb
    adding = {"gradients": held, "temporaries": 0.0}
    # stepping in backward: the sum is the gradient, its two parts freed, then it steps
    stepping = {"gradients": emb, "temporaries": _in_backward_step(s, s.sp.embedding)}
    return {**s.persistent, **_larger(stepping, adding), "held_outputs": s.kept.total}


def _optimizer_step(s: StepParts) -> dict[str, float] | None:
    """The step: parameters, gradients, states and the step's temporaries."""
    request, st = s.request, s.st
    if request.optimizer is Optimizer.NONE or s.in_bwd:
        return None
    largest = _largest_trainable(request, s.lay, st.trainable)
    temps = step_temporaries(request, s.rc, st.trainable / s.lay.state_shard, largest)
    return {
        **s.persistent,
        "gradients": st.step_grads,
        "activations": 0.0,
        "logits": 0.0,
        "held_outputs": s.kept.total,
        "communication": s.comm.step,
        "temporaries": 0.0 if request.offload is not Offload.NONE else float(temps),
    }


def _facts(s: StepParts) -> dict[str, ComponentFacts]:
    """The numbers behind the parameters, gradients and activations lines (``report.plan``)."""
    rc, lay, st, act = s.rc, s.lay, s.st, s.act
    return {
        "parameters": ParameterFacts(
            count=int(s.sp.total + st.adapters_local),
            shards=lay.param_shard,
            linear_bytes=rc.linear_bytes if rc.linear_bytes != rc.weight_bytes else None,
            offloaded=st.offload_params,
            unsharded_quant_state_bytes=st.replicated,
        ),
        "gradients": GradientFacts(
            trainable=int(st.trainable),
            with_grad=int(_gradient_params(s.request, lay, s.sp, st.trainable)),
            grad_bytes=rc.grad_bytes,
            # ZeRO-1/2 offload copies each slice straight to the host fp32 buffer
            fp32_copy_bytes=0.0 if zero12_offloads_optimizer(s.request, rc) else rc.grad32_bytes,
            shards=_grad_shard(s.request, lay),
            # one partition or the other (see _model_states): the larger is the peak
            one_at_a_time=bool(
                rc.stack is Stack.DEEPSPEED and s.request.zero_stage >= 3 and rc.grad32_bytes
            ),
        ),
        "activations": ActivationFacts(
            per_block_bytes=dict(act.per_layer),
            in_flight=act.in_flight,
            loss_saved_bytes=s.lb.saved if s.lb is not None else 0,
            weight_copy_bytes=s.casts,
            offloaded_bytes=act.offloaded,
            kernel_saved_bytes=act.kernel_saved,
            kernel_recomputed_bytes=act.kernel_one_layer,
        ),
    }


def _sources(s: StepParts) -> dict[str, tuple[str, str]]:
    """Each component's formula reference and, where ``_facts`` has no numbers for it, the
    detail line a user reads."""
    request, rc, lay, st = s.request, s.rc, s.lay, s.st
    sources = {
        "parameters": ("memory.md §2.2 bytes per weight; §2.6 TP/PP/ZeRO-3/FSDP sharding", ""),
        "gradients": (
            "memory.md §2.3-2.4: one gradient per trainable parameter; §2.6 ZeRO-2+/FSDP shard",
            "",
        ),
        "optimizer_states": (
            st.state.source + (" + fp32 master weights" if rc.master_bytes else ""),
            st.state.detail
            + (f" + master {rc.master_bytes:g} B" if rc.master_bytes else "")
            + (f", sharded over {lay.state_shard}" if lay.state_shard > 1 else "")
            + ("; offloaded to host" if request.offload is not Offload.NONE else "")
            + ("; CUDA unified memory, pages to host" if st.state.paged else ""),
        ),
        "activations": (ACT_SOURCE, ""),
        "communication": ("DeepSpeed / FSDP / DDP defaults (memory.md §2.6)", s.comm.detail),
        "temporaries": (
            "optimizer.step intermediates (memory.md §2.4) and one block's activation gradients",
            f"step impl {request.optimizer_impl.value}"
            + (
                f"; offload_optimizer: {s.offload_copy / GIB:.2f} GiB float64 copy of the "
                "largest gradient slice for its norm, in backward"
                if s.offload_copy
                else ""
            ),
        ),
    }
    if s.buffers:
        sources["buffers"] = (ROPE_TABLE_SOURCE, rope_table_detail(request))
    if s.lb is not None:
        sources["logits"] = (s.lb.source, s.lb.detail)
    kept = s.kept
    spec_state = request.model.state is not None
    if kept.unsaved_cache:
        sources["kv_cache"] = (
            "transformers builds a KV cache in a training forward (config use_cache, unless "
            "its own gradient checkpointing turned it off)",
            (
                "K/V of every layer, none of them saved by the checkpointed blocks"
                if request.checkpointing is Checkpointing.FULL
                else "grouped K/V of every layer, next to the per-head copies attention keeps"
            )
            + ("; a hybrid's state blocks' conv and recurrent states" if spec_state else "")
            + "; model.config.use_cache = False drops it",
        )
    if kept.total:
        sources["held_outputs"] = (
            "PyTorch FAQ: a local keeps a tensor alive until rebound (`outputs = model(**batch)`)",
            f"previous step's logits {kept.logits / GIB:.2f} GiB"
            + (f" + KV cache {kept.cache / GIB:.2f} GiB (use_cache)" if kept.cache else "")
            + (
                f" + its graph's 4-bit Linear inputs {kept.graph_inputs / GIB:.2f} GiB "
                f"({GRAPH_HELD_TERM})"
                if kept.graph_inputs
                else ""
            )
            + (
                " alive through the next forward"
                if request.peak_step is PeakStep.STEADY
                else " alive after this step's forward (first step: none from before it)"
            ),
        )
    return sources


def _zero12_offload_notes(request: PlanRequest, rc: Recipe) -> dict[str, str]:
    """Where DeepSpeed ZeRO-1/2's gradients go under offload_optimizer
    (``_zero12_offload_grads``)."""
    if not zero12_offloads_optimizer(request, rc):
        return {}
    held = (
        "every 16-bit .grad until reduce_gradients after backward"
        if request.zero_stage == 1
        else "none beyond the reduce bucket (reduced from backward hooks)"
    )
    return {
        "zero_offload_gradients": (
            f"ZeRO-{request.zero_stage} offload_optimizer keeps no 16-bit gradient partition on "
            f"the GPU: each reduced slice is copied to the host fp32 buffer; {held}; none at the "
            "step"
        )
    }


def _stage_phases(
    request: PlanRequest, rc: Recipe, lay: Layout, stage: int, adapters_total: int
) -> tuple[Assembled, Activations, LossBuffers | None]:
    s = _step(request, rc, lay, stage, adapters_total)
    notes: dict[str, str] = {
        **nf4_notes(request),
        **peak_step_notes(request, s.kept),
        **mixers.mixer_notes(request),
        **_zero12_offload_notes(request, rc),
    }
    raw: list[tuple[str, dict[str, float] | None]] = [
        (LOAD, load_phase(s, notes)),
        ("forward", _forward(s)),
        ("backward", _backward(s)),
        ("backward-end", _backward_end(s, notes)),
        ("embedding-backward", _embedding_backward(s)),
        ("optimizer-step", _optimizer_step(s)),
        (EVALUATION, eval_phase(s, notes)),
        (SAVE, save_phase(s, notes)),
    ]
    present = [(name, parts) for name, parts in raw if parts is not None]
    keys = {key: 0 for _, parts in present for key in parts}  # every phase names every component
    phases = tuple(
        Phase(name, {**keys, **{k: int(v) for k, v in parts.items()}}) for name, parts in present
    )
    kept, act = s.kept, s.act
    dynamic = (
        s.saved
        + _loss_peak(s)
        + kept.total
        + kept.unsaved_cache
        + s.comm.forward
        + act.grad_working
    )
    tensors = int(
        20 * s.sp.layers * act.in_flight + (12 * s.sp.layers if lay.param_shard == 1 else 4)
    )
    assembled = Assembled(
        phases=phases,
        sources=_sources(s),
        facts=_facts(s),
        host_bytes=int(s.st.host),
        unified_bytes=int(s.st.unified),
        dynamic_bytes=int(dynamic),
        tensors=tensors,
        trainable=int(s.st.trainable),
        stage=stage,
        notes=notes,
    )
    return assembled, act, s.lb


def training_phases(request: PlanRequest, rc: Recipe, lay: Layout) -> Assembled:
    """The pipeline stage with the highest peak (the first, unless the head is huge)."""
    adapters = lora_parameters(request.model, request)
    best: Assembled | None = None
    for stage in pipeline_stages(lay.pp):
        assembled, _, _ = _stage_phases(request, rc, lay, stage, adapters)
        peak = max(p.total for p in assembled.phases)
        if best is None or peak > max(p.total for p in best.phases):
            best = assembled
    assert best is not None
    return best


def hybrid_note(request: PlanRequest, lay: Layout) -> str | None:
    if request.fsdp is FsdpKind.HYBRID:
        return f"HYBRID_SHARD: sharded over {lay.shard} GPUs, replicated {lay.replicate}×"
    return None
