"""One dcgm-exporter scrape → a Snapshot, plus which Kubernetes pod used which GPU.

Series are grouped by device: the GPU's UUID (or its ``gpu`` index when an old exporter omits
it) and, for MIG, ``GPU_I_ID``. A MIG GPU instance becomes its own DeviceSample (DeviceInfo
carries ``mig_parent_uuid``/``mig_profile``/``gpu_instance_id``) and also appears in its parent's
``mig_devices``; a parent that has no series of its own is still listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwarden.telemetry.clock_events import decode_clock_events
from gpuwarden.telemetry.dcgm.exposition import parse_exposition, scrape_error
from gpuwarden.telemetry.dcgm.fields import (
    CLOCK_EVENT_FIELDS,
    FIELDS,
    cuda_version,
    extra_name,
    is_blank,
)
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample, MigDeviceSample, Snapshot
from gpuwarden.units import MIB


@dataclass(frozen=True, slots=True)
class PodAttribution:
    """A pod dcgm-exporter's kubelet mapping put on a device (labels pod, namespace, container)."""

    device_uuid: str
    gpu_instance_id: int | None
    namespace: str | None
    pod: str
    container: str | None


@dataclass(frozen=True, slots=True)
class DcgmScrape:
    snapshot: Snapshot
    pods: tuple[PodAttribution, ...]


@dataclass(slots=True)
class _Device:
    index: int
    uuid: str
    gpu_instance_id: int | None
    labels: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    memory_total_bytes: int | None = None


def _label(labels: dict[str, str], *names: str) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


def parse_scrape(text: str, source: str, timestamp_s: float) -> DcgmScrape:
    samples, _types = parse_exposition(text, source)
    devices: dict[tuple[str, int | None], _Device] = {}
    pods: dict[tuple[str, int | None, str], PodAttribution] = {}
    hosts: list[str] = []
    for sample in samples:
        if not sample.name.startswith("DCGM_"):
            continue
        labels = sample.labels
        gpu = labels.get("gpu")
        uuid = labels.get("UUID") or labels.get("uuid")
        if gpu is None and uuid is None:
            continue  # exporter-wide series (no device)
        try:
            index = int(gpu) if gpu is not None else len(devices)
            gi_label = labels.get("GPU_I_ID")
            gi = int(gi_label) if gi_label not in (None, "") else None
        except ValueError:
            raise scrape_error(
                source, sample.line, f"{sample.name}: gpu/GPU_I_ID label is not a number"
            ) from None
        parent_uuid = uuid or f"index:{index}"
        device = devices.setdefault(
            (parent_uuid, gi), _Device(index=index, uuid=parent_uuid, gpu_instance_id=gi)
        )
        for name, value in labels.items():
            device.labels.setdefault(name, value)
        host = _label(labels, "Hostname", "hostname")
        if host and host not in hosts:
            hosts.append(host)
        pod = labels.get("pod")
        if pod:
            key = (parent_uuid, gi, pod)
            pods.setdefault(
                key,
                PodAttribution(
                    device_uuid=parent_uuid,
                    gpu_instance_id=gi,
                    namespace=labels.get("namespace") or None,
                    pod=pod,
                    container=labels.get("container") or None,
                ),
            )
        if is_blank(sample.value):
            continue
        if sample.name in FIELDS:
            target, convert = FIELDS[sample.name]
            if target == "memory_total_bytes":  # identity, lives in DeviceInfo
                device.memory_total_bytes = device.memory_total_bytes or round(sample.value * MIB)
            else:
                device.values.setdefault(target, convert(sample.value))
        elif sample.name in CLOCK_EVENT_FIELDS:
            device.values.setdefault("clock_event_reasons", decode_clock_events(int(sample.value)))
        else:
            device.extra.setdefault(extra_name(sample.name), sample.value)
    snapshot = Snapshot(
        timestamp_s=timestamp_s,
        host=",".join(hosts),
        backend="dcgm",
        simulated=False,
        samples=_samples(devices, timestamp_s),
        source=source,
    )
    return DcgmScrape(snapshot=snapshot, pods=tuple(pods.values()))


def _info(device: _Device, *, parent: _Device | None) -> DeviceInfo:
    labels = device.labels
    memory_total = device.memory_total_bytes
    if memory_total is None and device.gpu_instance_id is not None:
        used, free = device.values.get("memory_used_bytes"), device.values.get("memory_free_bytes")
        if used is not None and free is not None:
            memory_total = used + free  # a MIG instance's FB is its whole memory
    gi = device.gpu_instance_id
    return DeviceInfo(
        index=device.index,
        uuid=device.uuid if gi is None else f"{device.uuid}:gi{gi}",
        name=_label(labels, "modelName", "DCGM_FI_DEV_NAME") or "",
        pci_bus_id=labels.get("pci_bus_id") or None,
        serial=labels.get("DCGM_FI_DEV_SERIAL") or None,
        vbios_version=labels.get("DCGM_FI_DEV_VBIOS_VERSION") or None,
        driver_version=labels.get("DCGM_FI_DRIVER_VERSION") or None,
        cuda_driver_version=cuda_version(labels.get("DCGM_FI_CUDA_DRIVER_VERSION")),
        memory_total_bytes=memory_total,
        mig_parent_uuid=None if parent is None else parent.uuid,
        mig_profile=labels.get("GPU_I_PROFILE") or None if gi is not None else None,
        gpu_instance_id=gi,
    )


def _samples(
    devices: dict[tuple[str, int | None], _Device], stamp: float
) -> tuple[DeviceSample, ...]:
    # Parents first (a MIG-only scrape still lists its GPU), then each parent's instances.
    parents: dict[str, _Device] = {}
    for (uuid, gi), device in devices.items():
        if gi is None:
            parents[uuid] = device
        elif uuid not in parents:
            parents[uuid] = _Device(index=device.index, uuid=uuid, gpu_instance_id=None)
            parents[uuid].labels = {
                k: v
                for k, v in device.labels.items()
                if k not in ("GPU_I_ID", "GPU_I_PROFILE", "pod", "namespace", "container")
            }
    out: list[DeviceSample] = []
    for uuid, parent in sorted(parents.items(), key=lambda item: item[1].index):
        instances = [d for (u, gi), d in devices.items() if u == uuid and gi is not None]
        instance_samples = [
            DeviceSample(
                info=_info(d, parent=parent), timestamp_s=stamp, extra=dict(d.extra), **d.values
            )
            for d in instances
        ]
        values = dict(parent.values)
        if instances:
            values.setdefault("mig_mode", True)
            values["mig_devices"] = tuple(
                MigDeviceSample(
                    gpu_instance_id=d.gpu_instance_id if d.gpu_instance_id is not None else 0,
                    compute_instance_id=None,
                    profile=s.info.mig_profile,
                    uuid=None,
                    memory_total_bytes=s.info.memory_total_bytes,
                    memory_used_bytes=s.memory_used_bytes,
                )
                for d, s in zip(instances, instance_samples, strict=True)
            )
        parent.values = values
        out.append(
            DeviceSample(
                info=_info(parent, parent=None),
                timestamp_s=stamp,
                extra=dict(parent.extra),
                **parent.values,
            )
        )
        out.extend(instance_samples)
    return tuple(out)
