"""Issue 13, a hostile user's third pass over `plan`'s config readers: a config.json that is valid
JSON but names an impossible model.

A router that picks more experts per token than the layer has (num_experts_per_tok, or a family's
own top-k key, past the routed experts) was planned by 23 of the 52 MoE configs' readers (Mixtral,
DeepSeek V2/V3, GLM-4 MoE, Jamba, Nemotron-H, OLMoE, PhiMoE ... built their MoeSpec without the
check the shared helper made): a plan for a model that cannot load, as torch.topk over
num_experts scores raises "selected index k out of range". Now every family's spec is checked
once where the configs are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwarden.catalog.models import load_config_file
from gpuwarden.errors import GpuwardenError, InvalidConfigError
from gpuwarden.types.model import ModelSpec
from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = (
    sorted((ROOT / "src/gpuwarden/catalog/data/models").glob("*.json"))
    + sorted((FIXTURES / "models").glob("*.json"))
    + sorted((ROOT / "tests/data").rglob("*.json"))
)
# the keys HF configs name a router's top-k by (ERNIE 4.5: moe_k)
TOP_K_KEYS = frozenset({"num_experts_per_tok", "moe_k", "moe_topk", "top_k", "experts_per_token"})


def _top_k_paths(config: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(config, dict):
        for key, value in config.items():
            if key in TOP_K_KEYS and type(value) is int:
                yield (*path, key)
            yield from _top_k_paths(value, (*path, key))


def _with(config: dict[str, object], path: tuple[str, ...], value: int) -> dict[str, object]:
    copy = json.loads(json.dumps(config))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


def _moe_cases() -> list[tuple[Path, tuple[str, ...], int]]:
    cases = []
    for path in CONFIGS:
        try:
            spec = load_config_file(path)
        except (GpuwardenError, ValueError):
            continue  # not a config, or one refused as it stands
        if spec.moe is None:
            continue
        config = json.loads(path.read_text(encoding="utf-8"))
        cases += [(path, key, spec.moe.num_experts) for key in _top_k_paths(config)]
    return cases


MOE_CASES = _moe_cases()


def test_the_sweep_reaches_the_moe_families() -> None:
    families = {json.loads(p.read_text())["model_type"] for p, _, _ in MOE_CASES}
    assert len(MOE_CASES) >= 50
    assert {"mixtral", "deepseek_v3", "jamba", "olmoe", "ernie4_5_moe"} <= families


@pytest.mark.parametrize(
    ("path", "key", "experts"),
    MOE_CASES,
    ids=[f"{p.parent.name}/{p.stem}:{'.'.join(k)}" for p, k, _ in MOE_CASES],
)
def test_a_router_past_its_experts_is_refused(
    tmp_path: Path, path: Path, key: tuple[str, ...], experts: int
) -> None:
    config = json.loads(path.read_text(encoding="utf-8"))
    hostile = tmp_path / path.name
    hostile.write_text(json.dumps(_with(config, key, experts + 1)))
    outcome = _load(hostile)
    if isinstance(outcome, InvalidConfigError):
        assert outcome.reference == "config-field-invalid"
    else:  # the key was not this family's top-k: the spec still routes within its experts
        assert outcome.moe is None or outcome.moe.experts_per_token <= outcome.moe.num_experts


def _load(path: Path) -> ModelSpec | InvalidConfigError:
    try:
        return load_config_file(path)
    except InvalidConfigError as exc:
        return exc


def test_mixtral_routing_past_its_experts_names_both_numbers(tmp_path: Path) -> None:
    config = json.loads((FIXTURES / "models" / "Mixtral-8x7B-v0.1.json").read_text())
    hostile = tmp_path / "config.json"
    hostile.write_text(json.dumps({**config, "num_experts_per_tok": 64}))
    with pytest.raises(InvalidConfigError) as caught:  # before: a plan of 46.7 B parameters
        load_config_file(hostile)
    assert caught.value.reference == "config-field-invalid"
    assert "num_experts_per_tok=64 exceeds the 8 routed experts" in str(caught.value)
    assert str(hostile) in str(caught.value)


def test_top_k_equal_to_the_experts_still_loads(tmp_path: Path) -> None:
    config = json.loads((FIXTURES / "models" / "Mixtral-8x7B-v0.1.json").read_text())
    dense_routing = tmp_path / "config.json"
    dense_routing.write_text(json.dumps({**config, "num_experts_per_tok": 8}))
    spec = load_config_file(dense_routing)
    assert spec.moe is not None and spec.moe.experts_per_token == spec.moe.num_experts == 8
