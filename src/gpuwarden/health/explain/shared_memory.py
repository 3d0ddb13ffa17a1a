"""A compiled kernel over the GPU's shared memory: the message states the two numbers that decide.

Triton checks a compiled kernel against the GPU before launching it and raises OutOfResources
(triton/runtime/errors.py): "out of resource: shared memory, Required: N, Hardware limit: M.
Reducing block sizes or `num_stages` may help." — N the bytes the kernel's config needs, M the
GPU's shared memory per block (the driver's max_shared_mem; AMD's LDS). Older releases printed
it as ``triton.code_gen.OutOfResources`` without separators ("shared memoryRequired: N
Hardware limit: M"); forks say "Hardware limitation"; Inductor's autotuning wraps it ("No valid
triton configs. OutOfMemoryError: out of resource: triton_mm Required: …") with the kernel's
name where the resource was. ptxas refuses a CUDA kernel whose static shared memory is over the
target's ("uses too much shared data (0xc400 bytes, 0xc000 max)").

The reading is certain only when the message states both numbers and the first exceeds the
second; the phrase alone (a truncated paste) is the usual reading. The same exception class
reports other resources ("threads"): those are not this cause.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.match import quoted
from gpuwarden.health.explain.votes import Vote

CAUSE = "kernel-shared-memory-exceeded"
WORDS = ("out of resource", "too much shared data")  # a message mentions one (lower case)

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium): both numbers and Required > limit state the
# cause; the phrase without its numbers is the usual reading; numbers that contradict the phrase
# (Required ≤ limit: a mangled paste) leave it one candidate.
STATED = 0.9
PHRASE_ONLY = 0.7
CONTRADICTED = 0.45

# Bounded: a byte count has at most a few digits (int() refuses thousands).
_NUMBER = r"(0x[0-9a-f]{1,16}|\d{1,20})"
# The resource is "shared memory", or (Inductor) a kernel's name; never another resource.
_TRITON = re.compile(
    r"out of resource:\s*(?P<resource>shared memory|(?!threads|registers)[a-z_][\w.]*)"
    r"(?:[,.]?\s*Required:\s*(?P<required>\d{1,20})[,.]?\s*Hardware limit(?:ation)?:\s*"
    r"(?P<limit>\d{1,20})(?![0-9a-z]))?",
    re.IGNORECASE,
)
# Inductor's wording names the kernel, not the resource: Triton's hint says it is the config's.
_TRITON_HINT = re.compile(r"Reducing block sizes or `?num_stages`?", re.IGNORECASE)
_PTXAS = re.compile(
    r"uses too much shared data\s*\(\s*" + _NUMBER + r"\s*bytes,\s*" + _NUMBER + r"\s*max\s*\)"
    r"|uses too much shared data",
    re.IGNORECASE,
)

_MEANINGS = {
    STATED: "the kernel needs more shared memory per block than the GPU (or target) offers",
    PHRASE_ONLY: "over the GPU's shared memory per block (the numbers are not in the text)",
    CONTRADICTED: "the numbers in the text do not show it over the limit",
}
_DECIDES = (
    "the whole message: Required (bytes the kernel's config needs) against the Hardware limit "
    "(the GPU's shared memory per block)"
)


def _bytes(number: str) -> int:
    return int(number, 16) if number[:2].lower() == "0x" else int(number)


def _weight(required: str | None, limit: str | None) -> float:
    if required is None or limit is None:
        return PHRASE_ONLY
    return STATED if _bytes(required) > _bytes(limit) else CONTRADICTED


def _triton_vote(flat: str) -> Vote | None:
    match = _TRITON.search(flat)
    if match is None:
        return None
    named = match["resource"].lower() == "shared memory"
    if not named and (match["required"] is None or _TRITON_HINT.search(flat) is None):
        return None
    weight = _weight(match["required"], match["limit"])
    if not named:
        weight = min(weight, PHRASE_ONLY)  # the resource is inferred from the hint
    meaning = "Triton's pre-launch check: " + (
        _MEANINGS[weight] if named else "Inductor names the kernel; the config is over a limit"
    )
    return Vote(CAUSE, weight, quoted(match[0], meaning), _DECIDES)


def _ptxas_vote(flat: str) -> Vote | None:
    match = _PTXAS.search(flat)
    if match is None:
        return None
    weight = _weight(match[1], match[2])
    meaning = "ptxas, the kernel's static shared memory: " + _MEANINGS[weight]
    return Vote(CAUSE, weight, quoted(match[0], meaning), _DECIDES)


def shared_memory_votes(flat: str) -> list[Vote]:
    """The votes for ``kernel-shared-memory-exceeded`` in a flattened paste (one per tool)."""
    found = (_triton_vote(flat), _ptxas_vote(flat))
    return [vote for vote in found if vote is not None]
