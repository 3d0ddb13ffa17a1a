"""The held-out sets of pasted error texts (tests/data/explain/heldout*.jsonl with their
*_labels.csv, SOURCES.md): loading a set, and the checks every set gets — labelled texts get
their cause first (the known misses as strict xfails), texts labelled ``unknown`` (a cause
outside explain's vocabulary) never get a confident one, a miss says what would decide."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from gpuwarden.health.explain import explain_text
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


def diagnoses_of(examples: Sequence[tuple[Example, str]], example_id: str) -> list[Any]:
    text = next(e["error_text"] for e, _ in examples if e["id"] == example_id)
    return list(explain_text(text).diagnoses)


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
