"""kernel-shared-memory-exceeded (health/explain/shared_memory.py): its confidence follows the two
numbers the message states, on Triton's and ptxas's own wordings (quoted from the real texts of
explain sets 5, 6 and 24); other resources and near-misses read nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence

CAUSE = "kernel-shared-memory-exceeded"
TRITON = (
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: {required}, "
    "Hardware limit: {limit}. Reducing block sizes or `num_stages` may help."
)


def _top(text: str) -> tuple[str, Confidence] | None:
    found = explain_text(text).diagnoses
    return (found[0].cause, found[0].confidence) if found else None


def test_both_numbers_over_the_limit_state_the_cause() -> None:
    assert _top(TRITON.format(required=131072, limit=101376)) == (CAUSE, Confidence.HIGH)
    ptxas = (
        "ptxas error   : Entry function 'k' uses too much shared data (0xc400 bytes, 0xc000 max)"
    )
    assert _top(ptxas) == (CAUSE, Confidence.HIGH)


def test_the_phrase_without_its_numbers_is_the_usual_reading() -> None:
    found = _top("OutOfResources: out of resource: shared memory")
    assert found is not None and found[0] == CAUSE and found[1] is not Confidence.HIGH


def test_numbers_that_do_not_exceed_the_limit_leave_it_a_low_candidate() -> None:
    found = _top(TRITON.format(required=49152, limit=101376))
    assert found is not None and found == (CAUSE, Confidence.LOW)


def test_other_resources_and_near_misses_read_nothing_of_it() -> None:
    for text in (
        "triton.runtime.errors.OutOfResources: out of resource: threads, Required: 2048, "
        "Hardware limit: 1024.",
        "the shared memory of the host ran out of resources",
    ):
        found = explain_text(text).diagnoses
        assert all(d.cause != CAUSE for d in found), text


@settings(max_examples=80, deadline=None)
@given(required=st.integers(0, 10**12), limit=st.integers(0, 10**12))
def test_any_pair_of_numbers_reads_by_their_order(required: int, limit: int) -> None:
    found = _top(TRITON.format(required=required, limit=limit))
    assert found is not None and found[0] == CAUSE
    assert (found[1] is Confidence.HIGH) == (required > limit)
