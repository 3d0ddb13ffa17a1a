"""Diff two traces (before / after a change): GPU time per kernel kind and per kernel name.

Unlike HTA's TraceDiff (reference §1.17: counts and durations per name for one rank and one
iteration), values are averaged over all ranks of each side and, when both sides have
ProfilerSteps, divided by each rank's step count so that traces of different lengths compare.

A diff says first what makes its two sides hard to compare (``comparability``): another GPU
(kernel times change with the hardware), another job size (communication and per-rank work
change with the number of ranks), or steps on one side only (then totals over traces of
different lengths are compared, not steps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuwarden.errors import MissingExtraError
from gpuwarden.types.trace_diff import KernelDelta, KindDelta, TraceDiff
from gpuwarden.types.trace_insights import KernelKind

if TYPE_CHECKING:
    from gpuwarden.traces.insights.view import RankView
    from gpuwarden.traces.model import LoadedTrace

TOP_KERNELS = 20
# One kernel, spelled two ways by two PyTorch builds: 2.x replaced its own ``at::detail::Array``
# with ``std::array`` in the elementwise kernels' template arguments, and demanglers print an
# unsigned long argument as ``2ul`` where the older type printed ``2``. A diff across such an
# upgrade matches the kernel instead of listing it as gone and new.
_SPELLINGS = (
    (re.compile(r"\bat::detail::Array<"), "std::array<"),
    (re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b"), r"\1"),
)


def kernel_identity(name: str) -> str:
    """``name`` with the spellings that differ between builds of the same kernel made one."""
    for pattern, spelling in _SPELLINGS:
        name = pattern.sub(spelling, name)
    return name


# A kind is "faster"/"slower" when it moved by at least this share of the before side's GPU time.
SIGNIFICANT_RATIO = 0.01


@dataclass(slots=True)
class _Side:
    steps: int = 0
    step_walls: list[float] | None = None
    busy_us: float = 0.0
    kinds: dict[KernelKind, float] | None = None
    # kernel_identity → (kind, count, us, the name as this side's trace spells it)
    names: dict[str, tuple[KernelKind, float, float, str]] | None = None
    gpus: frozenset[str] = frozenset()  # deviceProperties names of the GPUs the ranks ran on


def _side(views: list[RankView], per_step: bool) -> _Side:
    from gpuwarden.traces.insights import intervals as iv

    gpus = frozenset(v.device_name for v in views if v.device_name is not None)
    side = _Side(step_walls=[], kinds={}, names={}, gpus=gpus)
    assert side.step_walls is not None
    assert side.kinds is not None
    assert side.names is not None
    n_ranks = len(views)
    step_busy: list[float] = []  # GPU-busy time inside each step's window
    for view in views:
        n_steps = int(view.step_ids.size)
        side.steps += n_steps
        side.step_walls.extend(view.step_dur.tolist())
        if per_step:
            step_busy.extend(iv.covered_in(view.gpu_union, view.step_start, view.step_end).tolist())
        scale = 1.0 / n_ranks / (n_steps if per_step and n_steps else 1)
        side.busy_us += iv.length(view.gpu_union) / n_ranks
        _accumulate(view, scale, side)
    side.steps = side.steps // max(n_ranks, 1)
    # per step, the busy time is the median step's, inside its window, as the step wall beside
    # it (the trace's busy time over its steps also counts GPU work outside every step)
    if per_step:
        side.busy_us = _median(step_busy) or 0.0
    return side


def _accumulate(view: RankView, scale: float, side: _Side) -> None:
    import numpy as np

    from gpuwarden.traces.arrays import distinct_inverse

    assert side.kinds is not None
    assert side.names is not None
    rank = view.rank
    rows = np.flatnonzero(view.gpu)
    if rows.size == 0:
        return
    key = rank.name_id[rows].astype(np.int64) * 32 + view.kinds[rows].astype(np.int64)
    uniq, inverse = distinct_inverse(key)
    us = np.bincount(inverse, weights=rank.dur[rows], minlength=uniq.size)
    counts = np.bincount(inverse, minlength=uniq.size)
    for k, t, c in zip(uniq.tolist(), us.tolist(), counts.tolist(), strict=True):
        kind = KernelKind(k % 32)
        name = rank.names[k // 32]
        side.kinds[kind] = side.kinds.get(kind, 0.0) + t * scale
        identity = kernel_identity(name)
        _, c0, t0, spelled = side.names.get(identity, (kind, 0.0, 0.0, name))
        side.names[identity] = (kind, c0 + c * scale, t0 + t * scale, spelled)


def _median(values: list[float] | None) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _job(trace: LoadedTrace) -> str:
    """``rank 3 of 8``, ``4 of 8 ranks``, ``2 ranks`` (world size unknown)."""
    metas = [rank.meta for rank in trace.ranks.values()]
    worlds = trace.world_sizes()
    world = f" of {worlds.pop()}" if len(worlds) == 1 else ""
    if len(metas) == 1:
        return f"rank {metas[0].rank}{world}"
    return f"{len(metas)}{world} ranks"


def comparability(before: LoadedTrace, after: LoadedTrace, b: _Side, a: _Side) -> tuple[str, ...]:
    """What makes the sides hard to compare (module docstring); ``b``, ``a``: what ``_side``
    found in ``before`` and ``after``."""
    out = []
    if b.gpus and a.gpus and b.gpus != a.gpus:
        out.append(
            f"different GPUs: before ran on {', '.join(sorted(b.gpus))}, after on "
            f"{', '.join(sorted(a.gpus))}: kernel times change with the hardware, not only "
            "with the change under test"
        )
    world_b, world_a = before.world_sizes(), after.world_sizes()
    if (world_b and world_a and world_b != world_a) or (
        not (world_b and world_a) and len(before.ranks) != len(after.ranks)
    ):
        out.append(
            f"different job sizes: before is {_job(before)}, after is {_job(after)}: "
            "communication and the work per rank change with the number of ranks"
        )
    elif len(before.ranks) != len(after.ranks):
        out.append(
            f"different ranks loaded: before is {_job(before)}, after is {_job(after)}: the "
            "averages are over different ranks, and a straggler on one side moves them"
        )
    with_steps = [name for name, side in (("before", b), ("after", a)) if side.steps]
    if len(with_steps) == 1:
        other = "after" if with_steps[0] == "before" else "before"
        out.append(
            f"different step definitions: {with_steps[0]} has ProfilerStep annotations, "
            f"{other} has none: totals over the two traces are compared, not steps, and the "
            "traces need not cover the same amount of work"
        )
    return tuple(out)


def diff_traces(before: LoadedTrace, after: LoadedTrace) -> TraceDiff:
    """What got faster or slower from ``before`` to ``after``, by kernel kind and kernel."""
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("trace diff", "trace", "numpy") from exc
    from gpuwarden.traces.insights.view import build_view

    views_b = [build_view(r) for r in before.ranks.values()]
    views_a = [build_view(r) for r in after.ranks.values()]
    per_step = all(v.step_ids.size > 0 for v in views_b + views_a)
    b, a = _side(views_b, per_step), _side(views_a, per_step)
    assert b.kinds is not None
    assert a.kinds is not None
    assert b.names is not None
    assert a.names is not None
    kinds = []
    for kind in sorted(set(b.kinds) | set(a.kinds)):
        t0, t1 = b.kinds.get(kind, 0.0), a.kinds.get(kind, 0.0)
        kinds.append(KindDelta(kind, t0, t1, t1 - t0, t1 / t0 if t0 > 0 else None))
    kinds.sort(key=lambda d: -abs(d.delta_us))
    kernels = []
    for identity in set(b.names) | set(a.names):
        before_row = b.names.get(identity)
        after_row = a.names.get(identity)
        kind, _, _, name = after_row or before_row or (KernelKind.NOT_GPU, 0.0, 0.0, identity)
        _, c0, t0, _ = before_row or (kind, 0.0, 0.0, name)
        _, c1, t1, _ = after_row or (kind, 0.0, 0.0, name)
        kernels.append(KernelDelta(name, kind, c0, c1, t0, t1, t1 - t0))
    kernels.sort(key=lambda d: (-abs(d.delta_us), d.name))
    total_before = sum(b.kinds.values())
    threshold = SIGNIFICANT_RATIO * total_before
    return TraceDiff(
        per_step=per_step,
        before_steps=b.steps,
        after_steps=a.steps,
        before_step_us=_median(b.step_walls),
        after_step_us=_median(a.step_walls),
        before_busy_us=b.busy_us,
        after_busy_us=a.busy_us,
        kinds=tuple(kinds),
        top_kernels=tuple(kernels[:TOP_KERNELS]),
        new_kernels=len(set(a.names) - set(b.names)),
        gone_kernels=len(set(b.names) - set(a.names)),
        faster=tuple(d.kind.name for d in kinds if d.delta_us < -threshold),
        slower=tuple(d.kind.name for d in kinds if d.delta_us > threshold),
        warnings=comparability(before, after, b, a),
    )
