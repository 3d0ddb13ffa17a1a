"""A GPU as findings name it: a ``DeviceRef`` and a short label, from dcgm-exporter's labels."""

from __future__ import annotations

from gpuwarden.fleet.model import GpuId
from gpuwarden.types.health import DeviceRef
from gpuwarden.types.telemetry import placeholder_place, real_uuid


def number(text: str | None) -> int | None:
    """A label holding a whole number ("3", "119"), else None (labels are the server's text)."""
    if text is None or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def device_ref(gpu: GpuId | None, uuid: str) -> DeviceRef:
    if gpu is None:
        return DeviceRef(uuid=uuid)
    return DeviceRef(index=number(gpu.index), uuid=uuid, name=gpu.model, host=gpu.host)


def _place(host: str | None, index: str | None) -> str:
    return f"{host or '?'} GPU {index if index is not None else '?'}"


def gpu_label(gpu: GpuId | None, key: str) -> str:
    """``node-a GPU 3 (GPU-…)``: where to go, and the UUID that names it for sure. A GPU without
    a UUID (its key a placeholder, "node-a/index:3") is named by where it is alone: its key is
    no name a user could look up, and the node it names is the GPU's (a relaying exporter's node
    label is not)."""
    place = placeholder_place(key)
    if place is not None:
        return _place(*place)
    if gpu is None:
        return key
    where = _place(gpu.host, gpu.index)
    return f"{where} ({key})" if real_uuid(key) else where
