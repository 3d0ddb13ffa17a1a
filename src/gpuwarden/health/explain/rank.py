"""From votes to ranked diagnoses: one per cause, most likely first, each saying how sure it is.

A cause's score is its strongest vote, plus a little for each other independent piece of
evidence. Confidence follows the score (diagnosis.md §1, ``Confidence``): high = the text
states the cause; medium = the usual reading; low = one candidate among several, and then the
diagnosis carries ``decides``. A consequence (another rank died, a timeout, a launch failure)
ranks below a root cause found in the same text. A ceiling (a text from a stack the causes
only approximate, such as ROCm) caps every score — or only the scores of the causes it names
(WSL 2, where the Linux driver stack some causes presume is not there) — and says what decides
instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuwarden.health.explain.causes import BY_CODE
from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.health import Confidence, Diagnosis

HIGH = 0.85
MEDIUM = 0.55
CORROBORATION = 0.03  # per extra independent piece of evidence
CORROBORATION_MAX = 0.09
CONSEQUENCE_FACTOR = 0.7  # a consequence's score when a root cause is in the text
ROOT_MIN = MEDIUM  # a root cause must be at least this likely to push consequences down
EVIDENCE_MAX = 6


@dataclass(frozen=True, slots=True)
class Ceiling:
    """An upper bound on every diagnosis of one text (the text comes from a stack whose
    messages the causes only approximate): why, and what decides instead."""

    score: float
    why: str
    decides: str
    causes: frozenset[str] | None = None  # the causes it caps; None = every cause
    # what to capture on that stack when nothing is read at all (explainer.NEXT_STEPS names
    # NVIDIA's tools); empty: NVIDIA's steps apply
    next_steps: tuple[str, ...] = ()

    def caps(self, cause: str) -> bool:
        return self.causes is None or cause in self.causes


def confidence_of(score: float) -> Confidence:
    if score >= HIGH:
        return Confidence.HIGH
    if score >= MEDIUM:
        return Confidence.MEDIUM
    return Confidence.LOW


def _score(votes: list[Vote]) -> float:
    distinct = len({v.evidence for v in votes})
    bonus = min(CORROBORATION * (distinct - 1), CORROBORATION_MAX)
    return min(1.0, max(v.weight for v in votes) + bonus)


def _evidence(votes: list[Vote]) -> tuple[str, ...]:
    ordered = sorted(votes, key=lambda v: -v.weight)
    return tuple(dict.fromkeys(v.evidence for v in ordered))[:EVIDENCE_MAX]


def _fixes(votes: list[Vote], generic: tuple[str, ...]) -> tuple[str, ...]:
    """The readings' own fixes (strongest vote first), then the cause's generic ones: a CPU-only
    build of PyG is fixed by PyG's CUDA wheel before torch's."""
    ordered = sorted(votes, key=lambda v: -v.weight)
    own = (fix for vote in ordered for fix in vote.fixes)
    return tuple(dict.fromkeys((*own, *generic)))


def _capping(ceilings: Sequence[Ceiling], cause: str, score: float) -> Ceiling | None:
    """The lowest of ``ceilings`` that caps ``cause`` and lowers ``score``, else None."""
    lowering = [c for c in ceilings if c.caps(cause) and score > c.score]
    return min(lowering, key=lambda c: c.score, default=None)


def rank(votes: Iterable[Vote], *, ceilings: Sequence[Ceiling] = ()) -> tuple[Diagnosis, ...]:
    by_cause: dict[str, list[Vote]] = {}
    for vote in votes:
        by_cause.setdefault(vote.cause, []).append(vote)
    scores = {cause: _score(vs) for cause, vs in by_cause.items()}
    has_root = any(s >= ROOT_MIN and not BY_CODE[c].consequence for c, s in scores.items())
    diagnoses = []
    for cause, group in by_cause.items():
        spec = BY_CODE[cause]
        score = scores[cause] * (CONSEQUENCE_FACTOR if spec.consequence and has_root else 1.0)
        evidence = _evidence(group)
        cap = _capping(ceilings, cause, score)
        if cap is not None:
            score, evidence = cap.score, (*evidence[: EVIDENCE_MAX - 1], cap.why)
        confidence = confidence_of(score)
        decides = None
        if cap is not None:
            decides = cap.decides
        elif confidence is not Confidence.HIGH:
            decides = next((v.decides for v in group if v.decides), spec.decides)
        diagnoses.append(
            Diagnosis(
                cause=cause,
                category=spec.category,
                confidence=confidence,
                score=round(score, 3),
                title=spec.title,
                evidence=evidence,
                # a ceiling doubts the stack the readings presume: their own fixes go with it
                fixes=spec.fixes if cap is not None else _fixes(group, spec.fixes),
                references=spec.references,
                decides=decides,
            )
        )
    return tuple(sorted(diagnoses, key=lambda d: (-d.score, d.cause)))
