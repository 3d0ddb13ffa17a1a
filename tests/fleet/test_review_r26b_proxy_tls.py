"""Review r26b of the transport's connect bound (``_BoundedConnect``, ``_BoundedConnectTls``)
under urllib's ProxyHandler, on real sockets on 127.0.0.1: an https:// URL through ``https_proxy``
(a CONNECT tunnel, then TLS to the server through it), an http:// URL through ``http_proxy`` (the
proxy fetches it), and ``no_proxy``.

The bound covers connecting only — the proxy's tunnel and the TLS handshake included, as httpx's
connect timeout does — and the answer is then awaited for the request's whole timeout. The TLS
server's certificate is trusted through ``SSL_CERT_FILE``, which OpenSSL's default verify paths
read: the transport's own default context, nothing injected.
"""

from __future__ import annotations

import datetime
import http.client
import http.server
import ipaddress
import select
import socket
import socketserver
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpuwarden import transport
from gpuwarden.transport import ConnectTimeoutError, Request, UrllibTransport

SLOW_ANSWER_S = 0.8  # the server's think time: longer than the connect bound below
CONNECT_BOUND_S = 0.3
PROXY_VARIABLES = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")


class _Answers(http.server.BaseHTTPRequestHandler):
    """200 "ok <path>"; "/slow" after SLOW_ANSWER_S."""

    def log_message(self, *args: object) -> None:  # quiet: pytest shows failures
        return

    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(SLOW_ANSWER_S)
        body = f"ok {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "server.crt", folder / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def _serving(server: socketserver.BaseServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture(autouse=True)
def no_proxy_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setattr(transport, "CONNECT_TIMEOUT_S", CONNECT_BOUND_S)


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """https://localhost:PORT with a certificate the default context trusts."""
    cert_file, key_file = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    server = _Server(("127.0.0.1", 0), _Answers)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    _serving(server)
    try:
        yield f"https://localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def plain_server() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Answers)
    _serving(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Proxy(socketserver.ThreadingTCPServer):
    """A forward proxy: CONNECT tunnels bytes both ways, an absolute-form GET is fetched.
    ``asked`` holds each request line; ``silent`` reads a request and never answers."""

    daemon_threads = True

    def __init__(self, *, silent: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.asked: list[str] = []
        self.silent = silent


class _ProxyHandler(socketserver.StreamRequestHandler):
    server: _Proxy

    def handle(self) -> None:
        method, target, _ = self.rfile.readline().decode().split()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # the request's headers: nothing this proxy needs
        self.server.asked.append(f"{method} {target}")
        if self.server.silent:
            time.sleep(3 * CONNECT_BOUND_S)
        elif method == "CONNECT":
            self._tunnel(target)
        else:
            self._fetch(target)

    def _tunnel(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            ends = (self.connection, upstream)
            while True:
                ready, _, _ = select.select(ends, [], [], 5)
                if not ready:
                    return
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    (upstream if source is self.connection else self.connection).sendall(data)

    def _fetch(self, target: str) -> None:
        parts = urllib.parse.urlsplit(target)
        upstream = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
        try:
            upstream.request("GET", parts.path)
            answer = upstream.getresponse()
            body = answer.read()
        finally:
            upstream.close()
        self.wfile.write(
            f"HTTP/1.1 {answer.status} {answer.reason}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Proxy]:
    """A proxy named by http_proxy and https_proxy."""
    server = _Proxy()
    _serving(server)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("http_proxy", url)
    monkeypatch.setenv("https_proxy", url)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    answer = UrllibTransport().send(Request("GET", url, timeout_s=timeout_s))
    return answer.status, answer.body


def test_through_a_connect_tunnel_the_answer_is_awaited_for_the_request_s_timeout(
    tls_server: str, proxy: _Proxy
) -> None:
    # tunnel and TLS within the 0.3 s bound; the answer after 0.8 s, within the request's 5 s
    assert _get(tls_server + "/slow") == (200, b"ok /slow")
    assert proxy.asked == [f"CONNECT {urllib.parse.urlsplit(tls_server).netloc}"]


def test_through_a_plain_proxy_the_answer_is_awaited_for_the_request_s_timeout(
    plain_server: str, proxy: _Proxy
) -> None:
    assert _get(plain_server + "/slow") == (200, b"ok /slow")
    assert proxy.asked == [f"GET {plain_server}/slow"]


def test_no_proxy_reaches_the_server_itself(
    tls_server: str, plain_server: str, proxy: _Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
    assert _get(tls_server + "/slow") == (200, b"ok /slow")
    assert _get(plain_server + "/x") == (200, b"ok /x")
    assert proxy.asked == []


def test_a_proxy_that_never_opens_the_tunnel_is_a_connect_timeout(
    tls_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    silent = _Proxy(silent=True)
    _serving(silent)
    monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{silent.server_address[1]}")
    started = time.monotonic()
    try:
        with pytest.raises(ConnectTimeoutError) as caught:
            _get(tls_server + "/x", timeout_s=60.0)
    finally:
        silent.shutdown()
        silent.server_close()
    assert time.monotonic() - started < 5  # the bound, not the request's 60 s
    assert caught.value.problem.startswith(
        f"connected, but the TLS handshake (or a proxy's tunnel) did not finish within "
        f"{CONNECT_BOUND_S:g} s"
    )
