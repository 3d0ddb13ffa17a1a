"""Saved activations per GPU: the family recipes evaluated for one job.

Sizes follow the recipes in ``families.py``; parallelism and recomputation scale them as in
Korthikanti et al. 2022 (Table 2) and Megatron's ``theoretical_memory_usage.py``: tensor
parallelism splits what lives inside attention and MLP, sequence parallelism the rest, context
parallelism the sequence, and the first 1F1B pipeline stage keeps ``min(pp, micro-batches)``
micro-batches of its layers in flight (memory.md §2.5, §2.6).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwarden.planner import dora, families, stacks
from gpuwarden.planner.layout import Layout, lora_targets, stage_groups, stage_layers
from gpuwarden.planner.liger import LIGER_WIDEST_GRADS, gated_product_grads, runs_liger
from gpuwarden.planner.outputs import builds_cache, label_len
from gpuwarden.planner.precision import Recipe
from gpuwarden.planner.quant_kernel import (
    COMPUTE_DTYPE_BYTES,
    fp32_compute,
    input_keeping_linears,
)
from gpuwarden.planner.state import mixer_kernels
from gpuwarden.planner.tensors import Ctx, Dt, Role, Saved, wiring
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.planner.working_set import (
    GATED_PRODUCT_GRADS,
    gated_mlp_gradient_bytes,
    moe_gradient_bytes,
)
from gpuwarden.types.model import LayerParameters, ModelSpec, Structure
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    Mode,
    PipelineSchedule,
    PlanRequest,
)

# a norm's gradient in fp32, per hidden element (transformers' norms)
FP32_NORM_GRAD_BYTES = FP32_BYTES
# gradients of the widest saved tensors alive at once in a block's backward (transformers' modules)
WIDEST_GRADS = 2
SOURCE = (
    "memory.md §2.5 HF trace-derived closed form (transformers 5, FakeTensorMode), per family; "
    "TP/SP/CP/PP factors: Korthikanti et al. 2022 Table 2"
)


@dataclass(frozen=True, slots=True)
class Training:
    """Which weights and norms train, and how adapters read their inputs."""

    trainable: frozenset[str]  # Linear names (plus "embedding", "lm_head", "router")
    norms: bool
    adapted: frozenset[str]
    adapter_shares_input: bool  # same dtype, no dropout: the adapter keeps the Linear's input
    # Linears whose kernel keeps their input although their weight is frozen (bitsandbytes
    # < 0.43.2 4-bit Linears): kept when the input requires grad (``quant_kernel.py``)
    keeps_input: frozenset[str] = frozenset()
    # bytes per element of the input those Linears keep: their own cast to the bitsandbytes
    # compute dtype (fp32: one copy per Linear); None: the input itself, in the activation dtype
    kept_input_bytes: float | None = None
    # DTensor tensor parallelism (torchtitan): a column-parallel Linear's matmul keeps the input
    # all-gathered from the sequence shards, so the tensors Linears read are not split over TP
    gathered_inputs: bool = False


def training_of(
    request: PlanRequest, rc: Recipe, adapted: frozenset[str], names: frozenset[str]
) -> Training:
    gathered = request.tp > 1 and stacks.profile(request).tp_gathers_inputs
    if request.mode is Mode.TRAIN:
        return Training(
            names | {"embedding", "lm_head", "router"},
            True,
            frozenset(),
            False,
            gathered_inputs=gathered,
        )
    shares = request.lora_dropout == 0
    adapts_head = "lm_head" in lora_targets(request.model, request)
    trainable = frozenset({"lm_head"}) if adapts_head else frozenset()
    keeps = input_keeping_linears(request, names)
    kept_bytes = COMPUTE_DTYPE_BYTES["fp32"] if keeps and fp32_compute(request) else None
    return Training(trainable, False, adapted, shares, keeps, kept_bytes, gathered_inputs=gathered)


def _dtype_bytes(dt: Dt, rc: Recipe) -> float:
    if dt is Dt.ACT:
        return rc.act_bytes
    if dt is Dt.RES:
        return rc.res_bytes
    if dt is Dt.F32:
        return FP32_BYTES
    return 8 if dt is Dt.I64 else 1


def item_bytes(it: Saved, rc: Recipe, tr: Training, tp: int, sp: bool) -> float:
    """Bytes per token one saved tensor costs for this job (0 when nothing needs it)."""
    if it.norm and not tr.norms:
        return 0.0
    if it.low_precision_only and rc.act_bytes >= 4:
        return 0.0
    if it.residual_cast and rc.res_bytes >= 4:
        return 0.0
    size = _dtype_bytes(it.dtype, rc)
    copies = 1
    if it.consumers is not None:
        width_bytes = size
        needed = [
            c
            for c in it.consumers
            if c in tr.trainable
            or c in tr.keeps_input
            or (c in tr.adapted and tr.adapter_shares_input and rc.adapter_bytes == width_bytes)
        ]
        if not needed:
            return 0.0
        if tr.kept_input_bytes is not None and size < tr.kept_input_bytes:
            return _cast_kept_inputs(it, rc, tr, needed, size, tp, sp)
        if rc.autocast and it.cast:
            size, copies = 2, len(needed)  # autocast casts the fp32 input once per Linear
        if rc.fp8_linear_inputs and set(needed) != {"lm_head"}:
            size = 1  # the output projection stays bf16 (torchtitan filters "output", TE too)
    if it.autocast_f32 and rc.autocast:
        size = 4 + rc.act_bytes  # fp32 result of the op, and its cast for the next matmul
    split = tp if (it.tp or sp) else 1
    if tr.gathered_inputs and it.consumers is not None and not it.tp:
        split = 1  # kept as all-gathered for the column-parallel matmul (DTensor TP)
    return copies * it.width * size / split


def _cast_kept_inputs(
    it: Saved, rc: Recipe, tr: Training, needed: list[str], size: float, tp: int, sp: bool
) -> float:
    """Bytes per token of an input read by Linears that keep their own compute-dtype cast of it
    (bitsandbytes < 0.43.2 4-bit Linears computing in fp32: ``x.to(compute_dtype)`` per Linear,
    kept as ``ctx.tensors``), plus the input itself where another consumer keeps it."""
    casts = sum(1 for c in needed if c in tr.keeps_input)
    # the input itself stays for a trainable weight's gradient or an adapter sharing it
    shares = tr.adapter_shares_input and rc.adapter_bytes == size
    keeps_itself = any(
        c not in tr.keeps_input or c in tr.trainable or (c in tr.adapted and shares) for c in needed
    )
    kept = casts * (tr.kept_input_bytes or size) + (size if keeps_itself else 0.0)
    split = tp if (it.tp or sp) else 1
    if tr.gathered_inputs and not it.tp:
        split = 1
    return it.width * kept / split


def _fused_output_cast(
    it: Saved, items: tuple[Saved, ...], attn_out: frozenset[str], tr: Training
) -> float:
    """Bytes per token of the compute-dtype casts the output projection keeps of a fused
    attention kernel's output (``_cast_kept_inputs``), where the block lists that output as the
    projection's input as is (no item of its own with the projection as consumer); unsplit."""
    if tr.kept_input_bytes is None or not _projection_reads_as_is(it, items, attn_out, tr):
        return 0.0
    return len(attn_out & tr.keeps_input) * it.width * tr.kept_input_bytes


