"""The Prometheus HTTP API client: the only code of ``fleet`` that speaks HTTP (through
``gpuwarden.transport``). Works against Prometheus and VictoriaMetrics (same ``/api/v1`` API).

Queries go as form-encoded POSTs (no URL length limit), with ``nocache=1`` so VictoriaMetrics does
not align a range to its step for its cache (Prometheus ignores the parameter). 429 and 5xx
answers and network failures are tried again with backoff (``transport.send_with_retries``); a
query the server took and did not answer within ``--timeout`` is not: it has cost the whole
timeout once already. A range answer is parsed series by series into compact ``Series``.

Errors name the server, the query and what to do:

* ``prometheus-unreachable`` (exit 4): no answer after the retries;
* ``prometheus-unauthorized`` (exit 4): 401/403;
* ``prometheus-not-found`` (exit 4): 404, no Prometheus API at that URL (a path prefix?);
* ``prometheus-query-rejected`` (exit 4; the collector makes it exit 2 when the user's
  ``--selector`` is in the query): 400, the server refused the PromQL, with its message;
* ``prometheus-query-failed`` (exit 4): 422/503/5xx, the query could not run (too many samples,
  timeout);
* ``prometheus-bad-answer`` (exit 2): an answer that is not the API's JSON (a login page, a proxy).
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuwarden import __version__
from gpuwarden.errors import CorruptInputError, EnvironmentProblemError, shown
from gpuwarden.transport import (
    ConnectTimeoutError,
    Request,
    RequestTimeoutError,
    Response,
    ResponseTooLargeError,
    RetryHook,
    RetryPolicy,
    TooManyRedirectsError,
    Transport,
    TransportError,
    default_transport,
    send_with_retries,
    urlencode,
)

DEFAULT_TIMEOUT_S = 120.0  # one query over a chunk of a large fleet can take tens of seconds
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # chunks keep real answers to a few MiB
_QUERY_SHOWN_CHARS = 600  # an error quotes this much of the query


@dataclass(frozen=True, slots=True)
class Sample:
    """One element of an instant vector."""

    labels: Mapping[str, str]
    value: float


class Series:
    """One series of a range query: (Unix seconds, value) points, oldest first.

    The points are kept as one float64 array of (stamp, value) rows, 16 bytes a point: a tuple
    of float pairs takes 112 (tuple 56, two floats 48, a slot 8), seven times that, and a
    large answer's points are most of its memory. ``points`` gives them as pairs."""

    __slots__ = ("_rows", "labels")

    def __init__(self, labels: Mapping[str, str], points: Iterable[tuple[float, float]]) -> None:
        self.labels = labels
        pairs = points if isinstance(points, list | tuple) else list(points)
        # one array, not a reshaped view of another (a second array object per series)
        self._rows: npt.NDArray[np.float64] = (
            np.array(pairs, dtype=np.float64) if pairs else np.empty((0, 2), dtype=np.float64)
        )

    @property
    def points(self) -> tuple[tuple[float, float], ...]:
        return tuple(zip(self._rows[:, 0].tolist(), self._rows[:, 1].tolist(), strict=True))

    @property
    def stamps(self) -> npt.NDArray[np.float64]:
        return self._rows[:, 0]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Series):
            return NotImplemented
        return self.labels == other.labels and self.points == other.points

    __hash__ = None  # type: ignore[assignment]  # labels are a mutable mapping

    def __repr__(self) -> str:
        return f"Series({dict(self.labels)!r}, {len(self._rows)} points)"


@dataclass(frozen=True, slots=True)
class Answer:
    """A successful answer: the result and the server's warnings."""

    result_type: str
    result: tuple[Sample, ...] | tuple[Series, ...]
    warnings: tuple[str, ...] = ()


