"""`gpuwarden fleet report` over a large fleet held by a real Prometheus: wall time, the split
between Prometheus and gpuwarden, and memory at 100 / 500 / 1,000 GPUs.

Input: 1,000 GPUs × 24 h at a 15 s scrape interval (dcgm-exporter's default set for our queries:
GPU_UTIL, GR_ENGINE_ACTIVE, GPU_TEMP, POWER_USAGE, XID_ERRORS; 28.8 M samples), generated with
the shape of the public cluster traces (fleet.md §3.1: about a third of GPU time at exactly 0 %,
busy GPUs at 40-95 %; pods of 1, 2, 4 and 8 GPUs, some ending mid-day), backfilled with
``promtool tsdb create-blocks-from openmetrics`` two hours at a time (the text of a whole day is
~5 GB), and kept in ``--dir`` so later runs skip the build. The GPUs carry a ``shard`` label
(100 GPUs each): a size of N GPUs is the report with ``--selector 'shard=~"s0|s1|..."'``.

Each measurement runs in a fresh subprocess (imports excluded from the times):

* ours  — ``collect`` + ``analyze`` + the JSON document (what ``fleet report --json`` does),
  ``--parallel`` queries in flight (default 4, the CLI's); "gpuwarden CPU s" is the process's CPU
  time for all of it (parsing, folding, analysis, rendering; every thread), "Prometheus s" the
  rest of the wall time (waiting for the server), "Σ query s" the answers' waits added up (more
  than the wall time when queries overlap);
* naive — the reference a script would write: one ``query_range`` of raw GPU_UTIL at the scrape
  step for the window, parsed into Python, idle samples counted per GPU (no pods, no findings).

Peak RSS is VmHWM of the child; "heap" is tracemalloc's peak of Python allocations during the work
(a second run of ours with tracemalloc on, so it does not slow the timed run). Goal (issue 15):
≤ 20 s wall at 1,000 GPUs × 24 h, memory flat in the number of GPUs.

Run:  python benchmarks/fleet.py [--gpus 1000] [--sizes 100,500,1000] [--dir DIR] [--no-naive]
It reports; it never asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from planner_accuracy import table

ROOT = Path(__file__).resolve().parent.parent
BASE = 1_704_067_200  # 2024-01-01T00:00:00Z
HOURS = 24
STEP_S = 15
SHARD = 100  # GPUs per shard label
BLOCK_S = 2 * 3600
GOAL_WALL_S = 20.0
MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "550.90.07"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the fleet


class FleetPlan:
    """Per GPU: labels, and the level / temperature / power over the whole window (numpy)."""

    def __init__(self, gpus: int, seed: int = 15) -> None:
        rng = np.random.default_rng(seed)
        self.gpus = gpus
        self.times = np.arange(BASE - 1800 + 7, BASE + HOURS * 3600 + 600, STEP_S)
        n = len(self.times)
        self.labels: list[dict[str, str]] = []
        self.holders: list[tuple[str, str, int] | None] = []  # (namespace, pod, end time)
        self.level = np.zeros((gpus, n), dtype=np.float32)
        gpu = 0
        pod_id = 0
        while gpu < gpus:
            size = int(rng.choice([1, 2, 4, 8], p=[0.3, 0.2, 0.2, 0.3]))
            size = min(size, gpus - gpu)
            free = rng.random() < 0.25  # no pod: unallocated GPUs
            ends = BASE + int(rng.integers(6, 30)) * 3600  # some pods end mid-day
            busy = float(rng.uniform(40, 95))
            idle_share = float(rng.choice([0.0, 0.1, 0.35, 1.0], p=[0.45, 0.25, 0.2, 0.1]))
            for k in range(gpu, gpu + size):
                node, index = divmod(k, 8)
                self.labels.append(
                    {
                        "gpu": str(index),
                        "UUID": f"GPU-{k:08x}-5e1f-4c2b-9a7d-{(k * 2654435761) % 16**12:012x}",
                        "device": f"nvidia{index}",
                        "modelName": MODEL,
                        "Hostname": f"gpu-node-{node:04d}",
                        "DCGM_FI_DRIVER_VERSION": DRIVER,
                        "shard": f"s{k // SHARD}",
                    }
                )
                self.holders.append(
                    None if free else (f"team-{pod_id % 23:02d}", f"job-{pod_id:05d}", ends)
                )
                level = np.clip(busy + rng.normal(0, 6, n), 0, 100)
                zero = rng.random(n) < idle_share
                level[zero] = 0.0
                if free:
                    level[:] = 0.0
                else:
                    level[self.times >= ends] = 0.0
                self.level[k] = level
            gpu += size
            pod_id += 1
        self.power = (
            70 + 630 * 0.9 * self.level / 100 + rng.normal(0, 4, (gpus, n)).astype(np.float32)
        )
        self.temp = 30 + 0.06 * self.power + rng.normal(0, 0.8, (gpus, n)).astype(np.float32)

    def series_text(self, k: int, lo: int, hi: int) -> Iterator[str]:
        """OpenMetrics lines of GPU k for the samples lo:hi (per holder, per metric)."""
        times = self.times[lo:hi]
        holder = self.holders[k]
        held_until = holder[2] if holder else None
        base = self.labels[k]
        metrics = (
            (
                "DCGM_FI_DEV_GPU_UTIL",
                np.minimum(np.round(self.level[k, lo:hi] * 1.2), 100),
                "{:.0f}",
            ),
            ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", self.level[k, lo:hi] / 100, "{:.4f}"),
            ("DCGM_FI_DEV_GPU_TEMP", self.temp[k, lo:hi], "{:.0f}"),
            ("DCGM_FI_DEV_POWER_USAGE", self.power[k, lo:hi], "{:.2f}"),
            ("DCGM_FI_DEV_XID_ERRORS", np.zeros(hi - lo), "{:.0f}"),
        )
        for name, values, fmt in metrics:
            for held, mask in self._segments(times, held_until):
                if not mask.any():
                    continue
                labels = dict(base)
                if held and holder is not None:
                    labels.update(namespace=holder[0], pod=holder[1], container="main")
                head = name + "{" + ",".join(f'{a}="{b}"' for a, b in labels.items()) + "} "
                yield "".join(
                    f"{head}{fmt.format(v)} {t}\n"
                    for v, t in zip(values[mask], times[mask], strict=True)
                )

    @staticmethod
    def _segments(times: np.ndarray, held_until: int | None) -> list[tuple[bool, np.ndarray]]:
        if held_until is None:
            return [(False, np.ones(len(times), dtype=bool))]
        return [(True, times < held_until), (False, times >= held_until)]


def build_tsdb(plan: FleetPlan, data: Path, work: Path) -> float:
    """Backfill two hours at a time (bounded text on disk); returns the seconds it took."""
    started = time.perf_counter()
    data.mkdir(parents=True, exist_ok=True)
    t0 = int(plan.times[0]) - 7
    end = int(plan.times[-1]) + 1
    for block_start in range(t0 - t0 % BLOCK_S, end, BLOCK_S):
        lo, hi = np.searchsorted(plan.times, [block_start, block_start + BLOCK_S])
        if lo == hi:
            continue
        source = work / "chunk.om"
        with source.open("w") as out:
            for k in range(plan.gpus):
                out.writelines(plan.series_text(k, int(lo), int(hi)))
            out.write("# EOF\n")
        when = time.strftime("%H:%M", time.gmtime(block_start))
        _log(f"  backfill {when} UTC: {source.stat().st_size / 1e6:.0f} MB")
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            check=True,
            capture_output=True,
        )
        source.unlink()
    return time.perf_counter() - started


# ---------------------------------------------------------------- the server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def prometheus(data: Path, work: Path) -> Iterator[str]:
    config = work / "prometheus.yml"
    config.write_text("global: {}\n")
    port = _free_port()
    log = (work / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            "timeout",
            "-s",
            "KILL",
            "3600",
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
            "--query.max-samples=200000000",
        ],
        stdout=log,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"{url}/-/ready", timeout=1).read()
            break
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError("Prometheus did not start: see " + str(work / "prometheus.log"))
        time.sleep(0.1)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


# ---------------------------------------------------------------- the children

_OURS = r"""
import json, resource, sys, time, tracemalloc
t_import = time.perf_counter()
from gpuwarden.fleet.analyze import analyze
from gpuwarden.fleet.collect import collect
from gpuwarden.fleet.model import Window
from gpuwarden.fleet.pricing import flat
from gpuwarden.fleet.prometheus import PrometheusClient
from gpuwarden.report.fleet import fleet_document
url, selector = sys.argv[1], sys.argv[2]
start, end = int(sys.argv[3]), int(sys.argv[4])
traced, parallel = sys.argv[5] == "1", int(sys.argv[6])
def hwm():
    status = open("/proc/self/status").read().splitlines()
    return next(int(x.split()[1]) for x in status if x.startswith("VmHWM")) / 1024
