"""Issue 13, round 10: basic authentication (``--web-config-file``) against hostile and unusual
Authorization headers, on an exporter running in this process on 127.0.0.1.

Wrong, huge and non-UTF-8 credentials get a 401 (or a 431 past the stdlib's 64 KiB line limit),
never a crash; a password longer than bcrypt's 72 bytes is checked as htpasswd and exporter-toolkit
(Go's x/crypto/bcrypt, golang/go#36546) check it: on its first 72 bytes.
"""

from __future__ import annotations

import base64
import http.client
import socket
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from tests.export.test_hostile_r10_server import EXPOSITION, _FixedSite

from gpuwarden.export.server import ExporterServer, ListenAddress, start_server, stop_server
from gpuwarden.export.webconfig import BCRYPT_PASSWORD_BYTES, BasicAuth, WebConfigSource

# a generated password longer than bcrypt reads, as a password manager makes them
LONG_PASSWORD = b"Zq7-vN2!kP9#wL4@" * 6  # 96 bytes
# htpasswd -B and Go's GenerateFromPassword hash what bcrypt reads: the first 72 bytes
LONG_HASH = bcrypt.hashpw(LONG_PASSWORD[:BCRYPT_PASSWORD_BYTES], bcrypt.gensalt(4))


def _basic(user: bytes, password: bytes) -> str:
    return "Basic " + base64.b64encode(user + b":" + password).decode()


def test_a_password_longer_than_bcrypt_reads_is_checked_on_its_first_72_bytes():
    auth = BasicAuth({"prometheus": LONG_HASH})
    assert auth.check(_basic(b"prometheus", LONG_PASSWORD))
    assert not auth.check(_basic(b"prometheus", b"x" + LONG_PASSWORD[1:]))
    assert not auth.check(_basic(b"prometheus", LONG_PASSWORD[: BCRYPT_PASSWORD_BYTES - 1]))


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[ExporterServer]:
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prometheus: {LONG_HASH.decode()}\n")
    server, thread = start_server(
        ListenAddress("127.0.0.1", 0), _FixedSite(), WebConfigSource(str(path))
    )
    try:
        yield server
    finally:
        stop_server(server, thread)


def _status(server: ExporterServer, authorization: bytes) -> int:
    with socket.create_connection(("127.0.0.1", server.bound.port), timeout=5) as sock:
        sock.sendall(
            b"GET /metrics HTTP/1.1\r\nConnection: close\r\nAuthorization: "
            + authorization
            + b"\r\n\r\n"
        )
        answer = http.client.HTTPResponse(sock)
        try:
            answer.begin()
            answer.read()
            return answer.status
        finally:
            answer.close()


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (_basic(b"prometheus", LONG_PASSWORD).encode(), 200),
        (_basic(b"prometheus", b"wrong").encode(), 401),
        (_basic(b"prometheus", b"p" * 40_000).encode(), 401),  # a huge password, still a line
        (b"Basic " + b"A" * (1 << 20), 431),  # past the 64 KiB header line: refused unread
        (b"Basic \xff\xfe\x80" + base64.b64encode(b"prometheus:x"), 401),  # not UTF-8
        (_basic(b"prom\xffetheus", LONG_PASSWORD).encode(), 401),  # a user name not UTF-8
        (b"Basic", 401),
        (b"Digest username=prometheus", 401),
    ],
)
def test_any_authorization_header_gets_an_answer(guarded, authorization, status):
    assert _status(guarded, authorization) == status


def test_the_exporter_serves_on_after_hostile_credentials(guarded):
    for _ in range(3):
        _status(guarded, b"Basic " + b"A" * (1 << 20))
        _status(guarded, _basic(b"nobody", b"p" * 40_000).encode())
    connection = http.client.HTTPConnection("127.0.0.1", guarded.bound.port, timeout=5)
    try:
        connection.request(
            "GET", "/metrics", headers={"Authorization": _basic(b"prometheus", LONG_PASSWORD)}
        )
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, EXPOSITION)
    finally:
        connection.close()
