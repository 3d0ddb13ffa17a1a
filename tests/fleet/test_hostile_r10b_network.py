"""Issue 13, round 10b: the decisions r10 left for `fleet report`'s client and the transport.

1. A server that accepts a query and never answers costs one ``--timeout``, not four: a read
   timeout is not tried again (httpx's transport retries connect failures only; urllib3 counts
   read errors apart and does not retry them for a POST). A restarting server — a refused
   connection, a 503 — is still tried again.
3. A large range answer is parsed series by series into compact structures (points in a float64
   array, label values shared), not into the whole answer's JSON first: a DCGM-shaped answer
   peaks at 2.2× its body instead of 13×.
"""

from __future__ import annotations

import json
import socket
import time
import tracemalloc

import pytest

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.fleet.prometheus import AnswerError, PrometheusClient, Series, parse_answer
from gpuwarden.transport import (
    ConnectError,
    MockTransport,
    ReadTimeoutError,
    Request,
    RetryPolicy,
    UrllibTransport,
    response,
    send_with_retries,
)
from tests.fleet.test_hostile_r10_answers import EMPTY_VECTOR, _stand_in


def _no_sleep(seconds: float) -> None:
    return


def test_a_hung_server_costs_one_timeout_at_the_default_policy() -> None:
    """Before: 4 tries × 0.6 s (+ backoff) ≈ 4 s; the default --timeout 120 s made it 8 min."""
    with _stand_in(lambda path: None) as url:
        client = PrometheusClient(url, timeout_s=0.6, sleep=_no_sleep)  # RetryPolicy()
        started = time.monotonic()
        with pytest.raises(EnvironmentProblemError) as raised:
            client.instant("GPUs", "up", 1_700_000_000)
        took = time.monotonic() - started
    assert raised.value.reference == "prometheus-unreachable"
    assert "timed out waiting for the answer (0.6 s)" in str(raised.value)
    assert (raised.value.context or "").endswith("tried once")
    assert client.stats.retries == 0
    assert 0.6 <= took < 1.5


def test_a_read_timeout_is_a_read_timeout_error_and_not_retried() -> None:
    with _stand_in(lambda path: None) as url:
        request = Request("POST", url + "/api/v1/query", timeout_s=0.3)
        retried: list[str] = []
        with pytest.raises(ReadTimeoutError):
            send_with_retries(
                UrllibTransport(),
                request,
                RetryPolicy(),
                sleep=_no_sleep,
                on_retry=lambda attempt, wait, why: retried.append(why),
            )
    assert retried == []


def test_read_timeouts_are_retried_when_the_policy_asks() -> None:
    seen: list[Request] = []

    def hung(request: Request) -> object:
        seen.append(request)
        raise ReadTimeoutError(request.url, "timed out waiting for the answer (1 s)")

    policy = RetryPolicy(attempts=3, retry_read_timeouts=True)
    with pytest.raises(ReadTimeoutError):
        send_with_retries(
            MockTransport(hung),  # type: ignore[arg-type]
            Request("GET", "http://prom:9090/x"),
            policy,
            sleep=_no_sleep,
        )
    assert len(seen) == 3


def test_a_restarting_server_is_still_retried_refused_then_503_then_200() -> None:
    answers: list[object] = [
        ConnectError("http://prom:9090/x", "connection refused"),
        response(503),
        response(200, EMPTY_VECTOR),
    ]

    def restarting(request: Request) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    waits: list[float] = []
    answer = send_with_retries(
        MockTransport(restarting),  # type: ignore[arg-type]
        Request("POST", "http://prom:9090/x"),
        RetryPolicy(),
        sleep=waits.append,
        jitter=lambda: 0.5,
    )
    assert answer.status == 200 and waits == [0.5, 1.0]


def test_a_refused_port_is_retried_over_real_sockets() -> None:
    with socket.socket() as probe:  # a port with nobody listening: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = PrometheusClient(
        f"http://127.0.0.1:{port}", timeout_s=1.0, retry=RetryPolicy(attempts=3), sleep=_no_sleep
    )
    with pytest.raises(EnvironmentProblemError) as raised:
        client.instant("GPUs", "up", 1_700_000_000)
    assert "connection refused" in str(raised.value).lower()
    assert (raised.value.context or "").endswith("tried 3 times")


