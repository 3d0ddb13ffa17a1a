"""Issue 13, round 10: the exporter's HTTP endpoint against hostile clients on 127.0.0.1.

Slowloris (a request that never finishes, or trickles a byte at a time), request heads beyond
the stdlib's line and header limits, odd methods and versions, HTTP/1.0 keep-alive and clients
that leave mid-answer. The promise: every answer is a valid HTTP response (a status line
first), the exporter keeps serving, and a stalled client holds its connection for a bounded time.

The server runs in this process (``start_server`` with a fixed ``Site``) so that its timeouts can
be shortened; every socket here has a timeout and every loop a bound.
"""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator

import pytest

from gpuwarden.export import server as http_server
from gpuwarden.export.server import ExporterServer, ListenAddress, start_server, stop_server

EXPOSITION = b'# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{gpu="0"} 41\n'
HEAD_TIMEOUT_S = 0.5  # the tests' HEADER_TIMEOUT_S: a stalled head is cut off this soon


class _FixedSite:
    scrapes = 0

    def metrics(self, *, gzipped: bool) -> tuple[bytes, str]:
        return EXPOSITION, "text/plain; version=0.0.4; charset=utf-8"

    def health(self) -> tuple[bool, str]:
        return True, "ok"

    def observe_scrape(self, seconds: float) -> None:
        self.scrapes += 1


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[ExporterServer]:
    monkeypatch.setattr(http_server, "HEADER_TIMEOUT_S", HEAD_TIMEOUT_S)
    monkeypatch.setattr(http_server, "MAX_CONNECTIONS", 8)
    server, thread = start_server(ListenAddress("127.0.0.1", 0), _FixedSite())
    try:
        yield server
    finally:
        stop_server(server, thread)


def _connect(server: ExporterServer, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.bound.port), timeout=timeout)


def _scrape(server: ExporterServer) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.bound.port, timeout=5)
    try:
        connection.request("GET", "/metrics")
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Whether the server closes ``sock`` within ``seconds`` while the client sends ``trickle``
    a byte every 0.05 s (a slowloris keeps its connection alive that way)."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.05)
    sent = 0
    while time.monotonic() < deadline:
        try:
            if not sock.recv(4096):
                return True
        except TimeoutError:
            pass
        except ConnectionError:
            return True
        if sent < len(trickle):
            try:
                sock.sendall(trickle[sent : sent + 1])
            except OSError:
                return True
            sent += 1
    return False


def test_a_client_trickling_its_headers_is_cut_off_at_the_head_deadline(exporter):
    stalled = _connect(exporter)
    try:
        stalled.sendall(b"GET /metrics HTTP/1.1\r\n")
        # 60 header bytes at 20 a second: each read comes well within the per-read timeout
        assert _closed_within(stalled, 3.0, trickle=b"X-Slow: " + b"a" * 52)
    finally:
        stalled.close()
    assert _scrape(exporter) == (200, EXPOSITION)


def test_stalled_clients_in_every_slot_are_let_go_and_scrapes_resume(exporter):
    stalled = [_connect(exporter) for _ in range(http_server.MAX_CONNECTIONS)]
    try:
        for sock in stalled:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never the blank line
        started = time.monotonic()
        status = 0
        while status != 200 and time.monotonic() - started < 4.0:
            try:
                status, _ = _scrape(exporter)
            except (ConnectionError, http.client.HTTPException):
                time.sleep(0.05)  # refused while every slot is held: ask again, bounded
        assert status == 200
        assert time.monotonic() - started < HEAD_TIMEOUT_S + 2.0
    finally:
        for sock in stalled:
            sock.close()


def test_a_head_past_its_byte_limit_is_refused_before_it_ends(exporter, monkeypatch):
    """Before: the stdlib read on up to 100 lines of 64 KiB (6.4 MB a connection, held for as
    long as the client kept the head unfinished: 311 MiB for 50 such clients)."""
    monkeypatch.setattr(http_server, "HEADER_TIMEOUT_S", 30.0)  # not the deadline: the size
    line = b"X-Padding: " + b"p" * 8000 + b"\r\n"
    lines = http_server.MAX_HEAD_BYTES // len(line) + 2
    with _connect(exporter, timeout=3.0) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n" + line * lines)  # and never the blank line
        answer = http.client.HTTPResponse(sock, method="GET")
        try:
            answer.begin()
            assert answer.status == 431
        finally:
            answer.close()
    assert _scrape(exporter) == (200, EXPOSITION)


