"""The exporter's HTTP endpoint: ``/metrics``, ``/health`` and a landing page, over HTTP/1.1 with
keep-alive, optionally TLS and basic authentication (``export.webconfig``).

One thread per connection (Prometheus keeps its connection open between scrapes), at most
MAX_CONNECTIONS at once. Past that a new connection is answered 503 from the accepting thread, with
one non-blocking write, and closed — nothing queues, no thread starts — as node_exporter's
``--web.max-requests`` (promhttp's MaxRequestsInFlight) answers 503 past its limit: the scraper
records a failed scrape it can read instead of a reset (a TLS connection, whose answer would need a
handshake first, is still closed without one). A TLS handshake runs in the connection's thread with
a timeout, so a client that never finishes one holds only its own thread (the ssl module's timeout
bounds the whole handshake). A request's head (request line and headers) must arrive within
HEADER_TIMEOUT_S of its first byte, as Go's ``http.Server.ReadHeaderTimeout`` bounds it, and take at
most MAX_HEAD_BYTES: the per-read timeout alone lets a client that trickles a byte now and then
(slowloris) hold its connection, and with MAX_CONNECTIONS of them every scrape, for ever. What a
response contains comes from a ``Site``; this module knows nothing of Prometheus.
"""

from __future__ import annotations

import email.message
import errno
import io
import logging
import socket
import socketserver
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from gpuwarden.errors import EnvironmentProblemError, InvalidConfigError
from gpuwarden.export.webconfig import ActiveWebConfig, WebConfigSource

