"""Library versions as users type them (``0.43.1``, ``v0.8.3``, ``0.9.0+cu118``), compared by
their release part: the planner keys a few behaviours to the release that changed them."""

from __future__ import annotations

import calendar

# DeepSpeed 0.9.0 (2023-04) added the one-rank ZeRO-3 path (_no_gather_coalesced): before it an
# offloaded parameter was all-gathered on one GPU too, from a second GPU copy of it
DEEPSPEED_ONE_RANK_PATH = (0, 9, 0)

# PEFT 0.12.0 (2024-07-24) is the first release with get_peft_model(autocast_adapter_dtype=True),
# PR #1706 (merged 2024-05, after 0.11.1: PR #1874 calls it unreleased on 2024-06-19): fp16 / bf16
# adapters are upcast to fp32 (tuners_utils.cast_adapter_dtype, read in PEFT 0.21.2). Before it
# LoraLayer.update_layer ends with ``self.to(weight.device, dtype=weight.dtype)`` when the base
# weight is a float: the adapters take the base layer's dtype.
PEFT_ADAPTER_UPCAST = (0, 12, 0)

# PEFT 0.14.0 (2024-12) is the first release whose DoRA reuses the base layer's output when the
# adapter has no dropout (PR #2122 "Optimize DoRA in eval and no dropout", merged 2024-10-16,
# after 0.13.2): ``DoraLinearLayer.forward(..., base_result=result)``. Before it every DoRA
# forward recomputed ``F.linear(x, W)`` on the adapter's input (dora.py).
PEFT_DORA_REUSES_BASE_RESULT = (0, 14, 0)

# transformers 4.45.0 (2024-09) is the first release whose generate() asks the model for the
# last position's logits only: ``model_kwargs["num_logits_to_keep"] = 1`` when the forward
# takes it (generation/utils.py, the 4.45 form as copied in find_string id 47717475946), and
# Llama-style forwards slice before the head, ``self.lm_head(hidden_states[:,
# -num_logits_to_keep:, :]).float()`` (id 18115998802). Before it the prefill's forward returns
# every prompt position's logits.
TRANSFORMERS_LAST_POSITION_LOGITS = (4, 45, 0)

# transformers 5.0 is --framework hf; 4.x is hf-legacy (planner/stacks.py)
TRANSFORMERS_5 = (5, 0, 0)


def release(version: str) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of ``version``; None when it does not start with a number.

    Pre-releases and local tags (``0.43.2.dev0``, ``0.43.1+cu121``) compare by their release part.
    """
    text = version.strip().lstrip("vV").split("+")[0]
    parts: list[int] = []
    for piece in text.split(".")[:3]:
        digits = ""
        for char in piece:
            if not char.isdecimal():  # "²".isdigit() holds, int("²") raises
                break
            digits += char
        if not digits:
            return None
        parts.append(int(digits))
    if not parts:
        return None
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


def commit_date(text: str) -> tuple[int, int, int] | None:
    """``(year, month, day)`` of a release named by its commit date: ``2025-06-16``, or
    ``2025-06`` for a checkout from the end of that month (every change merged in it included);
    None when the text is not such a date. For stacks versioned by their commits (torchtitan)."""
    pieces = text.strip().split("-")
    if len(pieces) not in {2, 3} or not all(p.isascii() and p.isdecimal() for p in pieces):
        return None
    # lengths before int(): a month or day has at most two significant digits, and int() of a
    # string of thousands of digits raises instead of returning a number to reject
    if len(pieces[0]) != 4 or any(len(p.lstrip("0")) > 2 for p in pieces[1:]):
        return None
    year, month = int(pieces[0]), int(pieces[1])
    if year < 1 or not 1 <= month <= 12:
        return None
    last = calendar.monthrange(year, month)[1]
    day = int(pieces[2]) if len(pieces) == 3 else last
    if not 1 <= day <= last:
        return None
    return (year, month, day)


def names_day(text: str) -> bool:
    """Whether a ``commit_date`` text names the day (``2025-06-16``), not only the month."""
    return text.strip().count("-") == 2