@dataclass(slots=True)
class ClientStats:
    """What the client did: for the report's footer and the benchmark's time split."""

    queries: int = 0
    retries: int = 0
    server_s: float = 0.0  # wall time with at least one query waiting (transport included)
    query_s: float = 0.0  # the queries' waits added up: more than server_s when they overlap
    answer_bytes: int = 0
    warnings: list[str] = field(default_factory=list)
    waiting: int = 0  # queries now waiting for their answer
    busy_since: float = 0.0  # when the first of them was sent

    def sent(self, at: float) -> None:
        if not self.waiting:
            self.busy_since = at
        self.waiting += 1

    def answered(self, sent_at: float, at: float) -> None:
        self.queries += 1
        self.query_s += at - sent_at
        self.waiting -= 1
        if not self.waiting:
            self.server_s += at - self.busy_since


class AnswerError(ValueError):
    """The body is not the Prometheus API's JSON of the expected type (the boundary names it)."""


class PrometheusQueryError(EnvironmentProblemError):
    """The server refused or failed one query; ``query_name`` says which."""

    def __init__(self, message: str, *, reference: str, hint: str, context: str, name: str):
        super().__init__(message, reference=reference, hint=hint, context=context)
        self.query_name = name


def _number(text: object) -> float:
    if not isinstance(text, str):
        raise AnswerError(f"a sample value is {type(text).__name__}, not a string")
    try:
        return float(text)  # "NaN", "+Inf", "-Inf" included
    except ValueError:
        raise AnswerError(f"a sample value {text[:40]!r} is not a number") from None


def _point(raw: object) -> tuple[float, float]:
    if not (isinstance(raw, list) and len(raw) == 2):
        raise AnswerError("a sample is not a [timestamp, value] pair")
    stamp = raw[0]
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        raise AnswerError("a sample timestamp is not a number")
    return float(stamp), _number(raw[1])


def _labels(raw: object) -> dict[str, str]:
    """A series' metric, each value one shared copy (the node's, the model's, the driver's
    repeat on every series). sys.intern's table holds no reference: a value nothing keeps is
    freed. JSON's object keys are strings; sys.intern refuses any value that is not one."""
    if isinstance(raw, dict):
        try:
            return {name: sys.intern(value) for name, value in raw.items()}
        except TypeError:
            pass  # a value that is not a string: refused below, as a metric that is no object
    raise AnswerError("a series' metric is not an object of string labels")


def _element(raw: object, result_type: str) -> Sample | Series:
    """The result element ``raw``: made while parsing (``_made_element``), or else the JSON
    object itself, checked here (its error is the answer's)."""
    if isinstance(raw, Sample if result_type == "vector" else Series):
        return raw
    if isinstance(raw, Sample | Series):  # the other kind: refused below, as it always was
        raw = {"metric": raw.labels}
    if not isinstance(raw, dict):
        raise AnswerError("a result element is not an object")
    return _built(raw, result_type)


def _built(raw: dict[str, Any], result_type: str) -> Sample | Series:
    """A result element's JSON object as a ``Sample`` ("vector") or a ``Series`` ("matrix");
    ``AnswerError`` naming what is wrong with it."""
    labels = _labels(raw.get("metric", {}))
    if result_type == "vector":
        return Sample(labels, _point(raw.get("value"))[1])
    values = raw.get("values")
    if not isinstance(values, list):
        raise AnswerError("a matrix series has no values list")
    return Series(labels, [_point(v) for v in values])


# what a result element of the API holds (native histograms: "histogram", "histograms")
_ELEMENT_KEYS = frozenset({"metric", "value", "values", "histogram", "histograms"})


def _made_element(raw: dict[str, Any]) -> Any:
    """The ``json.loads`` object hook: a result element made a ``Sample`` or ``Series`` as soon
    as the parser has built its object, so that the parsed JSON of the whole answer (about 8
    times the body: a list and a string per point) never exists at once. Any other object, or
    an element with an error, is left as it is: ``_element`` checks it and says what is wrong."""
    metric = raw.get("metric", {})
    if (
        not raw.keys() <= _ELEMENT_KEYS
        or not isinstance(metric, dict)
        or ("value" in raw) == ("values" in raw)
    ):
        return raw
    try:
        return _built(raw, "vector" if "value" in raw else "matrix")
    except AnswerError:
        return raw


