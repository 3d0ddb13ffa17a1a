"""The kubelet pod-resources socket: one gRPC ``List`` call, over grpcio, on a unix socket.

grpcio carries the transport (HTTP/2, HPACK, gRPC framing: nothing to write by hand); the
messages are decoded by ``export.pod_resources`` from their bytes, so neither the protobuf runtime
nor generated stubs are needed. The only module that imports grpc.
"""

from __future__ import annotations

import os
import stat
from types import TracebackType
from typing import Any

from gpuwarden.errors import EnvironmentProblemError, InputError, MissingExtraError
from gpuwarden.export import KUBELET_SOCKET
from gpuwarden.export.pod_resources import MAX_MESSAGE_BYTES, PodMap, decode_list_response, pod_map

LIST_METHOD = "/v1.PodResourcesLister/List"  # package v1, service PodResourcesLister
_EMPTY_REQUEST = b""  # ListPodResourcesRequest has no fields
DEFAULT_TIMEOUT_S = 5.0


class PodResourcesError(Exception):
    """A List call that failed or answered something unreadable (collection goes on)."""


def _grpc() -> Any:
    try:
        import grpc
    except ImportError:
        raise MissingExtraError("export --kubernetes", "exporter", "grpcio") from None
    return grpc


def _check_socket(path: str) -> None:
    """A socket that is not there yet is the environment (the kubelet restarting, the hostPath
    not mounted): exit 4, the pod restarts. A path to something else is the user's: exit 2."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except (OSError, ValueError) as exc:  # a name too long, a component that is a file
        raise InputError(
            f"--kubelet-socket {path}: cannot be used ({getattr(exc, 'strerror', None) or exc})",
            reference="kubelet-socket-invalid",
            hint=f"the kubelet's pod-resources socket, by default {KUBELET_SOCKET}",
        ) from None
    if mode is None:
        raise EnvironmentProblemError(
            f"the kubelet pod-resources socket {path} does not exist",
            reference="kubelet-socket-missing",
            hint="mount the host's /var/lib/kubelet/pod-resources into the exporter pod "
            "(hostPath), or pass --kubelet-socket PATH; without Kubernetes drop --kubernetes",
        )
    if stat.S_ISDIR(mode):
        raise InputError(
            f"--kubelet-socket {path} is a directory, not the socket",
            reference="kubelet-socket-invalid",
            hint=f"name the socket in it: --kubelet-socket {os.path.join(path, 'kubelet.sock')}",
        )
    if not stat.S_ISSOCK(mode):
        raise InputError(
            f"--kubelet-socket {path} is not a unix socket",
            reference="kubelet-socket-invalid",
            hint=f"the kubelet's pod-resources socket, by default {KUBELET_SOCKET}",
        )


class PodResourcesClient:
    """``List`` on the kubelet's pod-resources socket, the channel kept between calls."""

    def __init__(self, socket_path: str = KUBELET_SOCKET, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        grpc = _grpc()
        _check_socket(socket_path)
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self._rpc_error: type[Exception] = grpc.RpcError
        self._channel = grpc.insecure_channel(
            f"unix:{os.path.abspath(socket_path)}",
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)],
        )
        # No serializers: the request and the answer travel as the message bytes themselves.
        self._list = self._channel.unary_unary(LIST_METHOD)

    def list_pods(self) -> PodMap:
        try:
            answer = self._list(_EMPTY_REQUEST, timeout=self.timeout_s)
        except self._rpc_error as exc:
            code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise PodResourcesError(f"{self.socket_path}: List failed: {code} {details}") from None
        try:
            return pod_map(decode_list_response(bytes(answer)))
        except ValueError as exc:
            raise PodResourcesError(f"{self.socket_path}: unreadable List answer: {exc}") from None

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> PodResourcesClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
