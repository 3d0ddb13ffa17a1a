"""Diagnosis speed: the kernel-log Xid scanner on a large dmesg vs ``grep -c Xid`` on the same file.

Kernel-log section: a 1,000,000-line dmesg is built in a temp dir from the real fixture lines of
../shared/fixtures/xid (deterministic seed): Xid lines of every format there (``[uptime]``,
``[ctime]``, ``dmesg --time-format=iso`` with ``kern :warn :``, journal ``kernel:``, Talos remote
syslog, bare ``NVRM:``, the multi-line fallen-off-the-bus message), their PCI bus ids rotated over
8 GPUs, mixed with the ordinary non-NVIDIA kernel lines of the gpud fixtures (call traces,
clocksource, OOM killer). Every line gets a fresh, increasing timestamp in its own format, so no
two prefixes repeat the way copies of a fixture line would. Each tool then runs as a whole
process, start-up included, the way a user's shell runs it: ours is ``python -c`` feeding the file
to ``KernelLogScanner`` in 8 MiB chunks (bounded memory), the reference is ``grep -c Xid FILE``.
Each keeps its fastest of ``--runs`` runs (noise on a shared VM only ever adds time).

Command section: ``gpuwarden explain`` on the 24 real error texts of ../shared/fixtures/errors and
``gpuwarden doctor --from`` on real captures, each a whole process as a user's shell runs it
(interpreter start included; the median over the inputs of each one's fastest run), next to
``python -c pass``, the floor any Python CLI pays.

Goals (issue 12): >= 50 MB/s for the scanner; explain and doctor --from <= 0.3 s each.

Run:  python benchmarks/diagnosis.py [--runs N] [--lines N] [--only kernel-log|commands]
Progress goes to stderr, tables to stdout. It reports; it never asserts.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from planner_accuracy import table

_T0 = time.perf_counter()
ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("GPUWARDEN_SHARED", ROOT.parent / "shared"))
XID_FIXTURES = SHARED / "fixtures" / "xid"
GOAL_MB_S = 50.0
SEED = 12
XID_SHARE = 0.8  # "most lines Xid lines" (issue 12)
NOISE_XID_SHARE = 0.01  # a second file: a real node's log is mostly other kernel lines
STEP_S = 0.01  # time between consecutive lines of the generated log
BUS_IDS = tuple(f"0000:{bus:02x}:00" for bus in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB))

# The scanner as a user's shell would run it: one process, start-up included.
_OURS = """
import sys
from gpuwarden.health.kernel_log import KernelLogScanner
scanner = KernelLogScanner(year=2025)
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for chunk in iter(lambda: f.read(1 << 23), ""):
        scanner.feed(chunk)
