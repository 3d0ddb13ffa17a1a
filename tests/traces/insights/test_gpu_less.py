"""Traces without GPU activity: every GPU analysis returns an empty or None result; ProfilerSteps
still get their wall time."""

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
    expected = raw.steps(rel)
    assert [(s.step, s.start_us, s.wall_us) for s in ins.steps] == [
        (int(e["name"].split("#")[1]), e["ts"], e["dur"]) for e in expected
    ]
    for s in ins.steps:
        gpu_fields = (s.gpu_busy_us, s.gpu_idle_us, s.gpu_busy_ratio, s.idle_data_loading_us)
        gpu_fields += (s.idle_host_launch_us, s.idle_kernel_gap_us, s.idle_wait_us, s.comm_us)
        assert set(gpu_fields) == {None}
        assert s.kernels is None and s.dominant_idle is None and s.exposed_comm_us is None
    assert ins.data_loading is None and ins.h2d is None and ins.launch is None
    assert ins.tensor_cores is None and ins.communication is None


def test_cpu_only_fixtures_have_a_step() -> None:
    # Guards the test above against a fixture without ProfilerStep (it would pass on ()).
    assert [len(raw.steps(rel)) for rel in (raw.CPU_ONLY, raw.NON_GPU)] == [1, 1]


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