def parse_answer(body: bytes, expected: str) -> Answer:
    """The body of ``/api/v1/query`` (``expected`` "vector") or ``/query_range`` ("matrix").

    Raises ``AnswerError`` for anything else, and ``PrometheusApiError`` for an API error
    document (``status: error``)."""
    try:
        document = json.loads(body, object_hook=_made_element)
    except json.JSONDecodeError as exc:
        raise AnswerError(_not_json(body, exc)) from None
    except (UnicodeDecodeError, RecursionError):
        raise AnswerError(_not_json(body, None)) from None
    if not isinstance(document, dict) or not isinstance(document.get("status"), str):
        raise AnswerError("the answer is JSON but not a Prometheus API document (no status)")
    if document["status"] == "error":
        raise PrometheusApiError(str(document.get("errorType", "")), str(document.get("error", "")))
    data = document.get("data")
    if document["status"] != "success" or not isinstance(data, dict):
        raise AnswerError(f"the answer's status is {document['status'][:40]!r} with no data")
    result_type, result = data.get("resultType"), data.get("result")
    if result_type != expected:
        raise AnswerError(f"the answer holds a {str(result_type)[:20]!r}, not a {expected}")
    if not isinstance(result, list):
        raise AnswerError(f"the {expected}'s result is {type(result).__name__}, not a list")
    warnings = document.get("warnings") or []
    elements = _one_per_label_set([_element(raw, expected) for raw in result])
    return Answer(
        expected,
        elements,  # type: ignore[arg-type]  # all Samples or all Series, by `expected`
        tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
    )


def _one_per_label_set(elements: list[Sample | Series]) -> tuple[Sample | Series, ...]:
    """The elements with each label set once, a series' points oldest first. Prometheus answers
    so (a result holding one label set twice is its error "vector cannot contain metrics with
    the same labelset"); a proxy merging replicas without deduplication, or a federation, may
    not — and a GPU counted twice would double its hours. A repeated series' points are merged,
    the first answer's value kept at a timestamp both have."""
    hashes = [hash(frozenset(element.labels.items())) for element in elements]
    if len(set(hashes)) == len(elements) and all(map(_in_time_order, elements)):
        return tuple(elements)  # what Prometheus sends: nothing to change, no label set kept
    by_labels: dict[frozenset[tuple[str, str]], Sample | Series] = {}
    for element in elements:
        key = frozenset(element.labels.items())
        known = by_labels.get(key)
        if known is None:
            by_labels[key] = element
        elif isinstance(known, Series) and isinstance(element, Series):
            by_labels[key] = Series(known.labels, (*known.points, *element.points))
    return tuple(_time_ordered(element) for element in by_labels.values())


def _in_time_order(element: Sample | Series) -> bool:
    if isinstance(element, Sample):
        return True
    stamps = element.stamps
    # one point is in order; numpy's per-call cost (~7 µs) on a million one-point series was
    # most of the parse
    return len(stamps) < 2 or bool(np.all(stamps[1:] > stamps[:-1]))


def _time_ordered(element: Sample | Series) -> Sample | Series:
    if isinstance(element, Sample) or _in_time_order(element):
        return element
    first_at: dict[float, float] = {}
    for stamp, value in element.points:
        first_at.setdefault(stamp, value)
    return Series(element.labels, tuple(sorted(first_at.items())))


def _not_json(body: bytes, problem: json.JSONDecodeError | None) -> str:
    if body.lstrip()[:1] == b"<":
        return "the answer is not JSON; it looks like HTML"
    if problem is not None and body.strip() and _ends_early(problem):
        # a proxy's buffer limit, a connection dropped under a chunked answer
        return f"the answer is not JSON: the JSON stops after {len(body)} bytes (cut off?)"
    return "the answer is not JSON"


