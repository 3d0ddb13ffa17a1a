"""Review r25a: which phase a transport timeout names, on real sockets on 127.0.0.1.

urllib wraps every OSError of ``HTTPConnection.request`` — connecting, the TLS handshake and
sending the request's bytes — in one ``URLError``; only the wait for the answer's headers is
raised bare. So a ``RequestTimeoutError`` that is not a ``ReadTimeoutError`` happened before the
whole request was sent (the server has not taken it, a retry is sound), and its words must not
claim it was the connect when the server accepted and then stopped reading the body.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from gpuwarden.transport import (
    ConnectTimeoutError,
    ReadTimeoutError,
    Request,
    RequestTimeoutError,
    UrllibTransport,
)

# far more than loopback's socket buffers take (a few MB): the send itself must block
BODY_BYTES = 64 * 1024 * 1024


@pytest.fixture
def accepting_never_reading() -> Iterator[int]:
    """A port whose server accepts and then reads nothing (nor answers) for a few seconds."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(timeout=5)
        for connection in held:
            connection.close()


def test_a_body_the_server_stops_reading_times_out_as_sending_not_connecting(
    accepting_never_reading,
):
    request = Request(
        "POST",
        f"http://127.0.0.1:{accepting_never_reading}/api/v1/query",
        body=b"q" * BODY_BYTES,
        timeout_s=0.5,
    )
    with pytest.raises(RequestTimeoutError) as caught:
        UrllibTransport().send(request)
    assert not isinstance(caught.value, ReadTimeoutError)  # never sent whole: tried again
    assert caught.value.problem == (
        "timed out sending the request (0.5 s): the server accepted the connection and stopped "
        "reading"
    )


def test_a_tls_handshake_that_never_ends_is_a_connect_timeout(accepting_never_reading):
    # the handshake is part of connecting (httpx's connect timeout covers it too): nothing of
    # the request was sent; a retry would be sound, but RetryPolicy makes none by default (it
    # would wait the whole connect bound again)
    request = Request("GET", f"https://127.0.0.1:{accepting_never_reading}/", timeout_s=0.5)
    with pytest.raises(ConnectTimeoutError) as caught:
        UrllibTransport().send(request)
    assert caught.value.problem == (
        "connected, but the TLS handshake (or a proxy's tunnel) did not finish within 0.5 s: the "
        "server accepted the connection and said nothing"
    )
