"""Interval algebra against brute-force coverage on a unit grid (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.traces.insights import intervals as iv

spans = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 15)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=25,
)


def _grid(pairs: list[tuple[int, int]]) -> np.ndarray:
    cells = np.zeros(80, dtype=bool)
    for s, e in pairs:
        cells[s:e] = True
    return cells


def _u(pairs: list[tuple[int, int]]) -> iv.Union:
    arr = np.array(pairs, dtype=np.float64).reshape(-1, 2)
    return iv.union(arr[:, 0], arr[:, 1])


@given(spans, spans, st.integers(0, 80), st.integers(0, 80))
def test_union_intersect_subtract_cover(a: list, b: list, lo: int, hi: int) -> None:  # type: ignore[type-arg]
    ga, gb = _grid(a), _grid(b)
    ua, ub = _u(a), _u(b)
    assert iv.length(ua) == ga.sum()
    assert iv.length(iv.intersect(ua, ub)) == (ga & gb).sum()
    assert iv.length(iv.subtract(ua, ub)) == (ga & ~gb).sum()
    lo, hi = min(lo, hi), max(lo, hi)
    got = iv.covered_in(ua, np.array([float(lo)]), np.array([float(hi)]))
    assert got[0] == ga[lo:hi].sum()
    gaps = iv.complement(ua, float(lo), float(hi))
    assert iv.length(gaps) == (~ga[lo:hi]).sum()
    assert np.all(ua[0][1:] > ua[1][:-1])  # disjoint, sorted, touching merged
