"""The job's lifecycle around the steady step: loading, evaluation, checkpoint saving.

Each phase has its own peak, and any of them can be the job's (memory.md §2.11: the peak is a max
over phases). What each stack does in each phase is in ``stacks.py``; here the bytes:

* load: the weights as the loader materialises them (torchtune: ``torchtune_load.py``).
  Unsharded, the whole model in the load dtype
  (transformers < 5 without ``torch_dtype``: fp32, twice a bf16 job's weights) and, when it is
  then cast, the largest tensor in both dtypes; quantize-on-load (bitsandbytes, LitGPT) holds
  one Linear's 16-bit weight (and the fp16 copy Lightning quantizes from) next to the packed
  model. Sharded (FSDP / ZeRO-3 loading through meta init, ``zero.Init`` or
  ``sync_module_states``), one unit in the load dtype next to the shards.
* evaluation: the optimizer states and weights of training, plus a no-grad forward over the
  evaluation batch with its full logits (and LitGPT's generation with a KV cache).
* checkpoint save: FSDP ``FULL_STATE_DICT`` unshards the units one at a time; offloaded to CPU
  (accelerate's and Lightning's ``FullStateDictConfig(offload_to_cpu=True, rank0_only=True)``)
  the GPU holds the root and one unit, plus one unit's full optimizer states when they are
  gathered too; with torch's default ``FullStateDictConfig()`` every unit's clone stays on the
  GPU until ``state_dict()`` returns: the whole model on every rank. Sharded / DCP checkpoints
  write each rank's shards in place.

A phase that cannot exceed the steady step (nothing beyond the persistent states) is left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwarden.planner import stacks
from gpuwarden.planner.kv_cache import kv_layout
from gpuwarden.planner.layout import distinct_layers
from gpuwarden.planner.loss import output_logit_bytes
from gpuwarden.planner.outputs import label_len
from gpuwarden.planner.quant_kernel import fp32_compute, fp32_matmul_bytes
from gpuwarden.planner.quantization import stored_linears
from gpuwarden.planner.torchtune_load import full_tensor_bytes, nf4_quantize_bytes
from gpuwarden.planner.working_set import working_set
from gpuwarden.types.model import LinearShape
from gpuwarden.types.plan import Mode, Offload, PlanRequest, QuantKernel, SaveMode
from gpuwarden.units import GIB

if TYPE_CHECKING:
    from gpuwarden.planner.layout import Layout
    from gpuwarden.planner.precision import Recipe
    from gpuwarden.planner.training import StepParts

LOAD = "load"
EVALUATION = "evaluation"
SAVE = "checkpoint-save"

SOURCES = {
    LOAD: "lifecycle.py: loading (stacks.py: the load dtype and how each stack loads)",
    EVALUATION: "lifecycle.py: evaluation forward without autograd, full logits",
    SAVE: "lifecycle.py: checkpoint save (FSDP FULL_STATE_DICT / DCP, DeepSpeed 16-bit gather)",
}


def quantized_shapes(request: PlanRequest, tp: int) -> list[tuple[float, float, float]]:
    """(weight elements, input features, output features) on one TP rank of each weight a
    4-bit / 8-bit quantizer packs: the blocks' Linears (split column-wise: the whole input, a
    share of the outputs), and the LM head where the stack's plugin swaps it too (LitGPT's
    BitsandbytesPrecision), split only where the stack splits the vocabulary."""
    shapes: list[tuple[float, float, float]] = [
        (lin.in_features * lin.out_features / tp, float(lin.in_features), lin.out_features / tp)
        for layer, _ in distinct_layers(request.model)
        for lin in layer.linears
        if not lin.expert
    ]
    if stacks.profile(request).quantizes_head:
        p = request.model.parameters
        vocab = min(tp, stacks.vocab_shards(request))
        head = (p.lm_head or p.embedding) / vocab
        hidden = request.model.hidden_size
        shapes.append((head, hidden, head / hidden))
    return shapes


def largest_quantized_linear(request: PlanRequest, tp: int) -> float:
    """Elements of the largest weight a 4-bit / 8-bit quantizer packs on one TP rank
    (``quantized_shapes``)."""
    return max((weight for weight, _, _ in quantized_shapes(request, tp)), default=0.0)


def dequant_bytes(request: PlanRequest, rc: Recipe, tp: int, tokens: float = 0.0) -> float:
    """The largest quantized weight dequantized for a matmul over ``tokens`` tokens:
    bitsandbytes' dequantize_4bit in the quantization dtype, cast to the compute dtype when they
    differ (LitGPT quantizes from fp16: two copies on a bf16 job). Under an fp32 compute dtype
    (``quant_kernel.fp32_compute``) the worst Linear's fp32 weight, input and output."""
    if rc.linear_bytes >= rc.weight_bytes:
        return 0.0
    if fp32_compute(request):
        return max(
            (
                fp32_matmul_bytes(weight, tokens * inputs, tokens * outputs)
                for weight, inputs, outputs in quantized_shapes(request, tp)
            ),
            default=0.0,
        )
    copies = stacks.profile(request).dequant_copies
    return largest_quantized_linear(request, tp) * 2 * copies


