"""The held-out sets of pasted error texts (tests/data/explain/heldout*.jsonl with their
*_labels.csv, SOURCES.md): loading a set, and the checks every set gets — labelled texts get
their cause first (the known misses as strict xfails), texts labelled ``unknown`` (a cause
outside explain's vocabulary) never get a confident one, a miss says what would decide."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.explain import explain
from gpuwarden.health.explain import BY_CODE, explain_text
from gpuwarden.types.health import Confidence

DATA = Path(__file__).resolve().parent.parent / "data" / "explain"
UNKNOWN = "unknown"

Example = dict[str, Any]


def load_set(name: str) -> list[tuple[Example, str]]:
    """(example, its cause code or ``unknown``) for the set ``name`` ("heldout2")."""
    with (DATA / f"{name}_labels.csv").open(newline="") as f:
        causes = {row["id"]: row["causes"] for row in csv.DictReader(f)}
    lines = (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [(e, causes[e["id"]]) for e in (json.loads(line) for line in lines)]


def source_urls(*paths: Path) -> set[str]:
    """The threads earlier sets (or the fixtures) already used."""
    return {
        json.loads(line)["source_url"]
        for path in paths
        for line in path.read_text(encoding="utf-8").splitlines()
    }


def top_cause(text: str) -> str | None:
    diagnoses = explain_text(text).diagnoses
    return diagnoses[0].cause if diagnoses else None


def misses(labelled: Sequence[tuple[Example, str]]) -> set[str]:
    return {e["id"] for e, cause in labelled if top_cause(e["error_text"]) != cause}


def assert_accuracy(
    labelled: Sequence[tuple[Example, str]], known_misses: Mapping[str, str], floor: float
) -> None:
    """At least ``floor`` of the labelled texts get their cause first, and exactly the known
    misses do not."""
    missed = misses(labelled)
    assert 1 - len(missed) / len(labelled) >= floor, sorted(missed)
    assert missed == set(known_misses)


def _xfail_if_known(example_id: str, known: Mapping[str, str]) -> list[Any]:
    """A strict xfail with its reason for a case ``known`` lists, else no mark."""
    if example_id not in known:
        return []
    return [pytest.mark.xfail(strict=True, reason=known[example_id])]


def labelled_params(
    labelled: Sequence[tuple[Example, str]], known_misses: Mapping[str, str]
) -> list[Any]:
    """One case a labelled text; a known miss is a strict xfail with its reason."""
    return [
        pytest.param(e, c, id=e["id"], marks=_xfail_if_known(e["id"], known_misses))
        for e, c in labelled
    ]


def assert_no_confident_cause(example: Example) -> None:
    explanation = explain_text(example["error_text"])
    assert all(d.confidence is not Confidence.HIGH for d in explanation.diagnoses)
    if not explanation.diagnoses:
        assert explanation.next_steps  # says what to capture instead


def assert_misses_are_unsure(
    labelled: Sequence[tuple[Example, str]], known_misses: Mapping[str, str]
) -> None:
    """Each known miss's top diagnosis (if any) is not confident and says what decides."""
    for example, _ in labelled:
        if example["id"] not in known_misses:
            continue
        diagnoses = explain_text(example["error_text"]).diagnoses
        if diagnoses:
            assert diagnoses[0].confidence is not Confidence.HIGH
            assert diagnoses[0].decides


def unknown_params(
    examples: Sequence[tuple[Example, str]], known_false_confidence: Mapping[str, str] | None = None
) -> list[Any]:
    """One case a text labelled ``unknown``; one that still gets a confident cause is a strict
    xfail with the reason the text cannot say otherwise."""
    known = known_false_confidence or {}
    return [
        pytest.param(e, id=e["id"], marks=_xfail_if_known(e["id"], known))
        for e, c in examples
        if c == UNKNOWN
    ]


def text_of(examples: Sequence[tuple[Example, str]], example_id: str) -> str:
    return str(next(e["error_text"] for e, _ in examples if e["id"] == example_id))


def diagnoses_of(examples: Sequence[tuple[Example, str]], example_id: str) -> list[Any]:
    return list(explain_text(text_of(examples, example_id)).diagnoses)


def top_reading(examples: Sequence[tuple[Example, str]], example_id: str) -> tuple[str, Confidence]:
    """The first diagnosis's cause and confidence."""
    top = diagnoses_of(examples, example_id)[0]
    return top.cause, top.confidence


def labelled(examples: Sequence[tuple[Example, str]]) -> list[tuple[Example, str]]:
    """The texts with a cause in the vocabulary (not ``unknown``)."""
    return [(e, c) for e, c in examples if c != UNKNOWN]


def earlier_urls(fixtures: Path, *sets: str) -> set[str]:
    """The threads the named earlier sets, the OOM wordings and the fixtures already used."""
    paths = [DATA / f"{name}.jsonl" for name in sets]
    return source_urls(*paths, DATA / "oom_wordings.jsonl", fixtures / "errors" / "examples.jsonl")


