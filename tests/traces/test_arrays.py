"""traces.arrays against numpy: the same values, bit for bit (HTA parity depends on it)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpuwarden.traces.arrays import (
    distinct,
    distinct_counts,
    distinct_inverse,
    median,
    member,
    quantile,
    sort_order,
    sum_mean_std,
)

FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e17, max_value=1e17)
# durations and gaps as traces hold them: µs, often with repeats
VALUES = hnp.arrays(np.float64, st.integers(1, 60), elements=FINITE | st.sampled_from([0.0, 1.5]))


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=300, deadline=None)
@given(VALUES, st.sampled_from([0.25, 0.5, 0.75, 0.8, 0.9, 0.99, 0.0, 1.0]))
def test_quantile_is_numpys(values: np.ndarray, q: float) -> None:
    assert _same(quantile(values, q), float(np.quantile(values, q)))
    assert _same(quantile(values, q), float(np.percentile(values, q * 100)))


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 400), elements=FINITE | st.sampled_from([0.0, 1.5])))
def test_sum_mean_std_are_numpys(values: np.ndarray) -> None:
    # up to 400 values: past numpy's 128-element pairwise block
    total, mean, std = sum_mean_std(values)
    assert _same(total, float(values.sum())) and _same(mean, float(values.mean()))
    if len(values) < 2:
        assert std is None
    else:
        assert std is not None and _same(std, float(values.std(ddof=1)))


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(np.int8, st.integers(0, 50), elements=st.integers(0, 15)),
    st.lists(st.integers(-3, 20), max_size=6),
)
def test_member_is_isin(codes: np.ndarray, wanted: list[int]) -> None:
    assert member(codes, wanted, 16).tolist() == np.isin(codes, wanted).tolist()


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_median_is_numpys(values: np.ndarray) -> None:
    assert _same(float(median(values)), float(np.median(values)))


@settings(max_examples=100, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 12)), elements=FINITE))
def test_median_along_an_axis_is_numpys(values: np.ndarray) -> None:
    for axis in (0, 1):
        assert np.array_equal(median(values, axis=axis), np.median(values, axis=axis))


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.int64, st.integers(0, 50), elements=st.integers(-3, 40)))
def test_distinct_is_numpys_unique(values: np.ndarray) -> None:
    got, want = distinct(values), np.unique(values)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([np.int32, np.int64]).flatmap(
        lambda dt: hnp.arrays(dt, st.integers(0, 300), elements=st.integers(-3, 40))
    )
)
def test_distinct_counts_and_inverse_are_numpys_unique(values: np.ndarray) -> None:
    keys, counts = distinct_counts(values)
    want_keys, want_counts = np.unique(values, return_counts=True)
    assert np.array_equal(keys, want_keys) and keys.dtype == want_keys.dtype
    assert counts.tolist() == want_counts.tolist()
    keys, inverse = distinct_inverse(values)
    want_keys, want_inverse = np.unique(values, return_inverse=True)
    assert np.array_equal(keys, want_keys) and inverse.tolist() == want_inverse.tolist()


# few distinct values (ties, as kernel-time sums in whole µs), NaN, and sizes past the
# 16/64/256-element networks the SIMD quicksort switches between
TIED = hnp.arrays(
    np.float64,
    st.integers(0, 600),
    elements=st.sampled_from([0.0, 1.0, 2.5, 7.0, -1.0, np.nan]) | FINITE,
)


@settings(max_examples=300, deadline=None)
@given(TIED)
def test_sort_order_is_numpys_quicksort_permutation(values: np.ndarray) -> None:
    """pandas' sort_values order, ties and NaN included (HTA's top-kernel cut depends on it)."""
    assert sort_order(values).tolist() == np.argsort(values, kind="quicksort").tolist()


@settings(max_examples=100, deadline=None)
@given(hnp.arrays(np.int64, st.integers(0, 600), elements=st.integers(-50, 50)))
def test_sort_order_of_integers_is_numpys_quicksort_permutation(values: np.ndarray) -> None:
    assert sort_order(values).tolist() == np.argsort(values, kind="quicksort").tolist()


def test_nan_propagates_and_empty_is_an_error() -> None:
    with_nan = np.array([1.0, np.nan, 3.0])
    assert math.isnan(quantile(with_nan, 0.5)) and math.isnan(float(median(with_nan)))
    with pytest.raises(ValueError, match="empty"):
        quantile(np.zeros(0), 0.5)
    with pytest.raises(ValueError, match="empty"):
        median(np.zeros(0))


def test_analysing_a_trace_does_not_import_numpy_ma(fixtures: object) -> None:
    """numpy.ma costs ~15 ms to import; np.unique/np.quantile/np.median would pull it in."""
    code = (
        "import sys\n"
        "from gpuwarden.traces.analyze import analyze\n"
        "from gpuwarden.traces.load import load_traces\n"
        f"analyze(load_traces([{str(fixtures)!r} + '/traces/astra_megatron_tp8_a100']))\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
