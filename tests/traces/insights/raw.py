"""Independent reading of trace fixtures for the insight tests: orjson + plain Python, no
gpuwarden code, so the numbers tests compare against do not come from the code under test."""

from __future__ import annotations

import gzip
from functools import cache
from pathlib import Path
from typing import Any

import orjson

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "traces"
GPU_CATS = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"})

CONTROL = "trace_diff/control/control.json.gz"
TEST = "trace_diff/test/test.json.gz"
NCCL = "nccl_parser_config/nccl_data.json.gz"
AMD = "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
CPU_ONLY = "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
NON_GPU = "rank_non_gpu/rank_non_gpu.json.gz"
CUPTI = "cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"
NS = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
B200 = "tracelens_b200_eager/eager_trace.json.gz"
H100_QWEN = "tracelens_h100_hf_inference/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
H100_BERT = "tracelens_h100_hf_inference/gaunernst_bert-small-uncased__1016001.json.gz"
TRITON = "triton_example/triton_example.json.gz"
SIMPLE_ADD = "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"
MEGATRON = "astra_megatron_tp8_a100"


def megatron(rank: int) -> str:
    return f"{MEGATRON}/megatron_kineto_{rank}.json.gz"


@cache
def events(rel: str) -> tuple[dict[str, Any], ...]:
    data = (FIXTURES / rel).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return tuple(orjson.loads(data)["traceEvents"])


def complete(rel: str) -> list[dict[str, Any]]:
    """X events HTA keeps: with dur and cat, cat != Trace."""
    return [
        e
        for e in events(rel)
        if e.get("dur") is not None and e.get("cat") is not None and e.get("cat") != "Trace"
    ]


def gpu_events(rel: str) -> list[dict[str, Any]]:
    return [e for e in complete(rel) if e["cat"] in GPU_CATS]


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def covered(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of intervals inside [lo, hi]."""
    total = 0.0
    for s, e in union(intervals):
        total += max(0.0, min(e, hi) - max(s, lo))
    return total


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length covered by both unions."""
    ua, ub = union(a), union(b)
    total, i, j = 0.0, 0, 0
    while i < len(ua) and j < len(ub):
        s, e = ua[i]
        t, u = ub[j]
        total += max(0.0, min(e, u) - max(s, t))
        if e < u:
            i += 1
        else:
            j += 1
    return total


def steps(rel: str) -> list[dict[str, Any]]:
    return sorted(
        (
            e
            for e in complete(rel)
            if e["cat"] == "user_annotation" and str(e["name"]).startswith("ProfilerStep#")
        ),
        key=lambda e: e["ts"],
    )
