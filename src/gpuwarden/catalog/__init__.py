"""Static facts: GPUs, cloud instances, model architectures. Data files in the package."""

from __future__ import annotations

from gpuwarden.catalog.models import model_names, resolve_model

__all__ = ["model_names", "resolve_model"]
