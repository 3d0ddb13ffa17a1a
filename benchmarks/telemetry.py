"""Issue 3's benchmark tables in one run: collector CPU per GPU-sample vs nvitop and gpustat on
the same fake NVML (telemetry_nvml.py), the SQLite store (telemetry_store.py), and nvidia-smi /
dcgm-exporter parser throughput (telemetry_parsers.py).

Run:  python benchmarks/telemetry.py [--only nvml|store|parsers]   (tables on stdout)
It reports; it never asserts: the exit code is 0 even when goals are missed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

PARTS = {
    "nvml": ("telemetry_nvml", "collector CPU time per GPU-sample (fake NVML, 8 devices)"),
    "store": ("telemetry_store", "SQLite store: ingest, size, query, kill -9"),
    "parsers": ("telemetry_parsers", "nvidia-smi / dcgm-exporter parser throughput"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(PARTS), action="append")
    args = parser.parse_args(argv)
    for key in args.only or list(PARTS):
        module_name, title = PARTS[key]
        print(f"\n## {title}\n", flush=True)
        start = time.perf_counter()
        module = importlib.import_module(module_name)
        module.main([])
        print(f"\n({key}: {time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
