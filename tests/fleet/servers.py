"""Real Prometheus and VictoriaMetrics on 127.0.0.1 for the fleet tests (fleet.md §1.2).

Each server gets a free port, a bounded life (``timeout -s KILL`` ends it even if pytest dies),
and is ready when its readiness endpoint answers, polled against a deadline, never slept on.
Prometheus is filled with ``promtool tsdb create-blocks-from openmetrics`` (one pass:
``--max-block-duration=48h``); VictoriaMetrics through ``/api/v1/import/prometheus``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

from tests.deploy.servers import free_port, stop
from tests.fleet.synth import Series, prometheus_text, write_openmetrics

LIFETIME_S = 900
READY_DEADLINE_S = 30.0


def _get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return bytes(answer.read())


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            _get(url, 0.5)
            return
        time.sleep(0.05)
    raise RuntimeError(f"{url}: not ready within {READY_DEADLINE_S} s: {log.read_text()[-2000:]}")


def _start(
    args: list[str], ready_path: str, workdir: Path, name: str
) -> tuple[subprocess.Popen[bytes], str]:
    """Start on a free port (tried again if another process took it in between)."""
    for _ in range(3):
        port = free_port()
        log = workdir / f"{name}-{port}.log"
        argv = [a.replace("{port}", str(port)) for a in args]
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["timeout", "-s", "KILL", str(LIFETIME_S), *argv], stdout=out, stderr=out
            )
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(process, base + ready_path, log)
        except RuntimeError:
            process.kill()
            process.wait()
            continue
        return process, base
    raise RuntimeError(f"{name} did not start (see {workdir})")


def have(binary: str) -> bool:
    return shutil.which(binary) is not None


@contextlib.contextmanager
def prometheus_with(series: Iterable[Series], workdir: Path) -> Iterator[str]:
    """A Prometheus holding ``series`` (backfilled); yields its base URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    source, data, config = workdir / "fleet.om", workdir / "tsdb", workdir / "prometheus.yml"
    write_openmetrics(series, source)
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=48h",
            str(source),
            str(data),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    source.unlink()
    config.write_text("global: {}\n")
    process, base = _start(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=100y",
            "--web.listen-address=127.0.0.1:{port}",
        ],
        "/-/ready",
        workdir,
        "prometheus",
    )
    try:
        yield base
    finally:
        stop(process)


def _query_count(base: str, query: str, at: int) -> float:
    body = urllib.parse.urlencode({"query": query, "time": str(at)})
    answer = json.loads(_get(f"{base}/api/v1/query?{body}"))
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


@contextlib.contextmanager
def victoria_metrics_with(series: Iterable[Series], workdir: Path, probe_at: int) -> Iterator[str]:
    """A VictoriaMetrics holding ``series`` (imported); yields its base URL once every series
    is searchable."""
    workdir.mkdir(parents=True, exist_ok=True)
    listed = list(series)
    process, base = _start(
        [
            "victoria-metrics",
            f"-storageDataPath={workdir / 'vmdata'}",
            "-httpListenAddr=127.0.0.1:{port}",
            "-retentionPeriod=100y",
            "-search.latencyOffset=0s",  # fleet.md §6: else the newest 30 s are hidden
        ],
        "/health",
        workdir,
        "victoria-metrics",
    )
    try:
        request = urllib.request.Request(
            f"{base}/api/v1/import/prometheus", data=prometheus_text(listed), method="POST"
        )
        with urllib.request.urlopen(request, timeout=60):
            pass
        _get(f"{base}/internal/force_flush", 10)
        alive = sum(
            1
            for s in listed
            if s.name == "DCGM_FI_DEV_GPU_TEMP"
            and any(probe_at - 3600 < t <= probe_at for t, _ in s.samples)
        )
        deadline = time.monotonic() + READY_DEADLINE_S
        while (
            _query_count(base, "count(last_over_time(DCGM_FI_DEV_GPU_TEMP[1h]))", probe_at) < alive
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{base}: the imported series are not searchable")
            time.sleep(0.1)
        yield base
    finally:
        stop(process)