def _kernel_referenced(
    items: tuple[Saved, ...],
    rc: Recipe,
    tr: Training,
    tp: int,
    sp: bool,
    attn_out: frozenset[str],
) -> float:
    """Bytes per token of the Linear inputs (or their compute-dtype casts) the 4-bit kernel keeps
    as ``ctx.tensors``, whether or not another op saves the same tensor: what the graph holds
    after backward has freed its saved tensors."""
    alone = replace(tr, trainable=frozenset(), adapted=frozenset(), adapter_shares_input=False)
    total = 0.0
    for it in items:
        split = tp if (it.tp or sp) else 1
        if it.consumers is not None:
            total += item_bytes(it, rc, alone, tp, sp)
        elif _projection_reads_as_is(it, items, attn_out, tr):
            # the output projection keeps the fused attention kernel's output itself (which
            # the kernel saves too), or its own compute-dtype cast of it
            own = it.width * _dtype_bytes(it.dtype, rc)
            total += (_fused_output_cast(it, items, attn_out, tr) or own) / split
    return total


def _projection_reads_as_is(
    it: Saved, items: tuple[Saved, ...], attn_out: frozenset[str], tr: Training
) -> bool:
    """A fused attention kernel's output that a kernel-keeping output projection reads as is (the
    block lists no item of its own with the projection as consumer)."""
    return (
        it.role is Role.ATTENTION_OUTPUT
        and bool(attn_out & tr.keeps_input)
        and not any(x.consumers == attn_out for x in items)
    )


