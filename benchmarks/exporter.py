"""`gpuwarden export` under load, against prometheus_client's own example exporter.

Ours: ``gpuwarden export --backend sim --gpus 8`` (8 simulated H100s, healthy-training, one
reading a second, health rules on a 60 s window). Reference: prometheus_client's example
exporter shape (``start_http_server`` + ``Gauge``s set from a loop), serving the SAME series —
every family, label set and value of our exposition, copied once into Gauges — plus its default
process/platform/gc collectors. Both run as their own processes; the scrapers run here.

Scrape latency = request sent → whole body read, client side, gzip accepted as Prometheus does;
our HTTP/1.1 keeps connections open, the reference (HTTP/1.0) opens one per scrape, as each
would with a real Prometheus.
* paced: 50 scrapers, each scraping every 0.2 s (250 scrapes/s in all) for ``--seconds``;
* burst: 50 scrapers back to back, 2,000 scrapes (a queueing measure: 50 waiting clients on a
  2-core machine, the client included).
RSS: VmRSS of each server after 1,000 warm-up scrapes and after 10,000 more.
CPU per GPU-sample at 1 Hz: utime+stime of `gpuwarden export` (collection, health rules, and a
scrape a second) over ``--seconds``, divided by readings x 8 GPUs, against the same Collector on
the same sim backend with nothing else (``--collector-alone``).

Run:  python benchmarks/exporter.py [--seconds N]   (≈ 3 min; progress on stderr, table on stdout)
It reports; it never asserts. Goals: p99 <= 5 ms for 8 GPUs under 50 scrapers; RSS flat.
Latencies are client-side on the same 2 cores as both servers: other work on the machine shows
in the p99s (the servers' own view: gpuwarden_scrape_duration_seconds).
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from planner_accuracy import progress, table

ROOT = Path(__file__).resolve().parent.parent
GPUS = 8
SCRAPERS = 50
PACED_PERIOD_S = 0.2
BURST_SCRAPES = 2_000
WARMUP_SCRAPES = 1_000
SOAK_SCRAPES = 10_000
TIMEOUT_S = 10.0
_TICKS = os.sysconf("SC_CLK_TCK")


# --- the processes -------------------------------------------------------------------------------


def start_ours() -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuwarden", "export", "--backend", "sim", "--gpus", str(GPUS),
         "--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:
        match = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
        if match:
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, int(match.group(1))
    raise RuntimeError("gpuwarden export did not start")


def start_reference(families: Path) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--reference-server", str(families)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def reference_server(families_json: str) -> None:
    """prometheus_client's example exporter shape, with our series as Gauges."""
    from prometheus_client import Gauge, start_http_server

    families: dict[str, list[tuple[dict[str, str], float]]] = json.loads(
        Path(families_json).read_text()
    )
    gauges = []
    for name, samples in families.items():
        names = sorted({k for labels, _ in samples for k in labels})
        gauge = Gauge(name, name, names) if names else Gauge(name, name)
        for labels, value in samples:
            target = gauge.labels(**{k: labels.get(k, "") for k in names}) if names else gauge
            gauges.append((target, value))
            target.set(value)
    server, _ = start_http_server(0, addr="127.0.0.1")
    print(server.server_address[1], flush=True)
    while True:  # as the example does: values set from a loop
        for target, value in gauges:
            target.set(value)
        time.sleep(1.0)


