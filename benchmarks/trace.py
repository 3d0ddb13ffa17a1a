"""Trace analysis speed and memory: gpuwarden vs HTA 0.5.0 vs the JSON floor, same input, one run.

For every trace set in ../shared/fixtures/traces (the sets of hta_expected/hta-0.5.0/*/meta.json,
multi-rank sets as one job) and for large traces made by repeating the steps of a real one, each
tool runs in a fresh subprocess that reports its own work time (perf_counter around the work,
imports excluded, as in reference/traces.md §3), CPU time and peak RSS (its own VmHWM plus, for
each worker of ours it forked, the memory the worker did not share with it — its USS when it
exits plus its peak above its RSS then — so pages both processes map are counted once; for HTA's
pool workers, the largest one's peak beyond the parent's RSS at the start):

* floor — read the file(s), gunzip, ``orjson.loads``;
* HTA   — ``TraceAnalysis(trace_files={rank: path}, trace_dir="/")`` + temporal, idle-time (all
  ranks), kernel and comm/comp overlap breakdowns (``visualize=False``);
* ours  — ``load_traces`` + ``gpuwarden.traces.analyze.analyze`` (what `gpuwarden trace analyze`
  runs before rendering; it includes the HTA-compatible report), or ``load_traces`` +
  ``hta_report`` when that module is absent (the table says which).

MB/s/core = uncompressed JSON MB / CPU seconds (user + sys) of our work. Goals (issue 4), on every
trace of ≥ 10 MB JSON: ≥ 10× faster than HTA, ≤ ¼ of HTA's peak RSS, ≥ 150 MB/s/core.

A second table times each tool as a user runs it (issue 13): a whole process from the shell's
fork to its exit, start-up (interpreter, imports) and rendering included, measured from outside
(wall time, and the CPU time of the process and its children):

* HTA  — ``python SCRIPT FILES``, the script doing what the first table times (TraceAnalysis + the
  4 breakdowns), as one writes it to use HTA; nothing printed;
* ours — ``gpuwarden trace analyze FILES --json`` (the document to a pipe) and without ``--json``
  (the tables, to a pipe: rich renders them as for a file).

With ``--runs N`` the tools take turns N times and each keeps its fastest run (wall and CPU) and
its largest peak RSS: on a shared 2-core VM, noise only ever adds time.

Run:  python benchmarks/trace.py [--runs N] [--copies 1,4,16] [--base SET] [--no-large]
                                 [--src DIR] [--before-src DIR] [--no-work]
``--src`` measures another gpuwarden source tree; ``--before-src`` adds an earlier one (an
earlier commit's ``src``) to the whole-process table, run in the same turns, for a before/after
table; ``--no-work`` prints only the whole-process table.
It reports; it never asserts: the exit code is 0 even when goals are missed.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from planner_accuracy import table

_T0 = time.perf_counter()
T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("GPUWARDEN_SHARED", ROOT.parent / "shared"))
TRACES = SHARED / "fixtures" / "traces"
EXPECTED = TRACES / "hta_expected" / "hta-0.5.0"
BIG_MB = 10.0
GOAL_SPEEDUP = 10.0
GOAL_RSS_RATIO = 0.25
GOAL_MB_S_CORE = 150.0

_REPORT = """
import json, os, resource, sys, tempfile, time
PARENT = os.getpid()
WORKER_LOG = os.path.join(tempfile.gettempdir(), f"gpuwarden-bench-workers-{PARENT}")
def _status(key):
    return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith(key))
def report(t0, c0, extra=None, t1=None):
    t1 = time.perf_counter() if t1 is None else t1
    s = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = s.ru_utime + s.ru_stime + ch.ru_utime + ch.ru_stime - c0
    # VmHWM: peak RSS of this process image (ru_maxrss would include the parent's pre-exec
    # image). Our forked workers: their logged private peak (_WORKER_HOOK); other children (HTA's
    # pool, which may kill its workers): the largest one's peak beyond our RSS at the start.
    hwm = _status("VmHWM:")
    try:
        with open(WORKER_LOG) as fh:
            workers = sum(int(x) for x in fh)
        os.unlink(WORKER_LOG)
    except FileNotFoundError:
        workers = max(0, ch.ru_maxrss - RSS_AT_START) if ch.ru_maxrss else 0
    out = {"wall_s": t1 - t0, "cpu_s": cpu, "rss_mb": (hwm + workers) / 1024,
           "workers_mb": workers / 1024}
    out.update(extra or {})
    print("RESULT " + json.dumps(out))
