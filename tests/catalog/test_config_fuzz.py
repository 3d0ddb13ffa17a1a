"""Mutated real configs never crash the normaliser: a ModelSpec, or an error naming the field."""

from __future__ import annotations

import csv
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import model_names, resolve_model
from gpuwarden.errors import CorruptInputError, InvalidConfigError
from gpuwarden.types.model import ModelSpec

_REAL = {
    name: json.loads(
        resources.files("gpuwarden.catalog.data.models").joinpath(f"{name}.json").read_text()
    )
    for name in model_names()
}
# The held-out configs plan reads (tests/data/model_configs_heldout): the families and aliases
# no bundled model exercises.
_HELDOUT_DIR = Path(__file__).parents[1] / "data" / "model_configs_heldout"
_HELDOUT = {
    row["file"].removeprefix("arch/").removesuffix(".json"): json.loads(
        (_HELDOUT_DIR / row["file"]).read_text()
    )
    for row in csv.DictReader((_HELDOUT_DIR / "expected.csv").read_text().splitlines())
    if row["expect"] == "read"
}

# What goes wrong in hand-edited or truncated configs.
_BAD_VALUES = st.one_of(
    st.integers(min_value=-(10**6), max_value=0),
    st.integers(min_value=10**9, max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def _mutation(
    draw: st.DrawFn, configs: dict[str, dict[str, Any]] = _REAL
) -> tuple[str, dict[str, Any], str]:
    """(model, mutated config, the key that was changed)."""
    name = draw(st.sampled_from(sorted(configs)))
    cfg = dict(configs[name])
    key = draw(st.sampled_from(sorted(cfg)))
    if draw(st.booleans()):
        del cfg[key]
    else:
        cfg[key] = draw(_BAD_VALUES)
    return name, cfg, key


def _load(path: Path) -> ModelSpec | InvalidConfigError | CorruptInputError:
    """The spec, or the input error; any other exception propagates and fails the test."""
    try:
        return resolve_model(str(path))
    except (InvalidConfigError, CorruptInputError) as exc:
        return exc


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_mutation())
def test_mutated_config_gives_a_spec_or_a_named_error(
    workdir: Path, case: tuple[str, dict[str, Any], str]
) -> None:
    _check_mutated(workdir, case)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_mutation(_HELDOUT))
def test_mutated_heldout_config_gives_a_spec_or_a_named_error(
    workdir: Path, case: tuple[str, dict[str, Any], str]
) -> None:
    _check_mutated(workdir, case)


def _check_mutated(workdir: Path, case: tuple[str, dict[str, Any], str]) -> None:
    name, cfg, key = case
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(cfg))  # NaN / Infinity are written as JSON's loose tokens
    outcome = _load(path)
    if isinstance(outcome, ModelSpec):
        assert outcome.total_parameters > 0
    else:
        assert str(path) in outcome.message
        assert key in outcome.message, outcome.message  # one change: the error is about that field
        assert outcome.hint


@pytest.mark.parametrize(
    ("key", "value", "reference"),
    [
        ("num_hidden_layers", -1, "config-field-invalid"),
        ("num_hidden_layers", 10**12, "config-field-invalid"),
        ("hidden_size", "4096", "config-field-invalid"),
        ("hidden_size", 4096.5, "config-field-invalid"),
        ("num_key_value_heads", 3, "config-field-invalid"),
        ("tie_word_embeddings", "yes", "config-field-invalid"),
        ("model_type", 7, "config-field-invalid"),
    ],
)
def test_typical_mistakes_have_stable_references(
    tmp_path: Path, key: str, value: object, reference: str
) -> None:
    cfg = {**_REAL["Llama-3.1-8B"], key: value}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(InvalidConfigError) as info:
        resolve_model(str(path))
    assert info.value.reference == reference
    assert key in info.value.message


def test_whole_number_floats_are_accepted(tmp_path: Path) -> None:
    cfg = {**_REAL["Llama-3.1-8B"], "hidden_size": 4096.0}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert (
        resolve_model(str(path)).total_parameters == resolve_model("Llama-3.1-8B").total_parameters
    )


def test_deeply_nested_json_is_corrupt_input(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CorruptInputError, match="nested too deeply"):
        resolve_model(str(path))
