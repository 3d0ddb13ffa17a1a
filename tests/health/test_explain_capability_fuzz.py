"""PyTorch's capability-range warning (health/explain/capability.py) read by its numbers, for any
numbers: a vote exactly when the GPU is below the build's minimum or in a newer major than its
maximum, and never an exception (a capability of many digits is no match)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.explain.capability import capability_range_votes

_WARNING = (
    "Found GPU0 NVIDIA X which is of cuda capability {gpu}. Minimum and Maximum cuda "
    "capability supported by this version of PyTorch is ({lo}) - ({hi})"
)
_CC = st.tuples(st.integers(0, 999), st.integers(0, 999))


def _cc(pair: tuple[int, int]) -> str:
    return f"{pair[0]}.{pair[1]}"


@settings(max_examples=150, deadline=None)
@given(gpu=_CC, lo=_CC, hi=_CC)
def test_a_vote_exactly_below_the_minimum_or_past_the_maximums_major(
    gpu: tuple[int, int], lo: tuple[int, int], hi: tuple[int, int]
) -> None:
    text = _WARNING.format(gpu=_cc(gpu), lo=_cc(lo), hi=_cc(hi))
    votes = capability_range_votes(text)
    expected = gpu < lo or gpu[0] > hi[0]
    assert [v.cause for v in votes] == (["gpu-arch-unsupported"] if expected else [])


@settings(max_examples=100, deadline=None)
@given(gpu=st.text(max_size=40), lo=st.text(max_size=40), hi=st.text(max_size=40))
def test_any_text_in_the_numbers_places_never_raises(gpu: str, lo: str, hi: str) -> None:
    votes = capability_range_votes(_WARNING.format(gpu=gpu, lo=lo, hi=hi))
    assert all(v.cause == "gpu-arch-unsupported" for v in votes)
