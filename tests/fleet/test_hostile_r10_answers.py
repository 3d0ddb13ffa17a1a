"""Issue 13, round 10: `gpuwarden fleet report` against servers an SRE meets in front of
Prometheus — a proxy's login page, a 200 cut off mid-JSON, API errors, a redirect loop, a
server that accepts and never answers, TLS to a plain-HTTP port, answers past the size limit —
and against the real Prometheus' answers reordered or repeated (a federating proxy without
deduplication).

The promise: exit 2 (the answer is not the API's) or 4 (the server failed or could not be
reached) with the URL named and a hint, never a traceback; with --json the error is one JSON
document on stderr and stdout stays empty; what the real server says is read the same however
it is ordered or repeated.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.fleet.prometheus import AnswerError, PrometheusClient, parse_answer
from gpuwarden.transport import RetryPolicy
from tests.fleet.test_sweep_hostile_answers import (
    WINDOW,
    Damage,
    _Proxy,
    _report,
    _strict_json,
    proxy,  # noqa: F401  (the fixture)
)

# how a stand-in answers a POST: (status, headers, body); None: accept and never answer
Answer = Callable[[str], tuple[int, dict[str, str], bytes] | None]

LOGIN_PAGE = (
    b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>"
    b'<form action="/oauth2/sign_in" method="post"><input name="username"></form></body></html>'
)
EMPTY_VECTOR = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


@contextlib.contextmanager
def _stand_in(answer: Answer) -> Iterator[str]:
    """A server on 127.0.0.1 answering every request with ``answer(path)``; its base URL.
    A request it never answers waits at most 10 s, so the server always stops."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # a 302 after a POST comes back as a GET
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answered = answer(self.path)
            if answered is None:
                stop.wait(10)
                self.close_connection = True
                return
            status, headers, body = answered
            self.send_response(status)
            for name, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _json_error(
    url: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, Any]]:
    code = main(["fleet", "report", "--prometheus", url, *WINDOW, "--json", *extra])
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    return code, _strict_json(err[err.index("{") :])


def _always(status: int, body: bytes, content_type: str = "application/json") -> Answer:
    return lambda path: (status, {"Content-Type": content_type}, body)


@pytest.mark.parametrize(
    ("answer", "code", "reference", "says"),
    [
        (_always(200, LOGIN_PAGE, "text/html"), 2, "prometheus-bad-answer", "looks like HTML"),
        (
            _always(200, EMPTY_VECTOR[:-9]),
            2,
            "prometheus-bad-answer",
            f"the JSON stops after {len(EMPTY_VECTOR) - 9} bytes",
        ),
        (
            _always(400, b'{"status":"error","errorType":"bad_data","error":"1:7: parse error"}'),
            4,
            "prometheus-query-rejected",
            "bad_data: 1:7: parse error",
        ),
        (
            _always(422, b'{"status":"error","errorType":"execution","error":"too many samples"}'),
            4,
            "prometheus-query-failed",
            "execution: too many samples",
        ),
        (
            lambda path: (302, {"Location": path}, b""),
            4,
            "prometheus-unreachable",
            "the redirects go round in a loop",
        ),
    ],
    ids=["login-page", "cut-off-json", "bad-data", "execution", "redirect-loop"],
)
def test_an_answer_that_is_no_result_is_named_with_its_url(
    capsys: pytest.CaptureFixture[str], answer: Answer, code: int, reference: str, says: str
) -> None:
    with _stand_in(answer) as url:
        started = time.monotonic()
        exit_code, document = _json_error(url, capsys)
    assert (exit_code, document["reference"]) == (code, reference)
    assert says in document["message"]
    assert url in document["message"] and document["hint"]
    assert "\n" not in document["message"]
    assert time.monotonic() - started < 4.0  # none of these is tried again


def test_a_redirect_loop_is_tried_once_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "answered HTTP 302 The HTTP server returned a redirect error that would lead to
    an infinite loop.\\nThe last 30x error message was:\\nFound", hint "retry later"."""
    with _stand_in(lambda path: (302, {"Location": path}, b"")) as url:
        _, document = _json_error(url, capsys)
    assert document["context"].endswith("tried once")
    assert "login proxy" in document["hint"]


def _fast_client(url: str, timeout_s: float) -> PrometheusClient:
    return PrometheusClient(
        url,
        timeout_s=timeout_s,
        retry=RetryPolicy(attempts=2, backoff_s=0.01),
        sleep=lambda seconds: None,
    )


def test_a_server_that_accepts_and_never_answers_times_out_once() -> None:
    """r10 tried it again after each timeout (2 tries × 0.5 s here, 4 × 120 s at the defaults);
    r10b: a read timeout is not retried (tests/fleet/test_hostile_r10b_network.py)."""
    with _stand_in(lambda path: None) as url:
        started = time.monotonic()
        with pytest.raises(EnvironmentProblemError) as raised:
            _fast_client(url, 0.5).instant("GPUs", "up", 1_700_000_000)
        took = time.monotonic() - started
    assert raised.value.reference == "prometheus-unreachable"
    assert "timed out" in str(raised.value) and url in str(raised.value)
    assert "--timeout 0.5 s" in (raised.value.hint or "")
    assert (raised.value.context or "").endswith("tried once")
    assert 0.5 <= took < 1.0  # one try of 0.5 s


