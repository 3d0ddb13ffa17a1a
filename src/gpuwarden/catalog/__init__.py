"""Static facts: GPUs, cloud instances, model architectures. Data files in the package."""

from __future__ import annotations

from gpuwarden.catalog.gpus import gpu_catalog, resolve_gpu
from gpuwarden.catalog.instances import instance_catalog, instances_for_gpu
from gpuwarden.catalog.models import model_names, resolve_model

__all__ = [
    "gpu_catalog",
    "instance_catalog",
    "instances_for_gpu",
    "model_names",
    "resolve_gpu",
    "resolve_model",
]