base = hwm()
if traced:
    tracemalloc.start()
t0, c0 = time.perf_counter(), time.process_time()
client = PrometheusClient(url)
data = collect(client, Window(start, end, 3600), selector=selector, parallel=parallel)
t1 = time.perf_counter()
report = analyze(data, flat(2.0))
t2 = time.perf_counter()
text = json.dumps(fleet_document(report))
t3, c3 = time.perf_counter(), time.process_time()
heap = tracemalloc.get_traced_memory()[1] / 2**20 if traced else None
print(json.dumps({
    "wall": t3 - t0, "cpu": c3 - c0, "server": data.collection.query_s, "collect": t1 - t0,
    "analyze": t2 - t1, "render": t3 - t2, "hwm": hwm(), "base": base, "heap": heap,
    "queries": data.collection.queries,
    "answer_mb": data.collection.answer_bytes / 1e6, "gpus": report.totals.gpus,
    "gpu_hours": report.totals.gpu_hours, "idle_gpu_hours": report.totals.idle_gpu_hours,
    "findings": len(report.findings),
}))
"""

_NAIVE = r"""
import json, sys, time, urllib.parse, urllib.request
url, selector = sys.argv[1], sys.argv[2]
start, end, step = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def hwm():
    status = open("/proc/self/status").read().splitlines()
    return next(int(x.split()[1]) for x in status if x.startswith("VmHWM")) / 1024
