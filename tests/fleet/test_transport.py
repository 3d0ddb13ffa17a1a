"""The one HTTP transport: the mock seam, the retry loop, the stdlib transport's contract, and
the hub and dcgm-exporter fetchers sending through an injected transport."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import hub
from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.telemetry.dcgm.fetch import fetch_scrape
from gpuwarden.transport import (
    ConnectError,
    ConnectTimeoutError,
    InvalidUrlError,
    MockTransport,
    ReadError,
    Request,
    RequestTimeoutError,
    Response,
    ResponseTooLargeError,
    RetryPolicy,
    UrllibTransport,
    http_url_problem,
    response,
    retry_after_s,
    send_with_retries,
)

A100 = "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"


class Script:
    """A handler answering from a list (a TransportError in it is raised); records requests."""

    def __init__(self, *answers: Response | Exception) -> None:
        self.answers = list(answers)
        self.seen: list[Request] = []

    def __call__(self, request: Request) -> Response:
        self.seen.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def _retry(transport: MockTransport, **policy: object) -> tuple[Response, list[float]]:
    waits: list[float] = []
    answer = send_with_retries(
        transport,
        Request("GET", "http://prom:9090/x"),
        RetryPolicy(**policy),  # type: ignore[arg-type]
        sleep=waits.append,
        jitter=lambda: 0.5,  # no jitter: the base wait
    )
    return answer, waits


def test_503_then_200_is_retried_with_backoff() -> None:
    script = Script(response(503), response(503), response(200, b"ok"))
    answer, waits = _retry(MockTransport(script))
    assert answer.status == 200 and answer.body == b"ok"
    assert waits == [0.5, 1.0]
    assert len(script.seen) == 3


def test_retry_after_is_honoured_and_capped() -> None:
    script = Script(response(429, headers={"Retry-After": "3"}), response(200))
    assert _retry(MockTransport(script))[1] == [3.0]
    script = Script(response(503, headers={"Retry-After": "3600"}), response(200))
    assert _retry(MockTransport(script), max_backoff_s=8.0)[1] == [8.0]


def test_the_last_answer_is_returned_when_the_tries_are_spent() -> None:
    script = Script(response(502))
    answer, waits = _retry(MockTransport(script), attempts=3)
    assert answer.status == 502 and len(waits) == 2 and len(script.seen) == 3


def test_client_errors_are_not_retried() -> None:
    for status in (400, 401, 404, 422):
        script = Script(response(status))
        answer, waits = _retry(MockTransport(script))
        assert (answer.status, waits, len(script.seen)) == (status, [], 1)


def test_connection_errors_are_retried_then_raised() -> None:
    script = Script(ConnectError("http://prom:9090/x", "connection refused"))
    with pytest.raises(ConnectError) as info:
        _retry(MockTransport(script), attempts=2)
    assert len(script.seen) == 2
    assert info.value.exit_code == 4  # an EnvironmentProblemError if nobody catches it


def test_a_connect_timeout_is_not_retried_unless_the_policy_asks() -> None:
    """The kernel already sent the SYN again within the connect bound: a further try repeats it
    and costs the bound again (before: 4 tries of up to 30 s for a host that is gone)."""
    timed_out = ConnectTimeoutError("http://prom:9090/x", "no connection within 30 s")
    script = Script(timed_out)
    with pytest.raises(ConnectTimeoutError):
        _retry(MockTransport(script))
    assert len(script.seen) == 1
    script = Script(timed_out)
    with pytest.raises(ConnectTimeoutError):
        _retry(MockTransport(script), attempts=3, retry_connect_timeouts=True)
    assert len(script.seen) == 3


def test_retry_after_forms() -> None:
    assert retry_after_s(response(429, headers={"Retry-After": "12"})) == 12
    assert (
        retry_after_s(response(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0
    )
    assert retry_after_s(response(429, headers={"Retry-After": "soon"})) is None
    assert retry_after_s(response(429)) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_retry_after_never_raises(value: str) -> None:
    try:
        answer = response(429, headers={"Retry-After": value})
    except ValueError:
        return
    wait = retry_after_s(answer)
    assert wait is None or wait >= 0


@pytest.mark.parametrize(
    ("url", "base", "problem"),
    [
        ("http://prometheus:9090", True, None),
        ("HTTPS://host/prometheus", True, None),
        ("http://[::1]:9090/", False, None),
        ("http://host/api?query=up", False, None),
        ("http://host/api?query=up", True, "no query"),
        ("http://host/#frag", True, "no fragment"),
        ("prometheus:9090", False, "only http"),
        ("file:///etc/passwd", False, "only http"),
        ("http://", False, "only http"),
        ("http://host:abc", False, "only http"),
        ("http://host:99999", False, "only http"),
        ("http://host:0", False, "port"),
    ],
)
def test_one_check_of_the_urls_users_give(url: str, base: bool, problem: str | None) -> None:
    found = http_url_problem(url, base=base)
    assert found is None if problem is None else (found is not None and problem in found)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.booleans())
def test_the_url_check_never_raises(url: str, base: bool) -> None:
    found = http_url_problem(url, base=base)
    assert found is None or found


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([200, 204, 400, 429, 500, 502, 503, 504]), min_size=1, max_size=8))
def test_at_most_the_policy_s_attempts(statuses: list[int]) -> None:
    script = Script(*(response(s) for s in statuses))
    answer, waits = _retry(MockTransport(script), attempts=4)
    assert len(script.seen) <= 4 and len(waits) == len(script.seen) - 1
    retryable = RetryPolicy().retry_statuses
    assert answer.status not in retryable or len(script.seen) == 4


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://host/x", "http://", "http://h:99999/"]
)
def test_only_http_urls_with_a_host(url: str) -> None:
    with pytest.raises(InvalidUrlError):
        UrllibTransport().send(Request("GET", url))


@contextlib.contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 in a thread (its request threads too: a slow answer does
    not hold the shutdown); the base URL; stopped on leaving."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server() -> Iterator[str]:
    """Answers GET /big with 1000 bytes and anything else with a 404 page."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"x" * 1000 if self.path == "/big" else b"not here"
            self.send_response(200 if self.path == "/big" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Thing", "yes")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    with _serving(Handler) as base:
        yield f"{base}"


def test_statuses_are_answers_and_bodies_are_bounded(server: str) -> None:
    transport = UrllibTransport()
    missing = transport.send(Request("GET", f"{server}/nope"))
    assert (missing.status, missing.body, missing.header("x-THING")) == (404, b"not here", "yes")
    assert transport.send(Request("GET", f"{server}/big", max_bytes=1000)).body == b"x" * 1000
    with pytest.raises(ResponseTooLargeError):
        transport.send(Request("GET", f"{server}/big", max_bytes=999))


@pytest.fixture
def trickle() -> Iterator[str]:
    """Sends its headers, then one byte of a 100-byte body every 0.2 s: each read comes well
    within a socket timeout, the whole never does. Stops after 20 s or when the client leaves."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.2)

        def log_message(self, format: str, *args: object) -> None:
            return

    with _serving(Handler) as base:
        yield f"{base}/metrics"


def test_a_server_trickling_its_body_times_out_as_a_whole(trickle: str) -> None:
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError, match="for the whole body"):
        UrllibTransport().send(Request("GET", trickle, timeout_s=1.0))
    assert time.monotonic() - started < 3.0  # the body's 1 s, not 100 reads of 0.2 s


@pytest.fixture
def short() -> Iterator[str]:
    """Promises 100 bytes, sends 10 and closes the connection."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"x" * 10)
            self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            return

    with _serving(Handler) as base:
        yield f"{base}/metrics"


def test_a_body_shorter_than_its_content_length_is_cut_off_not_an_answer(short: str) -> None:
    with pytest.raises(ReadError, match="90 bytes of it never came"):
        UrllibTransport().send(Request("GET", short, timeout_s=5.0))


def test_the_dcgm_scrape_goes_through_an_injected_transport(fixtures: Path) -> None:
    body = (fixtures / "dcgm" / A100).read_bytes()
    script = Script(response(200, body))
    text = fetch_scrape("http://node-1:9400/metrics", transport=MockTransport(script))
    assert text == body.decode()
    [request] = script.seen
    assert (request.method, request.url, request.headers["Accept"]) == (
        "GET",
        "http://node-1:9400/metrics",
        "text/plain",
    )
    failing = MockTransport(Script(ConnectError("http://node-1:9400/metrics", "no route to host")))
    with pytest.raises(EnvironmentProblemError, match="cannot connect \\(no route to host\\)"):
        fetch_scrape("http://node-1:9400/metrics", transport=failing)


def test_the_hub_goes_through_an_injected_transport(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUWARDEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example")
    for var in ("HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    config = (fixtures / "models" / "Qwen2.5-7B.json").read_bytes()
    script = Script(response(200, config))
    hub_id = hub.parse_hub_id("Qwen/Qwen2.5-7B-Instruct")
    assert hub_id is not None
    fetched = hub.fetch_config(hub_id, transport=MockTransport(script))
    assert fetched.config == json.loads(config)
    assert (
        script.seen[0].url
        == "https://hub.example/Qwen/Qwen2.5-7B-Instruct/resolve/main/config.json"
    )


@pytest.fixture
def redirecting() -> Iterator[str]:
    """POST /NNN answers status NNN pointing at /landed; /landed echoes the method and body it got;
    /to-ftp points at an ftp:// URL."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.path == "/landed":
                echo = f"{self.command} {body.decode()} {self.headers.get('X-Kept')}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(echo)))
                self.end_headers()
                self.wfile.write(echo)
                return
            target = "ftp://127.0.0.1/x" if self.path == "/to-ftp" else "/landed"
            self.send_response(int(self.path.strip("/")) if self.path != "/to-ftp" else 302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: object) -> None:
            return

    with _serving(Handler) as base:
        yield base


@pytest.mark.parametrize(
    ("status", "echoed"),
    [
        # RFC 9110 15.4.8-9: 307 and 308 keep the method and the body (httpx does)
        (307, "POST query=up X"),
        (308, "POST query=up X"),
        # 301 / 302 / 303 after a POST are fetched with GET, no body: what browsers, httpx and
        # requests do
        (301, "GET  X"),
        (302, "GET  X"),
        (303, "GET  X"),
    ],
)
def test_redirects_after_a_post_follow_the_status_s_rule(
    redirecting: str, status: int, echoed: str
) -> None:
    answer = UrllibTransport().send(
        Request("POST", f"{redirecting}/{status}", {"X-Kept": "X"}, b"query=up", timeout_s=5.0)
    )
    assert (answer.status, answer.body.decode()) == (200, echoed)
    assert answer.url.endswith("/landed")


def test_a_redirect_to_anything_but_http_is_refused(redirecting: str) -> None:
    with pytest.raises(InvalidUrlError, match=r"redirects to ftp://127\.0\.0\.1/x: only http://"):
        UrllibTransport().send(Request("GET", f"{redirecting}/to-ftp", timeout_s=5.0))
