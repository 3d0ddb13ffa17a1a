"""Shared by the exporter's tests: running `gpuwarden export`, reading its exposition."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from tests.deploy.servers import stop

from gpuwarden.telemetry.dcgm.exposition import parse_exposition

SeriesKey = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True)
class Scrape:
    """An exposition read back: values by (name, labels), and the declared types."""

    values: dict[SeriesKey, float]
    types: dict[str, str]
    text: str

    def series(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(dict(labels), v) for (n, labels), v in self.values.items() if n == name]

    def one(self, name: str, **labels: str) -> float:
        """The value of the one series of ``name`` whose labels include ``labels``."""
        found = [
            v for lab, v in self.series(name) if all(lab.get(k) == w for k, w in labels.items())
        ]
        assert len(found) == 1, f"{name}{labels}: {len(found)} series"
        return found[0]

    def names(self) -> set[str]:
        return {name for name, _ in self.values}


def read_scrape(text: str) -> Scrape:
    exposition = parse_exposition(text, "test")
    values: dict[SeriesKey, float] = {}
    for sample in exposition.samples:
        key = (sample.name, frozenset(sample.labels.items()))
        assert key not in values, f"duplicate series {key}"
        values[key] = sample.value
    return Scrape(values, exposition.types, text)


def run_export(*args: str, timeout: float = 60, env: Mapping[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", "export", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def once(*args: str, env: Mapping[str, str] | None = None) -> Scrape:
    result = run_export(*args, "--once", env=env)
    assert result.returncode == 0, result.stderr
    return read_scrape(result.stdout)


_SERVING = re.compile(r"serving (https?)://([^\s/]+)/metrics")


@dataclass
class Running:
    process: subprocess.Popen[str]
    url: str  # .../metrics
    port: int
    log: list[str]  # what it said on stderr after the start-up line


@contextmanager
def serving(
    *args: str, timeout: float = 30, env: Mapping[str, str] | None = None
) -> Iterator[Running]:
    """`gpuwarden export ... --listen 127.0.0.1:0` running until the block ends (SIGTERM)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuwarden", "export", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    drain: threading.Thread | None = None
    try:
        deadline = time.monotonic() + timeout
        assert process.stderr is not None
        line = ""
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            match = _SERVING.search(line)
            if match:
                host_port = match.group(2)
                port = int(host_port.rsplit(":", 1)[1])
                log: list[str] = []
                # keep reading stderr so that its pipe never fills and blocks the exporter
                drain = threading.Thread(target=log.extend, args=(process.stderr,), daemon=True)
                drain.start()
                yield Running(process, f"{match.group(1)}://{host_port}/metrics", port, log)
                break
            if not line and process.poll() is not None:
                raise AssertionError(f"export ended with {process.returncode} before serving")
        else:
            raise AssertionError(f"export did not start serving in {timeout} s: {line!r}")
    finally:
        stop(process)
        if drain is not None:
            drain.join(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