def cpu_now():
    global RSS_AT_START
    RSS_AT_START = _status("VmRSS:")
    s = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + ch.ru_utime + ch.ru_stime
RSS_AT_START = 0
files = json.loads(sys.argv[1])
"""

_WORKER_HOOK = """
# A forked worker shares the pages it inherited until either side writes them, so what it adds
# is its private memory (USS, /proc/self/smaps_rollup) plus its transient peak above what it
# holds when it exits (VmHWM - VmRSS). It writes that here just before os._exit (the way every
# forked worker of ours ends); report() adds the workers' sum (they run at the same time).
_real_exit = os._exit
def _exit(code):
    if os.getpid() != PARENT:
        uss = sum(int(x.split()[1]) for x in open("/proc/self/smaps_rollup")
                  if x.startswith(("Private_Clean:", "Private_Dirty:")))
        with open(WORKER_LOG, "a") as fh:
            fh.write(f"{uss + _status('VmHWM:') - _status('VmRSS:')}\\n")
    _real_exit(code)
os._exit = _exit
"""

FLOOR = (
    _REPORT
    + """
import gzip, orjson
t0, c0 = time.perf_counter(), cpu_now()
for path in files.values():
    data = open(path, "rb").read()
    if data[:2] == b"\\x1f\\x8b":
        data = gzip.decompress(data)
    obj = orjson.loads(data)
    del data, obj
report(t0, c0)
"""
)

HTA = (
    _REPORT
    + """
import logging, warnings
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
t0, c0 = time.perf_counter(), cpu_now()
ta = TraceAnalysis(trace_files={int(k): v for k, v in files.items()}, trace_dir="/")
errors = []
ranks = sorted(int(k) for k in files)
for name, call in [
    ("temporal", lambda: ta.get_temporal_breakdown(visualize=False)),
    ("idle", lambda: ta.get_idle_time_breakdown(ranks=ranks, visualize=False)),
    ("kernel", lambda: ta.get_gpu_kernel_breakdown(visualize=False)),
    ("overlap", lambda: ta.get_comm_comp_overlap(visualize=False)),
]:
    try:
        call()
    except Exception as exc:
        errors.append(f"{name}: {type(exc).__name__}")
report(t0, c0, {"errors": errors})
"""
)

OURS = (
    _REPORT
    + _WORKER_HOOK
    + """
import numpy  # imports are outside the timed work, as for HTA (pandas)
import gpuwarden.traces.decode, gpuwarden.traces.native
if not gpuwarden.traces.native.available():  # the msgspec decoder: what the load path imports
    import msgspec, gpuwarden.traces.columns, gpuwarden.traces.kineto_structs
import gpuwarden.traces.hta.breakdowns, gpuwarden.traces.hta.idle
import gpuwarden.traces.insights.summary, gpuwarden.traces.insights.stragglers  # lazy in analyze
from gpuwarden.traces.load import load_traces
try:
    from gpuwarden.traces.analyze import analyze
    mode = "load_traces + analyze"
except ImportError:
    from gpuwarden.traces.hta import hta_report as analyze
    mode = "load_traces + hta_report"
t0, c0 = time.perf_counter(), cpu_now()
trace = load_traces(list(files.values()))
t1 = time.perf_counter()
analyze(trace)
t2 = time.perf_counter()
# Workers started by a fork server (used when threads run) are its children, not ours: stop it so
# that their CPU time and peak RSS reach RUSAGE_CHILDREN (forked workers are ours already). Only
# if the work started one: importing multiprocessing here would add its memory to our peak.
forkserver = sys.modules.get("multiprocessing.forkserver")
server = getattr(forkserver, "_forkserver", None)
if getattr(server, "_forkserver_pid", None) is not None:
    server._stop()
