"""numpy's unique, sort, quantile and median as the analyses use them, without touching
``np.ma``, and numpy's SIMD quicksort only where its order of ties shows.

In numpy 2.x, ``np.unique(x)`` (and ``np.quantile``, which calls it) and ``np.median`` look up
``np.ma``, which imports numpy.ma on first use: about 15 ms, a quarter of analysing a 14 MB
trace. These give the same values, computed with the same float operations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt


def member(codes: npt.NDArray[Any], wanted: Iterable[int], size: int) -> npt.NDArray[np.bool_]:
    """``np.isin(codes, wanted)`` for codes in ``range(size)`` (interned ids, categories): one
    table lookup per element instead of isin's sort or compare passes."""
    table = np.zeros(max(size, 1), dtype=bool)
    table[[w for w in wanted if 0 <= w < size]] = True
    found: npt.NDArray[np.bool_] = table[codes]
    return found


def sum_mean_std(values: npt.NDArray[np.float64]) -> tuple[float, float, float | None]:
    """``values.sum()``, ``.mean()`` and ``.std(ddof=1)`` (None for fewer than two values) of a
    non-empty 1-d float64 array, with numpy's float operations (pairwise sums; the mean is the
    sum / n; the std the square root of the summed squared deviations / (n − 1)), bit for bit,
    without their Python wrappers: the analyses call this once per kernel name or stream."""
    n = values.shape[0]
    total = float(np.add.reduce(values))
    mean = total / n
    if n < 2:
        return total, mean, None
    deviation = values - mean
    return total, mean, math.sqrt(float(np.add.reduce(deviation * deviation)) / (n - 1))


# The sorts below are numpy's stable kind, not its default quicksort: for 32/64-bit keys that
# dispatches to x86-simd-sort, whose unrolled kernels fault in ~1 MB of code pages per process
# (a fifth of what analysing a 14 MB trace adds to the interpreter). Where the permutation of
# tied keys shows in a result, ``sort_order`` keeps quicksort's.


def _run_starts(ordered: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """For sorted values: True where a value differs from the one before (and at 0)."""
    first = np.empty(ordered.size, dtype=bool)
    if ordered.size:
        first[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


def distinct(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``np.unique(values)`` for arrays without NaN: the sorted distinct values."""
    ordered = np.sort(values.reshape(-1), kind="stable")
    return ordered[_run_starts(ordered)]


def distinct_counts(
    values: npt.NDArray[Any],
) -> tuple[npt.NDArray[Any], npt.NDArray[np.intp]]:
    """``np.unique(values, return_counts=True)`` for 1-d arrays without NaN."""
    ordered = np.sort(values, kind="stable")
    starts = np.flatnonzero(_run_starts(ordered))
    return ordered[starts], np.diff(starts, append=ordered.size)


def distinct_inverse(
    values: npt.NDArray[Any],
) -> tuple[npt.NDArray[Any], npt.NDArray[np.intp]]:
    """``np.unique(values, return_inverse=True)`` for 1-d arrays without NaN."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = _run_starts(ordered)
    inverse = np.empty(ordered.size, dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


def sort_order(values: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """``np.argsort(values, kind="quicksort")``, the permutation pandas' ``sort_values`` gives,
    ties and NaNs included. When no two keys tie every sort gives that permutation, so the
    stable sort is used and quicksort only when keys tie."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    if ordered.size < 2:
        return order
    tied = bool(np.any(ordered[1:] == ordered[:-1]))
    if tied or (ordered.dtype.kind in "fc" and bool(np.isnan(ordered[-1]))):
        return np.argsort(values, kind="quicksort")
    return order


def quantile(values: npt.NDArray[np.float64], q: float) -> float:
    """``np.quantile(values, q)`` (the default "linear" method, as pandas' ``quantile``) of a
    non-empty 1-d array, bit for bit: virtual index (n − 1)·q, and numpy's ``_lerp``, which
    interpolates from the nearer neighbour. NaN if any value is NaN, as numpy."""
    n = int(values.shape[0])
    if n == 0:
        raise ValueError("quantile of an empty array")
    if np.isnan(values).any():
        return math.nan
    virtual = (n - 1) * q
    if virtual >= n - 1:  # numpy: both neighbours are the last value (index -1)
        below, above, gamma = n - 1, n - 1, virtual + 1.0
    elif virtual < 0:
        below, above, gamma = 0, 0, virtual
    else:
        below = math.floor(virtual)
        above, gamma = below + 1, virtual - below
    ordered = np.partition(values, (below, above))
    a, b = float(ordered[below]), float(ordered[above])
    diff = b - a
    return b - diff * (1.0 - gamma) if gamma >= 0.5 else a + diff * gamma


def median(values: npt.ArrayLike, axis: int | None = None) -> npt.NDArray[np.float64]:
    """``np.median(values, axis)`` of a non-empty array, as float64: the middle value, or the mean
    of the two middle ones ((a + b) / 2, numpy's ``mean`` of two); NaN where a NaN is present.
    A 0-d array when ``axis`` is None."""
    a = np.asarray(values, dtype=np.float64)
    if axis is None:
        a, axis = a.reshape(-1), 0
    n = int(a.shape[axis])
    if n == 0:
        raise ValueError("median of an empty array")
    ordered = np.sort(a, axis=axis, kind="stable")  # NaN sorts last
    upper = np.take(ordered, n // 2, axis=axis)
    mid = upper if n % 2 else (np.take(ordered, n // 2 - 1, axis=axis) + upper) / 2.0
    return np.where(np.isnan(np.take(ordered, -1, axis=axis)), np.nan, mid)
