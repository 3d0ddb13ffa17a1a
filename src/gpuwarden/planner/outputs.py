"""What a training step's outputs hold once the loss is taken: the logits and, when an HF model
returns one, its KV cache.

An HF model builds a KV cache in a training forward too (config ``use_cache``, true by default),
unless transformers' own gradient checkpointing turned it off (torch's checkpoint wrapper does
not); where attention keeps per-head copies of grouped K/V,
the cache's grouped K/V are extra bytes at the end of the forward, whoever runs the loop.
A trainer (HF Trainer, torchtune, Lightning) drops the outputs with the function that made them. A
hand-written ``outputs = model(**batch)`` loop keeps them through backward and the optimizer step,
and the previous step's outputs through the next forward, until the name is rebound (PyTorch FAQ,
"Don't hold onto tensors and variables you don't need"). Held outputs keep their graph: the
attributes of its custom Functions' ``ctx`` live with it, among them the inputs bitsandbytes <
0.43.2 keeps for every 4-bit Linear (``quant_kernel.py``).

Only a step that has a previous one sees them in its forward: a job whose peak is its first step
(``PeakStep.FIRST``, a script that forces its longest sample into the first batch) has nothing
held from before at that peak; its own outputs are held after its forward all the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.planner import stacks
from gpuwarden.planner.families import eager_only, expands_kv, mask_share
from gpuwarden.planner.layout import Layout
from gpuwarden.planner.loss import output_logit_bytes
from gpuwarden.planner.precision import Recipe
from gpuwarden.planner.state import StateStack, stage_mixers, state_layout
from gpuwarden.types.model import ModelSpec, Structure
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    Framework,
    LossImpl,
    Mode,
    PeakStep,
    PlanRequest,
    TrainLoop,
)


@dataclass(frozen=True, slots=True)
class HeldOutputs:
    # outputs a script loop keeps (0 under a trainer)
    logits: float  # the full logits in the model's output dtype (last pipeline stage)
    # K and V of every layer; an encoder-decoder's cross-attention K and V and encoder output
    cache: float
    # the part of this step's cache autograd does not save: grouped K/V next to per-head copies
    unsaved_cache: float = 0.0
    # the 4-bit Linear inputs the held graph's MatMul4Bit nodes keep on ctx (bitsandbytes <
    # 0.43.2): freed with the graph, not by backward
    graph_inputs: float = 0.0

    @property
    def total(self) -> float:
        return self.logits + self.cache + self.graph_inputs


def builds_cache(request: PlanRequest) -> bool:
    """Whether the training forward builds a KV cache: an HF model (torchtune's and Megatron's
    return none) with use_cache on, which transformers turns off under its own gradient
    checkpointing only (``stacks.model_checkpointing``)."""
    hf = request.framework in {Framework.HF, Framework.HF_LEGACY}
    return (
        hf
        and request.use_cache
        and request.model.returns_cache
        and not stacks.model_checkpointing(request)
    )


def _unsaved_kv_share(request: PlanRequest) -> float:
    """Share of layers whose cached K/V autograd does not save. A block under full
    checkpointing saves its input only (its K/V are recomputed in backward). Otherwise the
    layers whose attention keeps per-head copies of grouped (GQA/MQA) K/V instead of the
    grouped K/V the cache holds: eager repeat_kv, transformers' SDPA before 2025, and an SDPA
    call with an explicit sliding-window mask. Flash-attention takes grouped K/V."""
    if request.checkpointing is Checkpointing.FULL:
        return 1.0
    spec = request.model
    if spec.mla is not None or not 0 < spec.kv_width < spec.num_heads * spec.head_dim:
        return 0.0
    if request.attention is Attention.EAGER or eager_only(spec):
        # one sequence, one K/V head: expand + reshape stay views of the cached tensor
        one_head = spec.kv_width == spec.head_dim
        return 0.0 if request.micro_batch == 1 and one_head else 1.0
    if request.attention is Attention.SDPA:
        return 1.0 if expands_kv(request) else mask_share(spec, request.seq_len, True)
    return 0.0


def label_len(request: PlanRequest) -> int:
    """Tokens per sequence the LM head scores: an encoder-decoder's labels, else the input."""
    if request.model.structure is Structure.ENCODER_DECODER and request.target_len:
        return request.target_len
    return request.seq_len


