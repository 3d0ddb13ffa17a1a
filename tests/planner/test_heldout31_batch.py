"""Held-out batch 31 (benchmarks/data/validation.csv V544-V573): model makers' and NVIDIA's recipes.

V544 is NVIDIA-NeMo/Automodel PR #2673 (Llama-3.3-70B SFT, FSDP2 x PP 8 interleaved on 32 H100,
out of memory in the first backward); V545 is NVIDIA-NeMo/Megatron-Bridge PR #3107 (Llama-3-70B
SFT in fp8, out of memory in 30-60 % of runs: AMBIGUOUS, not scored). V546-V573 are the Qwen docs'
speed benchmark (batch 1, exactly 2,048 new tokens): the Qwen2 revision ran transformers 4.38.2
(``torch.cuda.max_memory_allocated`` in GiB), the Qwen3 revision transformers 4.51.3, whose
figures equal the weights plus the KV cache of the final length, with no room for the prefill's
intermediates: a decode-end reading, AMBIGUOUS.

transformers before 4.45 computes the logits of every prompt position and upcasts them
(``logits = self.lm_head(hidden_states); logits = logits.float()``): at the prefill a bf16
[prompt, vocabulary] tensor and its fp32 copy exist together. The planner counts the last
position only by default (the 4.45+ behaviour, right for the Qwen3 rows). The Qwen2 rows' gap grew
with the prompt at exactly that rate (measured before any change); the rows now name their release
(``--transformers-version 4.38.2``, planner/inference.py), and the last test checks that the
planned growth from a 6,144- to a 30,720-token prompt is the measured one (benchmarks/README.md,
batch 31)."""

from __future__ import annotations

import functools

import pytest
from benchmarks.measured_rows import MappedRow, flagged, map_validation

from gpuwarden.catalog.models import load_bundled
from gpuwarden.planner import plan_memory

GIB = 2**30
BATCH = tuple(f"V{n}" for n in range(544, 574))
PIPELINE_OOM_ROW = "V544"
FLAKY_OOM_ROW = "V545"
QWEN3_ROWS = tuple(f"V{n}" for n in range(558, 574))
AMBIGUOUS_ROWS = (FLAKY_OOM_ROW, *QWEN3_ROWS)
# the Qwen3 rows at the longest input, whose cache then holds 30,720 + 2,048 positions
QWEN3_LONG_PROMPT_ROWS = ("V561", "V565", "V569", "V573")
FINAL_LENGTH = 30720 + 2048
# (row at input 6,144, row at input 30,720, catalog shape) of the Qwen2 revision
QWEN2_PROMPT_PAIRS = (("V547", "V549", "Qwen2.5-0.5B"), ("V551", "V553", "Qwen2.5-1.5B"))
SHORT_PROMPT, LONG_PROMPT = 6144, 30720
BF16_BYTES = 2
FP32_BYTES = 4
# README: the Qwen3 figures at 30,720 tokens are weights + cache within 0.05 GiB
DECODE_END_TOLERANCE_GIB = 0.1
# README: the flaky job is planned on the card's capacity
CAPACITY_TOLERANCE = 0.05


@functools.cache
def _batch() -> dict[str, MappedRow]:
    """The batch's rows as mapped, once for the module (mapping every row takes a second)."""
    return {m.row.id: m for m in map_validation() if m.row.id in BATCH}


def _planned_allocated_gib(row_id: str) -> float:
    request = _batch()[row_id].request
    assert request is not None
    return plan_memory(request).predicted.max_allocated_bytes / GIB


def _measured_gib(row_id: str) -> float:
    measured = _batch()[row_id].row.measured_gib
    assert measured is not None
    return measured


def test_every_row_maps_and_the_flaky_job_and_qwen3_readings_are_left_out() -> None:
    rows = _batch()
    assert set(rows) == set(BATCH)
    for row_id, mapped in rows.items():
        assert mapped.request is not None, mapped.error
        if row_id in AMBIGUOUS_ROWS:
            assert flagged(mapped.row) == "AMBIGUOUS"
            continue
        assert flagged(mapped.row) is None
        # OOM rows count in the OOM classification, the others in the error statistics
        assert mapped.row.oom == (row_id == PIPELINE_OOM_ROW)
        assert mapped.eligible != mapped.row.oom


def test_pipeline_parallel_sft_on_h100_is_caught_as_out_of_memory() -> None:
    mapped = _batch()[PIPELINE_OOM_ROW]
    assert mapped.request is not None
    assert mapped.row.oom
    plan = plan_memory(mapped.request)
    assert mapped.gpu_memory_bytes is not None
    assert plan.predicted.nvidia_smi_used_bytes > mapped.gpu_memory_bytes
    assert plan.fits is False


def test_flaky_fp8_job_is_planned_at_the_cards_capacity() -> None:
    mapped = _batch()[FLAKY_OOM_ROW]
    assert mapped.request is not None
    plan = plan_memory(mapped.request)
    assert plan.usable_bytes is not None
    assert plan.predicted.nvidia_smi_used_bytes == pytest.approx(
        plan.usable_bytes, rel=CAPACITY_TOLERANCE
    )


@pytest.mark.parametrize("row_id", QWEN3_LONG_PROMPT_ROWS)
def test_qwen3_long_prompt_figures_are_weights_plus_the_final_cache(row_id: str) -> None:
    request = _batch()[row_id].request
    assert request is not None
    plan = plan_memory(request)
    assert plan.inference is not None
    weights = plan.total_parameters * BF16_BYTES
    cache = plan.inference.kv_bytes_per_token * FINAL_LENGTH
    assert _measured_gib(row_id) == pytest.approx(
        (weights + cache) / GIB, abs=DECODE_END_TOLERANCE_GIB
    )


@pytest.mark.parametrize(("short_row", "long_row", "shape"), QWEN2_PROMPT_PAIRS)
def test_transformers_438_growth_with_the_prompt_is_planned(
    short_row: str, long_row: str, shape: str
) -> None:
    vocab = load_bundled(shape).vocab_size
    measured_growth = _measured_gib(long_row) - _measured_gib(short_row)
    planned_growth = _planned_allocated_gib(long_row) - _planned_allocated_gib(short_row)
    # lm_head's bf16 output and its fp32 copy for each extra prompt position: most of the growth
    all_position_logits = (LONG_PROMPT - SHORT_PROMPT) * vocab * (BF16_BYTES + FP32_BYTES) / GIB
    assert all_position_logits > 0.8 * measured_growth
    assert planned_growth == pytest.approx(measured_growth, rel=0.1)
