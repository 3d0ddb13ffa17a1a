"""GPU idle during DataLoader waits, against the raw events."""

from __future__ import annotations

import pytest

from gpuwarden.traces.insights import rank_insights
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of

DL_FIXTURES = [raw.CONTROL, raw.TEST, *(raw.megatron(r) for r in range(8))]


def _dataloader(rel: str) -> list[tuple[float, float]]:
    return [
        (e["ts"], e["ts"] + e["dur"])
        for e in raw.complete(rel)
        if e["cat"] == "user_annotation" and "DataLoader" in e["name"]
    ]


@pytest.mark.parametrize("rel", DL_FIXTURES)
def test_idle_during_dataloader(rel: str) -> None:
    dl = _dataloader(rel)
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in raw.gpu_events(rel)]
    in_dl = sum(e - s for s, e in raw.union(dl))
    idle = in_dl - raw.overlap(dl, gpu)
    report = rank_insights(rank_of(rel)).data_loading
    assert report is not None
    assert report.events == len(dl)
    assert report.dataloader_us == pytest.approx(in_dl)
    assert report.gpu_idle_us == pytest.approx(idle)
    assert report.multiprocess is True  # _MultiProcessingDataLoaderIter in every name
    walls = sum(e["dur"] for e in raw.steps(rel))
    assert report.gpu_idle_ratio_of_steps == pytest.approx(idle / walls)
    assert sum(s.gpu_idle_us for s in report.per_step) == pytest.approx(idle)


def test_no_dataloader_events_is_none() -> None:
    assert not _dataloader(raw.NCCL)
    assert rank_insights(rank_of(raw.NCCL)).data_loading is None


def test_fix_only_when_data_loading_matters() -> None:
    # trace_diff/control: 0.09 % of step time idle in the DataLoader: no fix
    report = rank_insights(rank_of(raw.CONTROL)).data_loading
    assert report is not None and report.gpu_idle_ratio_of_steps is not None
    assert report.gpu_idle_ratio_of_steps < 0.01 and report.fix is None
