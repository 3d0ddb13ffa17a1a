"""Collector CPU time per GPU-sample on a fake 8-GPU NVML host: gpuwarden vs nvitop vs gpustat.

All three run on the SAME fake ``pynvml`` (tests/fakes/fake_pynvml: nvidia-ml-py's real
wrappers over a fake libnvidia-ml built from the H100 80GB HBM3 "load" capture, 8 copies with
distinct UUIDs), installed as ``sys.modules['pynvml']`` before nvitop and gpustat are imported.
CPU time = ``time.process_time()`` around N repeated full readings, divided by N x 8.

Run:  python benchmarks/telemetry_nvml.py [--reads N]   (progress on stderr, table on stdout)
It reports; it never asserts. Goal: gpuwarden <= 1/3 of either tool's time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.fakes

from tests.fakes.fake_pynvml import FakeClock, fake_gpus, installed, make_fake_pynvml  # noqa: E402
from tests.fakes.fake_pynvml.captures import H100, load_capture  # noqa: E402

from planner_accuracy import table  # noqa: E402

GPUS = 8
_T0 = time.perf_counter()

FAIRNESS = {
    "gpuwarden": "every DeviceSample field: memory v2, util, enc/dec, temperatures, power,"
    " energy, 4 clocks, P-state, fan, clock-event reasons, 2 violation counters, 4 ECC counters,"
    " retired pages, remapped rows, PCIe gen/width/throughput/replay, 18 NVLinks (state, speed,"
    " tx/rx, 3 error counters: one field-values call; an unchanged link keeps its sample object),"
    " MIG mode, processes + per-process util + names (cached per pid), GPM (Hopper), Xid drain;"
    " identity once at open; settings (thresholds, power limits, max clocks, max PCIe, ECC/"
    "persistence/compute mode) every 30 s, so not within these reads",
    "nvitop": "Device.all() each read (as its TUI refreshes) + memory used/total, gpu/memory util,"
    " temperature, power usage/limit, SM/mem clocks, fan, P-state, processes (+ their GPU memory)",
    "gpustat": "new_query(): name, uuid, temperature, fan, gpu/memory util, enc/dec util, power"
    " draw/limit, memory used/total, processes (psutil lookups of pids that do not exist here;"
    " it sleeps 0.1 s per GPU with processes, wall time only, so it runs 1/10 of the reads)",
}


def progress(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def shared() -> Path:
    env = os.environ.get("GPUWARDEN_SHARED")
    return Path(env) if env else ROOT.parent / "shared"


def fake_module() -> ModuleType:
    fixtures = shared() / "fixtures"
    capture = load_capture(fixtures, H100)
    clock = FakeClock()
    gpus = fake_gpus([capture.with_identity(i) for i in range(GPUS)], clock=clock)
    return make_fake_pynvml(gpus, clock=time.time)


def measure(read: Callable[[], Any], reads: int, lib: Any) -> dict[str, float]:
    """µs CPU per GPU-sample: total (unmetered reads), inside the fake driver (metered reads,
    alternating with those: process_time around each fake C call), their difference, and NVML
    calls per GPU-sample."""
    read()  # warm-up: lazy init, handle caches
    calls, total = lib.calls, 0.0
    lib.cpu_s = 0.0
    for _ in range(reads):  # unmetered and metered reads alternate: both see the same load
        start = time.process_time()
        read()
        total += time.process_time() - start
        lib.meter = True
        read()
        lib.meter = False
    n = reads * GPUS
    per_sample_calls = (lib.calls - calls) / (2 * n)
    # the metered window holds about one process_time() call of meter overhead per C call:
    # count it as the collector's, so the correction never flatters the tool with more calls
    driver_us = lib.cpu_s / n * 1e6 - per_sample_calls * meter_cost_us()
    return {
        "total_us": total / n * 1e6,
        "driver_us": driver_us,
        "us_per_gpu_sample": total / n * 1e6 - driver_us,
        "calls": per_sample_calls,
    }


def meter_cost_us(samples: int = 20000) -> float:
    """CPU cost of one time.process_time() call, µs."""
    start = time.process_time()
    for _ in range(samples):
        time.process_time()
    return (time.process_time() - start) / samples * 1e6


def gpuwarden_reader(module: ModuleType) -> Callable[[], Any]:
    from gpuwarden.telemetry.nvml import NvmlBackend

    backend = NvmlBackend(module)
    return backend.read


def nvitop_reader() -> Callable[[], Any]:
    from nvitop import Device

    def read() -> list[Any]:
        out = []
        for device in Device.all():
            out.append(
                (
                    device.memory_used(),
                    device.memory_total(),
                    device.gpu_utilization(),
                    device.memory_utilization(),
                    device.temperature(),
                    device.power_usage(),
                    device.power_limit(),
                    device.sm_clock(),
                    device.memory_clock(),
                    device.fan_speed(),
                    device.performance_state(),
                    {pid: p.gpu_memory() for pid, p in device.processes().items()},
                )
            )
        return out

    return read


def gpustat_reader() -> Callable[[], Any]:
    import gpustat

    return gpustat.new_query


def run(reads: int = 100, repeats: int = 5) -> list[dict[str, Any]]:
    """One row per tool: median over ``repeats`` rounds (tools interleaved in each round, so
    they share the machine's load) of µs CPU per GPU-sample, and the ratio to gpuwarden's."""
    results: dict[str, list[dict[str, float]]] = {}
    errors: dict[str, str] = {}
    # One fake module per tool (same devices): gpustat and nvitop monkeypatch the pynvml module
    # they import, which would change the other tools' calls.
    makers: list[tuple[str, Callable[[ModuleType], Callable[[], Any]]]] = [
        ("gpuwarden", gpuwarden_reader),
        ("nvitop", lambda module: nvitop_reader()),
        ("gpustat", lambda module: gpustat_reader()),
    ]
    readers: dict[str, tuple[Callable[[], Any], ModuleType]] = {}
    for name, make in makers:
        module = fake_module()
        with installed(module):
            for sub in [m for m in sys.modules if m.split(".")[0] in ("nvitop", "gpustat")]:
                del sys.modules[sub]  # they bind pynvml at import: import them over the fake
            try:
                readers[name] = (make(module), module)
            except Exception as exc:  # a tool failing on the fake is a result, not a crash
                errors[name] = repr(exc)[:120]
    for round_ in range(repeats):
        for name, (read, module) in readers.items():
            # gpustat sleeps 0.1 s per GPU with processes in each query (wall, not CPU)
            n = max(5, reads // 10) if name == "gpustat" else reads
            progress(f"round {round_ + 1}/{repeats}: {name}, {n} reads of {GPUS} GPUs")
            try:
                results.setdefault(name, []).append(measure(read, n, module.fake_lib))
            except Exception as exc:
                errors[name] = repr(exc)[:120]
    rows: list[dict[str, Any]] = []
    for name, _ in makers:
        runs = results.get(name, [])
        row: dict[str, Any] = {"tool": name, "error": errors.get(name, "")}
        for key in ("total_us", "driver_us", "us_per_gpu_sample", "calls"):
            row[key] = statistics.median(r[key] for r in runs) if runs else None
        row["spread"] = (
            f"{min(r['us_per_gpu_sample'] for r in runs):.0f}–"
            f"{max(r['us_per_gpu_sample'] for r in runs):.0f}"
            if runs
            else ""
        )
        rows.append(row)
    ours, ours_total = rows[0]["us_per_gpu_sample"], rows[0]["total_us"]
    for row in rows:
        us, total = row["us_per_gpu_sample"], row["total_us"]
        row["ratio_vs_gpuwarden"] = None if us is None or not ours else us / ours
        row["total_ratio_vs_gpuwarden"] = (
            None if total is None or not ours_total else total / ours_total
        )
        row["fields"] = FAIRNESS[row["tool"]]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reads", type=int, default=100, help="full readings per tool per round")
    parser.add_argument("--repeats", type=int, default=5, help="rounds (the median is shown)")
    args = parser.parse_args(argv)
    rows = run(args.reads, args.repeats)

    def num(value: float | None, fmt: str) -> str:
        return "–" if value is None else format(value, fmt)

    body = [
        [
            r["tool"],
            num(r["us_per_gpu_sample"], ".0f"),
            num(r["ratio_vs_gpuwarden"], ".2f") + "×",
            num(r.get("total_us"), ".0f"),
            num(r.get("total_ratio_vs_gpuwarden"), ".2f") + "×",
            num(r.get("calls"), ".0f"),
            r["spread"],
            r["error"],
        ]
        for r in rows
    ]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"CPU time per GPU-sample, fake NVML host with {GPUS} x H100 80GB HBM3 (load capture).\n"
        f"Machine: {os.cpu_count()} cores, load average {load}. Goal: gpuwarden ≤ 1/3 of each.\n"
    )
    print(
        table(
            [
                "tool",
                "µs CPU per GPU-sample",
                "ratio vs gpuwarden",
                "µs incl. fake driver",
                "ratio incl. driver",
                "NVML calls per GPU-sample",
                "min–max over rounds",
                "error",
            ],
            body,
        )
    )
    print(
        "\nµs CPU per GPU-sample = the collector's own CPU: total process CPU minus the CPU spent"
        "\ninside the fake libnvidia-ml (Python here, C on a real host, so not the collector's)."
        "\n'incl. fake driver' keeps it: it grows with every field asked for."
    )
    print("\nFields each tool reads per GPU (not the same sets; see ratio with that in mind):")
    for r in rows:
        print(f"- {r['tool']}: {r['fields']}")
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