def test_a_keep_alive_connection_waits_for_its_next_request_without_the_head_deadline(exporter):
    connection = http.client.HTTPConnection("127.0.0.1", exporter.bound.port, timeout=5)
    try:
        for _ in range(2):
            connection.request("GET", "/metrics")
            answer = connection.getresponse()
            assert (answer.status, answer.read()) == (200, EXPOSITION)
            time.sleep(HEAD_TIMEOUT_S * 2)  # between scrapes: idle, not a stalled head
    finally:
        connection.close()


def _answer(server: ExporterServer, request: bytes) -> tuple[int, int, str]:
    """(status, HTTP version, Server header) of the answer to ``request``."""
    with _connect(server) as sock:
        sock.sendall(request)
        answer = http.client.HTTPResponse(sock, method=request.split(b" ", 1)[0].decode())
        try:
            answer.begin()  # BadStatusLine when the answer does not start with a status line
            answer.read()
            return answer.status, answer.version, answer.getheader("Server") or ""
        finally:
            answer.close()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),  # an HTTP/2 client without negotiation
        (b"GET /metrics HTTP/1.x\r\n\r\n", 400),
        (b"GET /metrics FOO/1.1\r\n\r\n", 400),
        (b"GET /metrics\r\n\r\n", 200),  # HTTP/0.9 form: answered as HTTP/1.x, not bare
        (b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n", 431),
        (b"GET /metrics HTTP/1.1\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", 431),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET /metrics%00 HTTP/1.1\r\nConnection: close\r\n\r\n", 404),
        (b"GET /metrics\x00 HTTP/1.1\r\nConnection: close\r\n\r\n", 404),
        (b"GET /m\xff\xfe HTTP/1.1\r\nConnection: close\r\n\r\n", 404),
        (b"OPTIONS * HTTP/1.1\r\n\r\n", 501),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\nabc", 501),
        (b"HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n", 200),
        # absolute-form, which a server must accept (RFC 9112 3.2.2); query and fragment ignored
        (b"GET http://127.0.0.1:9400/metrics HTTP/1.1\r\nConnection: close\r\n\r\n", 200),
        (b"GET /metrics?x=%00#frag HTTP/1.1\r\nConnection: close\r\n\r\n", 200),
    ],
)
def test_every_answer_is_an_http_response_and_serving_goes_on(exporter, request_bytes, status):
    answered, version, _ = _answer(exporter, request_bytes)
    assert answered == status
    assert version in (10, 11)
    assert _scrape(exporter) == (200, EXPOSITION)


def test_the_server_header_names_no_python_version(exporter):
    for request_bytes in (b"GET /metrics HTTP/1.1\r\n\r\n", b"OPTIONS * HTTP/1.1\r\n\r\n"):
        assert _answer(exporter, request_bytes)[2] == "gpuwarden-export"


def test_an_http_1_0_keep_alive_client_is_told_the_connection_stays(exporter):
    sock = _connect(exporter)
    try:
        for _ in range(2):  # the second request on the same connection
            sock.sendall(b"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            answer = http.client.HTTPResponse(sock)
            try:
                answer.begin()
                assert answer.getheader("Connection", "").lower() == "keep-alive"
                assert answer.read() == EXPOSITION
            finally:
                answer.close()
    finally:
        sock.close()


def test_clients_leaving_mid_answer_leave_the_exporter_serving(exporter):
    for _ in range(20):
        sock = _connect(exporter)
        sock.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        sock.recv(10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()  # a reset, not a clean close
    assert _scrape(exporter) == (200, EXPOSITION)


@pytest.mark.parametrize(
    "framing",
    ["Content-Length: 5\r\n", "Transfer-Encoding: chunked\r\n"],
    ids=["length", "chunked"],
)
def test_a_get_with_a_body_is_answered_and_its_body_never_read_as_a_request(
    exporter: ExporterServer, framing: str
) -> None:
    # review r25: the body's bytes were read as the next request line (200, then 501)
    sock = _connect(exporter)
    try:
        sock.sendall(
            f"GET /metrics HTTP/1.1\r\nHost: x\r\n{framing}\r\n".encode()
            + b"helloGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        answers = b""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answers += chunk
    finally:
        sock.close()
    assert answers.count(b"HTTP/1.1 ") == 1
    assert answers.startswith(b"HTTP/1.1 200 ")
    assert b"Connection: close" in answers


def test_a_get_with_an_empty_body_keeps_the_connection(exporter: ExporterServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", exporter.bound.port, timeout=5)
    try:
        for _ in range(2):
            connection.request("GET", "/metrics", headers={"Content-Length": "0"})
            answer = connection.getresponse()
            assert answer.status == 200 and answer.read() == EXPOSITION
            assert answer.getheader("Connection") is None
    finally:
        connection.close()
