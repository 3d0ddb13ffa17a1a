"""Held-out batch 28 (benchmarks/data/validation.csv V530-V539): PEFT / GaLore memory tables.

V530-V538 are PEFT's MetaMathQA method-comparison results (LoRA-family runs of Llama-3.2-3B on
an L40S; `max_memory_reserved` over the whole run, evaluations included, with data-dependent
batch lengths: AMBIGUOUS like V201-V204). V539 is GaLore's README run (LLaMA-7B pre-training
with per-layer 8-bit GaLore-Adam on an RTX 4090, "22.8G" from an unnamed counter: AMBIGUOUS).

The planner has no knob for GaLore's projection. GaLoreAdamW8bit (galore_torch/adamw8bit.py @
jiaweizzhao/GaLore 1317b5f7) swaps each projected weight's gradient for its low-rank projection
before bitsandbytes' ``Optimizer2State.init_state``, so the 8-bit states take the projected
shape, and ``GaLoreProjector`` (galore_projector.py, same commit) keeps one orthogonal matrix
per weight in the gradient's dtype: the 'std' projection keeps ``rank`` rows of the smaller
side. The plan counts bitsandbytes' 8-bit states on every full shape; the second test checks
the figures benchmarks/README.md quotes for that gap against the model's own shapes."""

from __future__ import annotations

import functools

import pytest
from benchmarks.measured_rows import MappedRow, flagged, map_validation

from gpuwarden.catalog.models import load_bundled
from gpuwarden.planner import plan_memory

GIB = 2**30
BATCH = tuple(f"V{number}" for number in range(530, 540))
GALORE_ROW = "V539"
# bitsandbytes' blockwise 8-bit Adam: two uint8 states per element and one fp32 absmax per
# 256-element block of each state.
BNB_8BIT_STATE_BYTES_PER_ELEMENT = 2 + 2 * 4 / 256
# scripts/single_gpu/llama_7b_checkpointing.sh: --rank 1024; torchrun_main.py projects every
# nn.Linear under "attn" / "mlp" (q, k, v, o, gate, up, down) and runs the model in bf16.
GALORE_RANK = 1024
BF16_BYTES = 2


@functools.cache
def _batch() -> dict[str, MappedRow]:
    """The batch's rows as mapped, once for the module (mapping every row takes a second)."""
    return {m.row.id: m for m in map_validation() if m.row.id in BATCH}


def _mapped(row_id: str) -> MappedRow:
    return _batch()[row_id]


@pytest.mark.parametrize("row_id", BATCH)
def test_batch_row_plans_and_stays_out_of_the_statistics(row_id: str) -> None:
    mapped = _mapped(row_id)
    assert mapped.request is not None
    assert flagged(mapped.row) == "AMBIGUOUS"
    assert plan_memory(mapped.request).peak_bytes > 0


def _galore_projected_elements(rows: int, cols: int) -> tuple[int, int]:
    """(state elements, projection-matrix elements) of one weight under the 'std' projection."""
    short_side, long_side = sorted((rows, cols))
    return long_side * GALORE_RANK, short_side * GALORE_RANK


def test_galore_row_plans_full_shape_8bit_states_where_galore_keeps_projected_ones() -> None:
    mapped = _mapped(GALORE_ROW)
    assert mapped.request is not None
    plan = plan_memory(mapped.request)
    model = load_bundled("Llama-2-7b-hf")
    assert plan.trainable_parameters == 6_738_415_616
    planned_states = plan.component("optimizer_states")
    assert planned_states == pytest.approx(
        plan.trainable_parameters * BNB_8BIT_STATE_BYTES_PER_ELEMENT, rel=1e-3
    )

    hidden, ffn = model.hidden_size, model.intermediate_size
    block_weights = [(hidden, hidden)] * 4 + [(ffn, hidden)] * 2 + [(hidden, ffn)]
    per_block = [_galore_projected_elements(rows, cols) for rows, cols in block_weights]
    projected_states = model.num_layers * sum(states for states, _ in per_block)
    projections = model.num_layers * sum(matrix for _, matrix in per_block)
    projected_weights = model.num_layers * sum(rows * cols for rows, cols in block_weights)
    other_states = plan.trainable_parameters - projected_weights  # embeddings, head, norms
    galore_states = (projected_states + other_states) * BNB_8BIT_STATE_BYTES_PER_ELEMENT
    galore_projections = projections * BF16_BYTES

    # benchmarks/README.md, batch 28: 12.75 GiB planned against 3.56 + 1.75 GiB GaLore keeps.
    assert planned_states / GIB == pytest.approx(12.75, abs=0.005)
    assert galore_states / GIB == pytest.approx(3.56, abs=0.005)
    assert galore_projections / GIB == pytest.approx(1.75, abs=0.005)
