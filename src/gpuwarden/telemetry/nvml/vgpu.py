"""vGPU guest licensing through NVML: what nvidia-smi -q prints as "License Status".

A vGPU guest's driver answers nvmlDeviceGetGridLicensableFeatures_v4 (NVML API reference,
nvmlGridLicensableFeatures_t): ``isGridLicenseSupported`` non-zero where vGPU software licensing
applies, then up to NVML_GRID_LICENSE_FEATURE_MAX_COUNT features, each with ``featureEnabled``
(non-zero: the feature this guest's vGPU type enables) and ``featureState`` (non-zero: "currently
licensed"). The call a hypervisor host makes per vGPU instance (nvmlVgpuInstanceGetLicenseInfo_v2,
the nvmlGridLicenseState_t that splits unlicensed into restricted / unrestricted) is not a guest
call: a guest can only tell licensed from unlicensed, so it reports "unlicensed" and never the
restricted/unrestricted detail (the rule judges "unlicensed" as "restricted once the grace period
is over").

The licence only means something inside a VM: nvmlDeviceGetVirtualizationMode must say VGPU (a
vGPU guest) for a zero featureState to read "unlicensed". A pass-through GPU reads "licensed" when
a feature says so and None otherwise (NVIDIA's pynvml example prints "Licensed" there for
NVIDIA Virtual Applications, which need no licence); bare metal, hypervisor hosts and a driver
that does not answer (NOT_SUPPORTED, FUNCTION_NOT_FOUND on old drivers) give None.
"""

from __future__ import annotations

from typing import Any

from gpuwarden.catalog.nvml_enums import (
    VGPU_LICENSED,
    VGPU_UNLICENSED,
    VIRTUALIZATION_MODE_PASSTHROUGH,
    VIRTUALIZATION_MODE_VGPU,
)
from gpuwarden.telemetry.nvml._lib import Nvml

# nvmlGridLicensableFeatures_t.gridLicensableFeatures[] length (NVML_GRID_LICENSE_FEATURE_MAX_COUNT)
_MAX_FEATURES = 3


def _enabled_features(features: Any) -> list[Any]:
    """The features this guest's vGPU type enables (``featureEnabled`` non-zero), among the
    ``licensableFeaturesCount`` entries the driver filled."""
    count = min(int(features.licensableFeaturesCount), _MAX_FEATURES)
    entries = features.gridLicensableFeatures
    return [entries[i] for i in range(count) if int(entries[i].featureEnabled)]


def license_state(features: Any, mode: int | None) -> str | None:
    """The guest's licence state from an nvmlGridLicensableFeatures_v4_t and the virtualization
    mode; None where licensing does not apply or the answer cannot decide (see the module)."""
    if features is None or not int(features.isGridLicenseSupported):
        return None
    enabled = _enabled_features(features)
    if not enabled:
        return None  # licensing supported, but no feature in use: nothing asks for a licence
    if any(int(feature.featureState) for feature in enabled):
        in_a_vm = mode in (VIRTUALIZATION_MODE_VGPU, VIRTUALIZATION_MODE_PASSTHROUGH)
        return VGPU_LICENSED if in_a_vm else None
    return VGPU_UNLICENSED if mode == VIRTUALIZATION_MODE_VGPU else None


def license_status(nvml: Nvml, handle: Any) -> str | None:
    """DeviceSample.vgpu_license_status of one device ("licensed", "unlicensed" or None)."""
    features = nvml.call("nvmlDeviceGetGridLicensableFeatures_v4", handle)
    if features is None:
        return None
    mode = nvml.call("nvmlDeviceGetVirtualizationMode", handle)
    return license_state(features, None if mode is None else int(mode))