def _adapter_bytes(
    layer: LayerParameters,
    items: tuple[Saved, ...],
    rc: Recipe,
    tr: Training,
    request: PlanRequest,
    grad_free: frozenset[str] = frozenset(),
) -> tuple[float, float]:
    """(per token, per block) bytes PEFT / torchtune LoRA keep besides the base block (§2.7).

    ``grad_free``: adapted Linears whose input does not require grad (layer 0, frozen embedding).
    """
    per_token = fixed = 0.0
    r = request.lora_rank
    # fp32 adapters on a half-precision base under autocast (HF Trainer bf16=True): lora_A and
    # lora_B compute in bf16 and keep bf16 casts of their inputs and weights. Without autocast
    # (PEFT's fp32 adapters on a pure bf16 base) they compute in fp32 on an fp32 cast input.
    amp = rc.adapters_autocast
    lora_in = rc.adapter_compute_bytes  # dtype lora_A's matmul keeps
    # LitGPT's LoRAQKVLinear: the adapted parts of q / k / v share one lora_A and one dropout
    # of their input; the first pays for the input, the others for their rows of lora_A's output
    shares_qkv = stacks.profile(request).lora_shared_qkv_input
    qkv = wiring(layer, request.model.hidden_size).attn_in if shares_qkv else frozenset()
    qkv_input_counted = False
    for lin in layer.linears:
        if lin.name not in tr.adapted:
            continue
        if lin.name in qkv and qkv_input_counted:
            per_token += r * lora_in
            continue
        qkv_input_counted = qkv_input_counted or lin.name in qkv
        source = next((it for it in items if it.consumers and lin.name in it.consumers), None)
        in_bytes = _dtype_bytes(source.dtype, rc) if source is not None else rc.act_bytes
        # a decoder's cross-attention (T5: q, k, v, o again) reads tensors that require grad
        free = lin.name in grad_free and lin.part != "cross_attention"
        if request.lora_dropout > 0:
            # dropped copy + bool mask (CUDA); no mask when the input does not require grad
            per_token += lin.in_features * (lora_in + (not free))
        elif amp or rc.adapter_bytes != in_bytes:
            # PEFT casts x to the adapter dtype; under autocast lora_A then keeps its own bf16
            # copy (one per adapter), else the cast input itself.
            per_token += lin.in_features * lora_in
        per_token += r * lora_in  # lora_A output, kept by lora_B
        per_token += dora.saved_per_token(request, rc, lin)
        fixed += dora.kept_weight_bytes(request, rc, lin, free)
        if amp:
            fixed += r * lin.out_features * rc.act_bytes  # lora_B weight cast
            if not free:
                fixed += r * lin.in_features * rc.act_bytes  # lora_A weight cast (∂x needs it)
    return per_token, fixed