def _load_note(request: PlanRequest, lb: float, why: str, rc: Recipe) -> str:
    text = f"weights materialised at {lb:g} B/param while loading ({why})"
    if lb > rc.weight_bytes and request.mode is not Mode.TRAIN:
        text += (
            "; a frozen base loaded this wide stays this wide unless it is cast: pass "
            "torch_dtype (dtype) to from_pretrained, or --load-dtype"
        )
    return text


def load_phase(s: StepParts, notes: dict[str, str]) -> dict[str, float] | None:
    """Bytes while the checkpoint is loaded (before optimizer states or gradients exist)."""
    request, rc, lay, sp = s.request, s.rc, s.lay, s.sp
    lb, why = stacks.load_dtype(request, rc.weight_bytes)
    # quantize-on-load; a checkpoint stored quantized arrives packed
    quantized = rc.linear_bytes < rc.weight_bytes and not stored_linears(request)
    prof = stacks.profile(request)
    torchao_nf4 = quantized and request.quant_kernel is QuantKernel.TORCHAO
    if lay.param_shard > 1 and prof.full_tensor_load:
        return _full_tensor_load(s, lb, torchao_nf4, notes)
    if lay.param_shard > 1 and prof.load_sharded:
        unit = sp.largest_layer * lb
        if unit <= 2 * sp.largest_layer * rc.weight_bytes:
            return None  # no more than the steady step's two gathered units
        notes["load"] = _load_note(request, lb, why, rc) + "; one unit at a time (sharded)"
        return {**s.resident, "temporaries": unit}
    if torchao_nf4:
        # torchao's NF4Tensor.from_tensor on each Linear in turn (torchtune_load.py)
        scratch = nf4_quantize_bytes(largest_quantized_linear(request, lay.tp), lb)
        notes["load"] = (
            f"torchao to_nf4 / NF4Tensor.copy_ of the largest Linear: its {lb:g}-byte weight, "
            f"scaled blocks, uint8 indices and one chunk's comparisons ({scratch / GIB:.2f} GiB) "
            "next to the packed model"
        )
        return {**s.resident, "temporaries": scratch}
    if quantized:
        # one Linear at a time: its 16-bit weight arrives, (Lightning: an fp16 copy), packs
        copy = 2.0 if prof.quantizes_head else 0.0
        transient = largest_quantized_linear(request, lay.tp) * (lb + copy)
        notes["load"] = (
            f"quantize-on-load: the largest Linear's {lb:g}-byte weight"
            + (" and its fp16 copy" if copy else "")
            + f" ({transient / GIB:.2f} GiB) next to the packed model"
        )
        return {**s.resident, "temporaries": transient}
    if lb <= rc.weight_bytes or s.st.offload_params:
        return None
    whole = (sp.total + s.st.adapters_local) * lb
    cast = _cast_transient(request, lay.tp) * rc.weight_bytes
    notes["load"] = _load_note(request, lb, why, rc)
    return {"parameters": whole, "buffers": s.buffers, "temporaries": cast}