def _ends_early(problem: json.JSONDecodeError) -> bool:
    """Whether the parser wanted more where the text ends (json raises "Unterminated string"
    only when a string runs to the end)."""
    return problem.pos >= len(problem.doc.rstrip()) or problem.msg.startswith("Unterminated")


class PrometheusApiError(ValueError):
    """``{"status": "error", "errorType": ..., "error": ...}``."""

    def __init__(self, error_type: str, error: str) -> None:
        error_type, error = _clipped(error_type), _clipped(error)
        super().__init__(f"{error_type}: {error}" if error_type else error)
        self.error_type = error_type
        self.error = error


def _clipped(text: str) -> str:
    """``text`` on one line, cut to what an error message can quote (a server's error may
    repeat a whole query of many kilobytes)."""
    return shown(" ".join(text.split()), _QUERY_SHOWN_CHARS)


class PrometheusClient:
    """``instant`` and ``range`` queries against one server (``base_url`` may carry a path
    prefix: ``http://host/prometheus``)."""

    def __init__(
        self,
        base_url: str,
        *,
        transport: Transport | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        bearer_token: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: RetryHook | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.transport = transport or default_transport()
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.bearer_token = bearer_token
        self.sleep = sleep
        self.on_retry = on_retry
        self.stats = ClientStats()
        self._lock = threading.Lock()  # queries may run in parallel threads

    def instant(self, name: str, query: str, at_s: float) -> tuple[Sample, ...]:
        answer = self._ask(name, "query", {"query": query, "time": _stamp(at_s)}, "vector")
        return answer.result  # type: ignore[return-value]  # a vector holds Samples

    def range(
        self, name: str, query: str, start_s: float, end_s: float, step_s: float
    ) -> tuple[Series, ...]:
        params = {
            "query": query,
            "start": _stamp(start_s),
            "end": _stamp(end_s),
            "step": _stamp(step_s),
        }
        answer = self._ask(name, "query_range", params, "matrix")
        return answer.result  # type: ignore[return-value]  # a matrix holds Series

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": f"gpuwarden/{__version__}",
        }
        if self.bearer_token:
            headers["Authorization"] = f"Bearer {self.bearer_token}"
        return headers

    def _retried(self, attempt: int, wait_s: float, why: str) -> None:
        with self._lock:
            self.stats.retries += 1
        if self.on_retry is not None:
            self.on_retry(attempt, wait_s, why)

    def _ask(self, name: str, endpoint: str, params: dict[str, str], expected: str) -> Answer:
        url = f"{self.base_url}/api/v1/{endpoint}"
        body = urlencode({**params, "nocache": "1"}).encode()
        request = Request(
            "POST", url, self._headers(), body, timeout_s=self.timeout_s, max_bytes=MAX_ANSWER_BYTES
        )
        started = time.monotonic()
        with self._lock:
            self.stats.sent(started)
        tries = [1]  # a redirect loop or a bad URL is tried once, a timeout up to the policy's

        def retried(attempt: int, wait_s: float, why: str) -> None:
            tries[0] = attempt + 1
            self._retried(attempt, wait_s, why)

        try:
            answer = send_with_retries(
                self.transport, request, self.retry, sleep=self.sleep, on_retry=retried
            )
        except ResponseTooLargeError:
            raise self._failed(
                name,
                params["query"],
                f"the answer to {name} is larger than {MAX_ANSWER_BYTES // 2**20} MiB",
                "prometheus-answer-too-large",
                "narrow the fleet with --selector, or report a shorter --range",
            ) from None
        except TransportError as exc:
            raise EnvironmentProblemError(
                f"cannot reach Prometheus at {self.base_url}: {exc.problem}",
                reference="prometheus-unreachable",
                hint=self._unreachable_hint(exc),
                context=f"POST {url} ({name}), tried {_times(tries[0])}",
            ) from None
        finally:
            with self._lock:
                self.stats.answered(started, time.monotonic())
        with self._lock:
            self.stats.answer_bytes += len(answer.body)
        return self._read(name, url, params["query"], answer, expected)

    def _unreachable_hint(self, exc: TransportError) -> str:
        if isinstance(exc, TooManyRedirectsError):
            return (
                "--prometheus must reach the server's API itself: something in between (a login "
                "proxy, a load balancer) sends the queries on and on; give the URL the redirects "
                "lead to, or reach the server past its proxy"
            )
        # a connect that timed out gets the reach hint below: its own bound
        # (transport.CONNECT_TIMEOUT_S) caps what a longer --timeout would give it
        if isinstance(exc, RequestTimeoutError) and not isinstance(exc, ConnectTimeoutError):
            return (
                f"no answer within --timeout {self.timeout_s:g} s: a server busy with a large "
                "fleet needs a longer --timeout or a narrower --selector; one that never answers "
                f"is stuck or not Prometheus (`curl {self.base_url}/-/ready`)"
            )
        return (
            "check --prometheus (the server's base URL, e.g. http://prometheus:9090), that it "
            f"runs, and the network in between: `curl {self.base_url}/-/ready`"
        )

    def _read(self, name: str, url: str, query: str, answer: Response, expected: str) -> Answer:
        if answer.status in {401, 403}:
            raise EnvironmentProblemError(
                f"{self.base_url} refused the fleet report's queries: HTTP {answer.status} "
                f"{answer.reason}",
                reference="prometheus-unauthorized",
                hint="pass a token with --bearer-token-file FILE (or reach the server without "
                "its authenticating proxy)",
                context=f"POST {url} ({name})",
            )
        if answer.status == 404:
            raise EnvironmentProblemError(
                f"no Prometheus API at {self.base_url}: {url} answered 404",
                reference="prometheus-not-found",
                hint="--prometheus takes the base URL the UI is served under, e.g. "
                "http://prometheus:9090 or https://host/prometheus (with its path prefix)",
                context=f"POST {url} ({name})",
            )
        try:
            parsed = parse_answer(answer.body, expected)
        except PrometheusApiError as exc:
            raise self._refused(name, query, answer.status, exc) from None
        except AnswerError as exc:
            if not answer.ok:
                raise self._failed(
                    name,
                    query,
                    f"{self.base_url} answered HTTP {answer.status} {answer.reason} to {name}",
                    "prometheus-query-failed",
                    "retry later; if it persists, check the server's log",
                ) from None
            raise CorruptInputError(
                f"{url}: not a Prometheus API answer: {exc}",
                reference="prometheus-bad-answer",
                hint="--prometheus must point at Prometheus or VictoriaMetrics itself (something "
                "else answered: a login page or a proxy?)",
                context=f"POST {url} ({name})",
            ) from None
        with self._lock:
            self.stats.warnings.extend(parsed.warnings)
        return parsed

    def _refused(
        self, name: str, query: str, status: int, exc: PrometheusApiError
    ) -> PrometheusQueryError:
        if status == 400 or exc.error_type == "bad_data":
            return self._failed(
                name,
                query,
                f"{self.base_url} rejected the query {name} (HTTP {status}): {exc}",
                "prometheus-query-rejected",
                "the server does not understand this PromQL: check --selector, and that the "
                "server is Prometheus ≥ 2.26 or VictoriaMetrics (last_over_time, clamp)",
            )
        return self._failed(
            name,
            query,
            f"{self.base_url} could not run the query {name} (HTTP {status}): {exc}",
            "prometheus-query-failed",
            "a fleet this large may need a narrower --selector or a shorter --range; or raise "
            "the server's limits (Prometheus --query.max-samples, --query.timeout)",
        )

    def _failed(
        self, name: str, query: str, message: str, reference: str, hint: str
    ) -> PrometheusQueryError:
        return PrometheusQueryError(
            message, reference=reference, hint=hint, context=f"query: {_clipped(query)}", name=name
        )


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _stamp(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".")
