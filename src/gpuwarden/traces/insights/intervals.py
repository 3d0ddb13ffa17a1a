"""Interval algebra on numpy arrays (µs): unions, intersections, coverage inside windows.

A *union* is a pair of sorted arrays ``(starts, ends)`` of disjoint intervals. Touching
intervals (start == running end) merge, as in HTA's temporal breakdown (reference §1.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    F64 = npt.NDArray[np.float64]

Union = tuple["F64", "F64"]


def empty() -> Union:
    return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.float64)


def union(starts: F64, ends: F64) -> Union:
    """Disjoint sorted cover of the intervals [starts, ends]."""
    n = int(starts.shape[0])
    if n == 0:
        return empty()
    order = np.argsort(starts, kind="stable")
    s = starts[order].astype(np.float64, copy=False)
    e = np.maximum(ends[order].astype(np.float64, copy=False), s)
    run_end = np.maximum.accumulate(e)
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, n - 1)
    return s[first], run_end[last]


def length(u: Union) -> float:
    return float(np.sum(u[1] - u[0]))


def intersect(a: Union, b: Union) -> Union:
    """Intervals covered by both unions (sweep over their edges)."""
    if a[0].size == 0 or b[0].size == 0:
        return empty()
    pts = np.concatenate([a[0], a[1], b[0], b[1]])
    delta = np.concatenate(
        [np.ones(a[0].size), -np.ones(a[1].size), np.ones(b[0].size), -np.ones(b[1].size)]
    )
    # At equal times close before open, so touching intervals do not intersect.
    order = np.lexsort((delta, pts))
    pts, depth = pts[order], np.cumsum(delta[order])
    inside = depth[:-1] == 2
    s, e = pts[:-1][inside], pts[1:][inside]
    keep = e > s
    return union(s[keep], e[keep])


def subtract(a: Union, b: Union) -> Union:
    """Parts of ``a`` not covered by ``b``."""
    if a[0].size == 0 or b[0].size == 0:
        return a
    return intersect(a, complement(b, float(a[0][0]), float(a[1][-1])))


def gaps(u: Union) -> Union:
    """The gaps between ``u``'s intervals, inside its span (none when ``u`` is empty)."""
    if u[0].size == 0:
        return empty()
    return complement(u, float(u[0][0]), float(u[1][-1]))


def complement(u: Union, lo: float, hi: float) -> Union:
    """Gaps of ``u`` inside [lo, hi]."""
    if hi <= lo:
        return empty()
    s = np.concatenate([[lo], u[1]])
    e = np.concatenate([u[0], [hi]])
    s = np.clip(s, lo, hi)
    e = np.clip(e, lo, hi)
    keep = e > s
    return s[keep], e[keep]


def covered_before(u: Union, t: F64) -> F64:
    """Length of ``u`` inside (-inf, t], for each t."""
    if u[0].size == 0:
        return np.zeros(t.shape, dtype=np.float64)
    lengths = u[1] - u[0]
    prefix = np.concatenate([[0.0], np.cumsum(lengths)])
    k = np.searchsorted(u[0], t, side="right")  # intervals starting at or before t
    prev = np.maximum(k - 1, 0)
    partial = np.where(k > 0, np.clip(t - u[0][prev], 0.0, lengths[prev]), 0.0)
    return prefix[prev] + partial


def covered_in(u: Union, lo: F64, hi: F64) -> F64:
    """Length of ``u`` inside each window [lo, hi]."""
    return np.maximum(covered_before(u, hi) - covered_before(u, lo), 0.0)
