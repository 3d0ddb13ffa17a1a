"""Shared helpers of the held-out architecture tests (tests/catalog/test_heldout_*.py): the
default configs of tests/data/model_configs_heldout/arch/, the set's own make_arch_set.py (variants,
the probe, meta-device counts) and the blocks transformers builds."""

from __future__ import annotations

import importlib.util
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

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
