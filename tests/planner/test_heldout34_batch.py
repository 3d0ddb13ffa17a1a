"""Held-out batch 34 (benchmarks/data/validation.csv V584-V585): vllm-project/vllm #7553, a vLLM
0.5.4 start of Yi-1.5-34B-Chat at tensor parallel 4 on RTX 4090s, read with nvidia-smi after
start-up with CUDA graphs (V584) and with --enforce-eager (V585).

The model is not in the catalog: it is planned from
benchmarks/data/vllm_configs/Yi-1.5-34B.json, the published config.json's numbers. The rows'
misses are reported in benchmarks/README.md (batch 34) and not asserted here; these tests pin the
inputs and the V0 budget the rows are read against."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from benchmarks.measured_rows import Kind, flagged

from gpuwarden.catalog.configs import normalise
from gpuwarden.types.model import ModelSpec
from gpuwarden.units import MIB
from tests.planner.validation_rows import component_bytes, mapped_rows, planned

ROWS = ("V584", "V585")
EAGER_ROW = "V585"
CONFIG = (
    Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "vllm_configs" / "Yi-1.5-34B.json"
)
# the thread's nvidia-smi: '24564MiB' total per card; --gpu-memory-utilization 0.9
CARD_TOTAL_MIB = 24564
UTILIZATION = 0.9
TENSOR_PARALLEL = 4


@functools.cache
def _spec() -> ModelSpec:
    return normalise(CONFIG.stem, json.loads(CONFIG.read_text(encoding="utf-8")), str(CONFIG))


def test_config_counts_the_llama_shapes_it_states() -> None:
    """Untied embedding and head, and per layer q/o (h x h), k/v (h x 8 heads x 128), the SwiGLU
    MLP (3 x h x intermediate) and two RMSNorm weights; one final norm."""
    spec = _spec()
    h, ffn, vocab = 7168, 20480, 64000
    kv_width = 8 * (h // 56)
    per_layer = 2 * h * h + 2 * h * kv_width + 3 * h * ffn + 2 * h
    expected = 2 * vocab * h + 60 * per_layer + h
    assert spec.total_parameters == expected == 34_388_917_248  # the hub's "34.4B"


@pytest.mark.parametrize("row", ROWS)
def test_each_row_maps_as_a_scored_nvidia_smi_row(row: str) -> None:
    mapped = mapped_rows()[row]
    assert mapped.request is not None, mapped.error
    assert flagged(mapped.row) is None
    assert mapped.eligible
    assert mapped.kind.kind is Kind.NVIDIA_SMI
    assert mapped.request.tp == TENSOR_PARALLEL
    assert mapped.request.model.total_parameters == _spec().total_parameters


def test_v0_budget_is_the_utilization_of_the_cards_total() -> None:
    """vLLM V0 (worker.py determine_num_available_blocks) sizes the KV pool to fill
    utilization x total minus the profiled peak: the plan's nvidia-smi is that budget."""
    budget = UTILIZATION * CARD_TOTAL_MIB * MIB
    assert planned(EAGER_ROW).predicted.nvidia_smi_used_bytes == pytest.approx(budget, abs=MIB)


def test_eager_idle_reading_is_the_budget_less_the_released_profile_blocks() -> None:
    """determine_num_available_blocks ends with gc.collect() and torch.cuda.empty_cache(): the
    profile run's activation blocks go back to the driver before the KV pool is allocated, so
    an idle card reads the budget less the activation peak (the plan's serving peak holds them)."""
    plan = planned(EAGER_ROW)
    mapped = mapped_rows()[EAGER_ROW]
    assert mapped.row.measured_gib is not None
    idle = plan.predicted.nvidia_smi_used_bytes - component_bytes(plan, "activations")
    assert idle / 2**30 == pytest.approx(mapped.row.measured_gib, rel=0.005)
