"""Pod attribution from the kubelet pod-resources API: the hand-written decoder against the real
protobuf runtime encoding the v1 messages (upstream api.proto, with the fields the decoder skips),
a fake kubelet speaking real gRPC on a unix socket, and the exporter labelling GPUs from it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.export.helpers import read_scrape

from gpuwarden.cli.main import main
from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.export.kubelet import LIST_METHOD, PodResourcesClient, PodResourcesError
from gpuwarden.export.pod_resources import (
    Allocation,
    WireError,
    decode_list_response,
    device_key,
    pod_map,
)
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.telemetry import DeviceInfo, PodSample

# k8s.io/kubelet/pkg/apis/podresources/v1/api.proto, the messages List answers with (field
# numbers and types as upstream, including those gpuwarden does not read).
_T = descriptor_pb2.FieldDescriptorProto
_MESSAGES = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _T.TYPE_MESSAGE, ".v1.PodResources", True)],
    "PodResources": [
        ("name", 1, _T.TYPE_STRING, None, False),
        ("namespace", 2, _T.TYPE_STRING, None, False),
        ("containers", 3, _T.TYPE_MESSAGE, ".v1.ContainerResources", True),
    ],
    "ContainerResources": [
        ("name", 1, _T.TYPE_STRING, None, False),
        ("devices", 2, _T.TYPE_MESSAGE, ".v1.ContainerDevices", True),
        ("cpu_ids", 3, _T.TYPE_INT64, None, True),
        ("memory", 4, _T.TYPE_MESSAGE, ".v1.ContainerMemory", True),
    ],
    "ContainerMemory": [
        ("memory_type", 1, _T.TYPE_STRING, None, False),
        ("size", 2, _T.TYPE_UINT64, None, False),
        ("topology", 3, _T.TYPE_MESSAGE, ".v1.TopologyInfo", False),
    ],
    "ContainerDevices": [
        ("resource_name", 1, _T.TYPE_STRING, None, False),
        ("device_ids", 2, _T.TYPE_STRING, None, True),
        ("topology", 3, _T.TYPE_MESSAGE, ".v1.TopologyInfo", False),
    ],
    "TopologyInfo": [("nodes", 1, _T.TYPE_MESSAGE, ".v1.NUMANode", True)],
    "NUMANode": [("ID", 1, _T.TYPE_INT64, None, False)],
}


def _classes() -> dict[str, Any]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="podresources_v1.proto", package="v1", syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, kind, type_name, repeated in fields:
            entry = message.field.add(name=field, number=number, type=kind)
            entry.label = _T.LABEL_REPEATED if repeated else _T.LABEL_OPTIONAL
            if type_name:
                entry.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{n}")) for n in _MESSAGES
    }


PB = _classes()


def encode(pods: list[dict[str, Any]]) -> Any:
    """A ListPodResourcesResponse as the kubelet would build it."""
    response = PB["ListPodResourcesResponse"]()
    for pod in pods:
        entry = response.pod_resources.add(name=pod["name"], namespace=pod["namespace"])
        for container in pod["containers"]:
            c = entry.containers.add(name=container["name"])
            c.cpu_ids.extend([2, 3, 66])  # exclusive CPUs: skipped by the decoder
            c.memory.add(memory_type="hugepages-1Gi", size=1 << 30).topology.nodes.add(ID=1)
            for resource, ids in container["devices"]:
                device = c.devices.add(resource_name=resource)
                device.device_ids.extend(ids)
                device.topology.nodes.add(ID=0)
    return response


def test_the_decoder_reads_what_protobuf_writes():
    message = encode(
        [
            {"name": "trainer-0", "namespace": "ml", "containers": [
                {"name": "main", "devices": [("nvidia.com/gpu", ["GPU-a", "GPU-b"])]},
                {"name": "sidecar", "devices": []},
            ]},
            {"name": "tts", "namespace": "serve", "containers": [
                {"name": "kserve-container", "devices": [("nvidia.com/mig-1g.10gb", ["MIG-c"]),
                                                         ("example.com/fpga", ["fpga0"])]},
            ]},
        ]
    )  # fmt: skip
    assert decode_list_response(message.SerializeToString()) == (
        Allocation("ml", "trainer-0", "main", "nvidia.com/gpu", ("GPU-a", "GPU-b")),
        Allocation("serve", "tts", "kserve-container", "nvidia.com/mig-1g.10gb", ("MIG-c",)),
        Allocation("serve", "tts", "kserve-container", "example.com/fpga", ("fpga0",)),
    )


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@given(
    st.lists(
        st.fixed_dictionaries(
            {"name": _text, "namespace": _text, "containers": st.lists(
                st.fixed_dictionaries({"name": _text, "devices": st.lists(
                    st.tuples(_text, st.lists(_text, max_size=3)), max_size=2)}),
                max_size=2)}
        ),
        max_size=3,
    )
)  # fmt: skip
@settings(max_examples=100, deadline=None)
def test_any_answer_protobuf_encodes_decodes_to_the_same_allocations(pods):
    expected = tuple(
        Allocation(p["namespace"], p["name"], c["name"], resource, tuple(ids))
        for p in pods
        for c in p["containers"]
        for resource, ids in c["devices"]
    )
    assert decode_list_response(encode(pods).SerializeToString()) == expected


@given(st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_garbage_is_a_wire_error_never_a_crash(data):
    with contextlib.suppress(WireError):
        decode_list_response(data)


@pytest.mark.parametrize(
    ("device_id", "key"),
    [("GPU-6e5c07c8-ffd3", ("uuid", "GPU-6e5c07c8-ffd3")),
     ("GPU-6e5c07c8-ffd3::3", ("uuid", "GPU-6e5c07c8-ffd3")),
     ("MIG-4f6ab5c6-b5b2", ("mig-uuid", "MIG-4f6ab5c6-b5b2")),
     ("MIG-GPU-6e5c07c8-ffd3/7/0", ("gi", "GPU-6e5c07c8-ffd3/7")),
     ("3", ("index", "3")), ("nvidia2", ("index", "2")), ("nvidia2/vgpu4", ("index", "2")),
     ("nvidia0/gi3", ("gi-index", "0/3")), ("nvidia0/gi3/vgpu1", ("gi-index", "0/3")),
     ("fpga0", None), ("", None)],
)  # fmt: skip
def test_device_ids_of_nvidias_and_gkes_device_plugins(device_id, key):
    assert device_key(device_id) == key


def test_pods_are_found_by_uuid_index_or_instance():
    mapping = pod_map(
        [
            Allocation("ml", "a", "main", "nvidia.com/gpu", ("GPU-1",)),
            Allocation("ml", "b", "main", "nvidia.com/gpu.shared", ("2::0",)),
            Allocation("ml", "c", "main", "nvidia.com/gpu.shared", ("2::1",)),
            Allocation("ml", "d", "main", "nvidia.com/mig-1g.10gb", ("MIG-GPU-9/7/0",)),
            Allocation("ml", "e", "main", "example.com/fpga", ("GPU-1",)),  # not NVIDIA's
        ]
    )
    assert [p.pod for p in mapping.pods_of_gpu(DeviceInfo(0, "GPU-1", "x"))] == ["a"]
    assert [p.pod for p in mapping.pods_of_gpu(DeviceInfo(2, "GPU-2", "x"))] == ["b", "c"]
    parent = DeviceInfo(1, "GPU-9", "x")
    assert mapping.pods_of_instance(parent, 7, None) == (PodSample("d", "ml", "main"),)
    assert mapping.pods_of_instance(parent, 8, None) == ()


# --- a fake kubelet on a unix socket, over real gRPC ---------------------------------------


class FakeKubelet:
    """``v1.PodResourcesLister/List`` on a unix socket; ``answer`` is what it returns next."""

    def __init__(self, socket_path: Path) -> None:
        self.answer: Any = PB["ListPodResourcesResponse"]()
        self.fail = False
        self.calls = 0
        self._lock = threading.Lock()
        service, method = LIST_METHOD.strip("/").split("/")
        handler = grpc.unary_unary_rpc_method_handler(
            self._list,
            request_deserializer=PB["ListPodResourcesRequest"].FromString,
            response_serializer=lambda message: message.SerializeToString(),
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {method: handler}),)
        )
        self.server.add_insecure_port(f"unix:{socket_path}")
        self.server.start()

    def _list(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.calls += 1
        if self.fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "kubelet restarting")
        return self.answer


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[tuple[FakeKubelet, Path]]:
    path = tmp_path / "kubelet.sock"
    fake = FakeKubelet(path)
    try:
        yield fake, path
    finally:
        fake.server.stop(grace=None).wait()


def sim_uuids(gpus: int) -> list[str]:
    return [info.uuid for info in open_backend("sim", gpus=gpus).devices()]


def test_the_exporter_labels_gpu_series_with_the_pods_holding_them(kubelet, capsys):
    fake, path = kubelet
    uuids = sim_uuids(3)
    fake.answer = encode(
        [
            {"name": "trainer-0", "namespace": "ml", "containers": [
                {"name": "main", "devices": [("nvidia.com/gpu", [uuids[0]])]}]},
            {"name": "notebook-a", "namespace": "research", "containers": [
                {"name": "jupyter", "devices": [("nvidia.com/gpu", [uuids[1] + "::0"])]}]},
            {"name": "notebook-b", "namespace": "research", "containers": [
                {"name": "jupyter", "devices": [("nvidia.com/gpu", [uuids[1] + "::1"])]}]},
        ]
    )  # fmt: skip
    args = [
        "export",
        "--backend",
        "sim",
        "--gpus",
        "3",
        "--kubernetes",
        "--kubelet-socket",
        str(path),
    ]
    assert main([*args, "--once"]) == 0
    scrape = read_scrape(capsys.readouterr().out)
    holders = {}
    for labels, _ in scrape.series("DCGM_FI_DEV_GPU_TEMP"):
        holders.setdefault(labels["gpu"], []).append(
            (labels.get("namespace"), labels.get("pod"), labels.get("container"))
        )
    assert holders == {
        "0": [("ml", "trainer-0", "main")],
        "1": [("research", "notebook-a", "jupyter"), ("research", "notebook-b", "jupyter")],
        "2": [(None, None, None)],  # no pod holds GPU 2
    }
    assert fake.calls == 1
    assert scrape.one("gpuwarden_pod_resources_errors_total") == 0


def test_a_kubelet_that_fails_leaves_the_last_answer_and_counts_the_error(kubelet):
    fake, path = kubelet
    uuid = sim_uuids(1)[0]
    fake.answer = encode(
        [{"name": "p", "namespace": "n", "containers": [
            {"name": "c", "devices": [("nvidia.com/gpu", [uuid])]}]}]
    )  # fmt: skip
    with PodResourcesClient(str(path), timeout_s=5.0) as client:
        first = client.list_pods()
        assert [p.pod for p in first.pods_of_gpu(DeviceInfo(0, uuid, "x"))] == ["p"]
        fake.fail = True
        with pytest.raises(PodResourcesError, match="UNAVAILABLE kubelet restarting"):
            client.list_pods()


def test_a_missing_socket_is_a_clear_environment_error(tmp_path):
    with pytest.raises(EnvironmentProblemError) as caught:
        PodResourcesClient(str(tmp_path / "nope.sock"))
    assert caught.value.reference == "kubelet-socket-missing"


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(min_size=1, max_size=200))
def test_a_kubelet_answering_garbage_is_an_error_not_a_crash(kubelet, data):
    fake, path = kubelet
    fake.answer = _Raw(data)
    with (
        PodResourcesClient(str(path), timeout_s=5.0) as client,
        contextlib.suppress(PodResourcesError),
    ):
        client.list_pods()


class _Raw:
    """Bytes sent as the answer whatever they are (the serializer calls this)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        return self.data
