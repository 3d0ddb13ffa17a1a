"""validation.csv rows may name a held-out config file as `arch_source` (batch 13, V360+): the
path is read from the repository root, so the row plans the same from any working directory."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from benchmarks.measured_rows import arch_model_argument, map_validation, validation_csv

ROOT = Path(__file__).resolve().parents[2]
HELDOUT = "tests/data/model_configs_heldout/Qwen3-Next-80B-A3B-Instruct.json"


def test_catalog_names_pass_through() -> None:
    assert arch_model_argument("Llama-3.1-8B") == "Llama-3.1-8B"
    assert arch_model_argument(" Qwen2.5-7B ") == "Qwen2.5-7B"


def test_config_paths_are_read_from_the_repository_root() -> None:
    resolved = Path(arch_model_argument(HELDOUT))
    assert resolved == ROOT / HELDOUT
    assert resolved.is_file()
    assert arch_model_argument(str(ROOT / HELDOUT)) == str(ROOT / HELDOUT)


def _heldout_ids() -> list[str]:
    with validation_csv().open(newline="", encoding="utf-8") as f:
        return [r["id"] for r in csv.DictReader(f) if r["arch_source"].endswith(".json")]


def test_heldout_rows_map_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _heldout_ids()
    assert ids, "no validation row names a held-out config"
    monkeypatch.chdir(tmp_path)
    assert Path(os.getcwd()) == tmp_path
    mapped = {m.row.id: m for m in map_validation() if m.row.id in ids}
    assert set(mapped) == set(ids)
    for row_id, m in mapped.items():
        assert m.request is not None, f"{row_id}: {m.error}"
    # V360 is Qwen3-Next-80B-A3B (the held-out config): 48 blocks, 12 of them attention.
    spec = mapped["V360"].request.model  # type: ignore[union-attr]
    assert spec.num_layers == 48
    assert spec.attention_layers == 12
