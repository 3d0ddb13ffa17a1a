# ruff: noqa: N802  (the C function names of nvml.h)
"""Fake C functions a vGPU guest's driver answers: virtualization mode, licensable features.

A capture-built GPU is bare metal (mode NONE) and answers NOT_SUPPORTED for the licensable
features, as a bare-metal driver does; a test makes it a vGPU guest by setting
``FakeGpu.virtualization_mode`` and ``FakeGpu.grid_features``.
"""

from __future__ import annotations

from typing import Any

from .clib_base import NOT_SUPPORTED, OK, LibBase, _out

_MAX_FEATURES = 3  # NVML_GRID_LICENSE_FEATURE_MAX_COUNT


class VgpuQueries(LibBase):
    """nvmlDeviceGetVirtualizationMode and nvmlDeviceGetGridLicensableFeatures_v4."""

    def nvmlDeviceGetVirtualizationMode(self, handle: Any, out: Any) -> int:
        return self._one(
            handle, out, "nvmlDeviceGetVirtualizationMode", lambda g: g.virtualization_mode
        )

    def nvmlDeviceGetGridLicensableFeatures_v4(self, handle: Any, out: Any) -> int:
        code, gpu, _ = self._target(handle, "nvmlDeviceGetGridLicensableFeatures_v4")
        if code or gpu is None:
            return code
        if gpu.grid_features is None:
            return NOT_SUPPORTED
        features = _out(out)
        features.isGridLicenseSupported = 1
        chosen = gpu.grid_features[:_MAX_FEATURES]
        features.licensableFeaturesCount = len(chosen)
        for entry, feature in zip(features.gridLicensableFeatures, chosen, strict=False):
            entry.featureCode = feature.feature_code
            entry.featureState = int(feature.licensed)
            entry.productName = feature.product_name.encode()
            entry.featureEnabled = int(feature.enabled)
        return OK