decoder = "simdjson" if gpuwarden.traces.native.available() else "msgspec"
report(t0, c0, {"mode": f"{mode} ({decoder} decoder)", "load_s": t1 - t0}, t1=t2)
"""
)


# What a user writes to get HTA's numbers: the work the first table times, in a script run as a
# fresh process (python SCRIPT FILES...).
HTA_SCRIPT = """
import logging, sys, warnings
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
files = {int(rank): path for rank, path in (arg.split("=", 1) for arg in sys.argv[1:])}
ta = TraceAnalysis(trace_files=files, trace_dir="/")
ranks = sorted(files)
for call in (
    lambda: ta.get_temporal_breakdown(visualize=False),
    lambda: ta.get_idle_time_breakdown(ranks=ranks, visualize=False),
    lambda: ta.get_gpu_kernel_breakdown(visualize=False),
    lambda: ta.get_comm_comp_overlap(visualize=False),
):
    try:
        call()
    except Exception:
        pass  # HTA raises on some traces (first table, notes); the process still counts
"""


def progress(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Measure:
    wall_s: float
    cpu_s: float
    rss_mb: float
    errors: tuple[str, ...] = ()
    mode: str = ""
    load_s: float | None = None  # ours: the load_traces part of wall_s


@dataclass(frozen=True)
class TraceSet:
    name: str
    files: dict[int, Path]  # rank → file
    json_mb: float


def run_once(snippet: str, files: dict[int, Path]) -> Measure | str:
    """One fresh subprocess: its Measure, or the failure text."""
    arg = json.dumps({str(k): str(v) for k, v in files.items()})
    proc = subprocess.run(
        [sys.executable, "-c", snippet, arg],
        capture_output=True,
        check=False,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed: {tail[:80]}"
    d = json.loads(line[len("RESULT ") :])
    return Measure(
        d["wall_s"],
        d["cpu_s"],
        d["rss_mb"],
        tuple(d.get("errors", ())),
        d.get("mode", ""),
        d.get("load_s"),
    )


def take_turns(tools: Sequence[Callable[[], T | str]], runs: int) -> list[list[T] | str]:
    """Each tool ``runs`` times, the tools taking turns (so a slow spell of this shared machine
    falls on all of them): each tool's results, or the text of its first failure (after which
    it is not run again)."""
    found: list[list[T]] = [[] for _ in tools]
    failed: list[str | None] = [None for _ in tools]
    for _ in range(runs):
        for i, tool in enumerate(tools):
            if failed[i] is None:
                got = tool()
                if isinstance(got, str):
                    failed[i] = got
                else:
                    found[i].append(got)
    return [got if fail is None else fail for got, fail in zip(found, failed, strict=True)]


def run_tools(snippets: Sequence[str], files: dict[int, Path], runs: int) -> list[Measure | str]:
    """Each tool ``runs`` times (``take_turns``), keeping each tool's fastest run — wall and CPU
    time of the least disturbed run, as timeit does: noise only adds time — and its largest
    peak RSS."""
    out: list[Measure | str] = []
    for got in take_turns([functools.partial(run_once, s, files) for s in snippets], runs):
        if isinstance(got, str):
            out.append(got)
            continue
        best = min(got, key=lambda m: m.wall_s)
        out.append(
            Measure(
                wall_s=best.wall_s,
                cpu_s=min(m.cpu_s for m in got),
                rss_mb=max(m.rss_mb for m in got),
                errors=best.errors,
                mode=best.mode,
                load_s=best.load_s,
            )
        )
    return out


@dataclass(frozen=True)
class Process:
    """A whole process as the shell sees it: fork to exit."""

    wall_s: float
    cpu_s: float  # user + sys of the process and the children it waited for


@dataclass(frozen=True)
class Tool:
    """One command line of the whole-process table, and the gpuwarden tree it imports."""

    label: str
    json: bool  # ours: --json (else the tables); HTA: unused
    src: Path | None  # None: HTA


def run_process(command: Sequence[str], src: Path | None) -> Process | str:
    """Run ``command`` (importing gpuwarden from ``src``) with stdout and stderr to pipes; its
    wall and CPU time, or why it failed."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(src), os.environ.get("PYTHONPATH")) if p
        )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        list(command), capture_output=True, check=False, cwd=ROOT, timeout=1800, env=env
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        return f"failed (exit {proc.returncode}): {tail[:80]}"
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Process(wall, cpu)


