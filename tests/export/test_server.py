"""The exporter's HTTP side: --listen, a port already taken, load (50 concurrent scrapers), memory
after 10,000 scrapes, gzip, /health, and that a scrape never waits for a collection."""

from __future__ import annotations

import gzip
import http.client
import re
import socket
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.export.helpers import read_scrape, run_export, serving

from gpuwarden.errors import InvalidConfigError
from gpuwarden.export.server import ListenAddress, _accepts_gzip, parse_listen


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:9400", ListenAddress("127.0.0.1", 9400)),
     (":9400", ListenAddress("0.0.0.0", 9400)),
     ("[::1]:0", ListenAddress("::1", 0)), ("localhost:65535", ListenAddress("localhost", 65535)),
     (" 0.0.0.0:9400 ", ListenAddress("0.0.0.0", 9400))],
)  # fmt: skip
def test_listen_addresses(text, address):
    assert parse_listen(text) == address


@pytest.mark.parametrize("text", ["9400", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:65536",
                                  "::1:9400", "a b:1", "127.0.0.1:-1", "host/x:1", "",
                                  "a" * 64 + ".example:1", "\udcff:1"])  # fmt: skip
def test_bad_listen_addresses_are_refused(text):
    with pytest.raises(InvalidConfigError) as caught:
        parse_listen(text)
    assert caught.value.reference == "invalid-listen-address"


@given(st.text(max_size=40))
@settings(max_examples=200, deadline=None)
def test_any_listen_text_is_an_address_or_a_clear_error(text):
    try:
        address = parse_listen(text)
    except InvalidConfigError as exc:
        assert exc.reference == "invalid-listen-address"  # noqa: PT017 - the fuzzed branch
    else:
        assert 0 <= address.port <= 65535 and address.host


@pytest.mark.parametrize(
    ("header", "gzip"),
    [(None, False), ("gzip", True), ("GZIP;q=0.5", True), ("deflate, gzip", True),
     ("gzip;q=0", False), ("gzip; q=0.000", False), ("identity", False), ("x-gzip", False)],
)  # fmt: skip
def test_accept_encoding(header, gzip):
    assert _accepts_gzip(header) is gzip


@given(st.text(max_size=60))
@settings(max_examples=200, deadline=None)
def test_any_accept_encoding_header_is_a_yes_or_no(header):
    assert _accepts_gzip(header) in (True, False)


def test_bad_listen_is_exit_2_with_its_reference():
    result = run_export("--backend", "sim", "--listen", "127.0.0.1:99999")
    assert result.returncode == 2
    assert "error: invalid-listen-address" in result.stderr and "Traceback" not in result.stderr


def test_a_port_in_use_is_exit_4_with_its_reference():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_export("--backend", "sim", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 4
    assert "error: listen-address-in-use" in result.stderr
    assert "dcgm-exporter" in result.stderr  # the hint names the usual culprit


def test_options_that_do_not_go_together():
    assert run_export("--backend", "smi", "--sim-speed", "5", "--once").returncode == 2
    result = run_export("--backend", "sim", "--kubelet-socket", "/x.sock", "--once")
    assert result.returncode == 2 and "kubelet-socket-without-kubernetes" in result.stderr


def _get(port: int, path: str = "/metrics", headers: dict[str, str] | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def _rss(port: int) -> float:
    _, body, _ = _get(port)
    return read_scrape(body.decode()).one("process_resident_memory_bytes")


def _scrape_many(port: int, count: int, workers: int, failures: list[str]) -> None:
    def scrape(n: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            for _ in range(n):
                connection.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
                response = connection.getresponse()
                body = response.read()
                if response.status != 200 or b"DCGM_FI_DEV_GPU_TEMP{" not in gzip.decompress(body):
                    failures.append(f"status {response.status}")
        except OSError as exc:
            failures.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=scrape, args=(count // workers,)) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_fifty_concurrent_scrapers_all_get_full_answers():
    with serving("--backend", "sim") as running:
        failures: list[str] = []
        _scrape_many(running.port, 1000, 50, failures)
        assert failures == []
        # a scrape is counted after its answer is sent ("render and send"), so the last of the
        # 1000 may be counted only after a client has read it: ask again, a bounded few times
        asked, counted = 0, 0.0
        while counted < 1000 and asked < 50:
            if asked:
                time.sleep(0.02)
            status, body, headers = _get(running.port)
            asked += 1
            assert status == 200
            scrape = read_scrape(body.decode())
            counted = scrape.one("gpuwarden_scrape_duration_seconds_count")
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert 1000 <= counted < 1000 + asked  # every scrape counted once, none twice
        assert len(scrape.series("DCGM_FI_DEV_GPU_TEMP")) == 8


def test_memory_stays_flat_over_ten_thousand_scrapes():
    with serving("--backend", "sim") as running:
        failures: list[str] = []
        _scrape_many(running.port, 1000, 4, failures)  # warm: caches, threads, allocator
        before = _rss(running.port)
        _scrape_many(running.port, 10_000, 4, failures)
        after = _rss(running.port)
        assert failures == []
        # a leak of even 500 bytes per scrape would show as 5 MB here
        assert after - before < 5 * 2**20, (before, after)


def test_gzip_is_the_same_exposition_and_health_answers():
    with serving("--backend", "sim", "--gpus", "2") as running:
        _, zipped, headers = _get(running.port, headers={"Accept-Encoding": "gzip"})
        assert headers["Content-Encoding"] == "gzip"
        plain = read_scrape(gzip.decompress(zipped).decode())
        assert len(plain.series("DCGM_FI_DEV_POWER_USAGE")) == 2
        status, body, _ = _get(running.port, "/health")
        assert status == 200 and body.startswith(b"ok")
        assert _get(running.port, "/nowhere")[0] == 404
        assert b"/metrics" in _get(running.port, "/")[1]


def test_a_scrape_never_waits_for_a_slow_collection():
    # a 4 s collection interval: scrapes in between are answered from the last reading
    with serving("--backend", "sim", "--gpus", "1", "--interval", "4") as running:
        started = time.perf_counter()
        for _ in range(20):
            assert _get(running.port)[0] == 200
        assert time.perf_counter() - started < 2.0
        _, body, _ = _get(running.port)
        collections = read_scrape(body.decode()).one("gpuwarden_collections_total", backend="sim")
        assert collections <= 2  # the 20 scrapes caused no reading


def test_sigterm_ends_the_exporter_cleanly():
    with serving("--backend", "sim", "--gpus", "1") as running:
        assert _get(running.port)[0] == 200
        running.process.terminate()
        assert running.process.wait(timeout=10) == 0
    assert not any(re.search("Traceback|Error", line) for line in running.log)
