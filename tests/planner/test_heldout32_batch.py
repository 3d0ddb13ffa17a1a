"""Held-out batch 32 (benchmarks/data/validation.csv V574): blogs and write-ups outside GitHub.

V574 is Experiment 1 of a personal blog post on vLLM memory on one RTX 4090
(ermolushka.github.io): Meta-Llama-3.1-8B-Instruct in FP16 under vLLM 0.10.1.1 with
``gpu_memory_utilization=0.9``, ``max_model_len=4096`` and ``enforce_eager=True``, printed as
"GPU Memory Used 22,631MB (92.1% of VRAM)". The page's share of the card fixes the unit (MiB of the
4090's 24,564 MiB) and the counter (device-level used memory). vLLM fills its budget (utilization
x total) with weights, profiled activations, non-torch memory and the KV pool; the part of the CUDA
context created before vLLM's baseline snapshot comes on top (benchmarks/README.md, batch 32)."""

from __future__ import annotations

import functools

from benchmarks.measured_rows import Kind, MappedRow, flagged, map_validation

from gpuwarden.planner import plan_memory

MIB = 2**20
ROW = "V574"
MEASURED_MIB = 22631
# the page: "22,631MB (92.1% of VRAM)"
PRINTED_SHARE_OF_CARD = 0.921
SHARE_ROUNDING = 0.0005
# README, batch 32: planned 22.02 GiB against 22.10 measured (-0.3 %)
ERROR_TOLERANCE = 0.01


@functools.cache
def _row() -> MappedRow:
    """The batch's one row as mapped (mapping every row takes a second)."""
    return next(m for m in map_validation() if m.row.id == ROW)


def test_the_row_maps_as_a_scored_nvidia_smi_reading() -> None:
    mapped = _row()
    assert mapped.request is not None, mapped.error
    assert flagged(mapped.row) is None
    assert not mapped.row.oom
    assert mapped.eligible
    assert mapped.kind.kind is Kind.NVIDIA_SMI


def test_the_printed_share_of_the_card_reads_the_figure_as_mib() -> None:
    request = _row().request
    assert request is not None
    share = MEASURED_MIB * MIB / request.gpu.memory_bytes
    assert abs(share - PRINTED_SHARE_OF_CARD) < SHARE_ROUNDING


def test_the_plan_fills_vllms_budget_and_matches_the_measured_used_memory() -> None:
    mapped = _row()
    assert mapped.request is not None
    planned = plan_memory(mapped.request).predicted.nvidia_smi_used_bytes
    measured = MEASURED_MIB * MIB
    budget = mapped.request.gpu_memory_utilization * mapped.request.gpu.memory_bytes
    # the device shows more than vLLM's budget: the context created before its snapshot
    assert planned > budget
    assert measured > budget
    assert abs(planned - measured) / measured < ERROR_TOLERANCE
