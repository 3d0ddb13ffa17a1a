"""A vote: one piece of evidence for one cause, with its weight (0..1)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Vote:
    cause: str
    weight: float
    evidence: str  # the phrase read or the arithmetic, in words
    decides: str | None = None  # when this evidence splits between causes: what decides
