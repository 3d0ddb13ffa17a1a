"""A TinyLlama-shaped model with a toy head: small enough to run its loss through the real
libraries on the CPU, the logits still the largest tensor (vocabulary 4,096 over hidden 256)."""

from __future__ import annotations

from typing import Any

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.types.plan import LossImpl, Mode, Optimizer, PlanRequest

BATCH, SEQ, VOCAB, HIDDEN = 2, 512, 4096, 256


def toy_head_request(**fields: Any) -> PlanRequest:
    """Training a toy-head TinyLlama at micro-batch ``BATCH`` × ``SEQ`` tokens, no optimizer,
    the full loss; ``fields`` set the rest (framework, precision, peak step)."""
    raw = dict(resolve_model("TinyLlama-1.1B-intermediate-step-1431k-3T").raw_config)
    shrink = {"vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": 688}
    heads = {"num_attention_heads": 4, "num_key_value_heads": 4}
    spec = normalise("toy-head", {**raw, **shrink, **heads}, "TinyLlama config, toy sizes")
    return PlanRequest(
        model=spec,
        mode=Mode.TRAIN,
        optimizer=Optimizer.NONE,
        micro_batch=BATCH,
        seq_len=SEQ,
        loss=LossImpl.FULL,
        **fields,
    )
