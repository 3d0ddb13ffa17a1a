"""Real servers on 127.0.0.1 for the deploy and exporter tests (fleet.md §1.2): Prometheus,
Alertmanager, gpuwarden's exporter, and a webhook receiver. Free ports, readiness polled with a
deadline, every process stopped by the context manager that started it; no fixed sleeps."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager")
PROMTOOL = shutil.which("promtool")
KUBECTL = shutil.which("kubectl")
needs_prometheus = pytest.mark.skipif(
    not (PROMETHEUS and PROMTOOL), reason="Debian's prometheus package (scripts/install) is missing"
)
needs_alertmanager = pytest.mark.skipif(
    not ALERTMANAGER, reason="Debian's prometheus-alertmanager package is missing"
)
needs_kubectl = pytest.mark.skipif(not KUBECTL, reason="kubectl is missing")
AMTOOL = shutil.which("amtool")
needs_amtool = pytest.mark.skipif(not AMTOOL, reason="Debian's prometheus-alertmanager is missing")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubectl(api: Any, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Real kubectl against the stand-in API server ``api`` (tests/fakes/kube_api.py), with a
    kubeconfig and HOME of its own under ``home``."""
    assert KUBECTL
    config = api.write_kubeconfig(home / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(home)}
    return subprocess.run(
        [KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert AMTOOL
    return subprocess.run([AMTOOL, *args], capture_output=True, text=True, timeout=30, check=False)


def get_json(url: str, timeout_s: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read())


def wait_until(check: Callable[[], Any], deadline_s: float, what: str, poll_s: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy or the deadline passes."""
    end = time.monotonic() + deadline_s
    last_error: Exception | None = None
    while time.monotonic() < end:
        try:
            result = check()
            if result:
                return result
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last_error = exc
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {deadline_s:g} s waiting for {what} ({last_error})")


def _ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(response.status == 200)
        except urllib.error.HTTPError as exc:  # 503 while starting: its socket is closed here
            exc.close()
            return False

    return check


@contextlib.contextmanager
def process(
    args: list[str], log: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            yield proc
        finally:
            stop(proc)


def stop(proc: subprocess.Popen[Any]) -> None:
    """A server started for a test, ended: asked first, killed if it has not gone in 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def write_prometheus_config(
    path: Path, targets: dict[str, list[str]], rule_files: list[Path], alertmanager: str | None
) -> None:
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": hosts}]}
            for job, hosts in targets.items()
        ],
    }
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    path.write_text(json.dumps(config))  # JSON is YAML


@contextlib.contextmanager
def prometheus(workdir: Path, config: Path) -> Iterator[str]:
    assert PROMETHEUS
    port = free_port()
    args = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'prometheus-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    url = f"http://127.0.0.1:{port}"
    with process(args, workdir / "prometheus.log"):
        wait_until(_ready(f"{url}/-/ready"), 15, "Prometheus /-/ready")
        yield url


@contextlib.contextmanager
def alertmanager(workdir: Path, webhook: str) -> Iterator[str]:
    config = {
        "route": {
            "receiver": "test",
            "group_by": ["alertname", "UUID"],
            "group_wait": "0s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [
            {"name": "test", "webhook_configs": [{"url": webhook, "send_resolved": False}]}
        ],
    }
    path = workdir / "alertmanager.yml"
    path.write_text(json.dumps(config))
    with alertmanager_serving(workdir, path) as url:
        yield url.removeprefix("http://")


@contextlib.contextmanager
def alertmanager_serving(workdir: Path, config: Path) -> Iterator[str]:
    """Alertmanager on a free port with `config`, ready; yields its http:// URL."""
    assert ALERTMANAGER
    port = free_port()
    args = [
        ALERTMANAGER,
        f"--config.file={config}",
        f"--storage.path={workdir / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    url = f"http://127.0.0.1:{port}"
    with process(args, workdir / "alertmanager.log"):
        wait_until(_ready(f"{url}/-/ready"), 15, "Alertmanager /-/ready")
        yield url


@contextlib.contextmanager
def exporter(workdir: Path, name: str, *args: str) -> Iterator[str]:
    """``gpuwarden export`` on a free port (the real exporter, as the user runs it)."""
    port = free_port()
    command = [sys.executable, "-m", "gpuwarden", "export", "--listen", f"127.0.0.1:{port}", *args]
    env = {**os.environ, "NODE_NAME": name}
    url = f"http://127.0.0.1:{port}/metrics"
    with process(command, workdir / f"exporter-{name}.log", env=env):
        wait_until(_ready(url), 30, f"the exporter {name}")
        yield f"127.0.0.1:{port}"


def query(prometheus_url: str, expr: str) -> list[dict[str, Any]]:
    url = f"{prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = get_json(url)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    if body["data"]["resultType"] == "scalar":
        return [{"value": result}]
    return result