def test_tls_to_a_plain_http_port_says_the_port_speaks_no_tls() -> None:
    with _stand_in(_always(200, EMPTY_VECTOR)) as url:
        tls_url = url.replace("http://", "https://")
        with pytest.raises(EnvironmentProblemError) as raised:
            _fast_client(tls_url, 2.0).instant("GPUs", "up", 1_700_000_000)
    assert raised.value.reference == "prometheus-unreachable"
    assert "not TLS (a plain http:// port?)" in str(raised.value)
    assert tls_url in str(raised.value)


def test_a_503_timeout_error_is_tried_again_then_named() -> None:
    error = b'{"status":"error","errorType":"timeout","error":"query timed out in query execution"}'
    with _stand_in(_always(503, error)) as url, pytest.raises(EnvironmentProblemError) as raised:
        _fast_client(url, 2.0).instant("GPUs", "up", 1_700_000_000)
    assert raised.value.reference == "prometheus-query-failed"
    assert "timeout: query timed out" in str(raised.value) and url in str(raised.value)
    assert "--query.timeout" in (raised.value.hint or "")


def test_a_million_series_is_refused_by_size_before_it_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A million one-label series of a vector: 55 MB of JSON, ~0.5 GB once parsed. The limit is
    on bytes, read before any parsing; here 4 MiB stands for the client's 64 MiB."""
    element = b'{"metric":{"UUID":"GPU-0000"},"value":[1700000000,"1"]},'
    body = b'{"status":"success","data":{"resultType":"vector","result":[' + element * 1_000_000
    monkeypatch.setattr("gpuwarden.fleet.prometheus.MAX_ANSWER_BYTES", 4 << 20)
    with _stand_in(_always(200, body)) as url, pytest.raises(EnvironmentProblemError) as raised:
        _fast_client(url, 5.0).instant("GPUs", "up", 1_700_000_000)
    assert raised.value.reference == "prometheus-answer-too-large"


@pytest.mark.parametrize("sample", ["NaN", "+Inf", "-Inf", "1e308"])
def test_special_sample_strings_are_numbers(sample: str) -> None:
    body = (
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"UUID":"GPU-1"},'
        f'"values":[[1700000000,"{sample}"],[1700000060,"1"]]}}]}}}}'
    ).encode()
    [series] = parse_answer(body, "matrix").result
    assert series.points[1] == (1700000060.0, 1.0)
    assert str(series.points[0][1]) == str(float(sample))


def test_a_cut_off_answer_says_where_it_stops() -> None:
    with pytest.raises(AnswerError, match="the JSON stops after 20 bytes"):
        parse_answer(EMPTY_VECTOR[:20], "vector")
    with pytest.raises(AnswerError, match="not JSON; it looks like HTML"):
        parse_answer(LOGIN_PAGE, "vector")


# --- the real Prometheus' answers, reordered and repeated ------------------------------------


def _rewritten(change: Callable[[list[Any]], list[Any]]) -> Damage:
    def damage(path: str, form: dict[str, str], status: int, body: bytes) -> tuple[int, bytes]:
        document = json.loads(body)
        data = document.get("data") or {}
        if isinstance(data.get("result"), list):
            data["result"] = change(data["result"])
        return status, json.dumps(document).encode()

    return damage


def _reversed_points(result: list[Any]) -> list[Any]:
    """Series in the reverse order, and each series' samples newest first."""
    for element in result:
        if "values" in element:
            element["values"].reverse()
    return result[::-1]


def _each_series_twice(result: list[Any]) -> list[Any]:
    return [element for element in result for _ in range(2)]


def _document(served: type[_Proxy], damage: Damage, capsys: pytest.CaptureFixture[str]) -> Any:
    code, out, err = _report(served, damage, capsys)
    assert code == 0, err
    document = _strict_json(out)
    for measured in ("answer_bytes", "server_seconds", "query_seconds", "total_seconds"):
        document["source"].pop(measured)  # the proxy's encoding and the clock, not the fleet
    return document


def test_series_and_samples_out_of_order_give_the_same_report(
    proxy: type[_Proxy],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    as_served = _document(proxy, lambda path, form, status, body: (status, body), capsys)
    assert _document(proxy, _rewritten(_reversed_points), capsys) == as_served


def test_every_series_served_twice_gives_the_same_report(
    proxy: type[_Proxy],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    as_served = _document(proxy, lambda path, form, status, body: (status, body), capsys)
    assert _document(proxy, _rewritten(_each_series_twice), capsys) == as_served
