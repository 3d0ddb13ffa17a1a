"""What a training step's outputs hold once the loss is taken: the logits and, when an HF model
returns one, its KV cache.

A trainer (HF Trainer, torchtune, Lightning) drops them with the function that made them. A
hand-written ``outputs = model(**batch)`` loop keeps them through backward and the optimizer step,
and the previous step's outputs through the next forward, until the name is rebound (PyTorch FAQ,
"Don't hold onto tensors and variables you don't need").
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.planner.layout import Layout, stage_layers
from gpuwarden.planner.precision import Recipe
from gpuwarden.types.model import Structure
from gpuwarden.types.plan import Checkpointing, Framework, LossImpl, Mode, PlanRequest, TrainLoop


@dataclass(frozen=True, slots=True)
class HeldOutputs:
    logits: float  # the full logits in the model's output dtype (last pipeline stage)
    # K and V of every layer; an encoder-decoder's cross-attention K and V and encoder output
    cache: float

    @property
    def total(self) -> float:
        return self.logits + self.cache


NONE = HeldOutputs(0.0, 0.0)


def label_len(request: PlanRequest) -> int:
    """Tokens per sequence the LM head scores: an encoder-decoder's labels, else the input."""
    if request.model.structure is Structure.ENCODER_DECODER and request.target_len:
        return request.target_len
    return request.seq_len


def held_outputs(request: PlanRequest, rc: Recipe, lay: Layout, stage: int) -> HeldOutputs:
    if request.loop is not TrainLoop.SCRIPT or request.mode is Mode.INFER:
        return NONE
    spec = request.model
    b = request.micro_batch
    labels = b * label_len(request) / lay.cp
    encoder = b * request.seq_len / lay.cp if spec.structure is Structure.ENCODER_DECODER else 0
    last = stage == lay.pp - 1
    logits = 0.0
    if last and request.loss is LossImpl.FULL:
        # chunked and fused losses never hand back the full logits
        logits = labels * spec.vocab_size / lay.tp * rc.act_bytes
    # Seq2SeqLMOutput also returns the encoder's last hidden state
    cache = encoder * spec.hidden_size * rc.act_bytes if last else 0.0
    # HF models build a cache in a training forward unless gradient checkpointing turned
    # use_cache off; torchtune's and Megatron's do not return one.
    hf = request.framework in {Framework.HF, Framework.HF_LEGACY}
    if hf and spec.returns_cache and request.checkpointing is Checkpointing.NONE:
        layers = stage_layers(spec.num_layers, lay.pp, stage)
        per_layer = 2 * labels * spec.kv_width + 2 * encoder * spec.num_heads * spec.head_dim
        cache += layers * per_layer * rc.act_bytes / lay.tp
    return HeldOutputs(logits, cache)
