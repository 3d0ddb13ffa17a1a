"""Host-to-device copies: pageable vs pinned, blocking, bytes, achieved bandwidth vs PCIe."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.insights.view import RankView
from gpuwarden.types.trace_insights import KernelKind

if TYPE_CHECKING:
    from gpuwarden.types.trace_h2d import H2DReport

# Runtime calls that return only when the copy is done.
_BLOCKING = re.compile(r"^(cudaMemcpy|cuMemcpy|hipMemcpy)(?!.*Async)")
FIX_EXPOSED_RATIO = 0.02


def _gb_s(nbytes: int, dur_us: float) -> float | None:
    return nbytes / dur_us / 1e3 if nbytes > 0 and dur_us > 0 else None


def _fix(pageable: int, blocking: int, exposed_ratio: float) -> str | None:
    parts = []
    if pageable:
        parts.append(
            "copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), "
            "then .to(device, non_blocking=True)"
        )
    if blocking:
        parts.append("use non_blocking=True copies so the host does not wait for each one")
    if exposed_ratio >= FIX_EXPOSED_RATIO:
        parts.append("prefetch the next batch to the GPU on a side stream while this one computes")
    return "; ".join(parts) or None


def h2d(view: RankView) -> H2DReport | None:
    rank = view.rank
    rows = np.flatnonzero(view.kinds == int(KernelKind.MEMCPY_H2D))
    if rows.size == 0:
        return None
    # the PCIe table (and the GPU names it reads) only for a trace with copies to judge
    from gpuwarden.catalog.host_link import PCIE_X16_GB_S, pcie_generation
    from gpuwarden.types.trace_h2d import H2DReport

    names = [rank.names[int(i)] for i in rank.name_id[rows].tolist()]
    pageable = np.array(["Pageable" in n for n in names], dtype=bool)
    pinned = np.array(["Pinned" in n for n in names], dtype=bool)
    nbytes = rank.bytes[rows]
    dur = rank.dur[rows]
    sized = nbytes >= 0
    launch = view.launch_row[rows]
    blocking = sum(
        1 for r in launch.tolist() if r >= 0 and _BLOCKING.match(rank.name(r)) is not None
    )
    copies = iv.union(rank.ts[rows], view.end[rows])
    exposed = iv.length(iv.subtract(copies, view.compute_union))
    gen = pcie_generation(view.device_name, view.compute_capability)
    limit = PCIE_X16_GB_S.get(gen) if gen else None
    achieved = _gb_s(int(nbytes[sized].sum()), float(dur[sized].sum()))
    per_step: tuple[tuple[int, float], ...] = ()
    wall = 0.0
    if view.step_ids.size:
        in_step = iv.covered_in(copies, view.step_start, view.step_end)
        per_step = tuple(
            (int(s), float(t)) for s, t in zip(view.step_ids.tolist(), in_step, strict=True)
        )
        wall = float(view.step_dur.sum())
    if wall <= 0 and view.gpu_union[0].size:
        wall = float(view.gpu_union[1][-1] - view.gpu_union[0][0])
    return H2DReport(
        copies=int(rows.size),
        bytes_total=int(nbytes[sized].sum()) if sized.any() else None,
        time_us=float(dur.sum()),
        exposed_us=exposed,
        pageable_copies=int(pageable.sum()),
        pinned_copies=int(pinned.sum()),
        unknown_source_copies=int((~pageable & ~pinned).sum()),
        pageable_bytes=int(nbytes[pageable & sized].sum()),
        blocking_copies=blocking,
        achieved_gb_s=achieved,
        pageable_gb_s=_gb_s(
            int(nbytes[pageable & sized].sum()), float(dur[pageable & sized].sum())
        ),
        pinned_gb_s=_gb_s(int(nbytes[pinned & sized].sum()), float(dur[pinned & sized].sum())),
        device_name=view.device_name,
        pcie_generation=gen,
        pcie_limit_gb_s=limit,
        achieved_ratio_of_pcie=achieved / limit if achieved is not None and limit else None,
        per_step_us=per_step,
        fix=_fix(int(pageable.sum()), blocking, exposed / wall if wall > 0 else 0.0),
    )
