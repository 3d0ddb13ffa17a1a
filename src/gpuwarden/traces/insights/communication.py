"""Communication kernels per collective: time, message bytes (when the trace records them),
overlap with compute kernels, and the exposed (non-overlapped) share of the step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwarden.traces.arrays import distinct
from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.insights.view import RankView
from gpuwarden.types.trace_insights import KernelKind, StepStats

if TYPE_CHECKING:
    from gpuwarden.types.trace_communication import CommunicationReport

# Bytes per element of the dtype names PyTorch writes in the `dtype` arg of collectives.
_DTYPE_BYTES = {
    "Float": 4,
    "float": 4,
    "Half": 2,
    "BFloat16": 2,
    "Double": 8,
    "Int": 4,
    "Long": 8,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1,
    "ComplexFloat": 8,
}
FIX_EXPOSED_RATIO = 0.15


def _message_bytes(extra: dict[str, Any]) -> int | None:
    n = extra.get("In msg nelems")
    size = _DTYPE_BYTES.get(str(extra.get("dtype")))
    if isinstance(n, int) and n >= 0 and size is not None:
        return n * size
    return None


def _bytes_per_row(view: RankView, rows: np.ndarray) -> list[int | None]:
    """Message size of each comm kernel: its own collective args (NCCL kernels carry them in
    newer PyTorch), else those of the CPU op with the same External id."""
    rank = view.rank
    by_external: dict[int, int] = {}
    for row, extra in rank.args.items():
        if "In msg nelems" not in extra or view.gpu[row]:
            continue
        ext = int(rank.external_id[row])
        if ext >= 0 and (b := _message_bytes(extra)) is not None:
            by_external.setdefault(ext, b)
    out: list[int | None] = []
    for row in rows.tolist():
        own = rank.args.get(row)
        b = _message_bytes(own) if own else None
        if b is None:
            b = by_external.get(int(rank.external_id[row]))
        out.append(b)
    return out


def communication(
    view: RankView, steps: tuple[StepStats, ...], gpu_busy_us: float
) -> CommunicationReport | None:
    rows = np.flatnonzero(view.comm)
    if rows.size == 0:
        return None
    from gpuwarden.types.trace_communication import CollectiveStats, CommunicationReport

    rank = view.rank
    kinds = view.kinds[rows]
    sizes = _bytes_per_row(view, rows)
    collectives = []
    for k in distinct(kinds).tolist():
        sel = kinds == k
        recorded = [b for b, s in zip(sizes, sel.tolist(), strict=True) if s and b is not None]
        collectives.append(
            CollectiveStats(
                kind=KernelKind(k),
                count=int(sel.sum()),
                time_us=float(rank.dur[rows[sel]].sum()),
                bytes_total=sum(recorded) if recorded else None,
            )
        )
    collectives.sort(key=lambda c: -c.time_us)
    busy = iv.length(view.comm_union)
    overlapped = iv.length(iv.intersect(view.comm_union, view.compute_union))
    exposed = max(busy - overlapped, 0.0)
    of_steps: float | None = None
    wall = sum(s.wall_us for s in steps)
    if wall > 0:
        of_steps = sum(s.exposed_comm_us for s in steps if s.exposed_comm_us is not None) / wall
    of_busy = exposed / gpu_busy_us if gpu_busy_us > 0 else 0.0
    share = of_steps if of_steps is not None else of_busy
    fix = None
    if share >= FIX_EXPOSED_RATIO:
        fix = (
            "communication is exposed (not overlapped with compute): overlap it (DDP "
            "bucket_cap_mb, FSDP backward/forward prefetch, async tensor parallel), cut its "
            "volume (bigger per-GPU batch, no_sync() during gradient accumulation, bf16 "
            "gradients) and check for stragglers: a late rank shows as long collectives on the "
            "others"
        )
    return CommunicationReport(
        collectives=tuple(collectives),
        comm_busy_us=busy,
        overlapped_us=overlapped,
        exposed_us=exposed,
        overlap_ratio=overlapped / busy if busy > 0 else 0.0,
        exposed_ratio_of_steps=of_steps,
        exposed_ratio_of_busy=of_busy,
        fix=fix,
    )
