"""A GPU as findings name it: a ``DeviceRef`` and a short label, from dcgm-exporter's labels."""

from __future__ import annotations

from gpuwarden.fleet.model import GpuId
from gpuwarden.types.health import DeviceRef


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
