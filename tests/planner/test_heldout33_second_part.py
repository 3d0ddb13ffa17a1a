"""Held-out batch 33, second part (benchmarks/data/validation.csv V578-V583): pre-training
codebases' OOM reports on models the catalog lacks, planned from benchmarks/data/pretrain_configs/.

Each config must reproduce the parameter count its source states (pretrain_configs/SOURCES.md),
and every row must map as a scored OOM row. The rows the plan catches are checked against the
model-state arithmetic the sources give; the three misses are reported in benchmarks/README.md
(batch 33, second part) and not asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.catalog.configs import normalise
from gpuwarden.types.model import ModelSpec
from tests.planner.test_heldout33_batch import assert_maps_as_a_scored_oom
from tests.planner.validation_rows import component_bytes, mapped_rows, planned

ROWS = ("V578", "V579", "V580", "V581", "V582", "V583")
CAUGHT = ("V580", "V581", "V582")
# one data-parallel rank: nothing to shard
UNSHARDED = ("V581", "V582")
CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "pretrain_configs"

# counts the sources state: the LLaMA-65B checkpoints' 65.2B; ColossalAI's zero benchmark config
# `_gpt2_10b = dict(..., numel=10279047168)`; the GPT-NeoX-20B paper's total
STATED_PARAMETERS = {
    "llama-65b.json": 65_285_660_672,
    "gpt2-10b-colossalai.json": 10_279_047_168,
    "gpt-neox-20b.json": 20_554_567_680,
}

# llm-foundry scripts/train/benchmarking/README.md: NumParams of its "7b" at sequence length 2048;
# that benchmark model adds learned positions and Linear / LayerNorm biases to mosaicml/mpt-7b and
# builds the yamls' 50368-token vocabulary (the published config has 50432)
FOUNDRY_7B_PARAMETERS = 6_658_859_008
FOUNDRY_SEQ_LEN = 2048
FOUNDRY_VOCAB = 50368

# bytes per parameter of the model state the threads' arithmetic counts: fp32 (or fp16 with an
# fp32 master) weights, gradients and Adam's two fp32 moments
ADAM_MIXED_STATE_BYTES = 16


def _spec(name: str) -> ModelSpec:
    cfg = json.loads((CONFIGS / name).read_text(encoding="utf-8"))
    return normalise(name, cfg, name)


@pytest.mark.parametrize(("name", "count"), sorted(STATED_PARAMETERS.items()))
def test_config_reproduces_the_stated_parameter_count(name: str, count: int) -> None:
    assert _spec(name).total_parameters == count


def test_mpt_config_matches_llm_foundrys_benchmark_count() -> None:
    spec = _spec("mpt-7b.json")
    h, layers = spec.hidden_size, spec.num_layers
    # per block: Wqkv, out_proj, up_proj, down_proj biases and two LayerNorm biases; norm_f's bias
    biases = layers * (3 * h + h + 4 * h + h + 2 * h) + h
    positions = FOUNDRY_SEQ_LEN * h
    vocab_rows = (spec.vocab_size - FOUNDRY_VOCAB) * h
    assert spec.total_parameters - vocab_rows + positions + biases == FOUNDRY_7B_PARAMETERS


@pytest.mark.parametrize("row", ROWS)
def test_each_row_maps_as_a_scored_oom(row: str) -> None:
    assert_maps_as_a_scored_oom(mapped_rows()[row])


@pytest.mark.parametrize("row", CAUGHT)
def test_caught_rows_exceed_the_cards_usable_memory(row: str) -> None:
    mapped = mapped_rows()[row]
    assert mapped.gpu_memory_bytes is not None
    assert planned(row).predicted.nvidia_smi_used_bytes > mapped.gpu_memory_bytes


@pytest.mark.parametrize("row", UNSHARDED)
def test_one_data_parallel_rank_keeps_the_whole_model_state(row: str) -> None:
    """gpt-neox #606 (tensor parallel 2 x pipe 1 on 2 GPUs: ZeRO-1 over one rank) and
    llm-foundry #468 (FSDP on one GPU) shard nothing: each GPU keeps 16 B of state for every
    parameter it holds, more than the card before any activation."""
    mapped = mapped_rows()[row]
    request = mapped.request
    assert request is not None and mapped.gpu_memory_bytes is not None
    local = request.model.total_parameters // request.tp
    plan = planned(row)
    state = sum(
        component_bytes(plan, key) for key in ("parameters", "gradients", "optimizer_states")
    )
    assert state >= ADAM_MIXED_STATE_BYTES * local > mapped.gpu_memory_bytes
