"""What nvidia-smi leaves out but the GPU catalog knows: the architecture (XML schemas up to
nvsmi_device_v11 have no ``product_architecture``) and the profile of a MIG device (no format
prints it; its memory, copy engines and SMs single it out of the GPU's profiles).

Only a GPU whose printed name is one of a catalog row's ``smi_names`` is completed, and a
profile only when exactly one of that GPU's profiles fits: otherwise the field stays None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpuwarden.catalog.gpus import MIG_PROFILE, gpu_by_smi_name
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.telemetry import MigDeviceSample

# A profile's "Ngb" is nominal: the instance's FB is within this factor of it (A100-80GB
# 1g.20gb = 19968 MiB = 20.9 GB; 7g.80gb = 80384 MiB = 84.3 GB; 1g.5gb = 4864 MiB = 5.1 GB).
_MEMORY_TOLERANCE = 1.25
# SMs per compute slice of MIG-capable GPUs: 14 (A100, A30) to 16 (H100 SXM, H200), 20 for
# H100's 3-slice instance (60 SMs): used only when the copy-engine count (= slices) is not printed.
_SMS_PER_SLICE = (14.0, 20.0)


@dataclass(frozen=True, slots=True)
class MigEngines:
    """Engine counts nvidia-smi prints per MIG device (``-q -x``, ``-q``; not the table)."""

    copy_engines: int | None  # one per compute slice (go-nvml facts: CopyEngineCount = slices)
    ofa: int | None  # optical-flow accelerators: a 1-slice "+me" profile has one, the plain none


def architecture(name: str | None) -> str | None:
    gpu = gpu_by_smi_name(name)
    return None if gpu is None else gpu.architecture


def mig_profile(
    gpu: GpuSpec, memory_total_bytes: int | None, sm_count: int | None, engines: MigEngines
) -> str | None:
    """The one profile of ``gpu`` a MIG device with this memory, SMs and engines can be."""
    if memory_total_bytes is None or memory_total_bytes <= 0:
        return None
    profiles = [(p, m) for p in gpu.mig_profiles if (m := MIG_PROFILE.match(p)) is not None]
    gigabytes = memory_total_bytes / 1e9
    distance = {p: abs(math.log(gigabytes / int(m["gb"]))) for p, m in profiles}
    if not distance or min(distance.values()) > math.log(_MEMORY_TOLERANCE):
        return None
    nearest = min(distance.values())
    fitting = [(p, m) for p, m in profiles if distance[p] == nearest]
    if engines.copy_engines is not None:
        fitting = [(p, m) for p, m in fitting if int(m["slices"]) == engines.copy_engines]
    elif sm_count is not None:
        low, high = _SMS_PER_SLICE
        fitting = [(p, m) for p, m in fitting if low <= sm_count / int(m["slices"]) <= high]
    else:
        return None
    if engines.ofa is not None and any(m["me"] for _, m in fitting):
        fitting = [(p, m) for p, m in fitting if bool(m["me"]) == (engines.ofa > 0)]
    return fitting[0][0] if len(fitting) == 1 else None


def with_profiles(
    gpu_name: str | None, devices: list[tuple[MigDeviceSample, MigEngines]]
) -> tuple[MigDeviceSample, ...]:
    """The MIG devices, each given its catalog profile where the format printed none."""
    gpu = gpu_by_smi_name(gpu_name)
    if gpu is None:
        return tuple(device for device, _ in devices)
    return tuple(
        device
        if device.profile is not None
        else replace(
            device,
            profile=mig_profile(gpu, device.memory_total_bytes, device.sm_count, engines),
        )
        for device, engines in devices
    )
