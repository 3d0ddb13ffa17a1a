"""Tensor-core share of GEMM time and misaligned matmul shapes."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwarden.traces.column_store import MATMUL_OPS
from gpuwarden.traces.insights import rank_insights
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of


def _gemm_time(rel: str, pred: object) -> float:
    return sum(
        e["dur"]
        for e in raw.complete(rel)
        if e["cat"] == "kernel" and pred(e["name"])  # type: ignore[operator]
    )


def test_v100_fp32_training_runs_on_cuda_cores() -> None:
    """trace_diff/test (V100, FP32): the sgemm kernels are SIMT and no GEMM is tensor-core."""
    report = rank_insights(rank_of(raw.TEST)).tensor_cores
    assert report is not None
    sgemm = _gemm_time(raw.TEST, lambda n: "sgemm" in n)
    assert report.simt_us >= sgemm > 0
    assert report.tensor_core_us == 0
    assert report.simt_ratio > 0.5
    assert report.fix is not None and "tensor cores" in report.fix
    assert report.top_simt_kernels[0].name.startswith("volta_sgemm")


def test_megatron_fp16_gemms_all_on_tensor_cores() -> None:
    rel = raw.megatron(0)
    gemm = _gemm_time(rel, lambda n: "gemm" in n)
    report = rank_insights(rank_of(rel)).tensor_cores
    assert report is not None
    assert report.gemm_time_us == pytest.approx(gemm)
    assert report.tensor_core_ratio == 1.0 and report.fix is None


def _with_input_dims(rel: str):  # type: ignore[no-untyped-def]
    """The rank with the `Input Dims` arg of every cpu_op added from the raw file (matched on the
    event's position in traceEvents)."""
    rank = rank_of(rel)
    dims = {
        i: e["args"]["Input Dims"]
        for i, e in enumerate(raw.events(rel))
        if e.get("cat") == "cpu_op" and "Input Dims" in (e.get("args") or {})
    }
    args = dict(rank.args)
    for row, index in enumerate(rank.index.tolist()):
        if index in dims:
            args[row] = {**args.get(row, {}), "Input Dims": dims[index]}
    return dataclasses.replace(rank, args=args)


def test_misaligned_shapes_from_recorded_dims() -> None:
    """trace_diff/control records shapes; its aten::mm [[1024, 100], [100, 256]] has K = 100."""
    rel = raw.CONTROL
    ops = MATMUL_OPS
    matmuls = [
        e
        for e in raw.complete(rel)
        if e["cat"] == "cpu_op" and e["name"] in ops and "Input Dims" in e["args"]
    ]
    report = rank_insights(_with_input_dims(rel)).tensor_cores
    assert report is not None
    assert report.matmul_ops_with_shapes == len(matmuls)
    mm_100 = sum(
        1
        for e in matmuls
        if e["name"] == "aten::mm" and e["args"]["Input Dims"] == [[1024, 100], [100, 256]]
    )
    assert report.misaligned_ops is not None and report.misaligned_ops >= mm_100 > 0
    assert report.fix is not None and "multiples of 8" in report.fix


def test_flattened_batch_dims_are_not_misaligned() -> None:
    """Qwen on H100: linear on [16, 559, 1024] is a GEMM with M = 16·559 = 8944, aligned."""
    report = rank_insights(_with_input_dims(raw.H100_QWEN)).tensor_cores
    assert report is not None and report.matmul_ops_with_shapes
    assert all("559, 1024], [1024" not in ex.dims for ex in report.misaligned_examples)


def test_no_shapes_recorded_is_none() -> None:
    """nccl_data was recorded without record_shapes: no op has Input Dims."""
    rel = raw.NCCL
    assert not any("Input Dims" in (e.get("args") or {}) for e in raw.events(rel))
    report = rank_insights(rank_of(rel)).tensor_cores
    assert report is not None
    assert report.matmul_ops_with_shapes is None and report.misaligned_ops is None


def test_loader_shapes_give_the_same_answer() -> None:
    """The loader keeps Input Dims of matmul ops itself; the result equals the injected one."""
    direct = rank_insights(rank_of(raw.CONTROL)).tensor_cores
    injected = rank_insights(_with_input_dims(raw.CONTROL)).tensor_cores
    assert direct is not None and injected is not None
    assert direct.matmul_ops_with_shapes == injected.matmul_ops_with_shapes
    assert direct.misaligned_ops == injected.misaligned_ops