def test_503_answers_over_real_sockets_are_retried_until_the_server_is_back() -> None:
    asked: list[str] = []

    def warming_up(path: str) -> tuple[int, dict[str, str], bytes]:
        asked.append(path)
        if len(asked) < 3:
            return 503, {"Content-Type": "text/plain"}, b"Service Unavailable"
        return 200, {"Content-Type": "application/json"}, EMPTY_VECTOR

    with _stand_in(warming_up) as url:
        client = PrometheusClient(url, timeout_s=2.0, sleep=_no_sleep)
        assert client.instant("GPUs", "up", 1_700_000_000) == ()
    assert len(asked) == 3 and client.stats.retries == 2


# --- 3. a large answer's memory ---------------------------------------------------------------


def _dcgm_matrix(series: int, points: int) -> bytes:
    """A range answer shaped like dcgm-exporter's series in Prometheus: twelve labels, most of
    them (node, model, driver, job) the same on many series; a value a minute."""
    elements = []
    for index in range(series):
        node = index // 8
        labels = {
            "__name__": "DCGM_FI_DEV_GPU_UTIL",
            "UUID": f"GPU-{index:08x}-1111-2222-3333-444455556666",
            "gpu": str(index % 8),
            "Hostname": f"node-{node:04d}",
            "instance": f"10.0.{node // 250}.{node % 250}:9400",
            "job": "dcgm-exporter",
            "modelName": "NVIDIA H100 80GB HBM3",
            "device": f"nvidia{index % 8}",
            "pci_bus_id": f"00000000:{index % 8:02X}:00.0",
            "DCGM_FI_DRIVER_VERSION": "550.54.15",
            "namespace": "gpu-operator",
            "pod": f"dcgm-exporter-{node:05d}",
        }
        values = [[1_700_000_000 + 60 * k, str((index * 7 + k) % 101)] for k in range(points)]
        elements.append({"metric": labels, "values": values})
    document = {"status": "success", "data": {"resultType": "matrix", "result": elements}}
    return json.dumps(document, separators=(",", ":")).encode()


def test_a_large_matrix_is_parsed_in_about_twice_its_size() -> None:
    """Before: the whole answer's parsed JSON (a list and a str per point, ~8× the body) and then
    tuples of float pairs (112 bytes a point) — a peak of 13× the body here (27.6 MiB: +416 MiB
    RSS); now each series is made compact as the parser completes it: 2.2× (+62 MiB)."""
    body = _dcgm_matrix(series=800, points=120)  # 2.0 MB
    tracemalloc.start()
    try:
        answer = parse_answer(body, "matrix")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(body)
    first, last = answer.result[0], answer.result[-1]
    assert isinstance(first, Series) and isinstance(last, Series)
    assert len(answer.result) == 800 and len(last.points) == 120
    assert last.points[5] == (1_700_000_300.0, float((799 * 7 + 5) % 101))
    assert last.labels["Hostname"] == "node-0099" and first.labels["gpu"] == "0"
    # one copy of a label value the series share
    assert first.labels["modelName"] is last.labels["modelName"]


def test_elements_of_the_other_kind_are_refused_as_before() -> None:
    vector_in_matrix = (
        b'{"status":"success","data":{"resultType":"matrix","result":'
        b'[{"metric":{"UUID":"GPU-1"},"value":[1700000000,"1"]}]}}'
    )
    with pytest.raises(AnswerError, match="a matrix series has no values list"):
        parse_answer(vector_in_matrix, "matrix")
    matrix_in_vector = (
        b'{"status":"success","data":{"resultType":"vector","result":'
        b'[{"metric":{"UUID":"GPU-1"},"values":[[1700000000,"1"]]}]}}'
    )
    with pytest.raises(AnswerError, match="not a \\[timestamp, value\\] pair"):
        parse_answer(matrix_in_vector, "vector")
    bad_value = (
        b'{"status":"success","data":{"resultType":"matrix","result":'
        b'[{"metric":{"UUID":"GPU-1"},"values":[[1700000000,"one"]]}]}}'
    )
    with pytest.raises(AnswerError, match="'one' is not a number"):
        parse_answer(bad_value, "matrix")


def test_a_series_with_native_histograms_keeps_its_float_points() -> None:
    body = (
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"UUID":"GPU-1"},'
        b'"values":[[1700000000,"2"]],"histograms":[[1700000060,{"count":"1","sum":"1"}]]}]}}'
    )
    [series] = parse_answer(body, "matrix").result
    assert isinstance(series, Series) and series.points == ((1_700_000_000.0, 2.0),)