def tool_command(tool: Tool, files: dict[int, Path]) -> list[str]:
    ranked = sorted(files.items())
    if tool.src is None:
        return [sys.executable, "-c", HTA_SCRIPT, *(f"{r}={p}" for r, p in ranked)]
    ours = [sys.executable, "-m", "gpuwarden", "trace", "analyze", *(str(p) for _, p in ranked)]
    return [*ours, "--json"] if tool.json else ours


def process_tools(src: Path, before: Path | None) -> list[Tool]:
    """HTA's script, then ours (--json, tables) from ``src`` and, with --before-src, from the
    earlier tree: all of them take turns in every run."""
    tools = [Tool("HTA", False, None), Tool("ours --json", True, src), Tool("ours", False, src)]
    if before is not None:
        tools += [Tool("before --json", True, before), Tool("before", False, before)]
    return tools


def fastest(got: list[Process] | str) -> Process | str:
    """The least wall and the least CPU time over the runs of one command."""
    if isinstance(got, str):
        return got
    return Process(min(p.wall_s for p in got), min(p.cpu_s for p in got))


def run_processes(tools: Sequence[Tool], files: dict[int, Path], runs: int) -> list[Process | str]:
    """Each tool ``runs`` times, taking turns; the fastest wall and CPU of each."""
    commands = [functools.partial(run_process, tool_command(t, files), t.src) for t in tools]
    return [fastest(got) for got in take_turns(commands, runs)]


def process_headers(tools: Sequence[Tool]) -> list[str]:
    out = ["trace", "JSON MB", "HTA s", "× at floor"]
    for tool in tools[1:]:
        out += [f"{tool.label} s", "× HTA"]
    return [*out, "HTA CPU s", *(f"{t.label} CPU s" for t in tools[1:] if t.json), "notes"]


def measure_processes(
    sets: Sequence[TraceSet], runs: int, tools: Sequence[Tool], floor: Process | str
) -> list[list[str]]:
    """One row per set; "× at floor" is HTA's wall time over the numpy floor's: the most any
    numpy-based tool could be faster on that input, had it no work and no imports of its own."""
    floor_s = floor.wall_s if isinstance(floor, Process) and floor.wall_s > 0 else None
    rows = []
    for ts in sets:
        progress(f"{ts.name}: whole processes")
        got = run_processes(tools, ts.files, runs)
        hta = got[0] if isinstance(got[0], Process) else None
        ceiling = hta.wall_s / floor_s if hta and floor_s else None
        cells = [
            ts.name,
            f"{ts.json_mb:.1f}",
            fmt(hta.wall_s if hta else None, ".3f"),
            fmt(ceiling, ".1f") + ("×" if ceiling else ""),
        ]
        for ours in got[1:]:
            o = ours if isinstance(ours, Process) else None
            speedup = hta.wall_s / o.wall_s if hta and o and o.wall_s > 0 else None
            cells += [
                fmt(o.wall_s if o else None, ".3f"),
                fmt(speedup, ".1f") + ("×" if speedup else ""),
            ]
        cells.append(fmt(hta.cpu_s if hta else None, ".3f"))
        for tool, ours in zip(tools[1:], got[1:], strict=True):
            if tool.json:
                cells.append(fmt(ours.cpu_s if isinstance(ours, Process) else None, ".3f"))
        cells.append("; ".join(x for x in got if isinstance(x, str)))
        rows.append(cells)
    return rows


def json_bytes(path: Path) -> int:
    data = path.read_bytes()
    return len(gzip.decompress(data)) if data[:2] == b"\x1f\x8b" else len(data)


