"""The fuzz harness over whole verbs (`history`, `record`, `snapshot --backend replay`, `trace`):
a batch of command lines, run in ONE fresh Python process (start-up paid once) under an
address-space limit, each as a user would run it (``gpuwarden.cli.main.main(argv)``), and
judged: never exit 70 (an internal error) nor a traceback, never invalid JSON (strict: no
Infinity/NaN) — the document on stdout when it succeeds, the error document on stderr when it
does not — and the process's peak RSS within a bound. The cases come from the callers (mutated
real fixtures, made with a fixed seed): the same cases on every run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.checkout import child_env

# A runaway allocation hits this (MemoryError) instead of the machine; the peak check is the
# bound the verbs must keep on these small inputs.
ADDRESS_SPACE_LIMIT = 4 << 30
PEAK_RSS_LIMIT_MB = 700

_RUNNER = textwrap.dedent(
    """
    import contextlib, io, json, os, resource, sys
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from gpuwarden.cli.main import main

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    def json_problem(code, out, err):
        # the document on stdout when it succeeds; else the error document on stderr (warnings
        # may come first, as `trace` prints them)
        text = out if code == 0 else err[max(err.find("{\\n"), 0):]
        try:
            document = json.loads(text, parse_constant=refuse)
            if code != 0:
                assert document["reference"] and document["hint"], document
        except (ValueError, AssertionError, KeyError, TypeError) as exc:
            return f"{exc}: {text[:300]!r}"
        return None

    cases = json.loads(open(sys.argv[1]).read())
    for argv in cases:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException as exc:  # main() must let nothing out: say what did
                code = f"raised {type(exc).__name__}: {exc}"
        out, err = out.getvalue(), err.getvalue()
        problem = None
        if isinstance(code, int) and "--json" in argv:
            problem = json_problem(code, out, err)
        print(json.dumps({"code": code, "json_problem": problem, "err": err[-2000:]}), flush=True)
    # VmHWM, the peak of this process image (ru_maxrss would count the parent's before exec)
    status = open("/proc/self/status").read().split("VmHWM:")[1]
    print(json.dumps({"peak_mb": int(status.split()[0]) / 1024}), flush=True)
    """
)


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int | str
    json_problem: str | None
    err: str


def run_cases(
    cases: Sequence[Sequence[str]], workdir: Path, *, address_space: int = ADDRESS_SPACE_LIMIT
) -> tuple[list[Outcome], float]:
    """Every case's outcome, and the peak RSS (MB) of the process that ran them all (under an
    ``address_space`` limit in bytes)."""
    listing = workdir / "cases.json"
    listing.write_text(json.dumps([list(c) for c in cases]))
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(listing), str(address_space)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=workdir,
        env=child_env(),
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    *results, last = (json.loads(line) for line in lines)
    assert len(results) == len(cases), proc.stderr[-3000:]
    outcomes = [
        Outcome(tuple(argv), r["code"], r["json_problem"], r["err"])
        for argv, r in zip(cases, results, strict=True)
    ]
    return outcomes, float(last["peak_mb"])


def problems(outcomes: Sequence[Outcome]) -> list[str]:
    """What broke the promise, one line per case (empty when none did)."""
    found = []
    for o in outcomes:
        what = " ".join(o.argv)
        if not isinstance(o.code, int):
            found.append(f"{what}: {o.code}")
        elif o.code == 70 or "Traceback" in o.err:
            found.append(f"{what}: exit {o.code}: {o.err.strip()[-500:]}")
        elif o.json_problem is not None:
            found.append(f"{what}: exit {o.code}, invalid JSON: {o.json_problem}")
    return found