MAX_CONNECTIONS = 256
IDLE_TIMEOUT_S = 30.0  # a keep-alive connection with no request this long is closed
HANDSHAKE_TIMEOUT_S = 10.0
# from a request's first byte to the end of its headers: Prometheus sends a scrape's few hundred
# bytes at once. dcgm-exporter allows a request 10 s (its http.Server's ReadTimeout), nginx 60 s
# (client_header_timeout); exporter-toolkit itself sets no bound
HEADER_TIMEOUT_S = 10.0
# a request's head in bytes: a scrape's is a few hundred. Without a bound the stdlib takes 100
# lines of 64 KiB each, 6.4 MB a connection held for HEADER_TIMEOUT_S, 1.6 GB over
# MAX_CONNECTIONS. Twice the stdlib's line limit (a request line that long still gets its 414);
# nginx takes 4 lines of 8 KiB (large_client_header_buffers), Go 1 MiB (DefaultMaxHeaderBytes)
MAX_HEAD_BYTES = 128 * 1024
# past MAX_CONNECTIONS: small enough for one non-blocking write into an empty socket buffer
_BUSY_BODY = b"Too many connections: try again later.\n"
_BUSY_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Server: gpuwarden-export\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: " + str(len(_BUSY_BODY)).encode() + b"\r\n"
    b"Connection: close\r\n\r\n" + _BUSY_BODY
)
# what of a refused client's request is read (without waiting) before closing: a close with
# unread bytes sends a reset, which can reach the client before it has read the 503
_BUSY_DRAIN_BYTES = 64 * 1024
_LISTEN_HINT = (
    "give HOST:PORT, e.g. 127.0.0.1:9400, 0.0.0.0:9400 (every interface), [::1]:9400, or :9400"
)
_log = logging.getLogger("gpuwarden.export")


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str
    port: int  # 0: any free port (the bound one is on the server)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_listen(text: str) -> ListenAddress:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (every IPv4 interface, as Go exporters do)."""
    value = text.strip()
    host, sep, port_text = value.rpartition(":")
    if not sep:
        raise InvalidConfigError(
            f"--listen {text!r} has no port", reference="invalid-listen-address", hint=_LISTEN_HINT
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise InvalidConfigError(
            f"--listen {text!r}: an IPv6 address goes in brackets",
            reference="invalid-listen-address",
            hint=_LISTEN_HINT,
        )
    if not port_text.isdecimal() or not 0 <= int(port_text) <= 65535:
        raise InvalidConfigError(
            f"--listen {text!r}: port {port_text!r} is not a number from 0 to 65535",
            reference="invalid-listen-address",
            hint=_LISTEN_HINT,
        )
    if any(c.isspace() or c in "/@?#" for c in host) or not _resolvable_name(host):
        raise InvalidConfigError(
            f"--listen {text!r}: {host!r} is not a host name or address",
            reference="invalid-listen-address",
            hint=_LISTEN_HINT,
        )
    return ListenAddress(host or "0.0.0.0", int(port_text))


def _resolvable_name(host: str) -> bool:
    """Whether the resolver can be asked about ``host`` at all: getaddrinfo encodes a name with
    IDNA first, which refuses a label over 63 characters or a character it cannot encode (a
    UnicodeError, not the gaierror of a name that does not resolve)."""
    try:
        host.encode("idna")
    except UnicodeError:
        return False
    return True


class Site(Protocol):
    """What the endpoints answer."""

    def metrics(self, *, gzipped: bool) -> tuple[bytes, str]:
        """The body and its content type."""
        ...

    def health(self) -> tuple[bool, str]:
        """Whether the exporter has a fresh reading, and a line saying so."""
        ...

    def observe_scrape(self, seconds: float) -> None: ...


def _carries_a_body(headers: email.message.Message) -> bool:
    """Whether a request's headers announce a body: a Transfer-Encoding, or a Content-Length
    that is not 0 (an unreadable one too: its framing is unknown)."""
    if headers.get("Transfer-Encoding") is not None:
        return True
    length = headers.get("Content-Length")
    return length is not None and length.strip() != "0"


def _accepts_gzip(header: str | None) -> bool:
    for item in (header or "").split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() == "gzip":
            q = params.strip().replace(" ", "")
            return q not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


_LANDING = (
    b"<html><head><title>gpuwarden export</title></head><body><h1>gpuwarden export</h1>"
    b'<p><a href="/metrics">/metrics</a> (DCGM-compatible GPU metrics and gpuwarden verdicts), '
    b'<a href="/health">/health</a></p></body></html>\n'
)


class _HeadTooLargeError(Exception):
    """A request's head went past MAX_HEAD_BYTES."""


class _HeadReader(io.RawIOBase):
    """The connection's bytes. While a request's head is read (``start_head`` to ``end_head``)
    no read waits past its deadline — each socket read is otherwise bounded by the socket's
    timeout only, however many there are — and the head takes at most MAX_HEAD_BYTES."""

    def __init__(self, connection: socket.socket) -> None:
        super().__init__()
        self._connection = connection
        self._stream = connection.makefile("rb", buffering=0)
        self._deadline: float | None = None
        self._head_bytes = 0

    def start_head(self) -> None:
        self._deadline = time.monotonic() + HEADER_TIMEOUT_S
        self._head_bytes = 0

    def end_head(self) -> None:
        self._deadline = None
        self._connection.settimeout(IDLE_TIMEOUT_S)  # the answer's writes: the usual bound

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self._deadline is None:
            return self._stream.readinto(buffer)
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's headers did not arrive in time")
        self._connection.settimeout(min(left, IDLE_TIMEOUT_S))
        count = self._stream.readinto(buffer)
        self._head_bytes += count or 0
        if self._head_bytes > MAX_HEAD_BYTES:
            raise _HeadTooLargeError
        return count

    def close(self) -> None:
        self._stream.close()
        super().close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # what an answer is given before the request line's version is read: the stdlib's HTTP/0.9
    # leaves out the status line, so a 400 or 505 for a bad version went out as bare HTML
    default_request_version = "HTTP/1.0"
    server_version = "gpuwarden-export"
    timeout = IDLE_TIMEOUT_S
    # Headers and body leave as separate writes: without TCP_NODELAY the second waits for the
    # client's delayed ACK (40 ms on Linux) on every keep-alive scrape.
    disable_nagle_algorithm = True
    server: ExporterServer

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(HANDSHAKE_TIMEOUT_S)
            self.request.do_handshake()
        super().setup()
        self.rfile.close()  # the plain reader setup() made: replaced by one with a deadline
        self._head = _HeadReader(self.connection)
        self._buffered = io.BufferedReader(self._head)
        self.rfile = self._buffered

    def version_string(self) -> str:
        return self.server_version  # not the Python version: nothing for a scanner to match

    def handle_one_request(self) -> None:
        # the wait for a keep-alive connection's next request is bounded by IDLE_TIMEOUT_S per
        # read; from its first byte on, the whole head by HEADER_TIMEOUT_S (Go's order too)
        self._head.end_head()
        try:
            arrived = self._buffered.peek(1)
        except OSError:  # idle too long (TimeoutError), reset by the client
            arrived = b""
        if not arrived:
            self.close_connection = True
            return
        self._head.start_head()
        super().handle_one_request()

    def parse_request(self) -> bool:
        # the request line (at most 64 KiB and a read-ahead) cannot reach MAX_HEAD_BYTES: only
        # the headers, read here, can
        try:
            parsed: bool | None = super().parse_request()
        except _HeadTooLargeError:
            parsed = None
        finally:
            self._head.end_head()
        if parsed is None:
            self.send_error(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"the request's headers are over {MAX_HEAD_BYTES} bytes",
            )
            return False
        return parsed

    def log_message(self, format: str, *args: Any) -> None:
        return  # one line per scrape is noise; failures are counted and logged elsewhere

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _send(
        self,
        status: int,
        payload: bytes,
        content_type: str,
        body: bool,
        active: ActiveWebConfig | None,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.send_response(status)
        if self.close_connection and self.request_version != "HTTP/1.0":
            self.send_header("Connection", "close")
        if self.request_version == "HTTP/1.0" and not self.close_connection:
            # an HTTP/1.0 client asked to keep the connection: without this answer it reads
            # until the connection closes (RFC 2068 19.7.1), IDLE_TIMEOUT_S later
            self.send_header("Connection", "keep-alive")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (*extra, *(active.config.headers if active else ())):
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _answer(self, *, body: bool) -> None:
        started = time.perf_counter()
        if _carries_a_body(self.headers):
            # a GET or HEAD with a body (Prometheus never sends one): unread, its bytes would be
            # taken for the next request (RFC 9112 6.3 frames a message by its Content-Length
            # or Transfer-Encoding whatever the method); answer it and close instead
            self.close_connection = True
        active = self.server.web.current() if self.server.web is not None else None
        auth = active.auth if active is not None else None
        if auth is not None and not auth.check(self.headers.get("Authorization")):
            challenge = (("WWW-Authenticate", 'Basic realm="gpuwarden export"'),)
            self._send(401, b"Unauthorized\n", "text/plain", body, active, challenge)
            return
        # origin-form "/metrics?x" or absolute-form "http://host:9400/metrics", which a server
        # must accept too (RFC 9112 3.2.2: what a client sends through a forward proxy)
        path = urllib.parse.urlsplit(self.path).path
        site = self.server.site
        if path == "/metrics":
            gzipped = _accepts_gzip(self.headers.get("Accept-Encoding"))
            payload, content_type = site.metrics(gzipped=gzipped)
            extra = (("Content-Encoding", "gzip"),) if gzipped else ()
            self._send(200, payload, content_type, body, active, extra)
            site.observe_scrape(time.perf_counter() - started)
        elif path == "/health":
            healthy, line = site.health()
            self._send(200 if healthy else 503, line.encode() + b"\n", "text/plain", body, active)
        elif path == "/":
            self._send(200, _LANDING, "text/html; charset=utf-8", body, active)
        else:
            self._send(404, b"Not found: try /metrics\n", "text/plain", body, active)


class ExporterServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # no list of finished threads kept: memory stays flat
    request_queue_size = 128

    def __init__(
        self, address: ListenAddress, site: Site, web: WebConfigSource | None = None
    ) -> None:
        self.site = site
        self.web = web
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        infos = socket.getaddrinfo(
            address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, _, _, _, sockaddr = infos[0]
        self.address_family = family
        super().__init__((str(sockaddr[0]), int(sockaddr[1])), _Handler)

    def server_bind(self) -> None:
        # HTTPServer's own looks the host up in DNS (getfqdn), which can hang; not needed here
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)

    def get_request(self) -> tuple[Any, Any]:
        sock, client = super().get_request()
        active = self.web.current() if self.web is not None else None
        if active is not None and active.context is not None:
            sock = active.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, client

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            _answer_busy(request)  # past MAX_CONNECTIONS: refused, not queued
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that went away, a failed handshake, a timeout: that connection's problem
        _log.debug("connection from %s ended with an error", client_address, exc_info=True)

    @property
    def bound(self) -> ListenAddress:
        return ListenAddress(self.server_name, self.server_port)


def _answer_busy(connection: socket.socket) -> None:
    """A 503 to a connection past MAX_CONNECTIONS, never blocking the accepting thread: one
    non-blocking write (a few dozen bytes: the empty send buffer takes them), then what of the
    request has already come is read and dropped, so that closing sends no reset."""
    if isinstance(connection, ssl.SSLSocket):
        return  # an answer needs the TLS handshake first: that is a thread's work
    try:
        connection.setblocking(False)
        connection.send(_BUSY_ANSWER)
        connection.shutdown(socket.SHUT_WR)
        drained = 0
        while drained < _BUSY_DRAIN_BYTES:
            part = connection.recv(_BUSY_DRAIN_BYTES - drained)
            if not part:
                break
            drained += len(part)
    except OSError:  # nothing more to read now (BlockingIOError), or the client left
        return


def _bind_error(address: ListenAddress, exc: OSError) -> Exception:
    if isinstance(exc, socket.gaierror):
        return InvalidConfigError(
            f"--listen {address}: {address.host!r} is not a known host ({exc.strerror})",
            reference="invalid-listen-address",
            hint=_LISTEN_HINT,
        )
    known = {
        errno.EADDRINUSE: (
            "listen-address-in-use",
            "is already in use",
            "another exporter (dcgm-exporter listens on 9400 too) has it: stop it or pick "
            "another port with --listen",
        ),
        errno.EACCES: (
            "listen-address-not-permitted",
            "needs privileges this user does not have",
            "ports below 1024 need root or CAP_NET_BIND_SERVICE: use a higher port",
        ),
        errno.EADDRNOTAVAIL: (
            "listen-address-unavailable",
            "is not an address of this machine",
            "use an address of this machine's interfaces, 127.0.0.1 or 0.0.0.0",
        ),
    }
    reference, problem, hint = known.get(
        exc.errno or 0,
        ("listen-failed", f"cannot be listened on ({exc.strerror or exc})", _LISTEN_HINT),
    )
    return EnvironmentProblemError(f"{address} {problem}", reference=reference, hint=hint)


def start_server(
    address: ListenAddress,
    site: Site,
    web: WebConfigSource | None = None,
) -> tuple[ExporterServer, threading.Thread]:
    """Bind and serve in a daemon thread; stop with ``server.shutdown(); server.server_close()``."""
    try:
        server = ExporterServer(address, site, web)
    except OSError as exc:
        raise _bind_error(address, exc) from None
    thread = threading.Thread(
        target=server.serve_forever, name="gpuwarden-export-http", daemon=True
    )
    thread.start()
    return server, thread


def stop_server(server: ExporterServer, thread: threading.Thread) -> None:
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