def fixture_sets() -> list[TraceSet]:
    sets = []
    for meta_path in sorted(EXPECTED.glob("*/meta.json")):
        meta = json.loads(meta_path.read_text())
        files = {int(r): TRACES / rel for r, rel in meta["files_by_rank"].items()}
        mb = sum(json_bytes(p) for p in files.values()) / 1e6
        sets.append(TraceSet(meta_path.parent.name, files, mb))
    return sets


_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def repeated_trace(base: Path, copies: int, out_dir: Path) -> TraceSet:
    """``copies`` back-to-back copies of every event of ``base`` (metadata events once), each copy
    shifted in time by the trace's span (+1 ms), with correlation / External id / flow ids
    offset so launches still pair with their own kernels, and ProfilerStep#N renumbered so each
    copy's steps are new steps. Written as plain JSON."""
    import orjson

    raw = base.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    shift = int(end - start) + 1000
    max_corr = max(
        (
            e.get("args", {}).get("correlation", 0)
            for e in events
            if isinstance(e.get("args"), dict)
        ),
        default=0,
    )
    max_ext = max(
        (
            e.get("args", {}).get("External id", 0)
            for e in events
            if isinstance(e.get("args"), dict)
        ),
        default=0,
    )
    steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
    step_stride = (max(steps) - min(steps) + 1) if steps else 0
    out: list[dict[str, object]] = []
    for c in range(copies):
        for e in events:
            if e.get("ph") == "M":
                if c == 0:
                    out.append(e)
                continue
            if c == 0:
                out.append(e)
                continue
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = e2["ts"] + c * shift
            if isinstance(e2.get("id"), int):
                e2["id"] = e2["id"] + c * (max_corr + 1)
            if step_stride and (m := _STEP.match(str(e2.get("name", "")))):
                e2["name"] = f"ProfilerStep#{int(m.group(1)) + c * step_stride}"
            args = e2.get("args")
            if isinstance(args, dict):
                args = dict(args)
                if isinstance(args.get("correlation"), int) and args["correlation"] >= 0:
                    args["correlation"] += c * (max_corr + 1)
                if isinstance(args.get("External id"), int):
                    args["External id"] += c * (max_ext + 1)
                e2["args"] = args
            out.append(e2)
    doc["traceEvents"] = out
    path = out_dir / f"repeated_x{copies}.json"
    path.write_bytes(orjson.dumps(doc))
    rank = doc.get("distributedInfo", {}).get("rank", 0)
    return TraceSet(f"{base.parent.name} ×{copies}", {int(rank): path}, path.stat().st_size / 1e6)


