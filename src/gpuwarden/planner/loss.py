"""Logits and cross-entropy buffers: what the loss keeps, and its transient peak.

HF causal LMs compute full logits in the compute dtype, upcast them to fp32 and keep the fp32
log-softmax for backward (4·s·b·V bytes); around the loss a bf16 and an fp32 copy coexist, and in
backward the fp32 gradient of the log-softmax is made next to its incoming gradient
(memory.md §2.5 "Logits and loss"); the HF Trainer's float32 copy of the returned logits
lies inside that region (stacks.py, transformers). torchtune's chunked loss runs the output
layer and the cross-entropy per chunk of the sequence; under torch.compile the upcast is fused
so only the bf16 logits are kept. Fused linear cross-entropy (Liger) never materialises the
logits: it keeps the gradients of the head's input and weight from forward to backward instead
(liger.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwarden.planner import stacks
from gpuwarden.planner.liger import LOSS_ROW_BYTES, flce_chunk_rows
from gpuwarden.planner.precision import Recipe
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.types.plan import LossImpl, Mode, PeakStep, PlanRequest, TrainLoop
from gpuwarden.units import GIB

CHUNKS = 8  # torchtune CEWithChunkedOutputLoss num_output_chunks
LITGPT_CHUNK = 128  # LitGPT lm_head_chunk_size: positions per logits chunk
# Unsloth's Fast_CrossEntropyLoss (stacks.py): MAX_FUSED_SIZE, the columns one Triton program
# reduces per row; a wider vocabulary gets one fp32 logsumexp per chunk of this many columns
UNSLOTH_FUSED_COLUMNS = 65536
LOGSUMEXP_BYTES = FP32_BYTES  # one per row (and one fp32 loss per row while the forward runs)
LABEL_BYTES = 8  # the shifted int64 label of each row, saved for backward


def chunks_head(request: PlanRequest) -> bool:
    """The training loop runs the output layer per ``LITGPT_CHUNK`` positions (LitGPT's
    ``model(input_ids, lm_head_chunk_size=128)``, ``GPT.forward``: one ``lm_head`` call per
    ``x.split(128, dim=1)``) and takes the loss with ``chunked_cross_entropy``."""
    return stacks.profile(request).holds_logits and request.loss is LossImpl.FULL


def head_calls(request: PlanRequest, positions: int) -> int:
    """Calls of the output layer per forward over ``positions`` positions per sequence."""
    return -(-positions // LITGPT_CHUNK) if chunks_head(request) else 1


def output_logit_bytes(request: PlanRequest, rc: Recipe) -> int:
    """Bytes per logit as the training loop receives them: float32 where the stack casts the
    model's outputs to torch's default dtype (``StackProfile.fp32_outputs``: Lightning Fabric's
    ``convert_output``), else the compute dtype the head wrote them in."""
    return max(4, rc.act_bytes) if stacks.profile(request).fp32_outputs else rc.act_bytes


@dataclass(frozen=True, slots=True)
class LossBuffers:
    saved: int  # kept from the loss's forward until its backward (counted with activations)
    transient_forward: int  # extra while the loss is computed
    transient_backward: int  # extra while the loss's backward runs
    grad_logits: int  # gradient of the logits alive while the output layer's backward runs
    source: str
    detail: str
    # Copies of the output layer's weight gradient alive at once: a chunked head gets one part
    # per chunk, and autograd adds each to the running sum out of place (sum, part, new sum).
    head_grad_copies: int = 1


def loss_buffers(request: PlanRequest, rc: Recipe, tokens: float, tp: int) -> LossBuffers:
    """``tokens`` of one micro-batch on the last pipeline stage; the vocabulary splits over TP."""
    spec = request.model
    v = spec.vocab_size / tp
    elems = tokens * v
    act = rc.act_bytes
    # T5 and BERT's MLM head call CrossEntropyLoss on the logits as they are (modeling_t5.py,
    # modeling_bert.py BertForMaskedLM), except under autocast, which runs cross_entropy in fp32
    # (PyTorch autocast's fp32 op list).
    upcast = not spec.traits.loss_on_logits or rc.autocast or rc.adapters_autocast
    if chunks_head(request):
        return _litgpt_chunks(request, rc, elems)
    if request.loss is LossImpl.FUSED:
        return _liger_fused_linear_ce(request, rc, tokens, v)
    if request.loss is LossImpl.CHUNKED:
        if request.compile:
            # Inductor fuses upcast, log-softmax and NLL: it keeps the bf16 chunk (and a
            # logsumexp) and writes the bf16 gradient directly.
            saved = act * elems
            forward = 0.0
            backward = act * elems / CHUNKS
        else:
            saved = 4 * elems  # fp32 log-softmax of every chunk
            forward = act * elems + 4 * elems / CHUNKS  # bf16 chunks held until `del logits`
            backward = (8 + act) * elems / CHUNKS
        return LossBuffers(
            saved=int(saved),
            transient_forward=int(forward),
            transient_backward=int(backward),
            grad_logits=int(act * elems / CHUNKS),
            source="torchtune CEWithChunkedOutputLoss (8 chunks)",
            detail=f"{'bf16 logits' if request.compile else 'fp32 log-softmax'} kept; "
            "per-chunk upcast and gradient",
            head_grad_copies=3,
        )
    prof = stacks.profile(request)
    if request.loss is LossImpl.FULL and prof.unsloth_ce:
        upcast_returned = prof.trainer_fp32_logits and request.loop is TrainLoop.TRAINER
        return _unsloth_fast_ce(tokens, v, act, upcast_returned)
    if request.loss is LossImpl.FULL and prof.vocab_parallel_loss:
        return _vocab_parallel_softmax(elems, act)
    if request.loss is LossImpl.FULL and prof.loss_parallel and tp > 1:
        return _loss_parallel(elems, act)
    if request.loss is LossImpl.FULL and prof.compiled_loss and request.compile:
        return LossBuffers(
            saved=int(act * elems),
            transient_forward=0,
            transient_backward=int(act * elems),
            grad_logits=int(act * elems),
            source="torchtitan components/loss.py: cross_entropy compiled with training.compile",
            detail="Inductor fuses the fp32 upcast, log-softmax and NLL: the bf16 logits (and a "
            "logsumexp) kept, the bf16 gradient written directly",
        )
    if not upcast:
        return LossBuffers(
            saved=int(act * elems),
            transient_forward=int(act * elems),
            transient_backward=int(2 * act * elems),
            grad_logits=int(act * elems),
            source="HF T5 / BERT CrossEntropyLoss on the logits' dtype",
            detail="log-softmax kept in the compute dtype",
        )
    saved = 4 * elems
    if spec.raw_config.get("final_logit_softcapping") or spec.traits.soft_caps:
        saved += act * elems  # Gemma-2 soft-caps the logits: tanh keeps its output
    # the 16-bit logits + one fp32 copy: ForCausalLMLoss's upcast, then (HF Trainer under fp16 /
    # bf16) accelerate's copy of the returned logits, made once the upcast is freed (stacks.py)
    forward = act * elems + (4 * elems if act < 4 else 0)
    backward = 8 * elems  # ∂/∂log-softmax from nll_loss and ∂/∂logits, both fp32
    return LossBuffers(
        saved=int(saved),
        transient_forward=int(forward),
        transient_backward=int(backward),
        grad_logits=int(act * elems),
        source="HF ForCausalLMLoss: fp32 upcast, log-softmax kept (memory.md §2.5)",
        detail=f"{spec.vocab_size:,}-token vocabulary × {int(tokens):,} tokens",
    )


def _head_weight_bytes(request: PlanRequest, rc: Recipe) -> float:
    """Bytes per element of the LM head's weight as the forward sees it: FSDP's mixed precision
    gathers it in the compute dtype; elsewhere the weight as stored."""
    return rc.act_bytes if request.fsdp is not None else rc.weight_bytes


def _liger_fused_linear_ce(
    request: PlanRequest, rc: Recipe, tokens: float, vocab: float
) -> LossBuffers:
    """Liger's ``LigerFusedLinearCrossEntropyFunction`` (liger.py): the forward computes the
    gradients and saves them, ``grad_input`` (every row × hidden, the hidden states' dtype) and,
    when the head trains, ``grad_weight`` (vocabulary × hidden, the head weight's dtype); while
    it runs, one logits chunk of ``flce_chunk_rows`` rows in the compute dtype (its gradient is
    written into it), an fp32 loss per row and ``lce_forward``'s contiguous copy of the shifted
    hidden states. The backward returns the saved gradients: nothing new, no logits gradient;
    the head's gradient is counted once, as saved (``head_grad_copies`` 0)."""
    hidden = request.model.hidden_size
    rows = int(tokens)
    chunk = flce_chunk_rows(rows, vocab, hidden)
    grad_weight = (
        vocab * hidden * _head_weight_bytes(request, rc) if request.mode is Mode.TRAIN else 0.0
    )
    grad_input = tokens * hidden * rc.res_bytes
    shifted_copy = tokens * hidden * rc.res_bytes
    return LossBuffers(
        saved=int(grad_input + grad_weight),
        transient_forward=int(
            chunk * vocab * rc.act_bytes + LOSS_ROW_BYTES * tokens + shifted_copy
        ),
        transient_backward=0,
        grad_logits=0,
        source="Liger-Kernel fused linear cross-entropy: gradients computed in forward and saved "
        "(fused_linear_cross_entropy_forward)",
        detail=f"no full logits; a {chunk:,}-row logits chunk at a time; grad_input "
        f"{grad_input / GIB:.2f} GiB and grad_weight {grad_weight / GIB:.2f} GiB kept to backward",
        head_grad_copies=0,
    )


def _litgpt_chunks(request: PlanRequest, rc: Recipe, elems: float) -> LossBuffers:
    """LitGPT's fit loop: ``logits = model(input_ids, lm_head_chunk_size=128)`` runs the head
    per 128 positions and Fabric hands the chunks back cast to float32 (``output_logit_bytes``);
    ``chunked_cross_entropy`` keeps each chunk's log-softmax in that dtype, and the loop's
    ``logits`` keeps the chunks alive through backward and the next forward (outputs.py).

    The forward phase adds the saved log-softmax (``saved``), ``transient_forward`` and the
    previous step's logits; ``transient_forward`` is the largest of three moments less those two:
    the head's end (its own chunks, their float32 copies and the previous step's copies: the
    name is rebound only when ``model()`` returns), the loss's end (the copies and the
    log-softmax) and the start of backward (the copies, the log-softmax, one chunk's gradients
    of both). MemTracker on LitGPT's TinyLlama step under FakeTensorMode (b=4, s=2048) peaks at
    the cast, 10 B per logit (``tests/planner/test_fabric_logits.py``)."""
    act = rc.act_bytes
    out = output_logit_bytes(request, rc)
    cast = act if out > act else 0  # the head's chunks while convert_output copies them
    previous = 0 if request.peak_step is PeakStep.FIRST else out
    chunk = elems / head_calls(request, request.seq_len)
    # one chunk's log-softmax gradient and logits gradient, in the output dtype
    chunk_grads = 2 * out * chunk
    dtype = "float32" if out == 4 else "16-bit"
    return LossBuffers(
        saved=int(out * elems),
        transient_forward=int(max(cast * elems, (out - previous) * elems + chunk_grads)),
        transient_backward=int(chunk_grads),
        grad_logits=int(act * chunk),
        source="LitGPT chunked_cross_entropy (lm_head_chunk_size=128); Lightning Fabric "
        "convert_output casts the chunks to torch's default dtype",
        detail=f"{dtype} log-softmax per 128-position chunk kept; the {dtype} logits held by "
        "the loop",
    )


def _unsloth_fast_ce(rows: float, vocab: float, act: int, upcast_returned: bool) -> LossBuffers:
    """Unsloth's ``Fast_CrossEntropyLoss`` (``unsloth/kernels/cross_entropy_loss.py``): the
    16-bit logits the head wrote are saved as they are, with one fp32 logsumexp and the int64
    shifted label per row; the forward writes one fp32 loss per row and, above
    ``UNSLOTH_FUSED_COLUMNS`` columns, one fp32 logsumexp per chunk of them before reducing them
    to one per row. Backward stores each row's gradient into the saved logits and returns them:
    no fp32 copy, no gradient buffer of its own (the logits are counted with what is saved).

    ``upcast_returned``: the HF Trainer's accelerate wrapper copies the returned logits to
    float32 once the loss is taken (``StackProfile.trainer_fp32_logits``), next to the saved
    16-bit logits until ``compute_loss`` returns, after the kernel's own scratch is freed."""
    logits = rows * vocab
    chunks = math.ceil(vocab / UNSLOTH_FUSED_COLUMNS)
    chunk_sums = LOGSUMEXP_BYTES * chunks if chunks > 1 else 0
    scratch = (LOGSUMEXP_BYTES + chunk_sums) * rows
    returned = FP32_BYTES * logits if upcast_returned else 0
    detail = f"{int(vocab):,}-token vocabulary × {int(rows):,} rows; fp32 logsumexp per row"
    if upcast_returned:
        detail += "; accelerate's float32 copy of the returned logits"
    return LossBuffers(
        saved=int(act * logits + (LOGSUMEXP_BYTES + LABEL_BYTES) * rows),
        transient_forward=int(max(scratch, returned)),
        transient_backward=0,
        grad_logits=0,
        source="Unsloth Fast_CrossEntropyLoss: 16-bit logits kept, gradient written into them",
        detail=detail,
    )


def _vocab_parallel_softmax(elems: float, act: int) -> LossBuffers:
    """Megatron-core's ``VocabParallelCrossEntropy`` on the vocabulary shard
    (``core/tensor_parallel/cross_entropy.py``): ``calculate_logits_max`` makes one fp32 copy of
    the logits (``vocab_parallel_logits.float()``), which becomes the softmax in place (``-=
    logits_max``, ``torch.exp(..., out=exp_logits)``, ``exp_logits.div_``) and is saved; backward
    writes the gradient into it (``grad_input = softmax``) and autograd casts it back to the
    logits' 16-bit dtype: the 16-bit logits next to the kept fp32 copy in forward, the 16-bit
    gradient next to it in backward."""
    return LossBuffers(
        saved=int(4 * elems),
        transient_forward=int(act * elems),
        transient_backward=int(act * elems),
        grad_logits=int(act * elems),
        source="Megatron-core VocabParallelCrossEntropy: fp32 softmax made in place and kept",
        detail="16-bit logits + one fp32 copy (softmax, gradient written into it)",
    )


def _loss_parallel(elems: float, act: int) -> LossBuffers:
    """torch.distributed.tensor.parallel.loss_parallel() on the vocabulary shard (TP): the
    log-softmax is computed as ``shifted = x - max``, ``exp(shifted)`` and ``shifted - log(sum)``
    next to the fp32 copy of the logits and the bf16 logits; backward fuses NLL and log-softmax
    as ``(zeros_like(x) + exp(x)) * grad``: three fp32 temporaries next to the saved log-softmax
    (torch ``tensor/parallel/loss.py``: ``_log_softmax``, ``_nll_loss_and_log_softmax_backward``).
    """
    return LossBuffers(
        saved=int(4 * elems),
        transient_forward=int((act + 8) * elems),
        transient_backward=int(12 * elems),
        grad_logits=int(act * elems),
        source="torch loss_parallel(): log-softmax and fused backward on the vocabulary shard",
        detail="fp32 log-softmax kept; x, x − max and exp(x − max) at once in forward, "
        "zeros + exp + their sum in backward",
    )
