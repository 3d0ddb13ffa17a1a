"""Fetching a scrape over HTTP from a real server on 127.0.0.1 serving a real fixture."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.telemetry.dcgm import open_dcgm
from gpuwarden.telemetry.dcgm.fetch import fetch_scrape

from .exporter import serve_metrics

A100 = "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"


@pytest.fixture
def exporter(fixtures: Path) -> Iterator[tuple[str, list[str]]]:
    """A /metrics endpoint like dcgm-exporter's serving the A100 scrape; records request paths."""
    seen: list[str] = []
    with serve_metrics([(fixtures / "dcgm" / A100).read_bytes()], seen) as base:
        yield base, seen


def test_url_source_fetches_on_every_read(exporter: tuple[str, list[str]], fixtures: Path) -> None:
    base, seen = exporter
    backend = open_dcgm(f"{base}/metrics")
    first = backend.read()
    second = backend.read()
    assert seen == ["/metrics", "/metrics"]
    from_file = open_dcgm(str(fixtures / "dcgm" / A100)).read()
    assert first.samples[0].power_draw_watts == from_file.samples[0].power_draw_watts == 409.692
    assert first.source == f"{base}/metrics"
    assert second.timestamp_s >= first.timestamp_s


def test_http_error_is_an_environment_problem(exporter: tuple[str, list[str]]) -> None:
    base, _ = exporter
    with pytest.raises(EnvironmentProblemError) as err:
        open_dcgm(f"{base}/nope").read()
    assert err.value.reference == "dcgm-exporter-unreachable"
    assert "HTTP 404" in err.value.message and err.value.hint and "9400" in err.value.hint


def test_nothing_listening() -> None:
    # Bound but not listening: connections are refused, and no other test or process can take
    # the port meanwhile (a port closed again could be reused by a parallel run's server).
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(EnvironmentProblemError, match="cannot connect"):
            fetch_scrape(f"http://127.0.0.1:{port}/metrics", timeout_s=2)


def test_slow_server_times_out() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)  # accepts the connection, never answers
        port = sock.getsockname()[1]
        with pytest.raises(
            EnvironmentProblemError, match=r"no answer within 0\.3 s|cannot connect"
        ):
            fetch_scrape(f"http://127.0.0.1:{port}/metrics", timeout_s=0.3)


def test_only_http_urls() -> None:
    with pytest.raises(EnvironmentProblemError, match="only http"):
        fetch_scrape("file:///etc/passwd")
