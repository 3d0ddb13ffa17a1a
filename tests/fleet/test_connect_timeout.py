"""Connecting has a bound of its own (``transport.CONNECT_TIMEOUT_S``, the lesser of it and the
request's timeout), on real sockets on 127.0.0.1.

A host that is down, or behind a firewall that drops packets, never answers a connect: before,
each try waited the request's whole timeout — ``fleet report``'s --timeout 120 s, four tries,
about 8 minutes for a mistyped address — and the hint said a busy server needs a longer
--timeout. The black hole here is a listening socket whose accept queue is full: Linux drops
further SYNs, so a connect waits exactly as it does for a host that is gone.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gpuwarden import transport
from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.fleet.prometheus import PrometheusClient
from gpuwarden.telemetry.dcgm.fetch import fetch_scrape
from gpuwarden.transport import (
    ConnectTimeoutError,
    ReadTimeoutError,
    Request,
    RequestTimeoutError,
    RetryPolicy,
    UrllibTransport,
)


@pytest.fixture
def black_hole() -> Iterator[str]:
    """http://127.0.0.1:PORT where connecting never completes (the accept queue is full)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    queued: list[socket.socket] = []
    for _ in range(4):  # more than a backlog of 0 admits
        waiting = socket.socket()
        waiting.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # a non-blocking connect in progress
            waiting.connect(("127.0.0.1", port))
        queued.append(waiting)
    time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for waiting in queued:
            waiting.close()
        listener.close()


@pytest.fixture
def short_connect_bound(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(transport, "CONNECT_TIMEOUT_S", 0.3)
    return 0.3


@pytest.fixture
def slow_answer() -> Iterator[str]:
    """A server that accepts at once and answers 200 after 0.8 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)

    def serve() -> None:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            connection.recv(65536)
            time.sleep(0.8)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/metrics"
    finally:
        thread.join(timeout=5)
        listener.close()


def test_a_connect_that_never_completes_is_a_connect_timeout(black_hole: str) -> None:
    with pytest.raises(ConnectTimeoutError) as caught:
        UrllibTransport().send(Request("GET", black_hole + "/metrics", timeout_s=0.4))
    assert isinstance(caught.value, RequestTimeoutError)  # nothing was sent: a retry is sound
    assert not isinstance(caught.value, ReadTimeoutError)
    assert caught.value.problem == (
        "no connection within 0.4 s: the host is down or unreachable, or a firewall drops the "
        "connection"
    )


def test_a_long_request_timeout_does_not_lengthen_the_connect(
    black_hole: str, short_connect_bound: float
) -> None:
    """Before: the connect waited the request's 60 s."""
    started = time.monotonic()
    with pytest.raises(ConnectTimeoutError) as caught:
        UrllibTransport().send(Request("GET", black_hole + "/metrics", timeout_s=60.0))
    assert "no connection within 0.3 s" in caught.value.problem
    assert time.monotonic() - started < 30  # far below the request's 60 s


def test_the_answer_is_still_awaited_for_the_request_s_whole_timeout(
    slow_answer: str, short_connect_bound: float
) -> None:
    # the connect bound (0.3 s) is not a read bound: the answer comes after 0.8 s
    answer = UrllibTransport().send(Request("GET", slow_answer, timeout_s=5.0))
    assert (answer.status, answer.body) == (200, b"ok")


def test_fleet_names_a_host_that_never_accepts_and_does_not_ask_for_a_longer_timeout(
    black_hole: str, short_connect_bound: float
) -> None:
    waits: list[float] = []
    client = PrometheusClient(
        black_hole,
        timeout_s=120.0,
        retry=RetryPolicy(attempts=2, backoff_s=0.01),
        sleep=waits.append,
    )
    with pytest.raises(EnvironmentProblemError) as raised:
        client.instant("GPUs", "up", 1_700_000_000)
    error = raised.value
    assert error.reference == "prometheus-unreachable"
    assert "no connection within 0.3 s" in str(error)
    # not tried again: the kernel sent the SYN again within the bound; before, 2 tries here and
    # 4 of 30 s each at the default policy
    assert (error.context or "").endswith("tried once")
    assert client.stats.retries == 0 and waits == []
    assert "--timeout" not in (error.hint or "")  # a longer --timeout cannot help a dead host
    assert "curl" in (error.hint or "")


def test_a_dcgm_scrape_of_a_host_that_never_accepts_says_so(black_hole: str) -> None:
    with pytest.raises(EnvironmentProblemError) as raised:
        fetch_scrape(black_hole + "/metrics", timeout_s=0.4)
    assert raised.value.reference == "dcgm-exporter-unreachable"
    assert "no connection within 0.4 s" in str(raised.value)
