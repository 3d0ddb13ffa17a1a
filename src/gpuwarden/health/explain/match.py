"""Run the tell-tale table and the CUDA error numbers over a flattened paste."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache, lru_cache

from gpuwarden.catalog.compat import parse_version
from gpuwarden.health.explain.anchors import may_match
from gpuwarden.health.explain.arch_cuda import cuda_versions
from gpuwarden.health.explain.cuda_errors import BY_NUMBER, CUT_NUMBERS, NUMBER, CudaError
from gpuwarden.health.explain.signatures import SIGNATURES, Signature
from gpuwarden.health.explain.text import Paste
from gpuwarden.health.explain.votes import Vote, fixes_of

EXCERPT_CHARS = 160
_NUMBERS_READ = 50  # a log repeating one error thousands of times says it once


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


# Prose naming a message as what a change fixed or avoids ("to avoid the '…' error", "use spawn to
# avoid: RuntimeError: …", "fixed the '…'"), read in the few characters before the message: an
# exception's name there is quoted too, not raised; "how to fix …" asks about an error still raised.
_QUOTED_AS_FIXED = re.compile(
    r"\b(?:avoid\w*|prevent\w*|fixe[ds]|resolve[ds])\W+(?:the\W+)?(?:[\w.]+'s\W+)?"
    r"(?:[\w.]*(?:Error|Exception)\W{0,3})?$",
    re.IGNORECASE,
)
_BEFORE_SPAN = 48
_MENTIONS_READ = 20  # a log repeating a message says it in its first mentions


def raised_mentions(pattern: re.Pattern[str], flat: str) -> Iterator[tuple[re.Match[str], str]]:
    """The first mentions of ``pattern`` in ``flat`` that the prose before them does not name as
    fixed or avoided, each with the text right before it."""
    for found in itertools.islice(pattern.finditer(flat), _MENTIONS_READ):
        before = flat[max(0, found.start() - _BEFORE_SPAN) : found.start()]
        if _QUOTED_AS_FIXED.search(before) is None:
            yield found, before


def quoted(phrase: str, meaning: str) -> str:
    """A vote's evidence: the phrase read (an excerpt), then what it means."""
    return f'"{excerpt(phrase)}": {meaning}'


def first_tier(
    flat: str, tiers: Sequence[tuple[re.Pattern[str], float]]
) -> tuple[str, float] | None:
    """The phrase the first matching pattern of ``tiers`` (strongest first) found, with that
    tier's weight; None where none matches."""
    for pattern, weight in tiers:
        found = pattern.search(flat)
        if found is not None:
            return found[0], weight
    return None


def reading_vote(
    cause: str, found: tuple[str, float] | None, meanings: Mapping[float, str], decides: str
) -> list[Vote]:
    """A reader's one vote for ``cause`` from the ``(phrase, weight)`` it found (none when it
    found nothing): the evidence quotes the phrase with what a reading of that weight means."""
    if found is None:
        return []
    phrase, weight = found
    return [Vote(cause, weight, quoted(phrase, meanings[weight]), decides)]


def _applies(signature: Signature, flat: str) -> bool:
    if signature.context is not None and _compiled(signature.context).search(flat) is None:
        return False
    return signature.unless is None or _compiled(signature.unless).search(flat) is None


def signature_votes(paste: Paste) -> list[Vote]:
    flat = paste.flat
    votes: list[Vote] = []
    for signature in SIGNATURES:
        if not may_match(signature.pattern, paste.lowered, signature.needs):
            continue
        # its first mention the prose before it does not name as fixed or avoided: a paste that
        # quotes the message as fixed and then raises it is read by the raised one
        match = next((m for m, _ in raised_mentions(_compiled(signature.pattern), flat)), None)
        if match is None or not _applies(signature, flat):
            continue
        evidence = quoted(match[0], signature.meaning)
        votes.extend(
            Vote(cause, weight, evidence, signature.decides, fixes_of(signature.fixes, cause))
            for cause, weight in signature.votes
        )
    return votes


@lru_cache(maxsize=4)  # read by the number votes and by stated_driver of the same paste
def cuda_numbers(paste: Paste) -> Mapping[int, str]:
    """Each CUDA error number the paste prints bare (``cuda_errors.NUMBER``, ``CUT_NUMBERS``),
    with the phrase it was read from (its first)."""
    # every form NUMBER reads holds one of these ("failed with error": PhysX's driver API calls;
    # "curesult=": a driver API result named by its type)
    if not paste.mentions("cuda", "error=", "failed with error", "curesult"):
        return {}
    flat = paste.flat
    found: dict[int, str] = {}
    cuts = (pattern.search(flat) for pattern in CUT_NUMBERS)
    numbers = itertools.chain(
        itertools.islice(NUMBER.finditer(flat), _NUMBERS_READ), (cut for cut in cuts if cut)
    )
    for match in numbers:
        found.setdefault(int(match["number"]), match[0])
    return found


def cuda_number_votes(paste: Paste) -> list[Vote]:
    votes: list[Vote] = []
    for number, phrase in cuda_numbers(paste).items():
        error = BY_NUMBER.get(number)
        if error is None or _before_its_meaning(paste, error):
            continue
        evidence = quoted(phrase, f"CUDA error {number} ({error.name})")
        votes.extend(
            Vote(cause, weight, evidence, error.decides, fixes_of(error.fixes, cause))
            for cause, weight in error.votes
        )
    return votes


def _before_its_meaning(paste: Paste, error: CudaError) -> bool:
    """Whether every CUDA release the paste names is older than the one that gave ``error``'s
    number its meaning (34 was cudaErrorNotReady before CUDA 10.1, cudaErrorStubLibrary since
    11.1); a paste naming none is read by the current numbering."""
    if error.since is None:
        return False
    named = [parse_version(v) for v in cuda_versions(paste.flat)]
    return bool(named) and all(v is not None and v < error.since for v in named)
