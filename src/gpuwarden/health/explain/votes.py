"""A vote: one piece of evidence for one cause, with its weight (0..1)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Vote:
    cause: str
    weight: float
    evidence: str  # the phrase read or the arithmetic, in words
    decides: str | None = None  # when this evidence splits between causes: what decides
    # the reading's own fixes (the library the text names has a CUDA build of its own), shown
    # before the cause's generic ones
    fixes: tuple[str, ...] = ()


# A reading's own fixes for the causes it votes for: (cause, its fixes in order) pairs.
ReadingFixes = tuple[tuple[str, tuple[str, ...]], ...]


def fixes_of(reading: ReadingFixes, cause: str) -> tuple[str, ...]:
    """The fixes ``reading`` gives for ``cause`` (none when it gives none)."""
    return next((fixes for code, fixes in reading if code == cause), ())
