"""The host op a GPU waited on: which CPU op (``aten::*``) the host was running during the
GPU's idle time inside its active span, among the calls that queue no GPU work.

HTA's idle-time breakdown calls a gap ``host_wait`` when the op after it was launched after the
stream went idle (reference §1.4): the GPU waited for the host. A call that launches kernels or
copies (a GPU ``aten::conv2d``, an autograd node, a ProfilerStep of the old ``Operator``
category) is the host launching; a call that queues no GPU work (``aten::randn`` on a CPU
tensor, CPU-side preprocessing) is the host computing. When such calls fill most of the gaps,
that op, not the launch path, is what to move.
"""

from __future__ import annotations

import numpy as np

from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.insights.host import runtime_calls
from gpuwarden.traces.insights.view import RankView
from gpuwarden.traces.model import Category
from gpuwarden.traces.verdict import HOST_OP_IDLE_RATIO, HostOpIdle


def host_op_in_idle(view: RankView) -> HostOpIdle | None:
    """The CPU op name whose calls without GPU work overlap the most of the rank's GPU idle
    time; None without GPU idle time or such calls. Where no CPU op fills
    ``HOST_OP_IDLE_RATIO`` of that time but one Python call does (the ``python_function``
    frames ``with_stack`` records: ``time.sleep``, host-side preprocessing in Python), that
    call."""
    gpu = view.gpu_union
    if gpu[0].size == 0:
        return None
    gaps = iv.complement(gpu, float(gpu[0][0]), float(gpu[1][-1]))
    idle_us = iv.length(gaps)
    if idle_us <= 0:
        return None
    op = _top_call_in_idle(view, Category.CPU_OP, gaps, idle_us)
    if op is not None and op.covered_us >= HOST_OP_IDLE_RATIO * idle_us:
        return op
    python = _top_call_in_idle(view, Category.PYTHON_FUNCTION, gaps, idle_us)
    if python is not None and python.covered_us >= HOST_OP_IDLE_RATIO * idle_us:
        return python
    return op


def _top_call_in_idle(
    view: RankView, category: Category, gaps: iv.Union, idle_us: float
) -> HostOpIdle | None:
    """The name of ``category`` whose calls without GPU work overlap the most of ``gaps``."""
    rank = view.rank
    ops = np.flatnonzero(rank.category == int(category))
    if ops.size == 0:
        return None
    queued = np.sort(rank.ts[runtime_calls(rank)[1]])
    starts, ends = rank.ts[ops], view.end[ops]
    inside = np.searchsorted(queued, ends, side="right") - np.searchsorted(queued, starts)
    ops = ops[inside == 0]
    if ops.size == 0:
        return None
    # rank the names by the idle time their calls overlap, then measure the leader exactly: a
    # union of its calls, so calls nested in a call of the same name count once
    overlap = iv.covered_in(gaps, rank.ts[ops], view.end[ops])
    by_name = np.bincount(rank.name_id[ops], weights=overlap, minlength=len(rank.names))
    top = int(np.argmax(by_name))
    if by_name[top] <= 0:
        return None
    calls = ops[rank.name_id[ops] == top]
    covered = iv.intersect(iv.union(rank.ts[calls], view.end[calls]), gaps)
    return HostOpIdle(
        name=rank.names[top],
        covered_us=iv.length(covered),
        idle_us=idle_us,
        python=category is Category.PYTHON_FUNCTION,
    )
