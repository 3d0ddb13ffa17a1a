"""Which pod holds which GPU: the kubelet pod-resources ``List`` answer, decoded and indexed.

The kubelet serves ``v1.PodResourcesLister/List`` on ``/var/lib/kubelet/pod-resources/
kubelet.sock`` (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto). Its answer is four nested
messages of strings, so they are decoded here from the protobuf wire format (varints and
length-delimited fields) instead of carrying the protobuf runtime and generated code for them;
unknown fields (cpu_ids, memory, topology, dynamic_resources, whatever a newer kubelet adds)
are skipped, as protobuf itself does. The gRPC transport is ``export.kubelet``.

    message ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    message PodResources { string name = 1; string namespace = 2;
                           repeated ContainerResources containers = 3; }
    message ContainerResources { string name = 1; repeated ContainerDevices devices = 2; }
    message ContainerDevices { string resource_name = 1; repeated string device_ids = 2; }

Device ids are what the device plugin advertised: a GPU UUID (NVIDIA's default), a MIG UUID
(``MIG-…``, or the R450-era ``MIG-GPU-<uuid>/<gi>/<ci>``), an index (``DEVICE_ID_STRATEGY=index``),
``<id>::<n>`` for the n-th time-slicing replica, or GKE's ``nvidia<i>``, ``nvidia<i>/gi<g>`` and
``…/vgpu<n>`` (the same forms dcgm-exporter's transformation/kubernetes.go maps).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gpuwarden.types.telemetry import DeviceInfo, PodSample

# Resource names of NVIDIA's device plugins: nvidia.com/gpu, nvidia.com/gpu.shared (time-slicing
# renamed), nvidia.com/mig-1g.10gb (MIG "mixed" strategy).
NVIDIA_RESOURCE_PREFIX = "nvidia.com/"
MAX_MESSAGE_BYTES = 16 << 20  # the kubelet's own gRPC limit for this API (16 MiB)
MAX_PODS_PER_DEVICE = 16  # time-slicing replicas sharing one GPU; more are not labelled
MAX_DEVICES = 1024  # distinct device ids remembered per answer

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """Bytes that are not the protobuf message they should be."""


@dataclass(frozen=True, slots=True)
class Allocation:
    """Devices of one resource that the kubelet gave one container."""

    namespace: str
    pod: str
    container: str
    resource_name: str
    device_ids: tuple[str, ...]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(at, min(at + 10, len(data))):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    raise WireError(f"truncated or overlong varint at byte {at}")


def wire_fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of one message: an int for varints, bytes for length-delimited
    fields; fixed-width fields are skipped (none of the messages read here has one)."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {at}")
        if wire == _VARINT:
            value, at = _varint(data, at)
            yield number, value
        elif wire == _LENGTH:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise WireError(f"field {number} runs {at + size - len(data)} bytes past the end")
            yield number, data[at : at + size]
            at += size
        elif wire in (_FIXED64, _FIXED32):
            at += 8 if wire == _FIXED64 else 4
            if at > len(data):
                raise WireError(f"field {number} runs past the end")
        else:  # groups (3, 4) are deprecated and absent from proto3; 6, 7 do not exist
            raise WireError(f"wire type {wire} of field {number} is not supported")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise WireError("a string field holds a varint")
    return value.decode("utf-8", errors="replace")


def _message(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise WireError("a message field holds a varint")
    return value


def _container(namespace: str, pod: str, data: bytes) -> Iterator[Allocation]:
    name = ""
    devices: list[bytes] = []
    for number, value in wire_fields(data):
        if number == 1:
            name = _text(value)
        elif number == 2:
            devices.append(_message(value))
    for device in devices:
        resource, ids = "", []
        for number, value in wire_fields(device):
            if number == 1:
                resource = _text(value)
            elif number == 2:
                ids.append(_text(value))
        yield Allocation(namespace, pod, name, resource, tuple(ids))


def decode_list_response(data: bytes) -> tuple[Allocation, ...]:
    """Every (container, resource) allocation of a ListPodResourcesResponse."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise WireError(f"{len(data)} bytes is more than the {MAX_MESSAGE_BYTES} a kubelet sends")
    out: list[Allocation] = []
    for number, value in wire_fields(data):
        if number != 1:
            continue
        pod = namespace = ""
        containers: list[bytes] = []
        for field, item in wire_fields(_message(value)):
            if field == 1:
                pod = _text(item)
            elif field == 2:
                namespace = _text(item)
            elif field == 3:
                containers.append(_message(item))
        for container in containers:
            out.extend(_container(namespace, pod, container))
    return tuple(out)


