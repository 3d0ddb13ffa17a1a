"""The host op a GPU waited on: which CPU op (``aten::*``) the host was running during the
GPU's idle time inside its active span, among the calls that neither queue GPU work nor wait
for it.

HTA's idle-time breakdown calls a gap ``host_wait`` when the op after it was launched after the
stream went idle (reference §1.4): the GPU waited for the host. A call that launches kernels or
copies (a GPU ``aten::conv2d``, an autograd node, a ProfilerStep of the old ``Operator``
category) is the host launching, and one that synchronizes (``torch.cuda.synchronize``) the
host waiting for the GPU; a call that does neither (``aten::randn`` on a CPU tensor, CPU-side
preprocessing) is the host computing. When such calls fill most of the gaps, that op, not the
launch path, is what to move.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.insights.host import runtime_calls
from gpuwarden.traces.insights.view import RankView, name_mask
from gpuwarden.traces.model import Category
from gpuwarden.traces.verdict import HOST_OP_IDLE_RATIO, HostOpIdle

if TYPE_CHECKING:
    import numpy.typing as npt

# The runtime calls that block the host until the GPU has run the work queued before them (CUDA
# runtime and driver, HIP: cudaDeviceSynchronize, cuStreamSynchronize, hipEventSynchronize, ...).
# A call around one (``torch.cuda.synchronize``, ``Tensor.item``) is the host waiting for the GPU:
# the gaps between the queued kernels it waits on are the GPU's, not the host computing.
_HOST_WAIT_CALL = re.compile("Synchronize")


def host_op_in_idle(view: RankView) -> HostOpIdle | None:
    """The CPU op name whose calls that neither queue GPU work nor wait for it overlap the most
    of the rank's GPU idle time; None without GPU idle time or such calls, or when the trace
    records no call that queues GPU work. Where no CPU op fills ``HOST_OP_IDLE_RATIO`` of that
    time but one Python call does (the ``python_function`` frames ``with_stack`` records:
    ``time.sleep``, host-side preprocessing in Python), that call."""
    gpu = view.gpu_union
    if gpu[0].size == 0:
        return None
    gaps = iv.gaps(gpu)
    idle_us = iv.length(gaps)
    if idle_us <= 0:
        return None
    rank = view.rank
    runtime, queues = runtime_calls(rank)
    if not queues.any():
        # the GPU ran work that no recorded call queued (the trace's runtime calls left out):
        # a call that launches it cannot be told from one that does not, and every frame around
        # the launches (``<module>``, the training loop) would read as the host computing
        return None
    waits = runtime & name_mask(rank, _HOST_WAIT_CALL)
    queue_or_wait_ts = np.sort(rank.ts[queues | waits])
    op = _top_call_in_idle(view, Category.CPU_OP, queue_or_wait_ts, gaps, idle_us)
    if op is not None and op.covered_us >= HOST_OP_IDLE_RATIO * idle_us:
        return op
    python = _top_call_in_idle(view, Category.PYTHON_FUNCTION, queue_or_wait_ts, gaps, idle_us)
    if python is not None and python.covered_us >= HOST_OP_IDLE_RATIO * idle_us:
        return python
    return op


def _top_call_in_idle(
    view: RankView,
    category: Category,
    queue_or_wait_ts: npt.NDArray[np.float64],
    gaps: iv.Union,
    idle_us: float,
) -> HostOpIdle | None:
    """The name of ``category`` whose calls overlap the most of ``gaps`` among those inside
    which the host neither queues GPU work nor waits for it (no runtime call at the sorted
    times ``queue_or_wait_ts``)."""
    rank = view.rank
    ops = np.flatnonzero(rank.category == int(category))
    if ops.size == 0:
        return None
    starts, ends = rank.ts[ops], view.end[ops]
    inside = np.searchsorted(queue_or_wait_ts, ends, side="right") - np.searchsorted(
        queue_or_wait_ts, starts
    )
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
