"""Held-out batch 26 (benchmarks/data/validation.csv V500-V502): torchtune runs' printed memory.

Two of the batch's printed numbers check the planner beyond the rows' own scores (both rows are
OOM or AMBIGUOUS, so planner_accuracy.py scores none of them as an error):

* meta-pytorch/torchtune issue #2071 (V502) fails in FSDP2's ``FSDPParam.init_all_gather_outputs``
  (torch 2.5.1 ``torch/distributed/_composable/fsdp/_fsdp_param.py``), which allocates one
  all-gather output per parameter, ``numel * world_size`` elements: its "Tried to allocate
  1.96 GiB" is one whole embedding / output table of Llama-3.1-70B in bf16.
* issue #856 (V500): the maintainer's dummy-tensor runs of the April 2024 LoRA config, "[1, 2048]
  and [1, 4096] ... Both of these seem to run under 24GB peak memory" (torchtune's
  ``memory_stats_log`` of that month divides by 1e9 and prints "GB")."""

from __future__ import annotations

from dataclasses import replace

from benchmarks.measured_rows import map_validation

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory

GIB = 2**30
BF16_BYTES = 2
ISSUE2071_TRIED_TO_ALLOCATE_GIB = 1.96  # torch's OOM message prints GiB to two decimals
ISSUE856_BOUND_BYTES = 24 * 10**9  # "under 24GB", torchtune's GB = 1e9 bytes
ISSUE856_SHORTER_RUN_TOKENS = 2048


def test_issue2071_failing_all_gather_is_one_llama31_70b_table() -> None:
    model = resolve_model("Llama-3.1-70B")
    table_bytes = model.vocab_size * model.hidden_size * BF16_BYTES
    assert round(table_bytes / GIB, 2) == ISSUE2071_TRIED_TO_ALLOCATE_GIB


def test_issue856_shorter_dummy_run_is_planned_under_24gb() -> None:
    (row,) = [mapped for mapped in map_validation() if mapped.row.id == "V500"]
    assert row.request is not None
    shorter = replace(row.request, seq_len=ISSUE856_SHORTER_RUN_TOKENS)
    assert plan_memory(shorter).predicted.max_allocated_bytes < ISSUE856_BOUND_BYTES
