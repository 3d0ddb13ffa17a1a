"""Held-out config.json files of models the catalog does not bundle
(tests/data/model_configs_heldout/SOURCES.md): three real hub configs, and the default config of
every causal-LM model_type transformers 5.24 knows (arch/, written by make_arch_set.py). `plan`
reads each one and counts the parameters transformers counts, or refuses it with exit 2 and a
reference -- never reads an architecture it does not model as one it does. The truth is in
expected.csv (transformers on the meta device), so transformers is not needed here, except by
the probe of the model_type aliases (marked torch)."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import ALIASES
from gpuwarden.cli.main import main

HELDOUT = Path(__file__).resolve().parent.parent / "data" / "model_configs_heldout"

# Exact: the family normalisers count what transformers builds, parameter for parameter.
TOLERANCE = 0.0


def _rows() -> list[dict[str, str]]:
    with (HELDOUT / "expected.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


ROWS = _rows()
READ = [row for row in ROWS if row["expect"] == "read"]


@pytest.mark.parametrize("row", READ, ids=[row["file"] for row in READ])
def test_parameter_count_matches_transformers(row: dict[str, str]) -> None:
    spec = resolve_model(str(HELDOUT / row["file"]))
    truth = int(row["params_truth"])
    assert abs(spec.total_parameters - truth) <= TOLERANCE * truth


@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("row", ROWS, ids=[row["file"] for row in ROWS])
def test_plan_answers_or_refuses_cleanly(
    row: dict[str, str], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["plan", str(HELDOUT / row["file"]), "--mode", mode, "--gpu", "H100-80GB", "--json"]
    )
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if row["expect"] == "read":
        assert code == 0
        assert json.loads(out)["model"]["parameters"] == int(row["params_truth"])
    else:
        assert code == 2
        refusal = json.loads(out or err)  # the gpuwarden.error/1 object: reference and hint
        assert refusal["reference"] and refusal["hint"]


def _make_arch_set() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_arch_set", HELDOUT / "make_arch_set.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.torch
@pytest.mark.parametrize("model_type", sorted(ALIASES))
def test_an_alias_counts_what_transformers_builds_for_every_variant(model_type: str) -> None:
    """A model_type read as another family's: its default config, each boolean flipped, each
    key dropped and each bias/tying key added is counted right or refused, never misread."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    assert _make_arch_set().probe(model_type, ALIASES[model_type].family) == []


def _plan_refusal(
    cfg: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    code = main(["plan", str(path), "--mode", "infer", "--gpu", "H100-80GB", "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    refusal = json.loads(out or err)
    assert refusal["hint"]
    return str(refusal["reference"])


def test_an_alias_refuses_a_config_that_leaves_out_a_key_whose_default_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ExaoneConfig defaults num_key_value_heads to a number, Llama to num_attention_heads
    cfg = json.loads((HELDOUT / "arch" / "exaone.json").read_text(encoding="utf-8"))
    del cfg["num_key_value_heads"]
    assert _plan_refusal(cfg, tmp_path, capsys) == "config-field-missing"


def test_an_alias_refuses_a_key_that_adds_weights_its_family_has_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GraniteMoE's attention_bias biases o_proj too; Mixtral's attention has no bias at all
    cfg = json.loads((HELDOUT / "arch" / "granitemoe.json").read_text(encoding="utf-8"))
    assert _plan_refusal({**cfg, "attention_bias": True}, tmp_path, capsys) == (
        "unsupported-architecture"
    )