def fmt(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def measure_sets(sets: Sequence[TraceSet], runs: int) -> tuple[list[list[str]], set[str]]:
    rows: list[list[str]] = []
    modes: set[str] = set()
    for ts in sets:
        progress(f"{ts.name} ({ts.json_mb:.1f} MB JSON)")
        floor, hta, ours = run_tools((FLOOR, HTA, OURS), ts.files, runs)
        f = floor if isinstance(floor, Measure) else None
        h = hta if isinstance(hta, Measure) else None
        o = ours if isinstance(ours, Measure) else None
        if o is not None:
            modes.add(o.mode)
        speedup = h.wall_s / o.wall_s if h and o and o.wall_s > 0 else None
        rss_ratio = o.rss_mb / h.rss_mb if h and o else None
        mbs = ts.json_mb / o.cpu_s if o and o.cpu_s > 0 else None
        big = ts.json_mb >= BIG_MB
        goals = []
        if big:
            goals.append("speed " + ("ok" if speedup and speedup >= GOAL_SPEEDUP else "MISSED"))
            goals.append("RSS " + ("ok" if rss_ratio and rss_ratio <= GOAL_RSS_RATIO else "MISSED"))
            goals.append("MB/s " + ("ok" if mbs and mbs >= GOAL_MB_S_CORE else "MISSED"))
        notes = [x for x in (floor, hta, ours) if isinstance(x, str)]
        if o and o.load_s is not None:
            notes.append(f"ours: load {o.load_s:.3f} s + analysis {o.wall_s - o.load_s:.3f} s")
        if h and h.errors:
            notes.append("HTA raised: " + ", ".join(h.errors))
        rows.append(
            [
                ts.name,
                f"{ts.json_mb:.1f}",
                fmt(f.wall_s if f else None, ".3f"),
                fmt(h.wall_s if h else None, ".3f"),
                fmt(o.wall_s if o else None, ".3f"),
                fmt(speedup, ".1f") + ("×" if speedup else ""),
                fmt(mbs, ".0f"),
                fmt(h.rss_mb if h else None, ".0f"),
                fmt(o.rss_mb if o else None, ".0f"),
                fmt(rss_ratio, ".2f"),
                "; ".join(goals) or "(< 10 MB: no goal)",
                "; ".join(notes),
            ]
        )
    return rows, modes


HEADERS = [
    "trace",
    "JSON MB",
    "floor s",
    "HTA s",
    "ours s",
    "speed-up vs HTA",
    "MB/s/core",
    "HTA peak RSS MB",
    "ours peak RSS MB",
    "RSS ratio",
    "goals",
    "notes",
]


def use_source(src: Path) -> None:
    """Our subprocesses import gpuwarden from ``src`` (the checkout, or --src)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(src.resolve()), os.environ.get("PYTHONPATH")) if p
    )


def byte_compile(src: Path) -> None:
    """Compile gpuwarden's modules, as pip does when it installs a wheel (HTA's and pandas'
    were compiled at install): an editable install run with PYTHONDONTWRITEBYTECODE would
    otherwise compile every module at import, and the compiler's memory would count in our peak
    RSS but not in HTA's."""
    import compileall

    compileall.compile_dir(src / "gpuwarden", quiet=1)


def start_up_floor(runs: int) -> Process | str:
    """``python -c "import numpy"`` with one BLAS thread unless told otherwise, as `gpuwarden
    trace` sets it: the start-up no numpy-based tool can go below."""
    script = "import os; os.environ.setdefault('OPENBLAS_NUM_THREADS', '1'); import numpy"
    return _fastest_script(script, runs)


def interpreter_start_up(runs: int) -> Process | str:
    """``python -c pass``: this interpreter's own start-up (site and its .pth files), which
    both tools pay and which differs between machines."""
    return _fastest_script("pass", runs)


def _fastest_script(script: str, runs: int) -> Process | str:
    command = functools.partial(run_process, [sys.executable, "-c", script], None)
    return fastest(take_turns([command], max(runs, 3))[0])


def _seconds(p: Process | str) -> str:
    return f"{p.wall_s:.3f} s wall, {p.cpu_s:.3f} s CPU" if isinstance(p, Process) else p


# a tree from `git archive` holds the C++ source of traces._kineto but not the module built from
# it: gpuwarden then decodes with msgspec, and the before column times another decoder
NO_NATIVE_DECODER = (
    " (that tree has no built traces._kineto module: it decodes with msgspec, not simdjson; "
    "copy src/gpuwarden/traces/_kineto*.so into it to time the same decoder)"
)


def _has_native_decoder(src: Path) -> bool:
    return any((src / "gpuwarden" / "traces").glob("_kineto*.so"))


def _process_table(
    rows: list[list[str]],
    tools: Sequence[Tool],
    floor: Process | str,
    interpreter: Process | str,
) -> list[str]:
    before_src = next((t.src for t in tools if t.label.startswith("before")), None)
    before = (
        ""
        if before_src is None
        else "; before = the same commands importing the earlier tree given with --before-src"
        + ("" if _has_native_decoder(before_src) else NO_NATIVE_DECODER)
    )
    return [
        "",
        "As a shell runs them: each a whole process, fork to exit, start-up and output included "
        "(wall s: the fastest run; CPU s: user + sys of the process and its children). HTA = "
        "`python SCRIPT FILES` doing TraceAnalysis + the 4 breakdowns; ours = `gpuwarden trace "
        f"analyze FILES` with --json and with its tables, stdout to a pipe{before}. "
        f"The floor of any numpy-based tool here, `python -c 'import numpy'`: {_seconds(floor)} "
        f"(of which the interpreter's own start-up, `python -c pass`: {_seconds(interpreter)}); "
        "× at floor = HTA s / that floor, the most such a tool could be faster.",
        "",
        table(process_headers(tools), rows),
    ]


