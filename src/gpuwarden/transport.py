"""The one HTTP transport of gpuwarden: every request to a server goes through ``Transport.send``.

Callers (the Hugging Face Hub config fetch, the dcgm-exporter scrape, the Prometheus client of
``fleet``) build a ``Request``, hand it to a ``Transport`` and read a ``Response``; tests inject a
``MockTransport`` (a function from request to response) where httpx users would pass
``httpx.MockTransport``. The default ``UrllibTransport`` is the standard library, so
``import gpuwarden`` and ``gpuwarden plan`` need no extra package.

The contract, whatever the implementation:

* an HTTP status is not an exception: a 404 or a 503 is a ``Response``, the caller decides what
  it means (an unknown model, a bad query, a server to retry);
* no answer is a ``TransportError`` (an ``EnvironmentProblemError``, exit 4 if nobody catches it):
  ``ConnectError`` (refused, DNS, TLS, proxy), ``RequestTimeoutError`` (its ``ConnectTimeoutError``
  when no connection was made within ``CONNECT_TIMEOUT_S``, its ``ReadTimeoutError`` when the server
  took the request and did not answer in time), ``ReadError`` (cut off mid-body),
  ``ResponseTooLargeError`` (more than ``Request.max_bytes``: memory stays bounded),
  ``InvalidUrlError`` (only http:// and https:// are fetched, never file://) and
  ``TooManyRedirectsError`` (a redirect loop, or more than 10 redirects: never tried again);
* redirects are followed (at most 10) to http:// and https:// only; 307 and 308 repeat the
  method and body, 301-303 after a POST become a GET; an ``Authorization`` header never follows
  a redirect to another origin (scheme, host and port), as httpx and requests do.

``send_with_retries`` is the one retry loop: 429 and 5xx answers and transport errors are tried
again with exponential backoff, honouring ``Retry-After`` — except a timeout, read or connect,
which has already cost its whole bound (see ``RetryPolicy.retry_read_timeouts``).

URL helpers (``split_url``, ``quote``, ``urlencode``) are the standard library's, offered here so
that the HTTP contract of import-linter can protect ``urllib`` and ``http`` as one module's;
``http_url_problem`` is the one check of a URL the user gives (an option, ``HF_ENDPOINT``).
"""

from __future__ import annotations

import email.message
import email.utils
import http.client
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Protocol

from gpuwarden.errors import EnvironmentProblemError

DEFAULT_TIMEOUT_S = 10.0
# Connecting (TCP, a proxy's tunnel, the TLS handshake) takes at most this, whatever a request's
# timeout: a long --timeout is for a server that thinks long, and a host that is down or behind a
# firewall dropping packets never answers a connect at all (each try would cost the whole
# timeout). Go's http.DefaultTransport — Prometheus' own client — dials with the same 30 s.
CONNECT_TIMEOUT_S = 30.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# Headers that name who is asking: kept on redirects within the origin only.
_CREDENTIAL_HEADERS = frozenset({"authorization"})

split_url = urllib.parse.urlsplit
quote = urllib.parse.quote
urlencode = urllib.parse.urlencode


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request. ``headers`` names are sent as given; ``body`` is sent as is."""

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    # per read (the stdlib's meaning) and for the whole body after the headers; connecting is
    # bounded by the lesser of this and CONNECT_TIMEOUT_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES  # a longer body is a ResponseTooLargeError


@dataclass(frozen=True, slots=True)
class Response:
    """What the server answered. ``headers`` has lower-case names; ``url`` is the final URL."""

    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes
    url: str

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class TransportError(EnvironmentProblemError):
    """No usable answer from the server. ``problem`` says why in a few lower-case words."""

    reference = "http-request-failed"

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(
            f"{url}: {problem}",
            hint="check the URL, that the server runs, and the network or proxy in between",
        )
        self.url = url
        self.problem = problem


class ConnectError(TransportError):
    """No connection: refused, no route, DNS, TLS, proxy."""


class RequestTimeoutError(TransportError):
    """No answer within the request's timeout."""


class ConnectTimeoutError(RequestTimeoutError):
    """No connection within the connect bound: nothing was sent (urllib3's and httpx's
    ConnectTimeout); the host is down or unreachable, or a firewall drops the packets."""


class ReadTimeoutError(RequestTimeoutError):
    """Connected and sent, but no answer (or not all of it) within the request's timeout: the
    server took the request and is busy or hung (urllib3's and httpx's ReadTimeout)."""


class ReadError(TransportError):
    """The answer was cut off before its end."""


class ResponseTooLargeError(TransportError):
    """The body is longer than ``Request.max_bytes``."""


class InvalidUrlError(TransportError):
    """Not an http:// or https:// URL with a host."""


class TooManyRedirectsError(TransportError):
    """The redirects go round in a loop, or on past 10 (urllib's limits)."""


