"""`gpuwarden trace analyze|diff`: PyTorch profiler traces → HTA's tables and the bottleneck."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpuwarden.cli.options import add_json_flag, ascii_number_text, naming, positive_int
from gpuwarden.errors import quoted

_PATH = naming("file or directory")


def _rank_list(text: str) -> tuple[int, ...]:
    """argparse type: ``0,1,5`` → (0, 1, 5)."""
    ascii_number_text(text, "a list of ranks")
    try:
        ranks = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is not a comma-separated list of ranks (e.g. 0,1,3)"
        ) from None
    if not ranks or any(r < 0 for r in ranks):
        raise argparse.ArgumentTypeError(f"{quoted(text)}: ranks are integers ≥ 0, e.g. 0,1,3")
    return ranks


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    analyze = sub.add_parser(
        "analyze",
        help="HTA's tables, per-rank insights and the bottleneck of one job",
        description="Analyse the trace files of one job (one file per rank, or a directory).",
    )
    analyze.add_argument(
        "paths",
        nargs="+",
        type=_PATH,
        metavar="PATH",
        help="*.pt.trace.json[.gz] files or directories",
    )
    analyze.add_argument(
        "--ranks", type=_rank_list, metavar="R,R", help="only these ranks (e.g. 0,1)"
    )
    analyze.add_argument(
        "--html", type=Path, metavar="FILE", help="also write a self-contained page with plots"
    )
    analyze.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="rank files decoded in parallel on large jobs: threads with the simdjson scanner, "
        "processes with msgspec (default: CPU count, at most 8)",
    )
    add_json_flag(analyze)
    diff = sub.add_parser(
        "diff",
        help="compare two traces (before/after a change)",
        description="Compare trace A (baseline) with trace B: each a file or a directory.",
    )
    diff.add_argument(
        "a", type=_PATH, metavar="A", help="baseline trace file or directory of rank files"
    )
    diff.add_argument(
        "b", type=_PATH, metavar="B", help="changed trace file or directory of rank files"
    )
    add_json_flag(diff)


def run(args: argparse.Namespace) -> int:
    # The analyses never call BLAS; OpenBLAS's worker threads, started when numpy loads, would
    # only spin (≈0.1 s of CPU per run). A user's own setting wins.
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if args.action == "diff":
        return _run_diff(args)
    return _run_analyze(args)


def _run_analyze(args: argparse.Namespace) -> int:
    from gpuwarden.report import trace_status as status
    from gpuwarden.traces.load import load_traces

    if args.html is not None:
        from gpuwarden.report.output import check_output_path

        check_output_path(
            args.html,
            option="--html",
            reference="trace-html-path",
            example="trace-report.html",
            beside_stdout=True,
        )
        _refuse_html_over_a_trace(args.html, args.paths)
    with status.loading_progress() as progress:
        loaded = load_traces(args.paths, progress=progress, workers=args.workers)
    # the analyses (numpy, every dataclass of the report) load once there is a trace to analyse
    from gpuwarden.traces.analyze import analyze, select_ranks

    if args.ranks is not None:
        loaded = select_ranks(loaded, args.ranks)
    result = analyze(loaded)
    status.print_warnings(result)
    if args.json:
        from gpuwarden.report.trace_json import print_trace_json

        print_trace_json(result)
    else:
        from gpuwarden.report.trace import print_trace_report

        print_trace_report(result)
    if args.html is not None:
        from gpuwarden.report.trace_html import write_trace_html

        write_trace_html(result, args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def _refuse_html_over_a_trace(html: Path, paths: list[str]) -> None:
    """``--html`` naming one of the traces read (a slip of the shell's completion) would replace
    the user's trace with the page."""
    from gpuwarden.errors import InputError
    from gpuwarden.traces.load import expand_paths

    if not html.exists():
        return
    for trace in expand_paths(paths):
        try:
            same = os.path.samefile(trace, html)
        except OSError:  # a trace that is not there: the loader says so
            continue
        if same:
            raise InputError(
                f"--html {html}: is one of the traces read ({trace}); writing the page would "
                "replace it",
                reference="trace-html-path",
                hint="give the page a name of its own, e.g. --html trace-report.html",
            )


def _run_diff(args: argparse.Namespace) -> int:
    from gpuwarden.report.trace_status import loading_progress
    from gpuwarden.traces.diff import diff_traces
    from gpuwarden.traces.load import load_traces

    with loading_progress() as progress:
        a = load_traces([args.a], progress=progress)
        b = load_traces([args.b], progress=progress)
    result = diff_traces(a, b)
    if args.json:
        from gpuwarden.report.trace_json import print_diff_json

        print_diff_json(result, a_path=args.a, b_path=args.b)
    else:
        from gpuwarden.report.trace import print_diff

        print_diff(result, a_path=args.a, b_path=args.b)
    return 0