def standard_checks(
    examples: Sequence[tuple[Example, str]],
    *,
    known_misses: Mapping[str, str],
    min_accuracy: float,
    known_false_confidence: Mapping[str, str] | None = None,
) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]]:
    """The three tests every set gets, for its module to bind under ``test_*`` names: the
    accuracy floor with exactly the known misses, each labelled text's cause first, and no
    confident cause for a text labelled ``unknown``."""
    with_cause = labelled(examples)

    def accuracy() -> None:
        assert_accuracy(with_cause, known_misses, min_accuracy)

    @pytest.mark.parametrize(("example", "cause"), labelled_params(with_cause, known_misses))
    def cause_first(example: Example, cause: str) -> None:
        assert top_cause(example["error_text"]) == cause

    @pytest.mark.parametrize("example", unknown_params(examples, known_false_confidence))
    def never_confident(example: Example) -> None:
        assert_no_confident_cause(example)

    return accuracy, cause_first, never_confident


TestFn = Callable[..., None]


def set_checks(
    examples: Sequence[tuple[Example, str]],
    earlier: Sequence[str],
    *,
    size: tuple[int, int | None],
    min_unknown: int,
    min_causes: int,
    min_repositories: int,
    min_categories: int | None = None,
    known_misses: Mapping[str, str],
    min_accuracy: float,
    known_false_confidence: Mapping[str, str] | None = None,
) -> tuple[TestFn, TestFn, TestFn, TestFn]:
    """The four tests every set from the seventh on gets, for its module to bind under ``test_*``
    names: the set is new and varied (``assert_new_and_varied`` with the spread given, the known
    misses and false confidences among its texts), then the three ``standard_checks``."""

    def new_and_varied(fixtures: Path) -> None:
        assert_new_and_varied(
            examples,
            fixtures,
            earlier,
            size=size,
            min_unknown=min_unknown,
            min_causes=min_causes,
            min_repositories=min_repositories,
            min_categories=min_categories,
            known_misses=known_misses,
            known_false_confidence=known_false_confidence,
        )

    return (
        new_and_varied,
        *standard_checks(
            examples,
            known_misses=known_misses,
            min_accuracy=min_accuracy,
            known_false_confidence=known_false_confidence,
        ),
    )


def pipeline_check(
    examples: Sequence[tuple[Example, str]],
    known_misses: Mapping[str, str],
    known_false_confidence: Mapping[str, str] | None = None,
) -> TestFn:
    """``assert_pipeline_reads_the_same`` as a test, for its module to bind under a ``test_*``
    name."""

    def pipeline_reads_the_same() -> None:
        assert_pipeline_reads_the_same(examples, known_misses, known_false_confidence)

    return pipeline_reads_the_same


def heldout_set_checks(
    examples: Sequence[tuple[Example, str]], earlier: Sequence[str], **spread: Any
) -> tuple[TestFn, TestFn, TestFn, TestFn, TestFn]:
    """The five tests every set from the twenty-fifth on gets, for its module to bind under
    ``test_*`` names: the four ``set_checks`` (``spread`` is their keywords, ``known_misses``
    among them), then ``pipeline_check`` with the same known misses and false confidences."""
    return (
        *set_checks(examples, earlier, **spread),
        pipeline_check(examples, spread["known_misses"], spread.get("known_false_confidence")),
    )


def cause_readings(text: str) -> list[tuple[str, Confidence]]:
    """Each diagnosis explain_text gives ``text``, as (cause, confidence), best first."""
    return [(d.cause, d.confidence) for d in explain_text(text).diagnoses]


def causes_read(text: str) -> set[str]:
    """The causes explain_text gives ``text``, whatever their order and confidence."""
    return {cause for cause, _ in cause_readings(text)}


def assert_read_first_among(
    examples: Sequence[tuple[Example, str]],
    example_id: str,
    first: tuple[str, Confidence],
    causes: set[str],
) -> None:
    """The set's text ``example_id`` is read as ``first`` (cause, confidence), among exactly
    ``causes``, and its first diagnosis names what decides."""
    assert top_reading(examples, example_id) == first
    diagnoses = diagnoses_of(examples, example_id)
    assert {d.cause for d in diagnoses} == causes
    assert diagnoses[0].decides


def ids_in(examples: Sequence[tuple[Example, str]], *categories: str) -> list[str]:
    """The ids of the set's texts in any of ``categories``."""
    return [e["id"] for e, _ in examples if e["category"] in categories]


def pastes_of(fragments: Sequence[str], max_parts: int = 10) -> st.SearchStrategy[str]:
    """Texts spliced from a set's telling fragments, separators and noise, joined by spaces: what
    the fuzz of a set's new readings feeds explain."""
    part = st.sampled_from([*fragments, " ", "\n", "é"]) | st.text(max_size=12)
    return st.lists(part, max_size=max_parts).map(" ".join)


