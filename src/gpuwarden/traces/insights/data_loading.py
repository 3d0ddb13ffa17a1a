"""GPU idle while the host waits for the next batch from the DataLoader, per step and total."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwarden.traces.arrays import distinct
from gpuwarden.traces.insights import intervals as iv
from gpuwarden.traces.insights.view import RankView

if TYPE_CHECKING:
    from gpuwarden.types.trace_data_loading import DataLoadingReport

# Below this share of step time a data-loading stall is not worth a fix.
FIX_RATIO = 0.05


def _fix(multiprocess: bool | None, idle_ratio: float) -> str | None:
    if idle_ratio < FIX_RATIO:
        return None
    if multiprocess is False:
        return (
            "the DataLoader loads in the training process: set num_workers > 0 (e.g. the CPU "
            "cores per GPU), pin_memory=True and persistent_workers=True"
        )
    return (
        "the DataLoader workers do not keep up: raise num_workers and prefetch_factor, set "
        "persistent_workers=True and pin_memory=True; move decoding/augmentation off the "
        "critical path (GPU decode, pre-processed or cached dataset)"
    )


def data_loading(view: RankView) -> DataLoadingReport | None:
    rows = view.dataloader_rows
    if rows.size == 0 or not view.gpu.any():
        return None
    from gpuwarden.types.trace_data_loading import DataLoadingReport, StepDataLoading

    rank = view.rank
    dl = view.dataloader_union
    dl_idle = iv.subtract(dl, view.gpu_union)
    names = {rank.names[int(i)] for i in distinct(rank.name_id[rows]).tolist()}
    multiprocess: bool | None = None
    if any("_MultiProcessingDataLoaderIter" in n for n in names):
        multiprocess = True
    elif any("_SingleProcessDataLoaderIter" in n for n in names):
        multiprocess = False
    per_step: list[StepDataLoading] = []
    ratio: float | None = None
    if view.step_ids.size:
        lo, hi = view.step_start, view.step_end
        in_dl = iv.covered_in(dl, lo, hi)
        idle = iv.covered_in(dl_idle, lo, hi)
        wall = view.step_dur
        for i in range(view.step_ids.size):
            per_step.append(
                StepDataLoading(
                    step=int(view.step_ids[i]),
                    dataloader_us=float(in_dl[i]),
                    gpu_idle_us=float(idle[i]),
                    gpu_idle_ratio_of_step=float(idle[i] / wall[i]) if wall[i] > 0 else 0.0,
                )
            )
        total_wall = float(wall.sum())
        ratio = float(idle.sum()) / total_wall if total_wall > 0 else None
    idle_us = iv.length(dl_idle)
    span = float(view.gpu_union[1][-1] - view.gpu_union[0][0])
    fix_ratio = ratio if ratio is not None else (idle_us / span if span > 0 else 0.0)
    return DataLoadingReport(
        events=int(rows.size),
        dataloader_us=iv.length(dl),
        gpu_idle_us=idle_us,
        gpu_idle_ratio_of_steps=ratio,
        max_single_wait_us=float(rank.dur[rows].max()),
        multiprocess=multiprocess,
        per_step=tuple(per_step),
        fix=_fix(multiprocess, fix_ratio),
    )
