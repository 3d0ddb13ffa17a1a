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

from dataclasses import dataclass

from gpuwarden.planner.activations import SOURCE as ACT_SOURCE
from gpuwarden.planner.activations import Activations, activations, training_of
from gpuwarden.planner.layout import (
    Layout,
    StageParams,
    adapted_names,
    all_linear_names,
    distinct_layers,
    largest_tensor,
    lora_parameters,
    pipeline_stages,
    stage_groups,
    stage_layers,
    stage_params,
)
from gpuwarden.planner.loss import LossBuffers, loss_buffers
from gpuwarden.planner.optimizer import state_cost, step_temporaries
from gpuwarden.planner.outputs import held_outputs, label_len
from gpuwarden.planner.precision import Recipe, Stack
from gpuwarden.planner.quant_kernel import (
    BNB_FIX,
    nf4_label,
    nf4_notes,
    unsharded_quant_state,
)
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import (
    Checkpointing,
    FsdpKind,
    Mode,
    Offload,
    Optimizer,
    Phase,
    PlanRequest,
    TrainLoop,
)
from gpuwarden.units import GIB, MIB

# DeepSpeed ZeRO defaults (deepspeed/runtime/zero/config.py, in elements; memory.md §2.6):
ZERO_BUCKET = 500_000_000  # reduce_bucket_size / allgather_bucket_size
ZERO3_PERSISTENCE = 100_000  # stage3_param_persistence_threshold: smaller tensors stay gathered


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


def _quantized_weight_bytes(sp: StageParams, rc: Recipe) -> float:
    return (sp.linear + sp.expert) * rc.linear_bytes + (sp.other + sp.embedding + sp.head) * (
        rc.weight_bytes
    )


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


def _comm(
    request: PlanRequest,
    rc: Recipe,
    lay: Layout,
    sp: StageParams,
    trainable: float,
    weights: float,
    stage: int,
    offload_params: bool,
) -> tuple[float, float, float, str]:
    """(forward, backward, step) bytes of communication buffers and gathered parameters."""
    stack = rc.stack
    if stack is Stack.FSDP:
        # weights holds the LoRA adapters too (trainable, when they are all that trains)
        held = sp.total + (trainable if request.mode in {Mode.LORA, Mode.QLORA} else 0.0)
        unit_bytes = weights / held if held else rc.weight_bytes

        # MixedPrecision(param_dtype=bf16) gathers units in bf16; a block's bytes are its
        # (possibly packed 4-bit) Linears and the rest, the root's (embedding, head) are unquantized
        def cast(per_param: float) -> float:
            return min(per_param, 2.0) if rc.act_bytes == 2 else per_param

        in_blocks = held - sp.embedding - sp.head  # blocks' params (+ adapters)
        block_bytes = weights - (sp.embedding + sp.head) * rc.weight_bytes
        compute = cast(block_bytes / in_blocks if in_blocks > 0 else unit_bytes)
        root_bytes = cast(rc.weight_bytes)
        gathered = 0.0
        if lay.param_shard > 1 and request.fsdp_shard_embeddings:
            # The embedding and the output projection are FSDP units of their own (torchtune
            # `custom_sharded_layers: ['tok_embeddings', 'output']`): each is gathered around its
            # own forward / backward and resharded after, so at most two adjacent units are
            # unsharded at once (current + prefetched): a block and the larger of {block,
            # embedding, head}. The root keeps only what is left (final norm) unsharded.
            p = request.model.parameters
            emb_unit = p.embedding / lay.tp if sp.embedding else 0.0
            head_unit = (p.lm_head or p.embedding) / lay.tp if sp.head else 0.0
            if sp.embedding and sp.head and not p.lm_head:
                head_unit = 0.0  # tied: the head is the embedding unit itself
            unit = max(emb_unit, head_unit)
            rest = max(0.0, sp.root - emb_unit - head_unit)
            gathered = (
                sp.largest_layer * compute
                + max(sp.largest_layer * compute, unit * root_bytes)
                + rest * root_bytes
            )
            detail = (
                "FSDP: embedding and head wrapped on their own (custom_sharded_layers): a block "
                "and the larger of {block, embedding, head} unsharded, root (final norm) "
                "unsharded, + one block's unsharded gradients"
            )
        else:
            if lay.param_shard > 1:
                # Current and prefetched block unsharded; FSDP leaves the root (embedding, head)
                # unsharded from forward to backward.
                gathered = 2 * sp.largest_layer * compute + sp.root * root_bytes
            detail = "FSDP: 2 blocks + root unsharded in forward, + one block's unsharded gradients"
        unit_grads = (trainable / max(1, sp.layers)) * 2 * rc.grad_bytes if trainable else 0.0
        return gathered, gathered + unit_grads, 0.0, detail
    if stack is Stack.DEEPSPEED and request.zero_stage >= 3:
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
        return gathered + staged + bucket, gathered + staged + bucket, bucket, detail
    if stack is Stack.DEEPSPEED and request.zero_stage >= 1 and lay.state_shard > 1:
        # backward() allocates the IPG buffer (contiguous_gradients): reduce_bucket_size elements
        # whatever the trainable count, kept until the next backward (stage_1_and_2.py)
        bucket = ZERO_BUCKET * rc.grad_bytes if trainable else 0.0
        gather = min(ZERO_BUCKET, trainable) * rc.weight_bytes
        detail = "ZeRO-1/2: reduce bucket (reduce_bucket_size 5e8), allgather bucket at the step"
        return bucket, bucket, bucket + gather, detail
    if lay.dp * lay.cp > 1 and trainable and stack in {Stack.PLAIN, Stack.AMP}:
        copy = trainable * rc.grad_bytes
        detail = "DDP buckets: a second copy of the gradients (gradient_as_bucket_view=False)"
        return copy, copy, copy, detail
    return 0.0, 0.0, 0.0, ""