def our_series(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of our exposition but the process' own (the reference has its own)."""
    from gpuwarden.telemetry.dcgm.exposition import parse_exposition

    text = scrape(port, keep_alive=None, gzipped=False)[1].decode()
    families: dict[str, list[tuple[dict[str, str], float]]] = {}
    for sample in parse_exposition(text, "ours").samples:
        if not sample.name.startswith(("process_", "python_")):
            families.setdefault(sample.name, []).append((sample.labels, sample.value))
    return families


def rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


# --- scraping ------------------------------------------------------------------------------------


def scrape(
    port: int, keep_alive: http.client.HTTPConnection | None, *, gzipped: bool = True
) -> tuple[float, bytes]:
    started = time.perf_counter()
    connection = keep_alive or _connection(port)
    headers = {"Accept-Encoding": "gzip"} if gzipped else {}
    connection.request("GET", "/metrics", headers=headers)
    response = connection.getresponse()
    body = response.read()
    if keep_alive is None or response.will_close:
        connection.close()
    elapsed = time.perf_counter() - started
    if response.status != 200:
        raise RuntimeError(f"status {response.status}")
    return elapsed, body


def load(port: int, *, scrapers: int, total: int | None, period_s: float | None,
         seconds: float | None, keep_alive: bool) -> tuple[list[float], float, int]:  # fmt: skip
    """Latencies of ``scrapers`` concurrent scrapers, paced or back to back; wall time; failed
    scrapes (no answer within TIMEOUT_S, a refused or reset connection)."""
    latencies: list[float] = []
    failed = [0]
    lock = threading.Lock()
    stop_at = None if seconds is None else time.perf_counter() + seconds
    each = None if total is None else total // scrapers

    def scraper(offset: float) -> None:
        connection = _connection(port) if keep_alive else None
        mine: list[float] = []
        errors = 0
        next_at = time.perf_counter() + offset
        while (each is None or len(mine) + errors < each) and (
            stop_at is None or time.perf_counter() < stop_at
        ):
            if period_s is not None:
                time.sleep(max(0.0, next_at - time.perf_counter()))
                next_at += period_s
            try:
                mine.append(scrape(port, connection)[0])
            except (OSError, http.client.HTTPException, RuntimeError):
                errors += 1
                if connection is not None:
                    connection.close()
                    connection = _connection(port)
        if connection is not None:
            connection.close()
        with lock:
            latencies.extend(mine)
            failed[0] += errors

    offsets = [(i / scrapers) * (period_s or 0.0) for i in range(scrapers)]
    threads = [threading.Thread(target=scraper, args=(o,)) for o in offsets]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, time.perf_counter() - started, failed[0]


def _connection(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def mib(value: float) -> str:
    return f"{value / 2**20:.1f}"


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "–"


def _row(
    label: str, ours: dict[str, Any], theirs: dict[str, Any], key: str, fmt: Callable[[Any], str]
) -> list[str]:
    return [label, fmt(ours[key]), fmt(theirs[key]), ratio(ours[key], theirs[key])]


# --- CPU per GPU-sample at 1 Hz ------------------------------------------------------------------


def collector_alone(seconds: float) -> None:
    """The Collector on the same sim backend at 1 Hz, nothing else; prints CPU s and readings."""
    from gpuwarden.telemetry.collector import Collector
    from gpuwarden.telemetry.open import open_backend

    backend = open_backend("sim", gpus=GPUS)
    collector = Collector(backend, interval_s=1.0)
    stop_at = time.monotonic() + seconds
    cpu = time.process_time()
    readings = collector.run(until=lambda: time.monotonic() >= stop_at, sink=lambda s: None)
    print(json.dumps({"cpu_s": time.process_time() - cpu, "readings": readings}), flush=True)


def cpu_per_sample(port: int, pid: int, seconds: float) -> tuple[float, float]:
    """(ours, collector alone): CPU seconds per GPU-sample over the same ``seconds``."""
    alone = subprocess.Popen(
        [sys.executable, __file__, "--collector-alone", str(seconds)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    before_cpu = cpu_seconds(pid)
    before_polls = _polls(port)
    stop_at = time.perf_counter() + seconds
    while time.perf_counter() < stop_at:  # Prometheus at a 1 s scrape interval
        scrape(port, None)
        time.sleep(1.0)
    ours = (cpu_seconds(pid) - before_cpu) / ((_polls(port) - before_polls) * GPUS)
    out, _ = alone.communicate(timeout=seconds + 60)
    result = json.loads(out)
    return ours, result["cpu_s"] / (result["readings"] * GPUS)


def _polls(port: int) -> float:
    text = gzip.decompress(scrape(port, None)[1]).decode()
    return float(
        re.search(r'gpuwarden_collections_total\{backend="sim"[^}]*\} (\S+)', text).group(1)
    )  # type: ignore[union-attr]


# --- the run -------------------------------------------------------------------------------------


def measure(name: str, port: int, pid: int, keep_alive: bool, seconds: float) -> dict[str, Any]:
    progress(f"{name}: paced, {SCRAPERS} scrapers every {PACED_PERIOD_S} s for {seconds:g} s")
    paced, _, paced_failed = load(port, scrapers=SCRAPERS, total=None, period_s=PACED_PERIOD_S,
                                  seconds=seconds, keep_alive=keep_alive)  # fmt: skip
    progress(f"{name}: burst, {BURST_SCRAPES} scrapes")
    burst, wall, burst_failed = load(port, scrapers=SCRAPERS, total=BURST_SCRAPES, period_s=None,
                                     seconds=None, keep_alive=keep_alive)  # fmt: skip
    progress(f"{name}: {WARMUP_SCRAPES} warm-up + {SOAK_SCRAPES} scrapes for RSS")
    load(port, scrapers=4, total=WARMUP_SCRAPES, period_s=None, seconds=None, keep_alive=keep_alive)
    warm = rss_bytes(pid)
    load(port, scrapers=4, total=SOAK_SCRAPES, period_s=None, seconds=None, keep_alive=keep_alive)
    soaked = rss_bytes(pid)
    body = gzip.decompress(scrape(port, None)[1])
    return {
        "series": sum(1 for line in body.splitlines() if line and not line.startswith(b"#")),
        "bytes": len(body),
        "paced_p50": quantile(paced, 0.5), "paced_p99": quantile(paced, 0.99),
        "paced_n": len(paced), "failed": paced_failed + burst_failed,
        "burst_p50": quantile(burst, 0.5), "burst_p99": quantile(burst, 0.99),
        "burst_rate": len(burst) / wall,
        "rss_warm": warm, "rss_soaked": soaked, "rss_growth": soaked - warm,
    }  # fmt: skip


def run(seconds: float) -> str:
    ours_process, ours_port = start_ours()
    reference_process = None
    try:
        time.sleep(1.5)  # a few readings in, the health window filling
        with tempfile.TemporaryDirectory() as folder:
            families = Path(folder) / "families.json"
            families.write_text(json.dumps(our_series(ours_port)))
            reference_process, reference_port = start_reference(families)
        ours = measure("gpuwarden export", ours_port, ours_process.pid, True, seconds)
        theirs = measure(
            "prometheus_client example", reference_port, reference_process.pid, False, seconds
        )
        reference_process.terminate()
        progress(f"CPU per GPU-sample at 1 Hz over {seconds:g} s (exporter vs collector alone)")
        cpu_ours, cpu_alone = cpu_per_sample(ours_port, ours_process.pid, seconds)
    finally:
        ours_process.terminate()
        if reference_process is not None:
            reference_process.terminate()
    rows = [
        _row("series served", ours, theirs, "series", str),
        _row("exposition bytes (uncompressed)", ours, theirs, "bytes", str),
        _row(f"paced p50 ms ({SCRAPERS} scrapers, each every {PACED_PERIOD_S:g} s)",
             ours, theirs, "paced_p50", ms),
        _row("paced p99 ms (goal <= 5)", ours, theirs, "paced_p99", ms),
        _row("paced scrapes answered", ours, theirs, "paced_n", str),
        _row(f"burst p50 ms ({SCRAPERS} back to back)", ours, theirs, "burst_p50", ms),
        _row("burst p99 ms", ours, theirs, "burst_p99", ms),
        _row("burst scrapes/s", ours, theirs, "burst_rate", lambda v: f"{v:.0f}"),
        _row(f"failed scrapes (no answer in {TIMEOUT_S:g} s)", ours, theirs, "failed", str),
        _row(f"RSS MiB after {WARMUP_SCRAPES} scrapes", ours, theirs, "rss_warm", mib),
        _row(f"RSS MiB after {SOAK_SCRAPES} more", ours, theirs, "rss_soaked", mib),
        [f"RSS growth MiB over the {SOAK_SCRAPES}", f"{ours['rss_growth'] / 2**20:+.2f}",
         f"{theirs['rss_growth'] / 2**20:+.2f}", "–"],
    ]  # fmt: skip
    cpu_rows = [
        ["CPU ms per GPU-sample at 1 Hz", f"{cpu_ours * 1000:.3f}", f"{cpu_alone * 1000:.3f}",
         ratio(cpu_ours, cpu_alone)],
    ]  # fmt: skip
    return "\n".join(
        [
            f"gpuwarden export vs prometheus_client's example exporter, {GPUS} simulated H100s",
            table(["measure", "gpuwarden export", "prometheus_client (Gauges)", "ratio"], rows),
            "",
            "collection + health rules + exporter vs the Collector alone (same sim backend)",
            table(["measure", "gpuwarden export", "Collector alone", "ratio"], cpu_rows),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="paced load and CPU windows")
    parser.add_argument("--reference-server", metavar="FAMILIES_JSON", help=argparse.SUPPRESS)
    parser.add_argument("--collector-alone", type=float, metavar="SECONDS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference_server:
        reference_server(args.reference_server)
    elif args.collector_alone:
        collector_alone(args.collector_alone)
    else:
        print(run(args.seconds))


if __name__ == "__main__":
    main()