def run(
    runs: int = 1,
    copies: Sequence[int] = (1, 4, 16),
    base: str = "nccl_parser_config",
    large: bool = True,
    work: bool = True,
    src: Path = ROOT / "src",
    before: Path | None = None,
) -> str:
    use_source(src)
    for tree in (src, before):
        if tree is not None:
            byte_compile(tree)
    tools = process_tools(src.resolve(), None if before is None else before.resolve())
    sets = fixture_sets()
    floor, interpreter = start_up_floor(runs), interpreter_start_up(runs)
    process_rows = measure_processes(sets, runs, tools, floor)
    if not work:
        return "\n".join(_process_table(process_rows, tools, floor, interpreter))
    rows, modes = measure_sets(sets, runs)
    out = [
        "Trace analysis: wall s of the work in a fresh process (imports excluded); CPU s and "
        "peak RSS MB of that process and its workers (RSS: its own peak + each of our forked "
        "workers' private memory (USS at exit + peak above its RSS then), so shared pages count "
        "once; for HTA's pool, as it may kill its workers, the largest worker's peak beyond the "
        "parent's RSS at the start, which can only undercount HTA).",
        f"ours = {', '.join(sorted(modes)) or '?'}; HTA = TraceAnalysis + 4 breakdowns; "
        "floor = gunzip + orjson.loads. Both run from byte-compiled modules.",
        f"Goals on traces ≥ {BIG_MB:.0f} MB JSON: ≥ {GOAL_SPEEDUP:.0f}× faster than HTA, "
        f"≤ {GOAL_RSS_RATIO:.2f} of its peak RSS, ≥ {GOAL_MB_S_CORE:.0f} MB/s/core "
        "(JSON MB / CPU s).",
        "",
        table(HEADERS, rows),
        *_process_table(process_rows, tools, floor, interpreter),
    ]
    if large:
        base_set = next(s for s in sets if s.name == base)
        (base_file,) = base_set.files.values()
        with tempfile.TemporaryDirectory(prefix="gpuwarden-bench-") as tmp:
            made = []
            for k in copies:
                progress(f"writing {base} ×{k}")
                made.append(repeated_trace(base_file, k, Path(tmp)))
            big_rows, _ = measure_sets(made, runs)
            big_process_rows = measure_processes(made, runs, tools, floor)
        out += [
            "",
            f"Large traces: {base} ({base_file.name}) repeated 1, 4, 16 times: every non-metadata "
            "event copied k times, copy c shifted by c × (trace span + 1 ms), correlation / "
            "External id / flow ids offset per copy, ProfilerStep#N renumbered; plain JSON in a "
            "temp dir.",
            "",
            table(HEADERS, big_rows),
            *_process_table(big_process_rows, tools, floor, interpreter),
        ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=1, help="subprocess runs per tool (the fastest is kept)"
    )
    parser.add_argument("--copies", default="1,4,16", help="copies for the large traces")
    parser.add_argument(
        "--base", default="nccl_parser_config", help="set repeated for large traces"
    )
    parser.add_argument("--no-large", action="store_true", help="skip the repeated-steps traces")
    parser.add_argument(
        "--src", type=Path, help="the gpuwarden source tree to measure (default: this checkout)"
    )
    parser.add_argument(
        "--no-work", action="store_true", help="only the whole-process table (fixture sets)"
    )
    parser.add_argument(
        "--before-src",
        type=Path,
        help="an earlier gpuwarden source tree, timed as whole processes in the same runs",
    )
    args = parser.parse_args(argv)
    copies = tuple(int(x) for x in args.copies.split(",") if x)
    src = ROOT / "src" if args.src is None else args.src
    print(
        run(args.runs, copies, args.base, not args.no_large, not args.no_work, src, args.before_src)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