def earlier_texts(fixtures: Path, *sets: str) -> set[str]:
    """The pasted texts the named earlier sets, the OOM wordings and the fixtures already hold
    (stripped), to keep a new set from repeating one under another thread."""
    paths = [
        *(DATA / f"{name}.jsonl" for name in sets),
        DATA / "oom_wordings.jsonl",
        fixtures / "errors" / "examples.jsonl",
    ]
    return {
        (row.get("error_text") or row.get("text") or "").strip()
        for path in paths
        for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())
    }


def sets_before(n: int) -> tuple[str, ...]:
    """The names of the held-out sets before set ``n`` ("heldout", "heldout2", ...)."""
    return ("heldout", *(f"heldout{k}" for k in range(2, n)))


def assert_new_and_varied(
    examples: Sequence[tuple[Example, str]],
    fixtures: Path,
    earlier: Sequence[str],
    *,
    size: tuple[int, int | None],
    min_unknown: int,
    min_causes: int,
    min_repositories: int,
    min_categories: int | None = None,
    known_misses: Mapping[str, str] | None = None,
    known_false_confidence: Mapping[str, str] | None = None,
) -> None:
    """The set's size (``size`` is its least and, if not None, its most), its spread (texts
    labelled ``unknown``, causes, categories, repositories), one text a thread, no thread or text
    an earlier set or the fixtures hold; the known misses (false confidences), where given, are
    labelled (``unknown``) texts of the set."""
    least, most = size
    assert least <= len(examples)
    if most is not None:
        assert len(examples) <= most
    assert {cause for _, cause in examples} <= set(BY_CODE) | {UNKNOWN}
    assert sum(cause == UNKNOWN for _, cause in examples) >= min_unknown
    assert len({cause for _, cause in labelled(examples)}) >= min_causes
    if min_categories is not None:
        assert len({e["category"] for e, _ in examples}) >= min_categories
    urls = [e["source_url"] for e, _ in examples]
    assert len(set(urls)) == len(urls)
    assert len({"/".join(url.split("/")[3:5]) for url in urls}) >= min_repositories
    assert not earlier_urls(fixtures, *earlier) & set(urls)
    assert not earlier_texts(fixtures, *earlier) & {e["error_text"].strip() for e, _ in examples}
    if known_misses is not None:
        assert set(known_misses) <= {e["id"] for e, _ in labelled(examples)}
    if known_false_confidence is not None:
        assert set(known_false_confidence) <= {e["id"] for e, c in examples if c == UNKNOWN}


def assert_pipeline_reads_the_same(
    examples: Sequence[tuple[Example, str]],
    known_misses: Mapping[str, str],
    known_false_confidence: Mapping[str, str] | None = None,
) -> None:
    """doctor.explain (explain_text plus what pasted screens say) gives no text labelled
    ``unknown`` a confident cause and each labelled text its cause first, but for the known
    false confidences and misses."""
    false_confidence = known_false_confidence or {}
    for example, cause in examples:
        diagnoses = explain(example["error_text"]).explanation.diagnoses
        if cause == UNKNOWN and example["id"] not in false_confidence:
            assert all(d.confidence is not Confidence.HIGH for d in diagnoses), example["id"]
        elif cause != UNKNOWN and example["id"] not in known_misses:
            assert diagnoses[0].cause == cause, example["id"]


def match_after_repeated_prefixes(pattern: re.Pattern[str], prefix: str, whole: str) -> str:
    """The text ``pattern`` finds in 200 copies of ``prefix`` (a message cut short, repeated on
    one flat line) followed by ``whole`` (the message complete): it must be ``whole`` alone.
    What keeps the search over repeated prefixes linear, checked without a clock (a wall-clock
    bound fails under load): each of the message's variable parts is bounded by what it can
    hold (a name's characters, a bounded count), so a search starting at a cut-short copy stops
    at that copy. An unbounded part (".+", "\\S+") runs on through the copies after it: each
    start rescans the rest (quadratic), and the match starts at the first copy."""
    text = prefix * 200 + whole
    found = pattern.search(text)
    return "" if found is None else text[found.start() : found.end()]


def never_raise(fragments: Sequence[str]) -> Callable[..., None]:
    """The fuzz of a set's new readings, for its module to bind under a ``test_*`` name: a paste
    spliced from ``fragments`` never raises and names only causes in the vocabulary."""

    @settings(max_examples=100, deadline=None)
    @given(pastes_of(fragments))
    def the_new_readings_never_raise(text: str) -> None:
        explanation = explain_text(text)
        assert all(d.cause in BY_CODE for d in explanation.diagnoses)

    return the_new_readings_never_raise
