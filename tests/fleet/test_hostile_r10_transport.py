"""Issue 13, round 10: the one HTTP transport (fleet's Prometheus client, the dcgm-exporter
scrape, the hub, remediate's webhook) against servers on 127.0.0.1 that loop, stall or never
stop talking: its three bounds — time, redirects, size — each in one place and each tested here.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from gpuwarden.transport import (
    ConnectError,
    Request,
    RequestTimeoutError,
    ResponseTooLargeError,
    RetryPolicy,
    TooManyRedirectsError,
    UrllibTransport,
    send_with_retries,
)
from tests.fleet.test_transport import _serving


@pytest.fixture
def looping() -> Iterator[str]:
    """/loop redirects to itself; /chain/N to /chain/N+1 for ever."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._redirect()

        def do_POST(self) -> None:
            self._redirect()

        def _redirect(self) -> None:
            if self.path.startswith("/chain/"):
                target = f"/chain/{int(self.path.rsplit('/', 1)[1]) + 1}"
            else:
                target = self.path
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    with _serving(Handler) as base:
        yield base


def test_a_redirect_loop_is_an_error_of_its_own_and_is_not_tried_again(looping: str) -> None:
    """Before: urllib's HTTPError came back as the server's "HTTP 302" answer, with a reason
    of three lines of urllib's prose."""
    waits: list[float] = []
    with pytest.raises(TooManyRedirectsError, match=r"go round in a loop \(to .*/loop again\)"):
        send_with_retries(
            UrllibTransport(),
            Request("GET", f"{looping}/loop", timeout_s=5.0),
            RetryPolicy(),
            sleep=waits.append,
        )
    assert waits == []  # the same redirects would come again


def test_a_chain_of_redirects_stops_after_ten(looping: str) -> None:
    with pytest.raises(TooManyRedirectsError, match="more than 10 redirects") as raised:
        UrllibTransport().send(Request("GET", f"{looping}/chain/0", timeout_s=5.0))
    assert raised.value.url.endswith("/chain/10") and raised.value.reference


@pytest.fixture
def silent() -> Iterator[tuple[str, threading.Event]]:
    """A port that accepts connections and reads, never answering; closes them when told."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.05)
    done = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/api/v1/query", done
    finally:
        done.set()
        thread.join(timeout=5)
        for sock in held:
            sock.close()
        listener.close()


def test_a_server_that_never_answers_times_out_at_the_request_s_timeout(silent) -> None:
    url, _ = silent
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError, match="timed out"):
        UrllibTransport().send(Request("POST", url, body=b"query=up", timeout_s=0.5))
    assert 0.4 < time.monotonic() - started < 2.0


@pytest.fixture
def endless() -> Iterator[str]:
    """A 200 with no Content-Length whose body never ends (until the client leaves, or 5 s)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection does

        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            chunk = b'{"metric":{"UUID":"GPU-0"},"value":[1,"1"]},' * 1000
            stop = time.monotonic() + 5.0
            while time.monotonic() < stop:
                try:
                    self.wfile.write(chunk)
                except OSError:
                    return

        def log_message(self, format: str, *args: Any) -> None:
            return

    with _serving(Handler) as base:
        yield f"{base}/api/v1/query"


def test_a_body_that_never_ends_stops_at_the_size_limit(endless: str) -> None:
    started = time.monotonic()
    with pytest.raises(ResponseTooLargeError, match="larger than 1048576 bytes"):
        UrllibTransport().send(Request("GET", endless, timeout_s=5.0, max_bytes=1 << 20))
    assert time.monotonic() - started < 3.0


def test_tls_to_a_plain_http_port_is_named_as_such(looping: str) -> None:
    url = looping.replace("http://", "https://") + "/loop"
    with pytest.raises(ConnectError, match=r"not TLS \(a plain http:// port\?\)"):
        UrllibTransport().send(Request("GET", url, timeout_s=5.0))
