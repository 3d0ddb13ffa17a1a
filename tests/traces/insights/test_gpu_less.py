"""Traces without GPU activity: every analysis returns an empty or None result."""

from __future__ import annotations

import pytest

from gpuwarden.traces.insights import rank_insights
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of


@pytest.mark.parametrize("rel", [raw.CPU_ONLY, raw.NON_GPU, raw.CUPTI])
def test_gpu_less_rank(rel: str) -> None:
    assert not raw.gpu_events(rel)
    ins = rank_insights(rank_of(rel))
    assert ins.gpu_events == 0 and ins.gpu_busy_us == 0 and ins.kinds == ()
    assert ins.steps == ()
    assert ins.data_loading is None and ins.h2d is None and ins.launch is None
    assert ins.tensor_cores is None and ins.communication is None


def test_kind_totals_match_raw() -> None:
    rel = raw.NCCL
    ins = rank_insights(rank_of(rel))
    gpu = raw.gpu_events(rel)
    assert ins.gpu_events == len(gpu)
    assert sum(k.time_us for k in ins.kinds) == pytest.approx(sum(e["dur"] for e in gpu))
    assert ins.gpu_busy_us == pytest.approx(
        sum(e - s for s, e in raw.union([(e["ts"], e["ts"] + e["dur"]) for e in gpu])), abs=1.0
    )
    assert ins.device_name == "NVIDIA A100-PG509-200"
