"""Fetching a dcgm-exporter ``/metrics`` page: the only HTTP in the telemetry layer."""

from __future__ import annotations

import urllib.error
import urllib.request

from gpuwarden.errors import EnvironmentProblemError

DEFAULT_TIMEOUT_S = 10.0
MAX_SCRAPE_BYTES = 64 * 1024 * 1024  # a 8-GPU node with every field is well under 1 MiB


def _unreachable(url: str, problem: str) -> EnvironmentProblemError:
    return EnvironmentProblemError(
        f"{url}: {problem}",
        reference="dcgm-exporter-unreachable",
        hint="check that dcgm-exporter runs and listens there (default port 9400, path /metrics):"
        " `curl -s <url> | head`",
        context=f"GET {url}",
    )


def fetch_scrape(url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    if not url.startswith(("http://", "https://")):
        raise _unreachable(url, "only http:// and https:// URLs are fetched")
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body: bytes = response.read(MAX_SCRAPE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the error page's open connection
        raise _unreachable(url, f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise _unreachable(url, f"cannot connect ({exc.reason})") from None
    except TimeoutError:
        raise _unreachable(url, f"no answer within {timeout_s:g} s") from None
    except (OSError, ValueError) as exc:
        raise _unreachable(url, str(exc) or type(exc).__name__) from None
    if len(body) > MAX_SCRAPE_BYTES:
        raise _unreachable(url, f"answer larger than {MAX_SCRAPE_BYTES} bytes, not a scrape")
    return body.decode("utf-8", errors="replace")