def held_outputs(
    request: PlanRequest, rc: Recipe, lay: Layout, stage: int, kernel_inputs: float = 0.0
) -> HeldOutputs:
    """``kernel_inputs``: the bytes of Linear inputs the stage's 4-bit kernels keep on ``ctx``
    (``Activations.kernel_inputs``), held with the graph where the loop holds its outputs."""
    if request.mode is Mode.INFER:
        return HeldOutputs(0.0, 0.0)
    spec = request.model
    b = request.micro_batch
    labels = b * label_len(request) / lay.cp
    encoder = b * request.seq_len / lay.cp if spec.structure is Structure.ENCODER_DECODER else 0
    last = stage == lay.pp - 1
    cached = builds_cache(request)
    layers, _ = stage_mixers(spec, lay.pp, stage)  # a hybrid's state blocks cache no K and V
    grouped = layers * 2 * labels * spec.kv_width * rc.act_bytes / lay.tp if cached else 0.0
    if cached and spec.kv_groups:
        # per-kind K/V widths; KV-shared blocks (in no group) add nothing to the cache
        grouped = _group_elements(spec, layers) * labels * rc.act_bytes / lay.tp
    # a hybrid's state blocks put their conv columns and recurrent state in the cache: new
    # tensors autograd does not save (the kernels save their own inputs)
    state = _state_cache(request, rc, lay, stage) if cached else 0.0
    unsaved = grouped * _unsaved_kv_share(request) + state
    if stacks.profile(request).holds_logits:
        # LitGPT's fit loop: `logits = model(input_ids, lm_head_chunk_size=128)` keeps the
        # previous step's logit chunks (float32 copies under Fabric) until the next forward
        # returns
        per_logit = output_logit_bytes(request, rc)
        held = labels * spec.vocab_size / lay.tp * per_logit if last else 0.0
        return HeldOutputs(held, 0.0, unsaved, kernel_inputs)
    if request.loop is not TrainLoop.SCRIPT:
        return HeldOutputs(0.0, 0.0, unsaved)
    logits = 0.0
    if last and request.loss is LossImpl.FULL:
        # chunked and fused losses never hand back the full logits
        logits = labels * spec.vocab_size / lay.tp * rc.act_bytes
    # Seq2SeqLMOutput also returns the encoder's last hidden state
    cache = encoder * spec.hidden_size * rc.act_bytes if last else 0.0
    if cached:
        cross = layers * 2 * encoder * spec.num_heads * spec.head_dim * rc.act_bytes / lay.tp
        cache += grouped + cross + state
    # `outputs.loss` keeps the graph whichever loss made it
    return HeldOutputs(logits, cache, unsaved, kernel_inputs)


def _group_elements(spec: ModelSpec, layers: int) -> float:
    """K and V elements per token over ``layers`` blocks of a stage, each kind in proportion."""
    return sum(
        g.elements_per_token * layers * g.layers / max(1, spec.num_layers) for g in spec.kv_groups
    )


def _state_cache(request: PlanRequest, rc: Recipe, lay: Layout, stage: int) -> float:
    """The states a hybrid's cache holds for the micro-batch's sequences (transformers')."""
    state = state_layout(request.model, lay, StateStack.HF, rc.act_bytes, stage)
    if state is None:
        return 0.0
    return request.micro_batch * state.bytes_per_sequence


def previous_outputs(request: PlanRequest, kept: HeldOutputs) -> float:
    """What the previous step's held outputs (and their graph) add to this step's forward: none
    where the peak is the first step, which has no previous one."""
    return 0.0 if request.peak_step is PeakStep.FIRST else kept.total


def peak_step_notes(request: PlanRequest, kept: HeldOutputs) -> dict[str, str]:
    """A plan note saying which step the peak was planned at, where that changes it (a loop
    that holds its outputs)."""
    if not kept.total:
        return {}
    if request.peak_step is PeakStep.FIRST:
        return {
            "peak_step": "first step (peak_step first): no previous step's outputs or graph held "
            "at its forward"
        }
    return {
        "peak_step": "steady step (peak_step steady): the previous step's outputs and their "
        "graph held through the forward"
    }