def _weight_casts(spec: ModelSpec, lay: Layout, stage: int) -> float:
    """bf16 copies autocast makes of the Linear/Conv1D weights the stage's matmuls keep.

    Weights only (addmm does not keep its bias), and the lm_head's weight even when it is tied to
    the embedding: the lookup reads the fp32 table, the head's matmul a bf16 cast of it.
    """
    blocks = spec.parameters.layers
    n = len(blocks)
    start = sum(stage_layers(n, lay.pp, st) for st in range(stage))
    weights = 0.0
    for first, times, _ in stage_groups(blocks, start, stage_layers(n, lay.pp, stage), 0):
        for lin in blocks[first].linears:
            split = lay.ep * lay.tp if lin.expert else lay.tp
            weights += lin.count * lin.in_features * lin.out_features / split * times
    if stage == lay.pp - 1:
        weights += (spec.parameters.lm_head or spec.parameters.embedding) / lay.tp
    return 2 * weights


def _stage_phases(
    request: PlanRequest, rc: Recipe, lay: Layout, stage: int, adapters_total: int
) -> tuple[Assembled, Activations, LossBuffers | None]:
    spec = request.model
    sp = stage_params(spec, lay, stage)
    n_blocks = max(1, len(spec.parameters.layers))
    share = sp.layers / n_blocks
    lora = request.mode in {Mode.LORA, Mode.QLORA}
    last = stage == lay.pp - 1
    notes: dict[str, str] = {}

    weights = _quantized_weight_bytes(sp, rc)
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
    if rc.fp8_linear_inputs:
        params += (sp.linear + sp.expert) * 2  # Transformer Engine's fp8 weight + transpose

    state = state_cost(request, rc)
    grads = trainable * rc.grad_bytes / lay.grad_shard
    grad_shard32 = lay.state_shard if rc.stack is Stack.DEEPSPEED else 1
    grads32 = trainable * rc.grad32_bytes / grad_shard32
    states = trainable * (rc.master_bytes + state.per_param) / lay.state_shard
    if request.optimizer is Optimizer.NONE:
        states = trainable * rc.master_bytes / lay.state_shard
    if request.offload is not Offload.NONE:
        host += states + grads32
        states = grads32 = 0.0
        if offload_params:
            host += grads
            grads = 0.0
    unified = states if state.paged else 0.0
    all_grads = grads + grads32
    step_grads = all_grads
    if rc.stack is Stack.DEEPSPEED and request.zero_stage >= 3:
        # ZeRO-3 keeps the bf16 gradient partition through backward and converts it to the fp32
        # partition at the step, releasing the bf16 copy ("release all the gradient since we have
        # already created a necessary copy", stage3.py): one or the other, 18 B/param over N in
        # all (DeepSpeed's estimate_zero3_model_states_mem_needs).
        all_grads = grads
        step_grads = max(grads, grads32)

    names = all_linear_names(spec)
    tr = training_of(request, rc, adapted_names(spec, request), names)
    act = activations(request, rc, lay, tr, stage)
    notes.update(nf4_notes(request))
    tokens = request.seq_len * request.micro_batch / lay.cp
    scored = label_len(request) * request.micro_batch / lay.cp
    lb = loss_buffers(request, rc, scored, lay.tp) if last else None
    kept = held_outputs(request, rc, lay, stage)
    script = request.loop is TrainLoop.SCRIPT
    casts = 0.0
    if rc.autocast:
        # autocast caches bf16 casts of the fp32 weights; matmuls keep them for backward.
        casts = _weight_casts(spec, lay, stage)
    saved = act.saved + (lb.saved if lb else 0) + casts

    head_grad = 0.0
    if request.mode is Mode.TRAIN and last and lay.param_shard == 1:
        head = spec.parameters.lm_head or spec.parameters.embedding
        head_grad = head / lay.tp * rc.grad_bytes
    dequant = 0.0
    if rc.linear_bytes < rc.weight_bytes:
        biggest = max(
            (
                lin.in_features * lin.out_features
                for lyr, _ in distinct_layers(spec)
                for lin in lyr.linears
                if not lin.expert
            ),
            default=0,
        )
        dequant = biggest / lay.tp * 2  # bitsandbytes dequantizes one weight to bf16 at a time
    comm_f, comm_b, comm_s, comm_detail = _comm(
        request, rc, lay, sp, trainable, weights - replicated, stage, offload_params
    )
    if lay.pp > 1:
        p2p = 2 * spec.hidden_size * tokens * rc.act_bytes
        comm_f, comm_b = comm_f + p2p, comm_b + p2p
    if lay.cp > 1:
        ring = 4 * spec.kv_width * tokens * rc.act_bytes / lay.tp
        comm_f, comm_b = comm_f + ring, comm_b + ring
    if lay.ep > 1 and spec.moe is not None:
        # all-to-all dispatch and combine buffers: k copies of each token's hidden state, each
        # (memory.md §2.8)
        a2a = 2 * spec.moe.experts_per_token * tokens * spec.hidden_size * rc.act_bytes
        comm_f, comm_b = comm_f + a2a, comm_b + a2a

    accumulating = request.grad_accum > 1 and lay.pp == 1
    in_bwd = request.optimizer_in_backward and request.optimizer is not Optimizer.NONE
    # .grad of every parameter alive through the step: an accumulation window's earlier
    # micro-batches, or zero_grad(set_to_none=False) (stepping in backward frees them instead)
    grads_alive = (accumulating or request.keep_grads) and not in_bwd
    grads_fwd = all_grads if grads_alive else 0.0
    loss_peak = 0.0
    if lb is not None:
        head_peak = head_grad * lb.head_grad_copies + lb.grad_logits
        loss_peak = max(lb.transient_forward, lb.transient_backward, head_peak)
    persistent = {"parameters": params, "optimizer_states": states}
    forward = {
        **persistent,
        "gradients": grads_fwd,
        "activations": saved,
        "logits": loss_peak,
        "kv_cache": kept.unsaved_cache,  # this step's, until the outputs die
        "held_outputs": kept.total,  # the previous step's, until `outputs` is rebound
        "communication": comm_f,
        "temporaries": dequant,
    }
    # First block (and the embedding) produce their gradients last. A tied embedding is the LM
    # head too: the head's backward, first of all, starts its gradient (autograd holds it in the
    # shared leaf's input buffer until the lookup's part is added at the end).
    tied = not spec.parameters.lm_head
    tied_here = tied and lay.pp == 1  # the head on the embedding's stage
    first_grads = trainable / max(1, sp.layers) if sp.layers else 0.0
    if stage == 0 and request.mode is Mode.TRAIN and not tied_here:
        first_grads += sp.embedding
    late = first_grads * all_grads / trainable if trainable else 0.0
    # with .grad alive, the last blocks' new gradients are computed next to it, then added
    end_grads = all_grads + late if grads_alive else max(0.0, all_grads - late)
    if in_bwd:
        # Each gradient is stepped and freed as soon as it is complete; a tied embedding's
        # gradient completes only at the end of backward.
        tied_emb = spec.parameters.embedding / lay.tp if tied and request.mode is Mode.TRAIN else 0
        end_grads = (trainable / max(1, sp.layers) + tied_emb) * rc.grad_bytes
        notes["optimizer_in_backward"] = "gradients stepped and freed per parameter"
    others = act.saved * (act.in_flight - 1) / act.in_flight if act.in_flight > 1 else 0.0
    # Backward of the last block: the loss is done, every block's saved tensors (or checkpoint)
    # are still alive, the last block is recomputed (checkpointing) and its gradients flow.
    recompute = act.one_layer if request.checkpointing is Checkpointing.FULL else 0.0
    # (sharded: the unsharded copy of the block's gradients is in the communication buffers)
    last_grads = 0.0
    if not grads_alive and grads:
        last_grads = head_grad + trainable / max(1, sp.layers) * rc.grad_bytes / lay.grad_shard
    backward = {
        **persistent,
        "gradients": grads_fwd + last_grads,
        "activations": act.saved + casts + recompute,
        "logits": 0.0,
        # this step's outputs: the cache's K/V are still saved tensors, except grouped ones
        "held_outputs": kept.logits + kept.unsaved_cache if script else 0.0,
        "communication": comm_b,
        "temporaries": act.grad_working + dequant,
    }
    backward_end = {
        **persistent,
        "gradients": end_grads,
        "activations": act.one_layer + others,
        "logits": 0.0,
        "held_outputs": kept.total,
        "communication": comm_b,
        "temporaries": act.grad_working + dequant,
    }
    raw: list[tuple[str, dict[str, float]]] = [
        ("forward", forward),
        ("backward", backward),
        ("backward-end", backward_end),
    ]
    if (
        tied_here
        and stage == 0
        and request.mode is Mode.TRAIN
        and trainable
        and lay.param_shard == lay.grad_shard == 1
    ):
        # autograd's input buffer adds the lookup's gradient to the head's out of place: three
        # embedding-sized tensors (the head's part, the lookup's, their sum) after the first
        # block's backward, as a real run and MemTracker show (accumulating micro-batches: next
        # to the .grad of the ones before)
        emb = sp.embedding * (rc.grad_bytes if in_bwd else all_grads / trainable)
        held = 3 * emb if in_bwd else all_grads + (3 if grads_alive else 2) * emb
        raw.append(
            ("embedding-backward", {**persistent, "gradients": held, "held_outputs": kept.total})
        )
    if request.optimizer is not Optimizer.NONE and not in_bwd:
        largest = largest_tensor(spec) / lay.tp if request.mode is Mode.TRAIN else trainable
        temps = step_temporaries(request, rc, trainable / lay.state_shard, min(largest, trainable))
        if request.offload is not Offload.NONE:
            temps = 0
        step = {
            **persistent,
            "gradients": step_grads,
            "activations": 0.0,
            "logits": 0.0,
            "held_outputs": kept.total,
            "communication": comm_s,
            "temporaries": float(temps),
        }
        raw.append(("optimizer-step", step))
    phases = [Phase(name, {k: int(v) for k, v in parts.items()}) for name, parts in raw]

    sources = {
        "parameters": (
            "memory.md §2.2 bytes per weight; §2.6 TP/PP/ZeRO-3/FSDP sharding",
            f"{int(sp.total + adapters_local):,} params on this GPU"
            + (f" / {lay.param_shard} shards" if lay.param_shard > 1 else "")
            + (
                f"; Linear weights at {rc.linear_bytes:.4g} B{nf4_label(request)}"
                if rc.linear_bytes != rc.weight_bytes
                else ""
            )
            + ("; offloaded to host" if offload_params else "")
            + (
                f"; bitsandbytes quantization state {replicated / GIB:.2f} GiB whole on each GPU "
                "(not sharded or offloaded)"
                if replicated and (offload_params or lay.param_shard > 1)
                else ""
            ),
        ),
        "gradients": (
            "memory.md §2.3-2.4: one gradient per trainable parameter; §2.6 ZeRO-2+/FSDP shard",
            f"{int(trainable):,} trainable × {rc.grad_bytes:g} B"
            + (f" + fp32 copy {rc.grad32_bytes:g} B" if rc.grad32_bytes else "")
            + (f", sharded over {lay.grad_shard}" if lay.grad_shard > 1 else ""),
        ),
        "optimizer_states": (
            state.source + (" + fp32 master weights" if rc.master_bytes else ""),
            state.detail
            + (f" + master {rc.master_bytes:g} B" if rc.master_bytes else "")
            + (f", sharded over {lay.state_shard}" if lay.state_shard > 1 else "")
            + ("; offloaded to host" if request.offload is not Offload.NONE else "")
            + ("; CUDA unified memory, pages to host" if state.paged else ""),
        ),
        "activations": (
            ACT_SOURCE,
            _act_detail(request, act, lb, casts),
        ),
        "communication": ("DeepSpeed / FSDP / DDP defaults (memory.md §2.6)", comm_detail),
        "temporaries": (
            "optimizer.step intermediates (memory.md §2.4) and one block's activation gradients",
            f"step impl {request.optimizer_impl.value}",
        ),
    }
    if lb is not None:
        sources["logits"] = (lb.source, lb.detail)
    if kept.unsaved_cache:
        sources["kv_cache"] = (
            "transformers builds a KV cache in a training forward (config use_cache, no "
            "gradient checkpointing)",
            "grouped K/V of every layer, next to the per-head copies attention keeps; "
            "model.config.use_cache = False drops it",
        )
    if kept.total:
        sources["held_outputs"] = (
            "PyTorch FAQ: a local keeps a tensor alive until rebound (`outputs = model(**batch)`)",
            f"previous step's logits {kept.logits / GIB:.2f} GiB"
            + (f" + KV cache {kept.cache / GIB:.2f} GiB (use_cache)" if kept.cache else "")
            + " alive through the next forward",
        )
    dynamic = saved + loss_peak + kept.total + kept.unsaved_cache + comm_f + act.grad_working
    tensors = int(20 * sp.layers * act.in_flight + (12 * sp.layers if lay.param_shard == 1 else 4))
    return (
        Assembled(
            phases=tuple(phases),
            sources=sources,
            host_bytes=int(host),
            unified_bytes=int(unified),
            dynamic_bytes=int(dynamic),
            tensors=tensors,
            trainable=int(trainable),
            stage=stage,
            notes=notes,
        ),
        act,
        lb,
    )


