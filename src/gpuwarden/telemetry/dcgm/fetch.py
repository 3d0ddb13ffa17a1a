"""Fetching a dcgm-exporter ``/metrics`` page through the package's one HTTP transport."""

from __future__ import annotations

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.files import MAX_CAPTURE_BYTES
from gpuwarden.transport import (
    ConnectTimeoutError,
    InvalidUrlError,
    Request,
    RequestTimeoutError,
    ResponseTooLargeError,
    Transport,
    TransportError,
    default_transport,
    http_url_problem,
)

DEFAULT_TIMEOUT_S = 10.0
MAX_SCRAPE_BYTES = MAX_CAPTURE_BYTES  # a 8-GPU node with every field is well under 1 MiB


def _unreachable(url: str, problem: str) -> EnvironmentProblemError:
    return EnvironmentProblemError(
        f"{url}: {problem}",
        reference="dcgm-exporter-unreachable",
        hint="check that dcgm-exporter runs and listens there (default port 9400, path /metrics):"
        " `curl -s <url> | head`",
        context=f"GET {url}",
    )


def fetch_scrape(
    url: str, timeout_s: float = DEFAULT_TIMEOUT_S, transport: Transport | None = None
) -> str:
    problem = http_url_problem(url)
    if problem is not None:  # checked here too: an injected transport may not check it
        raise _unreachable(url, problem)
    request = Request(
        "GET", url, {"Accept": "text/plain"}, timeout_s=timeout_s, max_bytes=MAX_SCRAPE_BYTES
    )
    try:
        answer = (transport or default_transport()).send(request)
    except ConnectTimeoutError as exc:
        raise _unreachable(url, exc.problem) from None
    except RequestTimeoutError:
        raise _unreachable(url, f"no answer within {timeout_s:g} s") from None
    except ResponseTooLargeError:
        raise _unreachable(
            url, f"answer larger than {MAX_SCRAPE_BYTES} bytes, not a scrape"
        ) from None
    except InvalidUrlError as exc:
        raise _unreachable(url, exc.problem) from None
    except TransportError as exc:
        raise _unreachable(url, f"cannot connect ({exc.problem})") from None
    if not answer.ok:
        raise _unreachable(url, f"HTTP {answer.status} {answer.reason}")
    return answer.body.decode("utf-8", errors="replace")
