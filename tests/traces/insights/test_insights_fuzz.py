"""Every analysis on random small traces (names and categories as real traces have them, random
times, correlations, streams): results or None, never an exception; invariants hold."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.traces.diff import diff_traces
from gpuwarden.traces.insights import rank_insights, straggler_report
from gpuwarden.traces.model import Category, LoadedTrace, RankTrace, TraceMetadata

NAMES = (
    ("ProfilerStep#1", Category.USER_ANNOTATION),
    ("ProfilerStep#2", Category.USER_ANNOTATION),
    ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", Category.USER_ANNOTATION),
    ("cudaLaunchKernel", Category.CUDA_RUNTIME),
    ("cudaMemcpy", Category.CUDA_RUNTIME),
    ("cudaGraphLaunch", Category.CUDA_RUNTIME),
    ("aten::mm", Category.CPU_OP),
    ("ncclDevKernel_AllReduce_Sum_f16_RING_LL", Category.KERNEL),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t", Category.KERNEL),
    ("volta_sgemm_128x64_nn", Category.KERNEL),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", Category.KERNEL),
    ("triton_poi_fused_add_0", Category.KERNEL),
    ("Memcpy HtoD (Pageable -> Device)", Category.GPU_MEMCPY),
    ("Memcpy HtoD (Pinned -> Device)", Category.GPU_MEMCPY),
    ("Memset (Device)", Category.GPU_MEMSET),
    ("Event Sync", Category.CUDA_SYNC),
)

events = st.lists(
    st.tuples(
        st.integers(0, len(NAMES) - 1),
        st.floats(0, 5_000, allow_nan=False),
        st.floats(-2, 800, allow_nan=False),  # a few corrupt negative durations
        st.integers(-1, 12),  # correlation
        st.integers(-1, 3),  # stream
        st.integers(-1, 1 << 20),  # bytes
    ),
    max_size=60,
)


def _rank(rank: int, rows: list[tuple[int, float, float, int, int, int]]) -> RankTrace:
    n = len(rows)
    col = np.array([r[0] for r in rows], dtype=np.int32)
    cats = np.array([int(NAMES[i][1]) for i in col.tolist()], dtype=np.int8)
    args = {
        i: {"Collective name": "allreduce", "In msg nelems": 10, "dtype": "Float"}
        for i in range(n)
        if NAMES[rows[i][0]][0].startswith("ncclDev")
    }
    return RankTrace(
        meta=TraceMetadata(
            path=f"r{rank}",
            rank=rank,
            rank_source="default",
            world_size=None,
            backend=None,
            base_time_ns=None,
            schema_version=None,
            device_properties=({"id": 0, "name": "NVIDIA A100-SXM4-80GB"},),
        ),
        names=tuple(nm for nm, _ in NAMES),
        cat_names=tuple(str(c) for c in Category),
        index=np.arange(n, dtype=np.int64),
        ts=np.array([r[1] for r in rows], dtype=np.float64),
        dur=np.array([r[2] for r in rows], dtype=np.float64),
        name_id=col,
        cat_id=cats.astype(np.int32),
        category=cats,
        pid=np.zeros(n, dtype=np.int64),
        tid=np.zeros(n, dtype=np.int64),
        stream=np.array([r[4] for r in rows], dtype=np.int64),
        correlation=np.array([r[3] for r in rows], dtype=np.int64),
        external_id=np.full(n, -1, dtype=np.int64),
        device=np.zeros(n, dtype=np.int64),
        bytes=np.array([r[5] for r in rows], dtype=np.int64),
        args=args,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events, events)
def test_random_traces(a: list, b: list) -> None:  # type: ignore[type-arg]
    ra, rb = _rank(0, a), _rank(1, b)
    for r in (ra, rb):
        ins = rank_insights(r)
        if (r.dur < 0).any():
            continue  # only "no exception" is promised for corrupt durations
        assert ins.gpu_busy_us <= ins.gpu_span_us + 1e-6
        for s in ins.steps:
            if ins.gpu_events == 0:  # CPU-only rank: wall time, no GPU split
                assert s.gpu_busy_us is None and s.gpu_idle_us is None and s.kernels is None
                continue
            assert s.gpu_busy_us is not None and s.gpu_idle_us is not None
            assert s.idle_data_loading_us is not None and s.idle_host_launch_us is not None
            assert s.idle_kernel_gap_us is not None and s.idle_wait_us is not None
            assert 0 <= s.gpu_busy_us <= s.wall_us + 1e-6
            idle = s.idle_data_loading_us + s.idle_host_launch_us + s.idle_kernel_gap_us
            assert abs(idle + s.idle_wait_us - s.gpu_idle_us) < 1e-6 * max(1.0, s.wall_us)
        if ins.communication is not None:
            c = ins.communication
            assert 0 <= c.overlapped_us <= c.comm_busy_us + 1e-6
    trace = LoadedTrace(ranks={0: ra, 1: rb})
    straggler_report(trace)
    d = diff_traces(LoadedTrace(ranks={0: ra}), LoadedTrace(ranks={1: rb}))
    assert len(d.top_kernels) <= 20