def _full_tensor_load(
    s: StepParts, lb: float, torchao_nf4: bool, notes: dict[str, str]
) -> dict[str, float]:
    """torchtune's sharded load: the shards loaded so far and one parameter's full tensor (or
    its NF4 quantization) on the GPU (``torchtune_load.py``)."""
    quantized = [w for w, _, _ in quantized_shapes(s.request, 1)] if torchao_nf4 else []
    full = full_tensor_bytes(s.request, lb, quantized, torchao_nf4)
    notes["load"] = (
        "load_from_full_model_state_dict: each parameter's full tensor on the GPU before its "
        + (
            "chunk is kept (to_nf4 of the full weight for NF4); "
            if torchao_nf4
            else "chunk is kept; "
        )
        + f"the largest {full / GIB:.2f} GiB next to the shards"
    )
    return {**s.resident, "temporaries": full}


def _cast_transient(request: PlanRequest, tp: int) -> float:
    """Elements of narrower copies alive beyond the wide model while it is cast.

    ``Module.to(dtype)`` converts one parameter at a time, in registration order (embedding,
    each block's Linears, the head): converting tensor i holds its new copy next to the old one,
    while the tensors before it have already shrunk. The extra is max over i of
    size_i − Σ size_j (j < i) narrow elements; in practice the embedding's, the first tensor.
    """
    p = request.model.parameters
    largest = max(
        (
            _cast_size(lin, tp)
            for layer, _ in distinct_layers(request.model)
            for lin in layer.linears
        ),
        default=0.0,
    )
    shrunk = float(p.embedding + p.position_embedding) / tp
    extra = shrunk
    for layer in p.layers:
        if shrunk >= largest:
            break  # no Linear still to come is larger than what is already cast
        for lin in layer.linears:
            size = _cast_size(lin, tp)
            extra = max(extra, size - shrunk)
            shrunk += size
    return max(extra, p.lm_head / tp - shrunk)


def _cast_size(lin: LinearShape, tp: int) -> float:
    """Elements one Linear entry casts at once on a TP rank (routed experts: all of them, one
    3-D tensor per projection as transformers 5 stores them)."""
    return lin.count * lin.in_features * lin.out_features / tp


def eval_phase(s: StepParts, notes: dict[str, str]) -> dict[str, float] | None:
    """An evaluation forward during training: no autograd, so each block's transients are gone
    before the head runs; the peak is the larger of one block's working set and the full logits
    with their loss next to the final hidden states (then LitGPT generates with a KV cache)."""
    request, rc, lay = s.request, s.rc, s.lay
    batch = stacks.eval_batch(request)
    if batch <= 0 or s.stage != lay.pp - 1:
        return None
    spec = request.model
    tokens = int(batch * label_len(request) / lay.cp)
    work = working_set(request, rc, lay, tokens, request.seq_len)
    logits = tokens * spec.vocab_size / lay.tp * _eval_logit_bytes(request, rc, batch)
    hidden = tokens * spec.hidden_size * rc.act_bytes  # the head's input, alive with the loss
    kv = 0.0
    if stacks.profile(request).eval_generates:
        # validate() generates one sample with a batch-1 KV cache of max_seq_length tokens
        cache = kv_layout(request, lay, paged=False)
        kv = cache.bytes_for(request.seq_len, 1)
    notes["evaluation"] = (
        f"evaluation batch {batch} × {request.seq_len:,} tokens without autograd: full logits "
        f"and loss {logits / GIB:.2f} GiB"
        + (f", then a generation KV cache {kv / GIB:.2f} GiB" if kv else "")
    )
    transient: dict[str, float] = {"activations": float(work)}
    if logits + hidden > work:
        transient = {"activations": hidden, "logits": logits}
    if kv > sum(transient.values()):
        transient = {"kv_cache": kv}
    return {
        **s.persistent,
        "gradients": _eval_gradients(s),
        "activations": 0.0,
        **transient,
        "communication": s.comm.forward,
    }