@dataclass(frozen=True, slots=True)
class _Group:
    """Bytes one group of identical blocks saves per micro-batch."""

    kind: str
    saved: float  # one block
    widest: float  # its largest saved tensor (an MoE block's: outside the routed dispatch)
    times: int  # blocks in the group
    kernel: float  # kept only by the 4-bit kernel
    boundary: float  # its input, what full checkpointing keeps
    routed_grads: float  # its routed experts' gradients at their peak (0: not apart)
    tokens: float  # tokens it runs over
    gated_grads: float = 0.0  # its dense gated MLP's gradients at their peak (0: not gated)


def _widest(items: tuple[Saved, ...], sizes: list[float], *, dispatch_apart: bool) -> float:
    """Bytes per token of the widest saved tensor whose gradient the block's backward holds
    beside another; with ``dispatch_apart`` the routed experts' dispatch is left out (its
    gradients are held per dispatch call: ``working_set.moe_gradient_bytes``)."""
    if not dispatch_apart:
        return max(sizes, default=0.0)
    kept = zip(items, sizes, strict=True)
    return max((size for it, size in kept if it.role is not Role.ROUTED_DISPATCH), default=0.0)


@dataclass(frozen=True, slots=True)
class Activations:
    saved: int  # kept at the end of forward on this stage, excluding the logits
    one_layer: int  # one block's full activations for one micro-batch (the recompute set)
    grad_working: int  # activation gradients in flight during one block's backward
    offloaded: int  # moved to host memory by activation offloading
    in_flight: float  # micro-batches whose activations this stage holds
    per_layer: dict[str, int]  # block kind → bytes per block per micro-batch (for the detail)
    # of ``saved``: Linear inputs kept only by the 4-bit kernel (bitsandbytes < 0.43.2), and of
    # ``one_layer``: the same for the recomputed block
    kernel_saved: int = 0
    kernel_one_layer: int = 0
    # every Linear input the 4-bit kernel references as ``ctx.tensors`` (also those another op
    # saves): not saved tensors, so backward does not free them; they live as long as the graph
    # (``quant_kernel.GRAPH_HELD_TERM``)
    kernel_inputs: int = 0


def _per_layer_input_width(spec: ModelSpec, layer: LayerParameters) -> int:
    """Elements per token of a block's slice of Gemma 4's per-layer inputs (0: none): a second
    input of Gemma4TextDecoderLayer.forward (``per_layer_input``), which full checkpointing keeps
    beside the hidden states."""
    return families.per_layer_width(layer) if spec.traits.per_layer_inputs else 0


def _without_block_zero_input(items: tuple[Saved, ...]) -> tuple[Saved, ...]:
    """The head's items less the one full checkpointing already keeps as block 0's input."""
    return tuple(it for it in items if it.role is not Role.FIRST_BLOCK_INPUT)


