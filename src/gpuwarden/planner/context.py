"""How many tokens a model was built to attend over, and whether a job asks for more.

The limit is the one vLLM derives from the config (``_get_and_verify_max_len``): the position
table (``max_position_embeddings``, GPT-2's ``n_positions``), times the RoPE scaling factor for
scalings that stretch the trained positions (``linear``, ``dynamic``, and ``yarn``, which counts
from ``original_max_position_embeddings``); ``llama3`` and ``longrope`` configs already state the
stretched length (Llama-3.1: 131,072). Models with relative positions and no table (T5) have no
limit here. Past it, learned position tables have no row and RoPE runs at angles it never trained
on: the memory plan still holds, the model's output does not.
"""

from __future__ import annotations

import math

from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import DEFAULT_SEQ_LEN, Engine, Mode, PlanRequest

# RoPE types whose config already gives the stretched length as max_position_embeddings
_STATED = frozenset({"llama3", "longrope", "su"})


def positive_number(value: object) -> float | None:
    """A positive finite number from a raw config value, else None (an int past float range is
    a damaged config, not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number > 0 else None


def _scaling_factor(rope: dict[object, object]) -> float:
    return positive_number(rope.get("factor")) or 1.0


def model_context(spec: ModelSpec) -> int | None:
    """Longest sequence (prompt + generated tokens) the model supports, or None if unbounded."""
    table = spec.max_position_embeddings
    rope = spec.raw_config.get("rope_scaling")
    if not isinstance(rope, dict):
        return table
    kind = rope.get("rope_type", rope.get("type"))
    if isinstance(kind, str) and (kind in _STATED or kind == "default"):
        return table
    base: object = table
    if kind == "yarn":
        base = rope.get("original_max_position_embeddings", table)
    start = positive_number(base) if isinstance(base, int) else None
    if start is None:
        return table
    stretched = start * _scaling_factor(rope)
    return max(1, int(stretched)) if math.isfinite(stretched) else table


def default_seq_len(spec: ModelSpec) -> int:
    """The training sequence when none is asked for: ``DEFAULT_SEQ_LEN``, or the model's context
    when shorter (GPT-2's 1,024 and BERT's 512 learned positions cannot take more)."""
    limit = model_context(spec)
    return DEFAULT_SEQ_LEN if limit is None else min(DEFAULT_SEQ_LEN, limit)


def requested_tokens(request: PlanRequest) -> int:
    """Tokens one sequence of the job spans: the training sequence, or prompt + generated
    (a serving engine: its max_model_len when set)."""
    if request.mode is not Mode.INFER:
        return request.seq_len
    if request.serving_engine is not Engine.HF and request.max_model_len is not None:
        return request.max_model_len
    return request.prompt_tokens + request.new_tokens


def context_warning(request: PlanRequest) -> str | None:
    """A warning when the job's sequences are longer than the model's context."""
    limit = model_context(request.model)
    tokens = requested_tokens(request)
    if limit is None or tokens <= limit:
        return None
    what = "--seq-len" if request.mode is not Mode.INFER else "prompt + new tokens"
    if request.mode is Mode.INFER and request.serving_engine is not Engine.HF:
        what = "--max-model-len" if request.max_model_len is not None else what
    if request.model.parameters.position_embedding > 0:
        return (
            f"{what} = {tokens:,} tokens exceeds {request.model.name}'s {limit:,} learned "
            "positions (max_position_embeddings): its position table has no row past them, so "
            "the job cannot run at this length (an index error); memory planned as asked"
        )
    return (
        f"{what} = {tokens:,} tokens exceeds {request.model.name}'s context of {limit:,} "
        "(max_position_embeddings with its RoPE scaling): positions past it were never trained "
        "(vLLM refuses such a max_model_len); memory planned as asked"
    )
