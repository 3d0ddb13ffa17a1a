"""Parameter counts from config must equal HF's instantiated counts (fixtures/models/SOURCES.md)."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import model_names, resolve_model
from gpuwarden.catalog.models import suggest_models
from gpuwarden.errors import (
    CorruptInputError,
    EnvironmentProblemError,
    InvalidConfigError,
    UnknownNameError,
)
from tests.conftest import FIXTURES

# A row of the SOURCES.md table: | fixture | source | params (meta-instantiated) | ...
_ROW = re.compile(r"^\| (?P<name>[^|\s]+) \| [^|]+ \| (?P<params>[\d,]+) \|")


def _counts(sources_md: str) -> dict[str, int]:
    """The "params (meta-instantiated)" column of a models SOURCES.md."""
    counts = {}
    for line in sources_md.splitlines():
        if match := _ROW.match(line):
            counts[match["name"]] = int(match["params"].replace(",", ""))
    return counts


BUNDLED_SOURCES = resources.files("gpuwarden.catalog.data.models").joinpath("SOURCES.md")


@pytest.fixture(scope="module")
def instantiated_counts() -> dict[str, int]:
    """The bundled catalog's SOURCES.md: the shared fixtures' rows and the models added since."""
    return _counts(BUNDLED_SOURCES.read_text())


def _fixture_models() -> list[str]:
    return sorted(p.stem for p in (FIXTURES / "models").glob("*.json"))


def test_every_bundled_model_has_a_sources_row(
    instantiated_counts: dict[str, int], fixtures: Path
) -> None:
    assert set(model_names()) == set(instantiated_counts)
    shared = _counts((fixtures / "models" / "SOURCES.md").read_text())
    assert len(shared) == 46 and set(shared) <= set(model_names())
    assert {name: instantiated_counts[name] for name in shared} == shared


@pytest.mark.parametrize("name", model_names())
def test_parameter_count_matches_sources_md(name: str, instantiated_counts: dict[str, int]) -> None:
    assert resolve_model(name).total_parameters == instantiated_counts[name]


@pytest.mark.parametrize("name", _fixture_models())
def test_bundled_config_is_the_fixture(name: str, fixtures: Path) -> None:
    """The 46 shared fixtures are bundled unchanged (models added since have no fixture)."""
    bundled = resources.files("gpuwarden.catalog.data.models").joinpath(f"{name}.json")
    assert json.loads(bundled.read_text()) == json.loads(
        (fixtures / "models" / f"{name}.json").read_text()
    )


def test_names_are_case_insensitive_and_hub_ids_use_their_tail() -> None:
    assert resolve_model("llama-2-7B-HF").name == "Llama-2-7b-hf"
    assert resolve_model("meta-llama/Llama-2-7b-hf").name == "Llama-2-7b-hf"


def test_unknown_model_suggests_close_names() -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_model("Llama-2-7b")
    assert "Llama-2-7b-hf" in info.value.suggestions
    assert info.value.reference == "unknown-model"


def test_did_you_mean_reads_past_an_organisation_prefix() -> None:
    # "Lama-3-8B": the catalog name is Meta-Llama-3-8B; people leave the prefix out.
    assert suggest_models("Lama-3-8B")[0] == "Meta-Llama-3-8B"
    assert suggest_models("llama-3-70b")[0] == "Meta-Llama-3-70B"
    assert suggest_models("meta-llama/Lama-3-8B")[0] == "Meta-Llama-3-8B"
    assert suggest_models("mixtral")[0] == "Mixtral-8x7B-v0.1"


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_suggestions_are_catalog_names_for_any_text(typed: str) -> None:
    names = suggest_models(typed)
    assert len(names) <= 3 and set(names) <= set(model_names())


def test_hub_id_not_bundled_is_an_offline_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Offline by setting, so the test never reaches the real Hub whatever the machine's network.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GPUWARDEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model("someone/not-a-bundled-model")
    assert info.value.reference == "model-hub-unreachable"


def test_local_config_json(tmp_path: Path, fixtures: Path) -> None:
    cfg = json.loads((fixtures / "models" / "Qwen2.5-7B.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = resolve_model(str(tmp_path / "config.json"))
    assert spec.total_parameters == resolve_model("Qwen2.5-7B").total_parameters
    assert resolve_model(str(tmp_path)).total_parameters == spec.total_parameters
    assert spec.source == str(tmp_path / "config.json")


def test_garbage_and_missing_fields_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(CorruptInputError, match=re.escape(str(bad))):
        resolve_model(str(bad))
    bad.write_text("[1, 2]")
    with pytest.raises(CorruptInputError, match="JSON object"):
        resolve_model(str(bad))
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    with pytest.raises(InvalidConfigError, match="num_hidden_layers") as info:
        resolve_model(str(bad))
    assert info.value.reference == "config-field-missing"


def test_unsupported_architecture_lists_the_supported_ones(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "rwkv", "hidden_size": 768}))
    with pytest.raises(InvalidConfigError, match="'rwkv'") as info:
        resolve_model(str(path))
    assert info.value.reference == "unsupported-architecture"
    assert "llama" in (info.value.hint or "")


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(CorruptInputError, match=r"missing\.json") as info:
        resolve_model(str(tmp_path / "missing.json"))
    assert info.value.reference == "config-unreadable"


def test_names_the_os_refuses_as_paths_are_clear_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GPUWARDEN_CACHE_DIR", str(tmp_path))
    # Longer than any file name the OS accepts: still just an unknown model.
    with pytest.raises(UnknownNameError):
        resolve_model("x" * 300)
    # "~user" that does not exist cannot be expanded: an unreadable config, not a crash.
    with pytest.raises(CorruptInputError) as info:
        resolve_model("~nosuchuser-gpuwarden/config.json")
    assert info.value.reference == "config-unreadable"
