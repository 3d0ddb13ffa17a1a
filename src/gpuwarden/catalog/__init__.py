"""Static facts: GPUs, cloud instances, model architectures. Data files in the package.

The names below load their module on first use (PEP 562): the model catalog (every family's
config reader, ~20 ms) is not imported by a verb that only needs GPU facts, as doctor, explain
and snapshot do when they import a catalog submodule."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwarden.catalog.gpus import gpu_catalog, resolve_gpu
    from gpuwarden.catalog.instances import instance_catalog, instances_for_gpu
    from gpuwarden.catalog.models import model_names, resolve_model

_HOME = {
    "gpu_catalog": "gpus",
    "resolve_gpu": "gpus",
    "instance_catalog": "instances",
    "instances_for_gpu": "instances",
    "model_names": "models",
    "resolve_model": "models",
}

__all__ = [
    "gpu_catalog",
    "instance_catalog",
    "instances_for_gpu",
    "model_names",
    "resolve_gpu",
    "resolve_model",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# hidden from mypy, which would otherwise type any name imported from here (a misspelt one too)
# as this function's Any: it reads the names from the imports above
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        home = _HOME.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{__name__}.{home}"), name)