class Transport(Protocol):
    """Sends one request; raises ``TransportError`` only when there is no usable answer."""

    def send(self, request: Request) -> Response: ...


class MockTransport:
    """A transport that answers with ``handler(request)``: for tests and offline embedding.

    The handler may raise any ``TransportError`` to stand for a network failure."""

    def __init__(self, handler: Callable[[Request], Response]) -> None:
        self.handler = handler

    def send(self, request: Request) -> Response:
        return self.handler(request)


def response(
    status: int,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    url: str = "",
    reason: str = "",
) -> Response:
    """A ``Response`` with lower-cased header names (for ``MockTransport`` handlers)."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    return Response(status, reason or http.client.responses.get(status, ""), lowered, body, url)


def origin(url: str) -> tuple[str, str]:
    """(scheme, host[:port]) in lower case: what must match for credentials to follow."""
    parts = split_url(url)
    return parts.scheme.lower(), parts.netloc.lower().rpartition("@")[2]


def describe(reason: object) -> str:
    """An OS-level failure in a few lower-case words ("connection refused", "timed out")."""
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, ssl.SSLError) and reason.reason == "WRONG_VERSION_NUMBER":
        # OpenSSL read a TLS record header where the server wrote "HTTP/1.1 400 ..."
        return "the TLS handshake got an answer that is not TLS (a plain http:// port?)"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror[0].lower() + reason.strerror[1:]
    return str(reason) or type(reason).__name__


# RFC 9110 15.4.8-9: a 307 or 308 asks for the same request again, method and body included
_METHOD_KEEPING_REDIRECTS = frozenset({307, 308})


class _SameOriginCredentials(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http:// and https:// only (urllib alone would fetch ftp://); a 307 or
    308 repeats the method and body (urllib alone refuses them after a POST; 301-303 after a POST
    become a GET, as in browsers and httpx); credentials go along only while the redirect stays on
    the origin."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        refusal = _redirect_refusal(self, req, newurl)
        if refusal is not None:
            fp.close()  # urllib closes the redirect's connection only when it follows it
            raise refusal
        new: urllib.request.Request | None
        if code in _METHOD_KEEPING_REDIRECTS and req.get_method() not in {"GET", "HEAD"}:
            new = urllib.request.Request(
                newurl.replace(" ", "%20"),
                data=req.data,
                headers=req.headers,
                origin_req_host=req.origin_req_host,
                unverifiable=True,
                method=req.get_method(),
            )
        else:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is None or origin(new.full_url) != origin(req.full_url):
            return new
        for name, value in req.unredirected_hdrs.items():
            if name.lower() in _CREDENTIAL_HEADERS:
                new.add_unredirected_header(name, value)
        return new


def _redirect_refusal(
    limits: urllib.request.HTTPRedirectHandler, req: urllib.request.Request, newurl: str
) -> TransportError | None:
    """Why the redirect from ``req`` to ``newurl`` is not followed; None when it is. urllib's
    own limits (``max_repeats`` visits of a URL, ``max_redirections`` in all) are checked here:
    urllib checks them after ``redirect_request`` with an HTTPError, which reads as the server's
    answer (an HTTP 302 with a paragraph of urllib's words)."""
    problem = http_url_problem(newurl)
    if problem is not None:
        return InvalidUrlError(req.full_url, f"it redirects to {newurl[:200]}: {problem}")
    visited: dict[str, int] = getattr(req, "redirect_dict", {})
    if visited.get(newurl, 0) >= limits.max_repeats:
        return TooManyRedirectsError(
            req.full_url, f"the redirects go round in a loop (to {newurl[:200]} again)"
        )
    if len(visited) >= limits.max_redirections:
        return TooManyRedirectsError(req.full_url, f"more than {limits.max_redirections} redirects")
    return None


def http_url_problem(url: str, *, base: bool = False) -> str | None:
    """Why ``url`` is no http:// or https:// URL with a host, in a few words; None when it is one.
    A ``base`` URL (one the caller appends paths to) also carries no query and no fragment."""
    try:
        parts = split_url(url)
        port = parts.port
    except ValueError:  # "host:abc", "host:99999", "[::1"
        return "only http:// and https:// URLs with a host are fetched"
    if parts.scheme.lower() not in {"http", "https"} or not parts.hostname:
        return "only http:// and https:// URLs with a host are fetched"
    if port == 0:
        return "the port is not a number between 1 and 65535"
    if base and (parts.query or parts.fragment):
        return "a base URL carries no query (?) and no fragment (#)"
    return None


def _check_url(url: str) -> None:
    problem = http_url_problem(url)
    if problem is not None:
        raise InvalidUrlError(url, problem)


# how much of a body one read asks for: the deadline is checked between reads
_READ_CHUNK = 64 * 1024


def _read(stream: IO[bytes], url: str, max_bytes: int, timeout_s: float) -> bytes:
    """The body, within ``timeout_s`` of the headers: the socket's timeout bounds each read
    only, so a server trickling a byte per read would otherwise hold the request forever."""
    deadline = time.monotonic() + timeout_s
    parts: list[bytes] = []
    size = 0
    try:
        while size <= max_bytes:
            part = _read_some(stream, min(_READ_CHUNK, max_bytes + 1 - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
            if time.monotonic() > deadline:
                raise TimeoutError
    except TimeoutError:
        raise ReadTimeoutError(
            url, f"timed out while reading the answer ({timeout_s:g} s for the whole body)"
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        raise ReadError(url, f"the answer was cut off ({describe(exc)})") from None
    if size > max_bytes:
        raise ResponseTooLargeError(url, f"the answer is larger than {max_bytes} bytes")
    missing = getattr(stream, "length", None)  # http.client counts down a Content-Length
    if isinstance(missing, int) and missing > 0:
        # the connection closed early: read1 and read(n) return what came without a word
        raise ReadError(url, f"the answer was cut off ({missing} bytes of it never came)")
    return b"".join(parts)


def _read_some(stream: IO[bytes], most: int) -> bytes:
    """What the stream has, up to ``most`` bytes: one socket read where the stream can."""
    read1 = getattr(stream, "read1", None)
    return read1(most) if read1 is not None else stream.read(most)


class _ConnectPhaseTimeoutError(TimeoutError):
    """The connect phase's timeout, told apart from sending's: urllib wraps both in URLError.
    ``handshaking``: the TCP connection was made, the TLS handshake (or a proxy's tunnel) did not
    finish."""

    def __init__(self, handshaking: bool) -> None:
        super().__init__("connect timed out")
        self.handshaking = handshaking


class _BoundedConnect(http.client.HTTPConnection):
    """Connects within the lesser of the request's timeout and CONNECT_TIMEOUT_S, then reads
    and writes under the request's timeout. For HTTPS (the subclass below) the bound covers
    the TLS handshake too, as httpx's connect timeout does."""

    def connect(self) -> None:
        request_timeout = self.timeout
        if isinstance(request_timeout, (int, float)):
            self.timeout = _connect_bound_s(request_timeout)
        try:
            super().connect()
        except TimeoutError as exc:
            raise _ConnectPhaseTimeoutError(handshaking=self.sock is not None) from exc
        finally:
            self.timeout = request_timeout
        self.sock.settimeout(request_timeout)


class _BoundedConnectTls(_BoundedConnect, http.client.HTTPSConnection):
    pass


class _HttpHandler(urllib.request.HTTPHandler):
    """urllib's http:// handler on ``_BoundedConnect`` connections."""

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_BoundedConnect, req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    """urllib's https:// handler on ``_BoundedConnectTls`` connections."""

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_BoundedConnectTls, req)  # the default context, as urllib's own


def _headers(message: email.message.Message | None) -> dict[str, str]:
    return {} if message is None else {k.lower(): v for k, v in message.items()}


class UrllibTransport:
    """The standard library's HTTP client (``urllib.request``): proxies from the environment
    (``http_proxy``, ``no_proxy``), TLS with the system's certificates, a new connection per
    request."""

    def send(self, request: Request) -> Response:
        _check_url(request.url)
        outgoing = urllib.request.Request(
            request.url, data=request.body, method=request.method.upper()
        )
        for name, value in request.headers.items():
            if name.lower() in _CREDENTIAL_HEADERS:
                outgoing.add_unredirected_header(name, value)
            else:
                outgoing.add_header(name, value)
        opener = urllib.request.build_opener(_SameOriginCredentials, _HttpHandler, _HttpsHandler)
        try:
            with opener.open(outgoing, timeout=request.timeout_s) as answer:
                body = _read(answer, request.url, request.max_bytes, request.timeout_s)
                return Response(
                    answer.status, answer.reason, _headers(answer.headers), body, answer.url
                )
        except urllib.error.HTTPError as exc:
            try:
                body = (
                    _read(exc, request.url, request.max_bytes, request.timeout_s) if exc.fp else b""
                )
                return Response(
                    exc.code, str(exc.reason), _headers(exc.headers), body, exc.geturl()
                )
            finally:
                exc.close()  # it holds the error page's open connection
        except urllib.error.URLError as exc:  # refused, DNS, TLS; any failure before all was sent
            if isinstance(exc.reason, _ConnectPhaseTimeoutError):
                problem = _connect_timeout_problem(request, exc.reason)
                raise ConnectTimeoutError(request.url, problem) from None
            if isinstance(exc.reason, TimeoutError):  # sending the request's bytes
                raise RequestTimeoutError(
                    request.url,
                    f"timed out sending the request ({request.timeout_s:g} s): the server "
                    "accepted the connection and stopped reading",
                ) from None
            raise ConnectError(request.url, describe(exc.reason)) from None
        except TimeoutError:  # urllib sent the request; the answer's headers did not come
            raise ReadTimeoutError(
                request.url, f"timed out waiting for the answer ({request.timeout_s:g} s)"
            ) from None
        except (OSError, http.client.HTTPException) as exc:  # reset while reading the headers
            raise ReadError(request.url, describe(exc)) from None
        except ValueError:  # a header value no HTTP line can carry (never echoed: a token?)
            raise InvalidUrlError(
                request.url, "a header or redirect no HTTP request can carry"
            ) from None


def _connect_bound_s(timeout_s: float) -> float:
    """How long connecting may take under a request's ``timeout_s``."""
    return min(timeout_s, CONNECT_TIMEOUT_S)


def _connect_timeout_problem(request: Request, timed_out: _ConnectPhaseTimeoutError) -> str:
    bound_s = _connect_bound_s(request.timeout_s)
    if timed_out.handshaking:
        return (
            f"connected, but the TLS handshake (or a proxy's tunnel) did not finish within "
            f"{bound_s:g} s: the server accepted the connection and said nothing"
        )
    return (
        f"no connection within {bound_s:g} s: the host is down or unreachable, or a firewall "
        "drops the connection"
    )


_DEFAULT = UrllibTransport()


def default_transport() -> Transport:
    return _DEFAULT


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to try again. The defaults wait 0.5, 1 and 2 s (±50 % jitter) between
    four tries: a restarting server or a rate limiter recovers, a dead one fails in seconds."""

    attempts: int = 4  # tries in all, the first included
    backoff_s: float = 0.5  # before the second try; doubled before each further one
    max_backoff_s: float = 8.0  # also caps a server's Retry-After
    # 429 rate limited; 500/502/503/504: a server or proxy in trouble, often for seconds
    retry_statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})
    # A read timeout is not tried again: the server took the request and held it for the whole
    # timeout, so each further try costs as much again (4 × 120 s for a hung Prometheus) and a
    # non-idempotent POST (a webhook) may have been acted on. httpx's transport retries connect
    # failures only; urllib3 counts read errors apart (Retry(read=)) and never retries them for
    # a method outside allowed_methods (POST). Refused connections and 503s are still retried.
    retry_read_timeouts: bool = False
    # Nor is a connect that timed out: within that bound the kernel already sent the SYN again
    # and again (Linux: after 1, 3, 7, 15 s; net.ipv4.tcp_syn_retries, RFC 6298's 1 s initial
    # RTO), so a further try repeats what was just tried and costs the whole bound again (4 ×
    # 30 s for a mistyped address). A refused connection is retried: a server restarting.
    retry_connect_timeouts: bool = False


RetryHook = Callable[[int, float, str], None]  # (try that failed, 1-based; wait s; why)


def retry_after_s(answer: Response) -> float | None:
    """``Retry-After`` in seconds (a number of seconds or an HTTP date), None when absent."""
    value = answer.header("Retry-After")
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "¹".isdigit() too, but float() refuses it
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(float(when.timestamp()) - time.time(), 0.0)


def _wait_s(policy: RetryPolicy, failed_tries: int, jitter: Callable[[], float]) -> float:
    base = min(policy.backoff_s * 2.0 ** (failed_tries - 1), policy.max_backoff_s)
    return base * (0.5 + jitter())  # "equal jitter": between half and one and a half times


def _retried(failure: TransportError, policy: RetryPolicy) -> bool:
    if isinstance(failure, ReadTimeoutError):
        return policy.retry_read_timeouts
    if isinstance(failure, ConnectTimeoutError):
        return policy.retry_connect_timeouts
    return True


def send_with_retries(
    transport: Transport,
    request: Request,
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    jitter: Callable[[], float] = random.random,
    on_retry: RetryHook | None = None,
) -> Response:
    """``transport.send`` tried up to ``policy.attempts`` times. Returns the last answer (also a
    429/5xx one once the tries are spent); raises the last ``TransportError``."""
    for attempt in range(1, policy.attempts + 1):
        last = attempt == policy.attempts
        try:
            answer = transport.send(request)
        except (ConnectError, RequestTimeoutError, ReadError) as exc:
            if last or not _retried(exc, policy):
                raise
            why = exc.problem
            wait = _wait_s(policy, attempt, jitter)
        else:
            if answer.status not in policy.retry_statuses or last:
                return answer
            why = f"HTTP {answer.status}"
            asked = retry_after_s(answer)
            wait = _wait_s(policy, attempt, jitter)
            if asked is not None:
                wait = min(max(asked, wait), policy.max_backoff_s)
        if on_retry is not None:
            on_retry(attempt, wait, why)
        sleep(wait)
    raise AssertionError("unreachable: the last attempt returns or raises")
