"""The ``nvml`` telemetry backend: local GPUs through nvidia-ml-py (the ``nvml`` extra).

``pynvml`` is imported in exactly one module of this package (``_lib``), lazily.
"""

from __future__ import annotations

from types import ModuleType

from gpuwarden.telemetry.nvml.backend import NvmlBackend

__all__ = ["NvmlBackend", "open_nvml"]


def open_nvml(library: ModuleType | None = None) -> NvmlBackend:
    """Initialise NVML and open every local GPU. Raises MissingExtraError without nvidia-ml-py,
    EnvironmentProblemError (nvml-library-not-found, nvml-driver-not-loaded,
    nvml-driver-mismatch, nvml-no-permission) when the driver cannot be used."""
    return NvmlBackend(library)