# --- device ids → the devices they name -------------------------------------------------------

DeviceKey = tuple[str, str]

_GKE_INSTANCE = re.compile(r"^nvidia(\d+)/gi(\d+)(?:/vgpu\d+)?$")
_GKE_DEVICE = re.compile(r"^nvidia(\d+)(?:/vgpu\d+)?$")
_OLD_MIG = re.compile(r"^MIG-(GPU-[0-9A-Fa-f-]+)/(\d+)/(\d+)$")


def device_key(device_id: str) -> DeviceKey | None:
    """What a device plugin's id names: ("uuid", GPU UUID), ("index", "3"), ("mig-uuid", MIG
    UUID), ("gi", "<GPU UUID>/<GI>") or ("gi-index", "<index>/<GI>"); None for other ids."""
    device_id = device_id.strip().split("::", 1)[0]  # time-slicing replica "<id>::<n>"
    if match := _GKE_INSTANCE.match(device_id):
        return ("gi-index", f"{int(match.group(1))}/{int(match.group(2))}")
    if match := _GKE_DEVICE.match(device_id):
        return ("index", str(int(match.group(1))))
    if match := _OLD_MIG.match(device_id):
        return ("gi", f"{match.group(1)}/{int(match.group(2))}")
    if device_id.startswith("MIG-"):
        return ("mig-uuid", device_id)
    if device_id.startswith("GPU-"):
        return ("uuid", device_id)
    if device_id.isdecimal() and len(device_id) <= 4:
        return ("index", str(int(device_id)))
    return None


@dataclass(frozen=True, slots=True)
class PodMap:
    """Pods by the device they hold, from one List answer."""

    by_device: dict[DeviceKey, tuple[PodSample, ...]]

    def pods_of_gpu(self, info: DeviceInfo) -> tuple[PodSample, ...]:
        return self._first(("uuid", info.uuid), ("index", str(info.index)))

    def pods_of_instance(
        self, parent: DeviceInfo, gpu_instance_id: int, mig_uuid: str | None
    ) -> tuple[PodSample, ...]:
        keys: list[DeviceKey] = [
            ("gi", f"{parent.uuid}/{gpu_instance_id}"),
            ("gi-index", f"{parent.index}/{gpu_instance_id}"),
        ]
        if mig_uuid:
            keys.insert(0, ("mig-uuid", mig_uuid))
        return self._first(*keys)

    def _first(self, *keys: DeviceKey) -> tuple[PodSample, ...]:
        for key in keys:
            pods = self.by_device.get(key)
            if pods:
                return pods
        return ()


def pod_map(allocations: Iterable[Allocation]) -> PodMap:
    """Index NVIDIA allocations by device; several pods on one device (time-slicing, MPS) are
    all kept, in name order, up to MAX_PODS_PER_DEVICE."""
    found: dict[DeviceKey, set[PodSample]] = {}
    for allocation in allocations:
        if not allocation.resource_name.startswith(NVIDIA_RESOURCE_PREFIX):
            continue
        pod = PodSample(
            pod=allocation.pod,
            namespace=allocation.namespace or None,
            container=allocation.container or None,
        )
        for device_id in allocation.device_ids:
            key = device_key(device_id)
            if key is None or (key not in found and len(found) >= MAX_DEVICES):
                continue
            found.setdefault(key, set()).add(pod)
    return PodMap(
        {
            key: tuple(sorted(pods, key=lambda p: (p.namespace or "", p.pod, p.container or "")))[
                :MAX_PODS_PER_DEVICE
            ]
            for key, pods in found.items()
        }
    )
