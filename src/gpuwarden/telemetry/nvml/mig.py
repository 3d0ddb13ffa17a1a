"""MIG mode and MIG devices (GPU instance + compute instance) through MIG device handles."""

from __future__ import annotations

from typing import Any

from gpuwarden.telemetry.nvml._lib import Nvml, text
from gpuwarden.types.telemetry import MigDeviceSample


def mig_mode(nvml: Nvml, handle: Any) -> tuple[bool | None, bool | None]:
    """(mig.mode.current, mig.mode.pending); None, None where MIG is not supported."""
    got = nvml.call("nvmlDeviceGetMigMode", handle)
    return (None, None) if got is None else (bool(got[0]), bool(got[1]))


def mig_handles(nvml: Nvml, handle: Any) -> list[Any]:
    """Handles of the MIG devices that exist (the index range has gaps: NotFound = empty slot)."""
    count = nvml.call("nvmlDeviceGetMaxMigDeviceCount", handle)
    out = []
    for i in range(int(count or 0)):
        mig = nvml.call("nvmlDeviceGetMigDeviceHandleByIndex", handle, i)
        if mig is not None:
            out.append(mig)
    return out


def profile_of(name: str | None) -> str | None:
    """ "NVIDIA A100-SXM4-40GB MIG 3g.20gb" -> "3g.20gb" (NVML names MIG devices this way)."""
    if not name or " MIG " not in name:
        return None
    return name.rsplit(" MIG ", 1)[1].strip() or None


def read_mig(nvml: Nvml, mig: Any) -> MigDeviceSample | None:
    gi = nvml.call("nvmlDeviceGetGpuInstanceId", mig)
    if gi is None:
        return None
    ci = nvml.call("nvmlDeviceGetComputeInstanceId", mig)
    memory = nvml.call("nvmlDeviceGetMemoryInfo", mig)
    # SMs of the instance (nvidia-smi's "Multiprocessor count"); MIG handles only, per nvml.h
    attributes = nvml.call("nvmlDeviceGetAttributes_v2", mig)
    return MigDeviceSample(
        gpu_instance_id=int(gi),
        compute_instance_id=None if ci is None else int(ci),
        profile=profile_of(text(nvml.call("nvmlDeviceGetName", mig))),
        uuid=text(nvml.call("nvmlDeviceGetUUID", mig)),
        memory_total_bytes=None if memory is None else int(memory.total),
        memory_used_bytes=None if memory is None else int(memory.used),
        sm_count=None if attributes is None else int(attributes.multiprocessorCount),
    )