def _act_detail(
    request: PlanRequest, act: Activations, lb: LossBuffers | None, casts: float
) -> str:
    parts = [f"{kind} {size / MIB:,.0f} MiB" for kind, size in act.per_layer.items()]
    text = "per block per micro-batch: " + ", ".join(parts)
    if request.checkpointing is Checkpointing.FULL:
        text += "; full checkpointing keeps block inputs, recomputes one block in backward"
    if act.in_flight > 1:
        text += f"; {act.in_flight:g} micro-batches in flight"
    if lb is not None and lb.saved:
        text += f"; loss keeps {lb.saved / GIB:.2f} GiB"
    if casts:
        text += f"; autocast weight casts {casts / GIB:.2f} GiB"
    if act.offloaded:
        text += f"; {act.offloaded / GIB:.2f} GiB offloaded to host"
    if act.kernel_saved or act.kernel_one_layer:
        full = request.checkpointing is Checkpointing.FULL
        kept = act.kernel_one_layer if full else act.kernel_saved
        text += (
            f"; of which {kept / GIB:.2f} GiB are 4-bit Linear inputs bitsandbytes < 0.43.2 keeps"
            + (" in the recomputed block" if full else "")
            + f" (MatMul4Bit ctx.tensors = (A, B); dropped by {BNB_FIX})"
        )
    return text


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
