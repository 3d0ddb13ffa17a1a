"""Parser throughput of the `smi` and `dcgm` telemetry backends on the real fixtures.

Each fixture file is parsed N times in this process (the text is read once; the parse is what is
timed). Formats: nvidia-smi `-q -x` XML, `-q` text, `--query-gpu` CSV, `--query-compute-apps`
CSV, `dmon`, the default screen, an nvidia_gpu_exporter capture bundle (two `-q` sections read
out of ~150 KB), and a dcgm-exporter scrape. Where a reference parser exists for the same input it
runs on the same text in the same loop: `prometheus_client.parser` for scrapes (what the exporter
extra would have used) and bare `xml.etree.ElementTree.fromstring` for the XML (the floor: the
XML parse without the field mapping). The ratio is our time over the reference's.

Run:  python benchmarks/telemetry_parsers.py [--runs N]   (progress on stderr, table on stdout)
`run()` returns the rows as dicts for benchmarks/telemetry.py. It reports; it never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path

from planner_accuracy import table

_T0 = time.perf_counter()

# (format label, folder under shared/fixtures, glob); one representative file per capture kind
FORMATS: tuple[tuple[str, str, str], ...] = (
    ("smi -q -x (XML)", "nvidia-smi", "netdata__*.xml"),
    ("smi -q (text)", "nvidia-smi", "*h100-mig*.q.txt"),
    ("smi -q (text)", "nvidia-smi", "windows*610.62.load.q.txt"),
    ("smi --query-gpu CSV", "nvidia-smi", "*h100-mig*.load.query-gpu.csv"),
    ("smi --query-gpu CSV", "nvidia-smi", "netdata__tesla-p100.csv"),
    ("smi --query-compute-apps CSV", "nvidia-smi", "windows*610.62.load.query-compute-apps.csv"),
    ("smi dmon", "nvidia-smi", "*h100-80gb*.load.dmon.txt"),
    ("smi dmon", "nvidia-smi", "windows*610.62.idle.dmon.txt"),
    ("smi screen (table)", "nvidia-smi", "*h100-mig*.load.table.txt"),
    ("smi capture bundle", "nvidia-smi/captures", "*h100-mig*.txt"),
    ("dcgm-exporter scrape", "dcgm", "*.prom"),
)


def progress(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def shared_fixtures() -> Path:
    env = os.environ.get("GPUWARDEN_SHARED")
    base = Path(env) if env else Path(__file__).resolve().parent.parent.parent / "shared"
    return base / "fixtures"


def _rate(parse: Callable[[], object], runs: int) -> float:
    """Parses per second: best of 3 batches (least disturbed by the other jobs on the box)."""
    parse()  # warm-up: imports, regex compilation
    batch = max(1, runs // 3)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(batch):
            parse()
        best = min(best, (time.perf_counter() - start) / batch)
    return 1.0 / best


def _reference(label: str, text: str) -> tuple[str, Callable[[], object]] | None:
    if label.startswith("dcgm"):
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            return None
        return "prometheus_client.parser", lambda: list(text_string_to_metric_families(text))
    if "XML" in label:
        return "ElementTree.fromstring only", lambda: ET.fromstring(text)
    return None


def run(runs: int = 300) -> list[dict[str, object]]:
    from gpuwarden.telemetry.dcgm import parse_scrape
    from gpuwarden.telemetry.smi import parse_smi_output

    root = shared_fixtures()
    rows: list[dict[str, object]] = []
    for label, folder, pattern in FORMATS:
        for path in sorted((root / folder).glob(pattern)):
            text = path.read_text()
            source = str(path)
            if label.startswith("dcgm"):

                def ours(text: str = text, source: str = source) -> object:
                    return parse_scrape(text, source, 0.0)
            else:

                def ours(text: str = text, source: str = source) -> object:
                    return parse_smi_output(text, source, 0.0)

            progress(f"{label}: {path.name}")
            rate = _rate(ours, runs)
            size = len(text.encode())
            row: dict[str, object] = {
                "format": label,
                "file": path.name,
                "bytes": size,
                "parses_per_s": rate,
                "mb_per_s": rate * size / 1e6,
                "reference": None,
                "reference_parses_per_s": None,
                "time_ratio_ours_to_reference": None,
            }
            reference = _reference(label, text)
            if reference is not None:
                name, parse = reference
                ref_rate = _rate(parse, runs)
                row.update(
                    reference=name,
                    reference_parses_per_s=ref_rate,
                    time_ratio_ours_to_reference=ref_rate / rate,
                )
            rows.append(row)
    return rows


def _cell(value: object, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="parses per file (3 batches)")
    # parse_known_args: benchmarks/telemetry.py calls main() with its own flags on sys.argv
    args, _ = parser.parse_known_args(argv)
    rows = run(args.runs)
    headers = [
        "format",
        "file",
        "bytes",
        "parses/s",
        "MB/s",
        "reference",
        "ref parses/s",
        "ours/ref",
    ]
    body = [
        [
            str(r["format"]),
            str(r["file"]),
            str(r["bytes"]),
            _cell(r["parses_per_s"], ",.0f"),
            _cell(r["mb_per_s"], ".2f"),
            str(r["reference"] or "–"),
            _cell(r["reference_parses_per_s"], ",.0f"),
            _cell(r["time_ratio_ours_to_reference"], ".2f"),
        ]
        for r in rows
    ]
    print(table(headers, body))
    print("ours/ref = our parse time ÷ the reference's (below 1: ours is faster).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