def pipeline_microbatches(request: PlanRequest) -> tuple[int, int]:
    """(sequences per microbatch, microbatches per optimizer step). torchtitan splits the local
    batch (``micro_batch``) into microbatches of ``pp_microbatch_size`` under pipeline
    parallelism (``pipeline_parallel_microbatch_size``, default 1); torchtitan of 2024 into as
    many microbatches as there are stages when none is named (``pipeline_parallel_microbatches``
    defaults to pp × stages per rank, ``build_pipeline_schedule``); otherwise each of the
    ``grad_accum`` micro-batches is one microbatch."""
    size = request.pp_microbatch_size
    if request.pp > 1 and size is None and stacks.profile(request).pp_microbatches_are_stages:
        stages = request.pp * max(1, request.virtual_stages)
        size = request.micro_batch // stages if request.micro_batch % stages == 0 else None
    if request.pp > 1 and size is not None and 0 < size <= request.micro_batch:
        return size, max(1, request.micro_batch // size) * max(1, request.grad_accum)
    return request.micro_batch, max(1, request.grad_accum)


def op_saved_widths(
    layer: LayerParameters, tp: int, adapted: frozenset[str] = frozenset(), rank: int = 0
) -> tuple[float, float]:
    """(base, adapter) elements per token torchtitan's op-level SAC keeps of one block besides
    its input: the outputs of every other ``aten.mm`` in forward order (``mm_count % 2``: the
    1st, 3rd, ... are saved) and of SDPA (its output; the logsumexp is added by the caller).
    torchtitan models/llama3/infra/parallelize.py, ``_save_list`` and ``_custom_policy``.

    The matmuls are the block's non-expert Linears as listed, except those with a bias, which
    run ``aten.addmm`` (neither saved nor counted); a LoRA-adapted Linear adds ``lora_A`` (rank
    wide) and ``lora_B`` matmuls after its own (PEFT ``LoraLayer.forward``), whose outputs are
    in the adapters' dtype."""
    sequence: list[tuple[float, bool]] = []  # (width, adapter's)
    for lin in layer.linears:
        if lin.expert:
            continue
        if not lin.bias:
            sequence.append((lin.out_features * lin.count / tp, False))
        if lin.name in adapted:
            sequence += [(rank * lin.count, True), (lin.out_features * lin.count / tp, True)]
    kept = sequence[0::2]
    return sum(w for w, a in kept if not a), sum(w for w, a in kept if a)


def in_flight(request: PlanRequest, stage: int) -> float:
    """Micro-batches alive on ``stage`` under the pipeline schedule (Korthikanti §4.2.3)."""
    p, m = request.pp, pipeline_microbatches(request)[1]
    if p == 1:
        return 1.0
    if request.pp_schedule is PipelineSchedule.GPIPE:
        return float(m)
    alive = float(min(p - stage, m))
    if request.pp_schedule is PipelineSchedule.INTERLEAVED and request.virtual_stages > 1:
        alive *= 1 + (p - 1) / (p * request.virtual_stages)
    return alive


def _context(request: PlanRequest) -> Ctx:
    """What shapes every block's saved tensors besides its own weights: the sequence, the
    attention kernel and the stack's fusions."""
    s, b = request.seq_len, pipeline_microbatches(request)[0]
    profile = stacks.profile(request)
    return Ctx(
        s=s,
        eager=request.attention is Attention.EAGER,
        compile=request.compile,
        masked=families.mask_share(request.model, s, request.attention is Attention.SDPA),
        single=b == 1,
        expand_kv=families.expands_kv(request),
        cached=builds_cache(request),
        fused_qkv=profile.fused_qkv,
        native_gelu=profile.native_gelu,
        heads_first_q=profile.heads_first_q,
        mixer_kernels=mixer_kernels(request),
        # Liger's RMSNorm keeps its input and rstd, its SwiGLU / GeGLU the gate and up outputs
        fused_norms=profile.fused_norms or runs_liger(request),
        fused_glu=profile.fused_glu or runs_liger(request),
        qkv_views=profile.qkv_split_views,
    )


@dataclass(frozen=True, slots=True)
class _Run:
    """Consecutive identical blocks of a stage: ``times`` copies of block ``index``."""

    index: int
    times: int
    decoder: bool
    first: bool  # the first block of its stack under a frozen embedding: its input needs no grad


def _runs(
    blocks: tuple[LayerParameters, ...], start: int, count: int, n_enc: int, frozen: bool
) -> list[_Run]:
    """The stage's blocks as runs. LoRA: the embedding is frozen, so the first block of each
    stack (an encoder-decoder's encoder and decoder) gets an input that does not require grad
    (BERT: its embedding LayerNorm is frozen too)."""
    runs: list[_Run] = []
    for index, times, decoder in stage_groups(blocks, start, count, n_enc):
        if frozen and index in {0, n_enc}:
            runs.append(_Run(index, 1, decoder, True))
            if times > 1:
                runs.append(_Run(index, times - 1, decoder, False))
        else:
            runs.append(_Run(index, times, decoder, False))
    return runs


@dataclass(frozen=True, slots=True)
class _Blocks:
    """What a stage's blocks save, per micro-batch."""

    groups: list[_Group]
    fixed: float  # per block, independent of tokens (autocast casts of adapter weights)
    kernel_inputs: float  # Linear inputs the 4-bit kernel references, every block


def _first_block(request: PlanRequest, lay: Layout, stage: int) -> int:
    """The index of the stage's first block."""
    return sum(
        stage_layers(len(request.model.parameters.layers), lay.pp, st) for st in range(stage)
    )


def _blocks(
    request: PlanRequest, rc: Recipe, lay: Layout, tr: Training, stage: int, ctx: Ctx
) -> _Blocks:
    spec = request.model
    s, b = request.seq_len, pipeline_microbatches(request)[0]
    tokens = s * b / lay.cp
    layers = spec.parameters.layers
    n_enc = spec.num_encoder_layers if spec.structure is Structure.ENCODER_DECODER else 0
    start = _first_block(request, lay, stage)
    count = stage_layers(len(layers), lay.pp, stage)
    frozen = "embedding" not in tr.trainable
    # encoder-decoder: the decoder runs over the labels (target_len), its cross-attention over
    # the encoder's tokens
    dec_s = label_len(request)
    dec_ctx = replace(ctx, s=dec_s) if dec_s != s else ctx
    groups: list[_Group] = []
    fixed = kernel_inputs = 0.0
    for run in _runs(layers, start, count, n_enc, frozen):
        decoder_side = run.decoder and bool(n_enc)
        tok = dec_s * b / lay.cp if decoder_side else tokens
        group, block_fixed, referenced = _group(
            request,
            rc,
            tr,
            lay.tp,
            run,
            dec_ctx if decoder_side else ctx,
            cross_len=s if run.decoder else 0,
            tokens=tok,
            encoder_decoder=bool(n_enc),
        )
        groups.append(group)
        fixed += block_fixed * run.times
        kernel_inputs += referenced * tok * run.times
    return _Blocks(groups, fixed, kernel_inputs)


def _group(
    request: PlanRequest,
    rc: Recipe,
    tr: Training,
    tp: int,
    run: _Run,
    ctx: Ctx,
    *,
    cross_len: int,
    tokens: float,
    encoder_decoder: bool,
) -> tuple[_Group, float, float]:
    """One run's bytes (a ``_Group``), its fixed bytes per block, and the Linear-input bytes per
    token the 4-bit kernel references in one block."""
    spec = request.model
    sp = request.sequence_parallel
    layer = spec.parameters.layers[run.index]
    items = families.block(
        spec, layer, ctx, cross_len=cross_len, frozen_input=tr.adapted if run.first else None
    )
    if rc.autocast and rc.weight_bytes > rc.act_bytes:
        items += families.amp_only(spec, layer)
    if request.checkpointing is Checkpointing.SELECTIVE:
        items = tuple(it for it in items if not it.quadratic)
    free = families.grad_free_inputs(spec, layer, tr.adapted) if run.first else frozenset()
    # a kernel keeps a Linear's input only when that input requires grad
    block_tr = replace(tr, keeps_input=tr.keeps_input - free) if free else tr
    attn_out = wiring(layer, spec.hidden_size).attn_out
    sizes = [
        item_bytes(it, rc, block_tr, tp, sp)
        + _fused_output_cast(it, items, attn_out, block_tr) / (tp if (it.tp or sp) else 1)
        for it in items
    ]
    kernel = referenced = 0.0
    if block_tr.keeps_input:
        plain = replace(tr, keeps_input=frozenset())
        kernel = sum(sizes) - sum(item_bytes(it, rc, plain, tp, sp) for it in items)
        referenced = _kernel_referenced(items, rc, block_tr, tp, sp, attn_out)
    extra, block_fixed = _adapter_bytes(layer, items, rc, tr, request, free)
    product = (
        gated_product_grads(layer, spec.intermediate_size)
        if runs_liger(request)
        else GATED_PRODUCT_GRADS
    )
    routed = moe_gradient_bytes(request, rc.act_bytes, tp, product) if layer.experts else None
    gated = None if layer.experts else gated_mlp_gradient_bytes(spec, rc.act_bytes, tp, product)
    group = _Group(
        _block_kind(layer.experts, run.decoder, encoder_decoder),
        (sum(sizes) + extra) * tokens,
        _widest(items, sizes, dispatch_apart=routed is not None) * tokens,
        run.times,
        kernel * tokens,
        _boundary(request, rc, layer, tr, tp, tokens),
        (routed or 0.0) * tokens,
        tokens,
        (gated or 0.0) * tokens,
    )
    return group, block_fixed, referenced


def _block_kind(experts: object, decoder: bool, encoder_decoder: bool) -> str:
    """The block's name in the plan's detail."""
    if encoder_decoder:
        return "decoder block" if decoder else "encoder block"
    return "MoE block" if experts else "block"


def _residual_width(request: PlanRequest, rc: Recipe, tp: int) -> float:
    """Bytes per token of the residual stream (sharded by sequence parallelism)."""
    return request.model.hidden_size * rc.res_bytes / (tp if request.sequence_parallel else 1)


def _boundary(
    request: PlanRequest,
    rc: Recipe,
    layer: LayerParameters,
    tr: Training,
    tp: int,
    tokens: float,
) -> float:
    """Bytes full (or op-level) checkpointing keeps of a block: its input — the residual
    stream, and Gemma 4's slice of the per-layer inputs — and under op-level SAC the matmul and
    SDPA outputs it saves."""
    spec = request.model
    res_width = _residual_width(request, rc, tp)
    boundary = (res_width + _per_layer_input_width(spec, layer) * rc.res_bytes) * tokens
    if request.checkpointing is Checkpointing.OP:
        # the selective checkpoint keeps matmul and SDPA outputs only: adapter inputs and
        # dropout masks are recomputed like the rest
        q_width = spec.num_heads * spec.head_dim / tp
        base, adapter = op_saved_widths(layer, tp, tr.adapted, request.lora_rank)
        kept = (base + q_width) * rc.act_bytes + adapter * rc.adapter_bytes
        boundary += (kept + 4 * spec.num_heads / tp) * tokens
    return boundary


def _head(
    request: PlanRequest,
    rc: Recipe,
    lay: Layout,
    tr: Training,
    stage: int,
    ctx: Ctx,
    *,
    recomputed: bool,
) -> float:
    """Bytes the tensors outside the blocks save on this stage (the embedding's on the first,
    the final norm's and the labels' on the last), except the logits."""
    if stage not in (0, lay.pp - 1):
        return 0.0
    spec = request.model
    s, b = request.seq_len, pipeline_microbatches(request)[0]
    tokens = s * b / lay.cp
    n_enc = spec.num_encoder_layers if spec.structure is Structure.ENCODER_DECODER else 0
    dec_s = label_len(request)
    frozen = "embedding" not in tr.trainable
    head_items = families.head(spec, ctx, frozen_embedding=frozen)
    if stage != lay.pp - 1:  # final norm and labels live on the last stage
        head_items = head_items[:1]
    if recomputed and _first_block(request, lay, stage) == 0:
        head_items = _without_block_zero_input(head_items)
    dec_tokens = dec_s * b / lay.cp
    head = sum(
        item_bytes(it, rc, tr, lay.tp, request.sequence_parallel)
        * (dec_tokens if it.decoder_side and n_enc else tokens)
        for it in head_items
    )
    head += families.rope_bytes(spec, s // lay.cp, rc.res_bytes)
    head += families.batch_shared(
        spec,
        s,
        dec_s,
        (rc.act_bytes, rc.res_bytes),
        sdpa=request.attention is not Attention.EAGER,
        recomputed=recomputed,
        embeddings_train="embedding" in tr.trainable,
    )
    return head


def _grad_working(request: PlanRequest, rc: Recipe, lay: Layout, groups: list[_Group]) -> float:
    """Backward of one block: the gradient of the residual stream in and out, the fp32 norm
    gradient, and the gradients of its two widest saved tensors. An MoE block's routed experts
    peak apart, at their gated product's backward (working_set.moe_gradient_bytes), which runs
    first in the block's backward: beside it only the gradient of the block's output (the
    residual stream's); the norms' and the block input's gradients come later. A dense gated
    MLP peaks the same way (working_set.gated_mlp_gradient_bytes), three i-wide gradients.
    Liger's kernels (liger.py) write their input gradients in place: no fp32 norm gradient, and
    one widest gradient at a time."""
    hidden = request.model.hidden_size
    sharded = lay.tp if request.sequence_parallel else 1
    tokens = request.seq_len * pipeline_microbatches(request)[0] / lay.cp
    largest_item = max((g.widest for g in groups), default=0.0)
    stream = rc.res_bytes * hidden / sharded
    apart = [(g.routed_grads or g.gated_grads, g.tokens) for g in groups]
    liger = runs_liger(request)
    widest_grads = LIGER_WIDEST_GRADS if liger else WIDEST_GRADS
    norm_grad = 0 if liger else FP32_NORM_GRAD_BYTES
    return max(
        widest_grads * largest_item + (2 * rc.res_bytes + norm_grad) * hidden * tokens / sharded,
        max((grads + stream * tok for grads, tok in apart if grads), default=0.0),
    )


def activations(
    request: PlanRequest, rc: Recipe, lay: Layout, tr: Training, stage: int
) -> Activations:
    ctx = _context(request)
    blocks = _blocks(request, rc, lay, tr, stage, ctx)
    groups = blocks.groups
    alive = in_flight(request, stage)
    widest = max(groups, key=lambda g: g.saved, default=None)
    one_layer = widest.saved if widest else 0.0
    kernel_saved = kernel_inputs = 0.0
    recomputed = request.checkpointing in {Checkpointing.FULL, Checkpointing.OP}
    if recomputed:
        # the recomputed blocks' graphs die with their backward: no kernel inputs outlive them
        layers_saved = sum(g.boundary * g.times for g in groups)
    else:
        layers_saved = sum(g.saved * g.times for g in groups) + blocks.fixed
        kernel_saved = sum(g.kernel * g.times for g in groups) * alive
        kernel_inputs = blocks.kernel_inputs * alive
    layers_saved *= alive
    head = _head(request, rc, lay, tr, stage, ctx, recomputed=recomputed)

    offloaded = 0.0
    if request.activation_offload:
        # Everything but the block in flight goes to host memory and comes back for backward.
        keep = _largest_boundary(request, rc, lay, groups) if recomputed else one_layer
        offloaded = max(0.0, layers_saved - keep)
        layers_saved -= offloaded

    return Activations(
        saved=int(layers_saved + head),
        one_layer=int(one_layer),
        grad_working=int(_grad_working(request, rc, lay, groups)),
        offloaded=int(offloaded),
        in_flight=alive,
        per_layer={g.kind: int(g.saved) for g in groups},
        kernel_saved=int(kernel_saved),
        kernel_one_layer=int(widest.kernel if widest else 0.0),
        kernel_inputs=int(kernel_inputs),
    )


def _largest_boundary(request: PlanRequest, rc: Recipe, lay: Layout, groups: list[_Group]) -> float:
    """The largest block input of the stage (a stage without blocks: the residual stream)."""
    tokens = request.seq_len * pipeline_microbatches(request)[0] / lay.cp
    return max((g.boundary for g in groups), default=_residual_width(request, rc, lay.tp) * tokens)
