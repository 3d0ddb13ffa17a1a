"""`gpuwarden fleet report`: the terminal tables, the `gpuwarden.fleet/1` document and the
``--html`` page (inline SVG plots, no JavaScript library, nothing fetched).

JSON labels keep dcgm-exporter's spelling (``Hostname``, ``UUID``, ``modelName``, ``gpu``) so
that alert rules, dashboards and `gpuwarden remediate` read a finding's node from ``Hostname``.
Hours, kWh and dollars are numbers (``null`` when unknown or unpriced); times are RFC 3339 UTC
with the Unix seconds beside them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from gpuwarden import __version__
from gpuwarden.fleet.collect import ProgressFn
from gpuwarden.fleet.model import (
    Breakdown,
    FleetFinding,
    FleetReport,
    GpuId,
    GpuUsage,
    Incident,
    TimelinePoint,
    Usage,
)
from gpuwarden.report.findings import SEVERITY_MARK, SEVERITY_STYLE, evidence_record
from gpuwarden.report.output import (
    check_output_path,
    console,
    json_text,
    print_json,
    write_output,
)
from gpuwarden.report.page import BASE_CSS, html_document
from gpuwarden.report.progress import stderr_progress
from gpuwarden.report.svg import (
    PALETTE,
    WIDTH_PX,
    Bar,
    Canvas,
    Lane,
    Segment,
    Span,
    empty_plot,
    legend,
    nice_step,
    stacked_bars,
    ticks,
    timeline,
)
from gpuwarden.types.health import Finding, Severity
from gpuwarden.types.schemas import FLEET_SCHEMA
from gpuwarden.units import iso_utc

TABLE_ROWS = 15  # terminal tables show the largest rows; --json has them all
PLOT_ROWS = 30
_NONE = "–"
BUSY_COLOR, IDLE_HELD_COLOR, UNALLOCATED_COLOR = PALETTE[0], PALETTE[1], PALETTE[7]


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return iso_utc(seconds, timespec="auto")


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


# ---------------------------------------------------------------- progress


@contextmanager
def query_progress() -> Iterator[ProgressFn | None]:
    """A progress bar on stderr while the queries run (see report.progress)."""
    with stderr_progress("querying Prometheus") as advance:
        yield advance


def retry_notice(attempt: int, wait_s: float, why: str) -> None:
    """One line on stderr per retry (the server is slow or restarting)."""
    print(f"warning: Prometheus: {why}; try {attempt + 1} in {wait_s:.1f} s", file=sys.stderr)


# ---------------------------------------------------------------- JSON


def usage_record(usage: Usage) -> dict[str, Any]:
    return {
        "gpus": usage.gpus,
        "gpu_hours": _r(usage.gpu_hours),
        "idle_gpu_hours": _r(usage.idle_gpu_hours),
        "held_gpu_hours": _r(usage.held_gpu_hours),
        "unallocated_gpu_hours": _r(usage.unallocated_gpu_hours),
        "mean_utilization_percent": _r(usage.mean_utilization_percent, 2),
        "energy_kwh": _r(usage.energy_kwh),
        "cost": {
            "gpu_dollars": _r(usage.gpu_dollars, 2),
            "idle_dollars": _r(usage.idle_dollars, 2),
            "unallocated_dollars": _r(usage.unallocated_dollars, 2),
            "energy_dollars": _r(usage.energy_dollars, 2),
            "unpriced_gpu_hours": _r(usage.unpriced_gpu_hours),
        },
    }


def breakdown_record(row: Breakdown) -> dict[str, Any]:
    record = {**dict(row.labels), **usage_record(row.usage)}
    if row.gpus:  # by_node: which GPUs, each with its own figures
        record["per_gpu"] = [gpu_usage_record(g) for g in row.gpus]
    return record


def gpu_usage_record(item: GpuUsage) -> dict[str, Any]:
    figures = usage_record(item.usage)
    del figures["gpus"]  # one GPU
    return {**gpu_labels(item.gpu), **figures}


def gpu_labels(gpu: GpuId | None) -> dict[str, Any]:
    return {
        "Hostname": gpu.host if gpu else None,
        "gpu": gpu.index if gpu else None,
        "UUID": gpu.uuid if gpu else None,
        "modelName": gpu.model if gpu else None,
    }


def finding_labels(finding: Finding) -> dict[str, Any]:
    device = finding.device
    return {
        "Hostname": device.host if device else None,
        "gpu": None if device is None or device.index is None else str(device.index),
        "UUID": device.uuid if device else None,
        "modelName": device.name if device else None,
    }


def fleet_finding_record(item: FleetFinding) -> dict[str, Any]:
    f = item.finding
    return {
        "code": f.code,
        "severity": f.severity.value,
        **finding_labels(f),
        "namespace": item.namespace,
        "pod": item.pod,
        "title": f.title,
        "cause": f.cause,
        "remedy": f.remedy,
        "evidence": [evidence_record(e) for e in f.evidence],
        "action": f.action,
        "confidence": f.confidence.value,
        "method": f.method,
        "first_seen": iso(f.first_seen_s),
        "last_seen": iso(f.last_seen_s),
        "count": f.count,
        "idle_dollars": _r(item.idle_dollars, 2),
        "references": list(f.references),
    }


def incident_record(incident: Incident) -> dict[str, Any]:
    return {
        "kind": incident.kind,
        **gpu_labels(incident.gpu),
        "xid": incident.xid,
        "count": _r(incident.count, 2),
        "episodes": incident.episodes,
        "first_seen": iso(incident.first_seen_s),
        "last_seen": iso(incident.last_seen_s),
        "source": incident.source,
        "timeline": [{"start": iso(t), "count": _r(n, 2)} for t, n in incident.timeline],
    }


def timeline_record(point: TimelinePoint) -> dict[str, Any]:
    return {
        "start": iso(point.start_s),
        "end": iso(point.end_s),
        "gpu_hours": _r(point.gpu_hours),
        "idle_gpu_hours": _r(point.idle_gpu_hours),
        "unallocated_gpu_hours": _r(point.unallocated_gpu_hours),
    }


def fleet_document(report: FleetReport) -> dict[str, Any]:
    """The `gpuwarden.fleet/1` document (diagnosis.md §3)."""
    totals, costs, c, w = report.totals, report.costs, report.collection, report.window
    total_record = usage_record(totals)
    cost = {
        "basis": costs.basis,
        "price_per_gpu_hour": costs.price_per_gpu_hour,
        "usd_per_kwh": costs.usd_per_kwh,
        **total_record.pop("cost"),
        "prices": [
            {
                "modelName": p.model,
                "usd_per_gpu_hour": _r(p.usd_per_gpu_hour, 4),
                "source": p.source,
            }
            for p in costs.prices
        ],
    }
    return {
        "schema": FLEET_SCHEMA,
        "window": {
            "start": iso(w.start_s),
            "end": iso(w.end_s),
            "start_s": w.start_s,
            "end_s": w.end_s,
            "hours": _r(w.hours),
            "bucket_seconds": w.bucket_s,
            "grid_seconds": 60,
        },
        "idle_below_percent": report.idle_below_percent,
        "utilization_source": dict(c.level_sources),
        **total_record,
        "cost": cost,
        "by_namespace": [breakdown_record(r) for r in report.by_namespace],
        "by_node": [breakdown_record(r) for r in report.by_node],
        "by_model": [breakdown_record(r) for r in report.by_model],
        "by_pod": [breakdown_record(r) for r in report.by_pod],
        "findings": [fleet_finding_record(f) for f in report.findings],
        "incidents": [incident_record(i) for i in report.incidents],
        "timeline": [timeline_record(p) for p in report.timeline],
        "source": {
            "prometheus": c.server,
            "queries": c.queries,
            "retries": c.retries,
            "server_seconds": _r(c.server_s, 3),
            "query_seconds": _r(c.query_s, 3),
            "total_seconds": _r(c.total_s, 3),
            "answer_bytes": c.answer_bytes,
            "lookback_seconds": c.lookback_s,
            "scrape_interval_seconds": _r(c.scrape_interval_s, 1),
            "pod_labels": c.pod_labels,
            "mig": c.mig,
            "gpuwarden_exporter": c.gpuwarden_exporter,
            "warnings": list(c.warnings),
        },
        "notes": list(report.notes),
    }


def print_fleet_json(report: FleetReport) -> None:
    print_json(fleet_document(report))


def check_output(path: Path) -> None:
    check_output_path(path, option="--output", reference="fleet-output-path", example="fleet.json")


def write_fleet_json(report: FleetReport, path: Path) -> None:
    """The document into a file, whole or not at all (`remediate --findings` reads it)."""
    text = json_text(fleet_document(report), indent=2) + "\n"
    write_output(text, path, option="--output", reference="fleet-output-write")


# ---------------------------------------------------------------- terminal


def _hours(value: float | None) -> str:
    return _NONE if value is None else f"{value:,.1f}"


def _dollars(value: float | None) -> str:
    return _NONE if value is None else f"${value:,.0f}"


def _pct(value: float | None) -> str:
    return _NONE if value is None else f"{value:.0f}"


def _table(title: str, columns: Sequence[str], text_columns: int = 1) -> Table:
    """Numbers right-aligned; the first ``text_columns`` (names, codes) left-aligned."""
    table = Table(title=title, title_justify="left", title_style="bold")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index < text_columns else "right")
    return table


def _label(value: str | None, empty: str) -> str:
    return empty if value is None else value


_USAGE_COLUMNS = ("GPUs", "GPU-h", "idle GPU-h", "idle %", "util %", "kWh", "$", "idle $")


def _usage_cells(usage: Usage) -> tuple[str, ...]:
    share = usage.idle_gpu_hours / usage.gpu_hours * 100 if usage.gpu_hours else None
    return (
        str(usage.gpus),
        _hours(usage.gpu_hours),
        _hours(usage.idle_gpu_hours),
        _pct(share),
        _pct(usage.mean_utilization_percent),
        _hours(usage.energy_kwh),
        _dollars(usage.gpu_dollars),
        _dollars(usage.idle_dollars),
    )


def _breakdown_table(
    title: str, rows: Sequence[Breakdown], empty: str, *, by_idle: bool = False
) -> Table:
    names = [name for name, _ in rows[0].labels] if rows else ["name"]
    table = _table(title, (" / ".join(names), *_USAGE_COLUMNS))
    ordered = sorted(rows, key=lambda r: -r.usage.idle_gpu_hours) if by_idle else list(rows)
    for row in ordered[:TABLE_ROWS]:
        label = " / ".join(_label(v, empty) for _, v in row.labels)
        table.add_row(label, *_usage_cells(row.usage))
    if len(rows) > TABLE_ROWS:
        table.caption = f"{len(rows) - TABLE_ROWS} more rows: --json or --html has them all"
    return table


def _where(finding: Finding, item: FleetFinding) -> str:
    if item.pod is not None:
        return f"{item.namespace}/{item.pod}" if item.namespace else item.pod
    d = finding.device
    if d is None:
        return "fleet"
    return f"{d.host or '?'} GPU {d.index if d.index is not None else '?'}"


def _findings_table(findings: Sequence[FleetFinding]) -> Table:
    table = _table("findings", ("severity", "code", "where", "what"), text_columns=4)
    for item in findings:
        f = item.finding
        table.add_row(
            Text(SEVERITY_MARK[f.severity], style=SEVERITY_STYLE[f.severity]),
            f.code,
            _where(f, item),
            f.title,
        )
    return table


def _incidents_table(incidents: Sequence[Incident]) -> Table:
    columns = ("kind", "GPU", "xid", "count", "first", "last")
    table = _table("Xid and ECC incidents", columns, text_columns=2)
    for i in incidents[: TABLE_ROWS * 2]:
        table.add_row(
            i.kind,
            f"{i.gpu.host or '?'} GPU {i.gpu.index or '?'}",
            _NONE if i.xid is None else str(i.xid),
            f"{i.count:g}",
            iso(i.first_seen_s) or _NONE,
            iso(i.last_seen_s) or _NONE,
        )
    return table


def _idle_split(idle: float, unallocated: float | None) -> tuple[float, float]:
    """(idle and held, idle and unallocated); all of it "held" when pods are unknown."""
    free = unallocated or 0.0
    return idle - free, free


def _summary_lines(report: FleetReport) -> list[Text]:
    t, w, c = report.totals, report.window, report.costs
    share = t.idle_gpu_hours / t.gpu_hours * 100 if t.gpu_hours else 0.0
    free = (
        "pods unknown (no pod labels)"
        if t.unallocated_gpu_hours is None
        else f"{t.unallocated_gpu_hours:,.1f} idle and held by no pod"
    )
    price = (
        f"at ${c.price_per_gpu_hour:,.2f} per GPU-hour"
        if c.price_per_gpu_hour is not None
        else f"at {c.basis} prices per GPU model"
    )
    energy = f" ({_dollars(t.energy_dollars)})" if t.energy_dollars else ""
    lines = [
        Text.assemble(
            ("fleet report", "bold"),
            f" {iso(w.start_s)} → {iso(w.end_s)} ({w.hours:,.1f} h), {report.collection.server}",
        ),
        Text.assemble(
            f"{t.gpus} GPUs · {t.gpu_hours:,.1f} GPU-hours · ",
            (f"{t.idle_gpu_hours:,.1f} idle", "bold"),
            f" ({share:.0f} %, below {report.idle_below_percent:g} % on the 1-minute grid) · "
            f"{free}",
        ),
        Text.assemble(
            f"cost {_dollars(t.gpu_dollars)}, of it ",
            (f"{_dollars(t.idle_dollars)} idle", "bold"),
            f" ({_dollars(t.unallocated_dollars)} unallocated) {price}; energy "
            f"{t.energy_kwh:,.1f} kWh{energy}",
        ),
    ]
    if t.unpriced_gpu_hours > 0:
        lines.append(
            Text.assemble(
                (f"{t.unpriced_gpu_hours:,.1f} GPU-hours have no price", "yellow"),
                " (models without one: give --prices FILE or --price-per-gpu-hour)",
            )
        )
    return lines


def print_fleet_report(report: FleetReport) -> None:
    out = console()
    for line in _summary_lines(report):
        out.print(line, soft_wrap=True)
    out.print()
    out.print(_breakdown_table("by namespace", report.by_namespace, "(no pod)"))
    out.print(_breakdown_table("by node", report.by_node, "?"))
    out.print(_breakdown_table("by model", report.by_model, "?"))
    if report.by_pod:
        out.print(_breakdown_table("pods, most idle first", report.by_pod, "?", by_idle=True))
    if report.findings:
        out.print(_findings_table(report.findings))
    else:
        out.print("no findings: no GPU needs attention in this window")
    if report.incidents:
        out.print(_incidents_table(report.incidents))
    for note in report.notes:
        out.print(f"note: {note}", soft_wrap=True, style="dim")
    for warning in report.collection.warnings:
        out.print(f"warning: Prometheus: {warning}", soft_wrap=True)


# ---------------------------------------------------------------- HTML

_STYLE_CSS = (
    BASE_CSS
    + """
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{border:1px solid #e4e4e4;border-radius:6px;padding:8px 14px;min-width:150px}
.card .v{font-size:20px;font-weight:700} .card .k{color:#666;font-size:12px}
.crit{color:#b00;font-weight:700} .warn{color:#a60} .info{color:#357}
.note{color:#777;font-size:12px}
"""
)

_LEGEND = (
    ("busy", BUSY_COLOR),
    ("idle, held by a pod", IDLE_HELD_COLOR),
    ("idle, unallocated", UNALLOCATED_COLOR),
)


def _hhmm(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%m-%d %H:%M")


def timeline_plot(points: Sequence[TimelinePoint]) -> str:
    """GPU-hours per bucket as stacked columns: busy, idle held, idle unallocated."""
    plot_id, title = "plot-timeline", "GPU-hours per bucket: busy, idle held by pods, unallocated"
    if not points or not any(p.gpu_hours for p in points):
        return empty_plot(plot_id, title, "no GPU reported in the window")
    plot_h, top, left = 200.0, 34.0, 60.0
    canvas = Canvas(plot_id, title, WIDTH_PX, top + plot_h + 44)
    legend(canvas, _LEGEND, 16)
    vmax = max(p.gpu_hours for p in points)
    base, right = top + plot_h, WIDTH_PX - 10.0
    canvas.line(left, top, left, base)
    canvas.line(left, base, right, base)
    for tick in ticks(vmax, nice_step(vmax, 4)):
        y = base - tick / vmax * plot_h
        canvas.line(left - 4, y, left, y)
        canvas.text(left - 6, y + 4, f"{tick:g}", anchor="end", cls="tick")
    canvas.text(left - 6, top - 4, "GPU-h", anchor="end", cls="tick")
    slot = (right - left - 4) / len(points)
    every = max(1, round(len(points) / 8))
    for index, p in enumerate(points):
        x, y = left + 2 + index * slot, base
        idle_held, free = _idle_split(p.idle_gpu_hours, p.unallocated_gpu_hours)
        parts = (
            ("busy", p.gpu_hours - p.idle_gpu_hours, BUSY_COLOR),
            ("idle, held", idle_held, IDLE_HELD_COLOR),
            ("idle, unallocated", free, UNALLOCATED_COLOR),
        )
        for name, value, color in parts:
            h = max(value, 0.0) / vmax * plot_h
            tip = f"{_hhmm(p.start_s)}–{_hhmm(p.end_s)} UTC: {value:,.2f} GPU-h {name}"
            canvas.rect(x + 0.5, y - h, max(slot - 1, 0.5), h, color, tip)
            y -= h
        if index % every == 0:
            canvas.text(x + slot / 2, base + 16, _hhmm(p.start_s), anchor="middle", cls="tick")
    canvas.text(right, base + 32, "UTC", anchor="end", cls="tick")
    return canvas.render()


def usage_plot(plot_id: str, title: str, rows: Sequence[Breakdown], empty: str) -> str:
    if not rows:
        return empty_plot(plot_id, title, "nothing to show")
    bars = []
    for row in sorted(rows, key=lambda r: -r.usage.idle_gpu_hours)[:PLOT_ROWS]:
        u = row.usage
        label = " / ".join(_label(v, empty) for _, v in row.labels)
        idle_held, free = _idle_split(u.idle_gpu_hours, u.unallocated_gpu_hours)
        segments = (
            Segment(
                f"{label}: {u.gpu_hours - u.idle_gpu_hours:,.1f} GPU-h busy",
                u.gpu_hours - u.idle_gpu_hours,
                BUSY_COLOR,
            ),
            Segment(f"{label}: {idle_held:,.1f} GPU-h idle, held", idle_held, IDLE_HELD_COLOR),
            Segment(f"{label}: {free:,.1f} GPU-h idle, unallocated", free, UNALLOCATED_COLOR),
        )
        note = (
            _dollars(u.idle_dollars) if u.idle_dollars is not None else f"{u.idle_gpu_hours:,.0f} h"
        )
        bars.append(Bar(label[:24], segments, f"{note} idle"))
    widest = max(sum(seg.value for seg in bar.segments) for bar in bars)
    # room right of the longest bar for its note
    return stacked_bars(plot_id, title, bars, "GPU-hours", _LEGEND, vmax=widest * 1.15 or None)


def incidents_plot(report: FleetReport) -> str:
    plot_id, title = "plot-incidents", "Xid and ECC incidents per GPU over the window"
    if not report.incidents:
        return empty_plot(plot_id, title, "no Xid or ECC incident in the window")
    colors = {"xid": PALETTE[3], "ecc-uncorrectable": PALETTE[4], "ecc-correctable": PALETTE[5]}
    w = report.window
    lanes: dict[str, list[Span]] = {}
    for incident in report.incidents:
        label = f"{incident.gpu.host or '?'} GPU {incident.gpu.index or '?'}"
        what = f"Xid {incident.xid}" if incident.kind == "xid" else incident.kind
        for start, count in incident.timeline:
            span = Span(
                (start - w.start_s) / 3600,
                (min(start + w.bucket_s, w.end_s) - w.start_s) / 3600,
                colors.get(incident.kind, PALETTE[7]),
                f"{label}: {what} ×{count:g} from {_hhmm(start)} UTC",
            )
            lanes.setdefault(label, []).append(span)
    drawn = [Lane(label[:24], tuple(spans)) for label, spans in list(lanes.items())[:PLOT_ROWS]]
    legend_items = list(colors.items())
    return timeline(plot_id, title, drawn, w.hours, "hours since the window's start", legend_items)


def _cell(value: object) -> str:
    return "–" if value is None else escape(str(value))


def _html_table(rows: Sequence[dict[str, Any]], table_id: str, left: Sequence[str] = ()) -> str:
    if not rows:
        return '<p class="explain">(none)</p>'
    columns = list(rows[0])
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)

    def cell(row: dict[str, Any], column: str) -> str:
        css = " class=l" if column in left else ""
        return f"<td{css}>{_cell(row.get(column))}</td>"

    body = "".join("<tr>" + "".join(cell(row, c) for c in columns) + "</tr>" for row in rows)
    return (
        f'<div class="scroll"><table id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _usage_row(row: Breakdown, empty: str) -> dict[str, Any]:
    cells = dict(zip(_USAGE_COLUMNS, _usage_cells(row.usage), strict=True))
    name = " / ".join(n for n, _ in row.labels)
    return {name: " / ".join(_label(v, empty) for _, v in row.labels), **cells}


def _finding_row(item: FleetFinding) -> str:
    f = item.finding
    css = {Severity.CRITICAL: "crit", Severity.WARNING: "warn", Severity.INFO: "info"}[f.severity]
    return (
        f'<tr><td class="{css}">{SEVERITY_MARK[f.severity]}</td><td class=l>{escape(f.code)}</td>'
        f"<td class=l>{escape(_where(f, item))}</td><td class=l>{escape(f.title)}<br>"
        f"<span class=note>{escape(f.remedy)}</span></td></tr>"
    )


def _findings_html(findings: Sequence[FleetFinding]) -> str:
    if not findings:
        return '<p class="explain">No findings: no GPU needs attention in this window.</p>'
    rows = "".join(_finding_row(item) for item in findings)
    return (
        '<div class="scroll"><table id="table-findings"><thead><tr><th>severity</th>'
        "<th class=l>code</th><th class=l>where</th><th class=l>what</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
    )


def _cards(report: FleetReport) -> str:
    t = report.totals
    cards = (
        ("GPUs", str(t.gpus)),
        ("GPU-hours", _hours(t.gpu_hours)),
        (f"idle GPU-hours (< {report.idle_below_percent:g} %)", _hours(t.idle_gpu_hours)),
        ("idle and unallocated", _hours(t.unallocated_gpu_hours)),
        ("cost", _dollars(t.gpu_dollars)),
        ("idle cost", _dollars(t.idle_dollars)),
        ("energy kWh", _hours(t.energy_kwh)),
    )
    items = "".join(
        f'<div class="card"><div class="v">{escape(v)}</div><div class="k">{escape(k)}</div></div>'
        for k, v in cards
    )
    return f'<div class="cards">{items}</div>'


def _plots_html(report: FleetReport) -> str:
    sections = (
        ("timeline", "GPU time over the window", timeline_plot(report.timeline)),
        (
            "namespaces",
            "By namespace",
            usage_plot(
                "plot-namespaces", "GPU-hours by namespace", report.by_namespace, "(no pod)"
            ),
        ),
        (
            "nodes",
            "By node",
            usage_plot("plot-nodes", "GPU-hours by node (most idle first)", report.by_node, "?"),
        ),
        ("incidents", "Xid and ECC incidents", incidents_plot(report)),
    )
    return "".join(
        f'<section id="section-{key}"><h2>{escape(heading)}</h2>{svg}</section>'
        for key, heading, svg in sections
    )


def _tables_html(report: FleetReport) -> str:
    prices = [
        {"model": p.model, "USD per GPU-hour": p.usd_per_gpu_hour, "source": p.source}
        for p in report.costs.prices
    ]
    tables = (
        ("By namespace", [_usage_row(r, "(no pod)") for r in report.by_namespace], "namespaces"),
        ("By model", [_usage_row(r, "?") for r in report.by_model], "models"),
        ("By node", [_usage_row(r, "?") for r in report.by_node], "nodes"),
        ("Pods", [_usage_row(r, "?") for r in report.by_pod], "pods"),
    )
    html = '<section id="findings"><h2>Findings</h2>' + _findings_html(report.findings)
    html += "</section>"
    for heading, rows, key in tables:
        html += f"<h2>{escape(heading)}</h2>" + _html_table(rows, f"table-{key}")
    return html + "<h2>Prices</h2>" + _html_table(prices, "table-prices", left=("source",))


def render_fleet_html(report: FleetReport) -> str:
    """The whole page as one string."""
    w, c = report.window, report.collection
    span = f"{iso(w.start_s)} → {iso(w.end_s)}"
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in report.notes)
    body = (
        f'<h1>Fleet report</h1><p class="explain">{escape(span)} ({w.hours:,.1f} h) · '
        f"{escape(c.server)}</p>"
        + _cards(report)
        + _plots_html(report)
        + _tables_html(report)
        + notes
        + f"<footer>gpuwarden {escape(__version__)} · {c.queries} queries, "
        f"{c.server_s:.1f} s waiting for the server</footer>"
    )
    return html_document(f"gpuwarden fleet report — {span}", _STYLE_CSS, body)


def check_html_path(path: Path) -> None:
    check_output_path(
        path,
        option="--html",
        reference="fleet-html-path",
        example="fleet-report.html",
        beside_stdout=True,
    )


def write_fleet_html(report: FleetReport, path: Path) -> None:
    write_output(render_fleet_html(report), path, option="--html", reference="fleet-html-write")
