"""A GPU as findings name it: a ``DeviceRef`` and a short label, from dcgm-exporter's labels."""

from __future__ import annotations

from gpuwarden.fleet.model import GpuId
from gpuwarden.types.health import DeviceRef


def real_uuid(uuid: str) -> str | None:
    """``uuid`` when it is a GPU's or MIG instance's UUID; None for a backend's placeholder
    ("index:0", "HOST/index:0": gpuwarden's exporter and dcgm reader where a backend has none).
    The test of health.devices.real_uuid, which the fleet layer may not import (DESIGN.md's
    layers): the one to keep once it moves below both."""
    return uuid if uuid.startswith(("GPU-", "MIG-")) else None


def number(text: str | None) -> int | None:
    """A label holding a whole number ("3", "119"), else None (labels are the server's text)."""
    if text is None or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def device_ref(gpu: GpuId | None, uuid: str) -> DeviceRef:
    if gpu is None:
        return DeviceRef(uuid=uuid)
    return DeviceRef(index=number(gpu.index), uuid=uuid, name=gpu.model, host=gpu.host)


def gpu_label(gpu: GpuId | None, uuid: str) -> str:
    """``node-a GPU 3 (GPU-…)``: where to go, and the UUID that names it for sure."""
    if gpu is None:
        return uuid
    return f"{gpu.host or '?'} GPU {gpu.index if gpu.index is not None else '?'} ({uuid})"
