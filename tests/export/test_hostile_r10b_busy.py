"""Issue 13, round 10b: a scrape past the exporter's MAX_CONNECTIONS gets an HTTP answer.

r10 closed such a connection without a word: the scraper saw a reset or an empty reply. Now it
is answered 503 from the accepting thread (node_exporter's ``--web.max-requests`` answers 503
past its limit), and nothing queues: the answer is one non-blocking write, no thread starts.
Real sockets on 127.0.0.1; every socket has a timeout and every loop a bound.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from tests.export.test_hostile_r10_server import EXPOSITION, _FixedSite

from gpuwarden.export import server as http_server
from gpuwarden.export.server import ExporterServer, ListenAddress, start_server, stop_server
from gpuwarden.transport import Request, UrllibTransport

LIMIT = 4


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[ExporterServer]:
    monkeypatch.setattr(http_server, "MAX_CONNECTIONS", LIMIT)
    server, thread = start_server(ListenAddress("127.0.0.1", 0), _FixedSite())
    try:
        yield server
    finally:
        stop_server(server, thread)


def _scrape(server: ExporterServer) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.bound.port, timeout=5)
    try:
        connection.request("GET", "/metrics")
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def _hold_every_slot(server: ExporterServer) -> list[socket.socket]:
    """LIMIT keep-alive connections, each with a scrape answered (so its slot is surely held)."""
    held = []
    for _ in range(LIMIT):
        sock = socket.create_connection(("127.0.0.1", server.bound.port), timeout=5)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = http.client.HTTPResponse(sock, method="GET")
        answer.begin()
        assert answer.status == 200
        answer.read()
        held.append(sock)
    return held


def test_a_scrape_past_the_limit_is_answered_503_and_serving_resumes(exporter):
    """Before: http.client.RemoteDisconnected or ConnectionResetError, no status."""
    held = _hold_every_slot(exporter)
    try:
        for _ in range(20):
            status, headers, body = _scrape(exporter)
            assert status == 503
            assert headers["connection"] == "close"
            assert int(headers["content-length"]) == len(body)
            assert b"try again later" in body
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 3.0
    status = 503
    while status == 503 and time.monotonic() < deadline:  # the held slots free as they close
        status, _, body = _scrape(exporter)
    assert (status, body) == (200, EXPOSITION)


def test_many_clients_past_the_limit_all_get_an_answer_and_no_thread(exporter):
    held = _hold_every_slot(exporter)
    threads_before = threading.active_count()
    try:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(lambda _: _scrape(exporter)[0], range(200)))
        assert statuses == [503] * 200
        # the server started no thread for them (the pool's own have ended)
        assert threading.active_count() <= threads_before
    finally:
        for sock in held:
            sock.close()


def test_gpuwarden_s_own_transport_reads_the_503(exporter):
    held = _hold_every_slot(exporter)
    try:
        url = f"http://127.0.0.1:{exporter.bound.port}/metrics"
        answer = UrllibTransport().send(Request("GET", url, timeout_s=5.0))
        assert answer.status == 503 and answer.header("Connection") == "close"
    finally:
        for sock in held:
            sock.close()