report = scanner.finish()
# VmHWM: this process image's peak (ru_maxrss would count the parent's RSS carried across exec)
rss_mb = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
print(len(report.groups), len(report.fallen_off_bus), report.xid_lines, f"{rss_mb:.0f}")
"""


def progress(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# --- building the log -------------------------------------------------------------------------

_UPTIME = re.compile(r"^\[\s*\d+\.\d+\]")
_CTIME = re.compile(r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\]")
_ISO_KERN = re.compile(r"^kern\s+:\w+\s+: \d{4}-\d{2}-\d{2}T[\d:]+,\d+\+00:00")
_TALOS = re.compile(r"\[\d{4}-\d{2}-\d{2}T[\d:.]+Z\]")
_PCI = re.compile(r"(PCI:|GPU at |GPU )0000:[0-9a-f]{2}:00")


@dataclass(frozen=True, slots=True)
class Template:
    """A fixture line: how its time prefix is written, and the rest."""

    kind: str  # "uptime", "ctime", "iso-kern", "talos", "none"
    rest: str  # the line after its time prefix (with {bus} where the PCI id was)


def _template(line: str) -> Template:
    for kind, pattern in (("uptime", _UPTIME), ("ctime", _CTIME), ("iso-kern", _ISO_KERN)):
        found = pattern.match(line)
        if found:
            return Template(kind, _PCI.sub(r"\g<1>{bus}", line[found.end() :]))
    found = _TALOS.search(line)
    if found:
        head, tail = line[: found.start()], line[found.end() :]
        return Template("talos", head + "[{talos}]" + _PCI.sub(r"\g<1>{bus}", tail))
    return Template("none", _PCI.sub(r"\g<1>{bus}", line))


def _prefix(kind: str, t: float, base: datetime) -> str:
    when = base + timedelta(seconds=t)
    if kind == "uptime":
        return f"[{t + 100.0:12.6f}]"
    if kind == "ctime":
        return when.strftime("[%a %b ") + f"{when.day:2d}" + when.strftime(" %H:%M:%S %Y]")
    if kind == "iso-kern":
        return "kern  :warn  : " + when.strftime("%Y-%m-%dT%H:%M:%S,%f+00:00")
    return ""


def _render(tpl: Template, t: float, base: datetime, bus: str) -> str:
    rest = tpl.rest.replace("{bus}", bus)
    if tpl.kind == "talos":
        stamp = (base + timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
        return rest.replace("{talos}", stamp)
    return _prefix(tpl.kind, t, base) + rest


def fixture_lines() -> tuple[list[Template], list[Template]]:
    """(Xid and GPU-lost message lines, ordinary non-NVIDIA kernel lines) of the xid fixtures."""
    xid: list[Template] = []
    noise: list[Template] = []
    with (XID_FIXTURES / "xid_lines_from_issues.tsv").open(newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["xid"]:
                xid.append(_template(row["log_line"]))
    for name in ("gpud__dmesg-with-xid-119.log", "gpud__dmesg-decode-iso-xid13-43.log"):
        for line in (XID_FIXTURES / name).read_text().splitlines():
            if "Xid" in line:
                xid.append(_template(line))
            elif "NVRM" not in line:
                noise.append(_template(line))
    return xid, noise


def build_log(path: Path, n_lines: int, xid_share: float = XID_SHARE) -> int:
    """Write the generated dmesg; returns its size in bytes."""
    xid, noise = fixture_lines()
    rng = random.Random(SEED)
    base = datetime(2025, 2, 23, 16, 0, 0, tzinfo=UTC)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n_lines):
            t = i * STEP_S
            if rng.random() < xid_share:
                line = _render(rng.choice(xid), t, base, BUS_IDS[i % len(BUS_IDS)])
            else:
                line = _render(rng.choice(noise), t, base, BUS_IDS[0])
            out.write(line + "\n")
    return path.stat().st_size


# --- timing ----------------------------------------------------------------------------------


def _fastest(cmd: Sequence[str], runs: int) -> tuple[float, str]:
    """Best wall time of ``runs`` runs of a whole process, and its stdout."""
    best, output = float("inf"), ""
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode not in (0, 1):  # grep -c exits 1 when it counts 0
            raise RuntimeError(f"{cmd[0]} failed: {done.stderr.strip()[-500:]}")
        if wall < best:
            best, output = wall, done.stdout.strip()
    return best, output


def _file_rows(path: Path, label: str, n_lines: int, runs: int) -> list[dict[str, object]]:
    mb = path.stat().st_size / 1e6
    progress(f"{label}: gpuwarden KernelLogScanner on {mb:.0f} MB ×{runs}")
    ours_s, ours_out = _fastest([sys.executable, "-c", _OURS, str(path)], runs)
    groups, fallen, xid_lines, rss = ours_out.split()
    grep = shutil.which("grep")
    grep_s: float | None = None
    grep_out = "–"
    if grep is not None:
        progress(f"{label}: grep -c Xid ×{runs}")
        grep_s, grep_out = _fastest([grep, "-c", "Xid", str(path)], runs)
    rows: list[dict[str, object]] = [
        {
            "tool": f"gpuwarden scan (python -c, KernelLogScanner), {label}",
            "mb": mb,
            "lines": n_lines,
            "wall_s": ours_s,
            "mb_s": mb / ours_s,
            "ratio": None if grep_s is None else ours_s / grep_s,
            "result": f"{groups} groups + {fallen} GPU-lost, {xid_lines} Xid lines",
            "rss_mb": rss,
            "goal": f"≥ {GOAL_MB_S:.0f} MB/s: " + ("met" if mb / ours_s >= GOAL_MB_S else "MISSED"),
        }
    ]
    if grep_s is not None:
        rows.append(
            {
                "tool": f"grep -c Xid, {label}",
                "mb": mb,
                "lines": n_lines,
                "wall_s": grep_s,
                "mb_s": mb / grep_s,
                "ratio": 1.0,
                "result": f"{grep_out} lines",
                "rss_mb": None,
                "goal": "reference",
            }
        )
    return rows


def kernel_log_rows(runs: int, n_lines: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="gpuwarden-bench-") as tmp:
        for share, label in ((XID_SHARE, "80 % Xid lines"), (NOISE_XID_SHARE, "1 % Xid lines")):
            path = Path(tmp) / "dmesg.log"
            progress(f"building a {n_lines:,}-line dmesg ({label}) in {tmp}")
            build_log(path, n_lines, share)
            rows += _file_rows(path, label, n_lines, runs)
    return rows


def _cell(value: object, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def print_kernel_log(rows: list[dict[str, object]]) -> None:
    headers = [
        "tool",
        "input MB",
        "lines",
        "wall s",
        "MB/s",
        "time / grep",
        "result",
        "peak RSS MB",
        "goal",
    ]
    body = [
        [
            str(r["tool"]),
            _cell(r["mb"], ".1f"),
            _cell(r["lines"], ","),
            _cell(r["wall_s"], ".2f"),
            _cell(r["mb_s"], ".0f"),
            _cell(r["ratio"], ".1f"),
            str(r["result"]),
            str(r["rss_mb"] or "–"),
            str(r["goal"]),
        ]
        for r in rows
    ]
    print(table(headers, body))


# --- explain and doctor as commands ------------------------------------------------------------

COMMAND_GOAL_S = 0.3
DOCTOR_INPUTS = (
    (
        "nvidia-smi -q (H100, load)",
        ("nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt",),
    ),
    ("nvidia-smi -q -x (A100 MIG)", ("nvidia-smi/netdata__a100-sxm4-mig.xml",)),
    ("dcgm-exporter scrape (T4)", ("dcgm/datadog-integrations-core__tesla-t4__metrics.prom",)),
    (
        "bundle: -q + nvlink -s + topo -m + dmesg",
        (
            "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt",
            "topo/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.nvlink-s.txt",
            "topo/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.topo-m.txt",
            "xid/gpud__dmesg-with-xid-119.log",
        ),
    ),
)


def _gpuwarden(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpuwarden", *args]


def _median_row(label: str, commands: Sequence[Sequence[str]], runs: int) -> dict[str, object]:
    walls = [_fastest(cmd, runs)[0] for cmd in commands]
    median = statistics.median(walls)
    goal = f"≤ {COMMAND_GOAL_S} s: " + ("met" if median <= COMMAND_GOAL_S else "MISSED")
    return {
        "tool": label,
        "inputs": len(commands),
        "median_s": median,
        "max_s": max(walls),
        "goal": goal,
    }


def command_rows(runs: int) -> list[dict[str, object]]:
    fixtures = SHARED / "fixtures"
    examples = [
        json.loads(line)["error_text"]
        for line in (fixtures / "errors" / "examples.jsonl").read_text().splitlines()
        if line.strip()
    ]
    rows = [
        _median_row("python -c pass (interpreter floor)", [[sys.executable, "-c", "pass"]], runs)
    ]
    rows[0]["goal"] = "reference"
    progress(f"explain: {len(examples)} real error texts ×{runs}")
    for flag in ((), ("--json",)):
        rows.append(
            _median_row(
                "gpuwarden explain TEXT " + " ".join(flag),
                [_gpuwarden("explain", text, *flag) for text in examples],
                runs,
            )
        )
    for label, paths in DOCTOR_INPUTS:
        progress(f"doctor --from {label} ×{runs}")
        args = [arg for p in paths for arg in ("--from", str(fixtures / p))]
        for flag in ((), ("--json",)):
            row = _median_row(
                f"gpuwarden doctor --from {label} " + " ".join(flag),
                [_gpuwarden("doctor", *args, *flag)],
                runs,
            )
            rows.append(row)
    return rows


def print_commands(rows: list[dict[str, object]]) -> None:
    headers = ["command (whole process)", "inputs", "median wall s", "max wall s", "goal"]
    body = [
        [
            str(r["tool"]),
            str(r["inputs"]),
            _cell(r["median_s"], ".3f"),
            _cell(r["max_s"], ".3f"),
            str(r["goal"]),
        ]
        for r in rows
    ]
    print(table(headers, body))


# name → (title, run(args) -> rows, print(rows))
SECTIONS: dict[
    str,
    tuple[
        str,
        Callable[[argparse.Namespace], list[dict[str, object]]],
        Callable[[list[dict[str, object]]], None],
    ],
] = {
    "kernel-log": (
        "Kernel-log Xid scan vs grep (whole processes, start-up included)",
        lambda args: kernel_log_rows(args.runs, args.lines),
        print_kernel_log,
    ),
    "commands": (
        "explain and doctor --from as a user runs them (whole processes, start-up included)",
        lambda args: command_rows(args.runs),
        print_commands,
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per tool; the fastest counts")
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines of the generated dmesg")
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append")
    args = parser.parse_args(argv)
    for key in args.only or list(SECTIONS):
        title, run, show = SECTIONS[key]
        print(f"\n## {title}\n", flush=True)
        show(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
