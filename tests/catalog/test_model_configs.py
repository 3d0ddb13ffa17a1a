"""Parameter counts from config must equal HF's instantiated counts (fixtures/models/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.errors import CorruptInputError, InvalidConfigError, UnknownNameError

# Instantiated on the meta device with transformers 5.23 (fixtures/models/SOURCES.md).
PUBLISHED = {
    "Llama-2-7b-hf": 6_738_415_616,
    "Llama-2-70b-hf": 68_976_648_192,
    "Llama-3.1-8B": 8_030_261_248,
    "Llama-3.2-1B": 1_235_814_400,
    "Mistral-7B-v0.1": 7_241_732_096,
    "Mixtral-8x7B-v0.1": 46_702_792_704,
    "Qwen2.5-0.5B": 494_032_768,
    "Qwen2.5-72B": 72_706_203_648,
    "Phi-3-mini-4k-instruct": 3_821_079_552,
}


@pytest.mark.parametrize(("name", "expected"), sorted(PUBLISHED.items()))
def test_parameter_count_matches_hf(name: str, expected: int) -> None:
    assert resolve_model(name).total_parameters == expected


def test_names_are_case_insensitive_and_hub_ids_use_their_tail() -> None:
    assert resolve_model("llama-2-7B-HF").name == "Llama-2-7b-hf"
    assert resolve_model("meta-llama/Llama-2-7b-hf").name == "Llama-2-7b-hf"


def test_unknown_model_suggests_close_names() -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_model("Llama-2-7b")
    assert "Llama-2-7b-hf" in info.value.suggestions


def test_local_config_json(tmp_path: Path, fixtures: Path) -> None:
    cfg = json.loads((fixtures / "models" / "Qwen2.5-7B.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = resolve_model(str(tmp_path / "config.json"))
    assert spec.total_parameters == 7_615_616_512
    assert resolve_model(str(tmp_path)).total_parameters == 7_615_616_512


def test_garbage_and_missing_fields_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(CorruptInputError, match=str(bad)):
        resolve_model(str(bad))
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    with pytest.raises(InvalidConfigError, match="num_hidden_layers"):
        resolve_model(str(bad))
