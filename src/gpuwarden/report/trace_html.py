"""``gpuwarden trace analyze --html FILE``: one self-contained page, plots first, tables after.

No network and nothing external: styles, SVG plots and a few lines of tooltip script are inline,
and a Content-Security-Policy forbids the page from fetching anything.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from gpuwarden import __version__
from gpuwarden.report import trace_plots as plots
from gpuwarden.report.output import write_output
from gpuwarden.report.page import BASE_CSS, html_document
from gpuwarden.report.trace import other_findings, rank_rows
from gpuwarden.types.trace import TraceReport

_STYLE = (
    BASE_CSS
    + """
.verdict{border-left:6px solid #D55E00;background:#fff6ef;padding:10px 16px;margin:14px 0}
.verdict .kind{font-weight:700;text-transform:uppercase;letter-spacing:.04em;color:#D55E00}
.verdict .summary{font-size:17px;margin:2px 0 6px}
.warn{background:#fffbe6;border-left:4px solid #E69F00;padding:6px 12px;margin:6px 0}
"""
)


_EXPLAIN = {
    "timeline": "Each lane is one CUDA stream of one rank; coloured where a kernel, memcpy or "
    "memset runs, grey where the stream is idle. Hover a span for its events and busy time.",
    "temporal": "HTA's temporal breakdown: within each rank's span of GPU activity, the time "
    "compute kernels run, the time only other GPU work runs, and the time nothing runs.",
    "idle": "HTA's idle-time breakdown: gaps between consecutive kernels of a stream. host_wait = "
    "the CPU had not launched the next kernel yet; kernel_wait = short gaps between back-to-back "
    "kernels; other = waiting for something else (another stream, an event).",
    "kernel-types": "HTA's kernel-type breakdown, summed over ranks: time by kernel class and by "
    "overlaps of classes.",
    "steps": "Duration of each ProfilerStep on each rank: ranks of one job should match; the "
    "slowest one sets the pace.",
    "overlap": "HTA's communication/computation overlap: the share of communication time during "
    "which compute kernels also run. Exposed communication is time the GPUs only wait.",
}


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return escape(str(value))


def rows_table(rows: Sequence[Mapping[str, Any]], table_id: str) -> str:
    if not rows:
        return '<p class="explain">(no rows)</p>'
    columns = list(rows[0])
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(row.get(c))}</td>" for c in columns) + "</tr>" for row in rows
    )
    return (
        f'<div class="scroll"><table id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _verdict_html(report: TraceReport) -> str:
    v = report.verdict
    evidence = "".join(f"<li>{escape(e)}</li>" for e in v.evidence)
    return (
        f'<section class="verdict" id="verdict"><div class="kind">{escape(str(v.kind))}</div>'
        f'<div class="summary">{escape(v.summary)}</div><ul>{evidence}</ul>'
        f"<div><b>Fix:</b> {escape(v.fix)}</div></section>"
    )


def _findings_html(report: TraceReport) -> str:
    findings = other_findings(report)
    if not findings:
        return ""
    items = "".join(f"<li>{escape(f)}</li>" for f in findings)
    return f'<section id="findings"><h2>Other findings</h2><ul>{items}</ul></section>'


def _stragglers_html(report: TraceReport) -> str:
    st = report.stragglers
    if st is None:
        return ""
    rows = [
        {
            "rank": r.rank,
            "median step ms": None
            if r.step_time_median_us is None
            else r.step_time_median_us / 1e3,
            "late µs (mean)": r.late_arrival_mean_us,
            "last arrivals": r.last_arrivals,
            "waited ms": r.waited_us / 1e3,
            "score": r.score,
            "straggler": "yes" if r.is_straggler else "",
        }
        for r in st.ranks
    ]
    return (
        f'<section id="stragglers"><h2>Stragglers</h2><p class="explain">By {escape(st.metric)}'
        f" over {st.matched_collectives} collectives matched across ranks; score = modified "
        "z-score (median/MAD).</p>" + rows_table(rows, "table-stragglers") + "</section>"
    )


def _files_html(report: TraceReport) -> str:
    rows = [
        {
            "rank": f.rank,
            "file": Path(f.path).name,
            "rank from": f.rank_source,
            "device": f.device or "–",
            "events": f.events,
            "MB (JSON)": round(f.size_bytes / 1e6, 1),
        }
        for f in report.files
    ]
    warnings = "".join(f'<div class="warn">{escape(w)}</div>' for w in report.warnings)
    skipped = "".join(
        f'<div class="warn">skipped {escape(s.path)}: {escape(s.reason)}</div>'
        for s in report.skipped
    )
    return rows_table(rows, "files") + skipped + warnings


def _section(key: str, heading: str, svg: str) -> str:
    return (
        f'<section id="section-{key}"><h2>{escape(heading)}</h2>'
        f'<p class="explain">{escape(_EXPLAIN[key])}</p>{svg}</section>'
    )


def render_trace_html(report: TraceReport) -> str:
    """The whole page as one string."""
    hta = report.hta
    temporal = [r.to_row() for r in hta.temporal_breakdown]
    idle = [r.to_row() for r in hta.idle_time_breakdown]
    overlap = [r.to_row() for r in hta.comm_comp_overlap]
    kernel_types = [r.to_row() for r in hta.kernel_type_breakdown]
    steps = {rank: [(s.step, s.wall_us) for s in ins.steps] for rank, ins in report.ranks.items()}
    sections = [
        _section("timeline", "GPU timeline", plots.timeline_plot(report)),
        _section("temporal", "Where the GPU time goes", plots.temporal_plot(temporal)),
        _section("idle", "Why the GPU is idle", plots.idle_plot(idle)),
        _section("kernel-types", "Kernel types", plots.kernel_type_plot(kernel_types)),
        _section("steps", "Step time per rank", plots.step_plot(steps)),
        _section("overlap", "Communication overlap", plots.overlap_plot(overlap)),
    ]
    dropped = (
        "<p class=\"explain\">HTA's tables leave out the last ProfilerStep of each rank (HTA's "
        "rule: the profiler often cuts it short); the timeline and step plot include it.</p>"
        if hta.last_step_dropped
        else ""
    )
    tables = (
        "<h2>HTA tables</h2>"
        + dropped
        + "<h3>temporal_breakdown</h3>"
        + rows_table(temporal, "table-temporal")
        + "<h3>idle_time_breakdown</h3>"
        + rows_table(idle, "table-idle")
        + "<h3>comm_comp_overlap</h3>"
        + rows_table(overlap, "table-overlap")
        + "<h3>kernel_type_breakdown</h3>"
        + rows_table(kernel_types, "table-kernel-types")
    )
    ranks = ", ".join(str(f.rank) for f in report.files)
    body = (
        f'<h1>Trace report</h1><p class="explain">ranks {escape(ranks)}</p>'
        + _verdict_html(report)
        + _files_html(report)
        + "".join(sections)
        + '<section id="ranks"><h2>Per rank</h2>'
        + rows_table(rank_rows(report), "table-ranks")
        + "</section>"
        + _stragglers_html(report)
        + _findings_html(report)
        + tables
        + f"<footer>gpuwarden {escape(__version__)} · HTA-compatible numbers (HTA "
        f"{escape(hta.hta_version)} definitions)</footer>"
    )
    return html_document(f"gpuwarden trace report — {report.verdict.kind}", _STYLE, body)


def write_trace_html(report: TraceReport, path: Path) -> None:
    write_output(render_trace_html(report), path, option="--html", reference="trace-html-write")