base = hwm()
t0 = time.perf_counter()
query = "DCGM_FI_DEV_GPU_UTIL{" + selector + "}"
form = {"query": query, "start": start + step, "end": end, "step": step}
data = urllib.parse.urlencode(form).encode()
request = urllib.request.Request(url + "/api/v1/query_range", data=data)
with urllib.request.urlopen(request, timeout=600) as answer:
    body = answer.read()
t1 = time.perf_counter()
result = json.loads(body)["data"]["result"]
idle = {}
for series in result:
    uuid = series["metric"].get("UUID")
    idle[uuid] = idle.get(uuid, 0) + sum(1 for _, v in series["values"] if float(v) < 5)
idle_hours = sum(idle.values()) * step / 3600
t2 = time.perf_counter()
print(json.dumps({
    "wall": t2 - t0, "server": t1 - t0, "hwm": hwm(), "base": base, "answer_mb": len(body) / 1e6,
    "gpus": len(idle), "idle_gpu_hours": idle_hours,
}))
"""


def _child(code: str, *args: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-c", code, *args]
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=1800, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _selector(gpus: int) -> str:
    shards = "|".join(f"s{i}" for i in range(gpus // SHARD))
    return f'shard=~"{shards}"'


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--sizes", default="100,500,1000")
    parser.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()) / "gpuwarden-bench-fleet"
    )
    parser.add_argument("--no-naive", action="store_true", help="skip the raw-pull reference")
    parser.add_argument("--parallel", type=int, default=4, help="queries in flight (ours)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    data = args.dir / f"tsdb-{args.gpus}gpus-{HOURS}h-{STEP_S}s"
    marker = data / "gpuwarden-bench-complete"
    args.dir.mkdir(parents=True, exist_ok=True)
    if not marker.exists():
        _log(f"generating {args.gpus} GPUs × {HOURS} h at {STEP_S} s and backfilling into {data}")
        plan = FleetPlan(args.gpus)
        samples = plan.gpus * 5 * len(plan.times)
        seconds = build_tsdb(plan, data, args.dir)
        marker.write_text(json.dumps({"samples": samples, "backfill_s": seconds}))
    built = json.loads(marker.read_text())
    _log(
        f"TSDB: {built['samples'] / 1e6:.1f} M samples (backfill took {built['backfill_s']:.0f} s)"
    )
    start, end = BASE, BASE + HOURS * 3600
    rows = []
    with prometheus(data, args.dir) as url:
        par = str(args.parallel)
        _child(_OURS, url, _selector(SHARD), str(start), str(start + 3600), "0", par)  # warm up
        for size in sizes:
            selector = _selector(size)
            _log(f"report over {size} GPUs")
            ours = _child(_OURS, url, selector, str(start), str(end), "0", par)
            traced = _child(_OURS, url, selector, str(start), str(end), "1", par)
            naive = (
                None
                if args.no_naive
                else _child(_NAIVE, url, selector, str(start), str(end), str(STEP_S))
            )
            rows.append((size, ours, traced, naive))
    headers = [
        "GPUs",
        "wall s",
        "Prometheus s",
        "gpuwarden CPU s",
        "of it analysis+JSON s",
        "Σ query s",
        "queries",
        "answers MB",
        "peak RSS MiB",
        "RSS above start MiB",
        "Python heap peak MiB",
        "naive wall s",
        "naive RSS above start MiB",
        "RSS ratio naive/ours",
        "idle GPU-h ours / naive",
    ]
    body = []
    for size, ours, traced, naive in rows:
        above = ours["hwm"] - ours["base"]
        naive_above = None if naive is None else naive["hwm"] - naive["base"]
        body.append(
            [
                str(size),
                f"{ours['wall']:.2f}",
                f"{max(ours['wall'] - ours['cpu'], 0):.2f}",
                f"{ours['cpu']:.2f}",
                f"{ours['analyze'] + ours['render']:.2f}",
                f"{ours['server']:.2f}",
                str(int(ours["queries"])),
                f"{ours['answer_mb']:.1f}",
                f"{ours['hwm']:.0f}",
                f"{above:.0f}",
                f"{traced['heap']:.1f}",
                "–" if naive is None else f"{naive['wall']:.2f}",
                "–" if naive_above is None else f"{naive_above:.0f}",
                "–" if naive_above is None else f"{naive_above / max(above, 1):.1f}",
                f"{ours['idle_gpu_hours']:.0f} / "
                + ("–" if naive is None else f"{naive['idle_gpu_hours']:.0f}"),
            ]
        )
    samples = built["samples"] / 1e6
    print(
        f"fleet report over {HOURS} h at {STEP_S} s scrapes ({samples:.1f} M samples in Prometheus "
        f"{_prometheus_version()}), --parallel {args.parallel}, {os.cpu_count()} cores; goal ≤ "
        f"{GOAL_WALL_S:.0f} s at 1,000 GPUs"
    )
    print(table(headers, body))


def _prometheus_version() -> str:
    done = subprocess.run(["prometheus", "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"version (\S+)", done.stdout + done.stderr)
    return found.group(1) if found else "?"


if __name__ == "__main__":
    main()
