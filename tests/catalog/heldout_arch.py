"""Shared helpers of the held-out architecture tests (tests/catalog/test_heldout_*.py): the
default configs of tests/data/model_configs_heldout/arch/, the set's own make_arch_set.py (variants,
the probe, meta-device counts), the blocks transformers builds, and the checks every family's
tests make against them (the probe, the counts, the linears of each block)."""

from __future__ import annotations

import copy
import importlib.util
import json
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpuwarden.catalog import configs
from gpuwarden.types.model import LayerParameters, LinearShape

HELDOUT = Path(__file__).resolve().parent.parent / "data" / "model_configs_heldout"
ARCH = HELDOUT / "arch"


def arch(model_type: str) -> dict[str, Any]:
    """The default config.json of ``model_type`` (a fresh dict each call)."""
    cfg: dict[str, Any] = json.loads((ARCH / f"{model_type}.json").read_text(encoding="utf-8"))
    return cfg


@contextmanager
def quiet() -> Iterator[None]:
    """transformers warns while it builds some variants (zero-size init, deprecated keys, xIELU
    without its CUDA kernel, a forced last layer type); under pytest's warnings-as-errors the
    probe would skip those variants as unbuildable, and a build would fail."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@cache
def make_arch_set() -> ModuleType:
    """tests/data/model_configs_heldout/make_arch_set.py, loaded once (it imports torch)."""
    spec = importlib.util.spec_from_file_location("make_arch_set", HELDOUT / "make_arch_set.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hf_blocks(cfg: dict[str, Any]) -> list[Any]:
    """The decoder blocks transformers builds for ``cfg`` on the meta device (the first
    ModuleList of the causal LM)."""
    import torch
    import transformers

    kwargs = {k: v for k, v in cfg.items() if k not in {"model_type", "architectures"}}
    with quiet(), torch.device("meta"):
        config = transformers.AutoConfig.for_model(cfg["model_type"], **kwargs)
        model = transformers.AutoModelForCausalLM.from_config(config)
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList):
            return list(module)
    raise AssertionError("no block list")


def two_blocks(model_type: str, drop: Collection[str] = ()) -> dict[str, Any]:
    """The default config of ``model_type`` without the keys in ``drop``, cut to 2 blocks as the
    probe cuts it (make_arch_set's "default" variant)."""
    cfg = {k: v for k, v in arch(model_type).items() if k not in drop}
    base: dict[str, Any] = make_arch_set().variants(cfg)["default"]
    return base


def size_cases(variants: Mapping[str, Sequence[dict[str, Any]]]) -> list[Any]:
    """(model_type, change) parameters of ``variants``, each with the id "<model_type>-<index>"."""
    return [
        pytest.param(model_type, change, id=f"{model_type}-{i}")
        for model_type, changes in variants.items()
        for i, change in enumerate(changes)
    ]


def transformers_count(cfg: dict[str, Any]) -> int:
    """The parameters transformers builds for ``cfg`` on the meta device (on a copy: the build
    must not change the config the planner then reads)."""
    with quiet():
        count: int = make_arch_set().meta_parameters(copy.deepcopy(cfg))
    return count


def assert_probe_matches_transformers(model_type: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variant of the probe (2 blocks, each boolean flipped, each key dropped) counts what
    transformers builds."""
    pytest.importorskip("transformers")
    # probe() registers the type as an alias of itself: keep that out of the shared table
    monkeypatch.setattr(configs, "ALIASES", dict(configs.ALIASES))
    with quiet():
        assert make_arch_set().probe(model_type, model_type) == []


def assert_counts_what_transformers_builds(
    model_type: str, cfg: dict[str, Any], source: str = "variant"
) -> None:
    """The planner's total parameters of ``cfg`` are the ones transformers builds."""
    pytest.importorskip("transformers")
    truth = transformers_count(cfg)
    assert configs.normalise(model_type, dict(cfg), source).total_parameters == truth


def _not_expert(linear: LinearShape) -> bool:
    return not linear.expert


def assert_linears_are_the_hf_modules(
    blocks: Sequence[Any],
    layers: Sequence[LayerParameters],
    *,
    skip_hf: Callable[[str], bool] = lambda name: False,
    ours: Callable[[LinearShape], bool] = _not_expert,
    kv_width: int | None = None,
    k_proj_names: Sequence[str] = (),
    whole_block: bool = False,
) -> None:
    """PEFT matches target_modules against module names: each block's nn.Linear modules (those
    ``skip_hf`` does not name: routers, gates) are the planner's linears of the block that
    ``ours`` keeps, by name and shape; the first of ``k_proj_names`` a block has is ``kv_width``
    wide; with ``whole_block``, the block's parameters are all counted."""
    import torch

    for block, layer in zip(blocks, layers, strict=True):
        modules = dict(block.named_modules())
        theirs = sorted(
            (name.rsplit(".", 1)[-1], m.in_features, m.out_features)
            for name, m in modules.items()
            if isinstance(m, torch.nn.Linear) and not skip_hf(name)
        )
        listed = sorted(
            (lin.name, lin.in_features, lin.out_features) for lin in layer.linears if ours(lin)
        )
        assert listed == theirs
        k_proj = next((modules[name] for name in k_proj_names if name in modules), None)
        if k_proj is not None:
            assert kv_width == k_proj.out_features
        if whole_block:
            assert layer.total == sum(p.numel() for p in block.parameters())
