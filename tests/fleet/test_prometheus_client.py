"""The Prometheus client through a mock transport: the answers' parsing, retries, and the error
each failure becomes (reference, exit code, the query it names). No server."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import threading
import time
import urllib.parse
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError, EnvironmentProblemError, GpuwardenError
from gpuwarden.fleet.prometheus import (
    AnswerError,
    PrometheusApiError,
    PrometheusClient,
    PrometheusQueryError,
    parse_answer,
)
from gpuwarden.transport import (
    ConnectError,
    MockTransport,
    Request,
    Response,
    ResponseTooLargeError,
    RetryPolicy,
    response,
)
from tests.fleet.test_transport import Script

URL = "http://prometheus.example:9090"
QUERY = 'sum by (UUID) (DCGM_FI_DEV_GPU_UTIL{cluster="x"})'


def _json(document: dict[str, Any], status: int = 200) -> Response:
    return response(status, json.dumps(document).encode(), {"Content-Type": "application/json"})


def _vector(*values: tuple[dict[str, str], str]) -> Response:
    result = [{"metric": labels, "value": [1704067200.5, value]} for labels, value in values]
    return _json({"status": "success", "data": {"resultType": "vector", "result": result}})


def _client(script: Script, **kwargs: Any) -> PrometheusClient:
    return PrometheusClient(
        URL,
        transport=MockTransport(script),
        sleep=lambda s: None,
        retry=RetryPolicy(attempts=3),
        **kwargs,
    )


def test_an_instant_query_is_a_form_post_with_nocache() -> None:
    script = Script(_vector(({"UUID": "GPU-1"}, "42.5"), ({"UUID": "GPU-2"}, "NaN")))
    client = _client(script, bearer_token="s3cret")
    samples = client.instant("util", QUERY, 1704067200)
    assert [(dict(s.labels), s.value) for s in samples[:1]] == [({"UUID": "GPU-1"}, 42.5)]
    assert samples[1].value != samples[1].value  # NaN kept as NaN
    [request] = script.seen
    assert (request.method, request.url) == ("POST", f"{URL}/api/v1/query")
    form = urllib.parse.parse_qs((request.body or b"").decode())
    assert form == {"query": [QUERY], "time": ["1704067200"], "nocache": ["1"]}
    assert request.headers["Authorization"] == "Bearer s3cret"
    assert client.stats.queries == 1


def test_a_range_query_reads_a_matrix_and_keeps_warnings() -> None:
    document = {
        "status": "success",
        "warnings": ["query result may be incomplete"],
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"gpu": "0"}, "values": [[60, "1"], [120, "+Inf"]]}],
        },
    }
    client = _client(Script(_json(document)))
    [series] = client.range("util", QUERY, 60, 120, 60)
    assert series.points == ((60.0, 1.0), (120.0, float("inf")))
    assert client.stats.warnings == ["query result may be incomplete"]


def test_bad_promql_is_rejected_naming_the_query() -> None:
    error = {"status": "error", "errorType": "bad_data", "error": 'parse error: unexpected "}"'}
    client = _client(Script(_json(error, 400)))
    with pytest.raises(PrometheusQueryError) as info:
        client.instant("idle minutes", QUERY, 0)
    err = info.value
    assert err.reference == "prometheus-query-rejected"
    assert err.exit_code == 4 and err.query_name == "idle minutes"
    assert "idle minutes" in err.message and "parse error" in err.message
    assert QUERY in (err.context or "")


def test_an_expensive_query_fails_with_a_hint() -> None:
    error = {
        "status": "error",
        "errorType": "execution",
        "error": "query processing would load too many samples into memory",
    }
    with pytest.raises(PrometheusQueryError) as info:
        _client(Script(_json(error, 422))).instant("energy", QUERY, 0)
    assert info.value.reference == "prometheus-query-failed"
    assert "--query.max-samples" in (info.value.hint or "")


def test_a_restarting_server_is_waited_for() -> None:
    script = Script(response(503, b"starting"), response(503, b"starting"), _vector())
    client = _client(script)
    assert client.instant("util", QUERY, 0) == ()
    assert client.stats.retries == 2 and len(script.seen) == 3


def test_a_server_that_stays_unavailable_is_a_failed_query() -> None:
    script = Script(response(503, b"<html>unavailable</html>"))
    with pytest.raises(PrometheusQueryError) as info:
        _client(script).instant("util", QUERY, 0)
    assert info.value.reference == "prometheus-query-failed"
    assert "HTTP 503" in info.value.message
    assert len(script.seen) == 3


def test_nobody_listening_is_unreachable_exit_4() -> None:
    script = Script(ConnectError(f"{URL}/api/v1/query", "connection refused"))
    with pytest.raises(EnvironmentProblemError) as info:
        _client(script).instant("util", QUERY, 0)
    err = info.value
    assert (err.reference, err.exit_code) == ("prometheus-unreachable", 4)
    assert "connection refused" in err.message and URL in err.message
    assert "--prometheus" in (err.hint or "") and "tried 3 times" in (err.context or "")


@pytest.mark.parametrize(
    ("answer", "reference", "error_type"),
    [
        (response(401, b"no"), "prometheus-unauthorized", EnvironmentProblemError),
        (response(403, b"no"), "prometheus-unauthorized", EnvironmentProblemError),
        (response(404, b"404 page not found"), "prometheus-not-found", EnvironmentProblemError),
        (
            response(200, b"<!doctype html><title>Sign in</title>"),
            "prometheus-bad-answer",
            CorruptInputError,
        ),
        (
            response(200, b'{"status": "success", "data": {"resultType": "matrix", "result": []}}'),
            "prometheus-bad-answer",
            CorruptInputError,
        ),
    ],
)
def test_other_answers_name_the_problem(
    answer: Response, reference: str, error_type: type[GpuwardenError]
) -> None:
    with pytest.raises(error_type) as info:
        _client(Script(answer)).instant("util", QUERY, 0)
    assert info.value.reference == reference
    assert info.value.hint


def test_an_oversized_answer_is_refused() -> None:
    script = Script(ResponseTooLargeError(f"{URL}/api/v1/query", "too large"))
    with pytest.raises(PrometheusQueryError) as info:
        _client(script).instant("util", QUERY, 0)
    assert info.value.reference == "prometheus-answer-too-large"


def test_parse_answer_rejects_the_wrong_shapes() -> None:
    vector = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
    assert parse_answer(vector, "vector").result == ()
    for body in (
        b"[]",
        b'{"status": 1}',
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"2"]}]}}',
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}}',
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":["x","2"]}]}}',
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":{}}]}}',
    ):
        with pytest.raises(AnswerError):
            parse_answer(body, "vector" if b"vector" in body or body == b"[]" else "matrix")
    with pytest.raises(PrometheusApiError, match="timeout: query timed out"):
        parse_answer(
            b'{"status":"error","errorType":"timeout","error":"query timed out"}', "vector"
        )


_json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8) | st.integers(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=200), _json_values.map(lambda v: json.dumps(v).encode())))
def test_parse_answer_fuzz(body: bytes) -> None:
    for expected in ("vector", "matrix"):
        with contextlib.suppress(AnswerError, PrometheusApiError):
            parse_answer(body, expected)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "metric": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
                "values": st.lists(
                    st.tuples(
                        st.integers(0, 2**31), st.sampled_from(["1", "NaN", "-Inf", "0.5", "x"])
                    ),
                    max_size=4,
                ),
            }
        ),
        max_size=4,
    )
)
def test_parse_answer_fuzz_matrix_shapes(result: list[dict[str, Any]]) -> None:
    body = json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": result}}
    ).encode()
    bad = any(v == "x" for r in result for _, v in r["values"])
    try:
        answer = parse_answer(body, "matrix")
    except AnswerError:
        assert bad
        return
    label_sets = {frozenset(r["metric"].items()) for r in result}  # a repeated one is merged
    assert not bad and len(answer.result) == len(label_sets)
    for series in answer.result:
        stamps = [stamp for stamp, _ in series.points]  # type: ignore[union-attr]
        assert stamps == sorted(set(stamps))


def test_request_is_what_the_mock_sees() -> None:
    script = Script(_json({"status": "success", "data": {"resultType": "matrix", "result": []}}))
    _client(script).range("r", "up", 0, 3600, 60)
    form = urllib.parse.parse_qs((script.seen[0].body or b"").decode())
    assert (
        form["step"] == ["60"]
        and form["end"] == ["3600"]
        and script.seen[0].url.endswith("/query_range")
    )
    assert isinstance(script.seen[0], Request)


def test_time_waiting_for_the_server_is_wall_time_not_the_sum_of_parallel_queries() -> None:
    """Four queries in flight at once, each answered after 0.2 s: the server was waited for
    ~0.2 s (the report's footer), the queries' waits add up to ~0.8 s."""
    gate = threading.Barrier(4)

    def answer(_: Request) -> Response:
        gate.wait(timeout=5)  # all four are in flight before any is answered
        time.sleep(0.2)
        return _vector(({"UUID": "GPU-1"}, "1"))

    client = PrometheusClient(URL, transport=MockTransport(answer), sleep=lambda s: None)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: client.instant(f"q{i}", QUERY, 1704067200), range(4)))
    stats = client.stats
    assert stats.queries == 4 and stats.waiting == 0
    assert 0.2 <= stats.server_s < 0.5
    assert stats.query_s >= 0.8 and stats.query_s > 2 * stats.server_s