def _eval_gradients(s: StepParts) -> float:
    """Gradients alive through an evaluation: none unless ``zero_grad(set_to_none=False)`` keeps
    them. Training loops evaluate between optimizer steps, after ``zero_grad`` ended the
    accumulation window (LitGPT's fit loop: ``if not is_accumulating and step_count %
    eval.interval == 0`` after ``optimizer.zero_grad()``, and a sanity ``validate`` before the
    first step; the HF Trainer after ``model.zero_grad()``)."""
    return s.st.all_grads if s.request.keep_grads and not s.in_bwd else 0.0


def _eval_logit_bytes(request: PlanRequest, rc: Recipe, batch: int) -> float:
    """Bytes per logit at the evaluation loss's peak. transformers: the logits, their fp32 copy
    and the fp32 log-softmax; LitGPT: the logits as Fabric hands them back (float32,
    ``output_logit_bytes``), ``logits[..., :-1, :].reshape`` (a copy when the batch has several
    rows) and cross_entropy's log-softmax in that dtype (``chunked_cross_entropy(...,
    chunk_size=0)``); they outlast the cast (the head's own logits next to their copy)."""
    if stacks.profile(request).holds_logits:
        return output_logit_bytes(request, rc) * (3 if batch > 1 else 2)
    return rc.act_bytes + 4 + 4


def save_phase(s: StepParts, notes: dict[str, str]) -> dict[str, float] | None:
    """Writing a training checkpoint (after the optimizer step; gradients set to None)."""
    request, rc, lay, sp, st = s.request, s.rc, s.lay, s.sp, s.st
    mode = stacks.save_mode(request)
    sharded = lay.param_shard > 1
    if mode in {SaveMode.NONE, SaveMode.SHARDED} or not sharded or st.offload_params:
        return None
    unit = sp.largest_layer * rc.weight_bytes
    gathered = sp.root * rc.weight_bytes + unit
    states = 0.0
    if request.mode is Mode.TRAIN and lay.state_shard > 1 and request.offload is Offload.NONE:
        # FSDP.optim_state_dict (FULL) all-gathers one unit's flattened states at a time
        states = sp.largest_layer * st.state.per_param
    if mode is SaveMode.FULL_GPU:
        whole = (sp.total + st.adapters_local) * rc.weight_bytes
        notes["checkpoint_save"] = (
            f"FULL_STATE_DICT without offload_to_cpu: every unit's clone stays on the GPU "
            f"({whole / GIB:.2f} GiB, the whole model on every rank)"
        )
        gathered += whole
    else:
        notes["checkpoint_save"] = (
            "consolidated checkpoint: one unit unsharded at a time, moved to CPU"
            + (" (+ its optimizer states)" if states else "")
        )
    return {
        **s.persistent,
        "gradients": st.all_grads if request.keep_grads else 0.0,
        "checkpoint": gathered + states,
        "held_outputs": s.kept.total,
    }


def packed_head(request: PlanRequest, lay: Layout, rc: Recipe) -> float:
    """LM-head parameters on the last stage a quantizer packs (0 where the head stays 16-bit)."""
    p = request.model.parameters
    if rc.linear_bytes >= rc.weight_bytes or not stacks.profile(request).quantizes_head:
        return 0.0
    return (p.lm_head or 0) / stacks.vocab_shards(request)


def inference_load(
    request: PlanRequest, rc: Recipe, lay: Layout, weights: float, notes: dict[str, str]
) -> dict[str, float] | None:
    """Loading an inference model: the weights in the load dtype (cast after), or the
    quantizer's transient next to the packed weights."""
    lb, why = stacks.load_dtype(request, rc.weight_bytes)
    if stored_linears(request):
        return None  # the checkpoint's packed Linears arrive as they are kept
    if rc.linear_bytes < rc.weight_bytes:
        copy = 2.0 if stacks.profile(request).quantizes_head else 0.0
        transient = largest_quantized_linear(request, lay.tp) * (lb + copy)
        notes["load"] = f"quantize-on-load: {transient / GIB:.2f} GiB for the largest Linear"
        return {"parameters": weights, "temporaries": transient}
    if lb <= rc.weight_bytes:
        return None
    notes["load"] = _load_note(request, lb, why, rc)
    return {
        "parameters": weights * lb / rc.weight_bytes,
        "temporaries": _cast_transient(request, lay.tp) * rc.weight_bytes,
    }
