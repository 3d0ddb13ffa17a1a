"""The plots of the trace page, as inline SVG (``report.svg``), from a ``TraceReport``.

HTA's tables are read through their rows (``to_row()``: HTA's own column names), so each plot
shows exactly the numbers the JSON output and HTA itself give.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpuwarden.report.svg import (
    IDLE_COLOR,
    PALETTE,
    Bar,
    Lane,
    Segment,
    Span,
    empty_plot,
    grouped_columns,
    stacked_bars,
    timeline,
)
from gpuwarden.types.trace import SpanKind, TraceReport

Row = Mapping[str, Any]

KIND_COLORS = {
    SpanKind.COMPUTE: PALETTE[0],
    SpanKind.COMMUNICATION: PALETTE[1],
    SpanKind.MEMORY: PALETTE[2],
}
IDLE_CATEGORY_COLORS = {"host_wait": PALETTE[3], "kernel_wait": PALETTE[5], "other": PALETTE[7]}
_US_PER_MS = 1000.0


def _num(value: object) -> float | None:
    """A finite number from a row cell, else None (HTA writes NaN for 'not defined')."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def timeline_plot(report: TraceReport) -> str:
    plot_id, title = "plot-timeline", "GPU busy and idle time per rank and stream"
    if not report.timelines:
        return empty_plot(plot_id, title, "no GPU kernels, memcpy or memset in this trace")
    lanes = []
    for lane in report.timelines:
        label = f"rank {lane.rank} · stream {lane.stream}"
        spans = tuple(
            Span(
                start=s.start_us / _US_PER_MS,
                end=s.end_us / _US_PER_MS,
                color=KIND_COLORS[s.kind],
                tip=(
                    f"{label}: {s.kind} — {s.events} event{'s' if s.events != 1 else ''}, "
                    f"{s.busy_us / _US_PER_MS:.3f} ms busy in "
                    f"{s.start_us / _US_PER_MS:.3f}–{s.end_us / _US_PER_MS:.3f} ms"
                ),
            )
            for s in lane.spans
        )
        lanes.append(Lane(label, spans))
    legend = [(str(k), c) for k, c in KIND_COLORS.items()] + [("idle", IDLE_COLOR)]
    return timeline(
        plot_id,
        title,
        lanes,
        report.timeline_end_us / _US_PER_MS,
        "ms since first GPU event",
        legend,
    )


def temporal_plot(rows: Sequence[Row]) -> str:
    plot_id, title = "plot-temporal", "Share of the GPU-active span: compute, non-compute, idle"
    if not rows:
        return empty_plot(plot_id, title, "no rank has GPU activity")
    parts = (
        ("compute", "compute_time_pctg", PALETTE[0]),
        ("non-compute", "non_compute_time_pctg", PALETTE[1]),
        ("idle", "idle_time_pctg", IDLE_COLOR),
    )
    bars = []
    for row in rows:
        segments = tuple(
            Segment(
                f"rank {row['rank']}: {name} {_num(row[col]) or 0.0:.2f} %",
                _num(row[col]) or 0.0,
                color,
            )
            for name, col, color in parts
        )
        span_ms = (_num(row.get("kernel_time(us)")) or 0.0) / _US_PER_MS
        bars.append(Bar(f"rank {row['rank']}", segments, note=f"{span_ms:.1f} ms"))
    return stacked_bars(
        plot_id, title, bars, "% of span", [(n, c) for n, _, c in parts], vmax=100.0
    )


def idle_plot(rows: Sequence[Row]) -> str:
    plot_id, title = "plot-idle", "GPU idle time by cause, per rank and stream"
    if not rows:
        return empty_plot(plot_id, title, "no idle-time breakdown (no GPU kernels)")
    lanes: dict[tuple[int, int], dict[str, float]] = {}
    for row in rows:
        key = (int(row["rank"]), int(row["stream"]))
        value = _num(row["idle_time"]) or 0.0
        lanes.setdefault(key, {})[str(row["idle_category"])] = value
    bars = []
    for (rank, stream), cats in lanes.items():
        total = sum(max(v, 0.0) for v in cats.values())
        segments = tuple(
            Segment(
                f"rank {rank} stream {stream}: {cat} {cats[cat] / _US_PER_MS:.3f} ms "
                f"({100 * cats[cat] / total if total else 0.0:.1f} %)",
                max(cats[cat], 0.0) / _US_PER_MS,
                color,
            )
            for cat, color in IDLE_CATEGORY_COLORS.items()
            if cat in cats
        )
        bars.append(
            Bar(f"rank {rank} · stream {stream}", segments, note=f"{total / _US_PER_MS:.2f} ms")
        )
    return stacked_bars(plot_id, title, bars, "ms", list(IDLE_CATEGORY_COLORS.items()))


def kernel_type_plot(rows: Sequence[Row]) -> str:
    plot_id, title = "plot-kernel-types", "GPU time by kernel type (all ranks)"
    if not rows:
        return empty_plot(plot_id, title, "no GPU kernels")
    # The three pure types keep the timeline's colours; overlaps get the remaining ones.
    pure = {
        "COMPUTATION": KIND_COLORS[SpanKind.COMPUTE],
        "COMMUNICATION": KIND_COLORS[SpanKind.COMMUNICATION],
        "MEMORY": KIND_COLORS[SpanKind.MEMORY],
    }
    spare = iter(PALETTE[3:] * 4)
    bars = []
    for row in rows:
        value = (_num(row["sum"]) or 0.0) / _US_PER_MS
        pct = _num(row["percentage"]) or 0.0
        label = str(row["kernel_type"])
        color = pure.get(label) or next(spare)
        seg = Segment(f"{label}: {value:.3f} ms ({pct:.1f} %)", value, color)
        bars.append(Bar(_short(label), (seg,), note=f"{pct:.1f} %"))
    return stacked_bars(plot_id, title, bars, "ms")


def _short(label: str) -> str:
    # "COMPUTATION overlapping COMMUNICATION" → "COMP ∥ COMM": fits the label column.
    return (
        label.replace(" overlapping ", " ∥ ")
        .replace("COMPUTATION", "COMP")
        .replace("COMMUNICATION", "COMM")
        .replace("MEMORY", "MEM")
    )


def overlap_plot(rows: Sequence[Row]) -> str:
    plot_id, title = "plot-overlap", "Communication overlapped by compute, per rank"
    if all(_num(row["comp_comm_overlap_pctg"]) is None for row in rows):
        return empty_plot(plot_id, title, "no communication kernels in this trace")
    bars = []
    for row in rows:
        pct = _num(row["comp_comm_overlap_pctg"])
        label = f"rank {row['rank']}"
        if pct is None:
            bars.append(
                Bar(
                    label, (Segment(f"{label}: no communication", 0.0, PALETTE[1]),), note="no comm"
                )
            )
            continue
        tip = f"{label}: {pct:.2f} % of communication overlapped, {100 - pct:.2f} % exposed"
        bars.append(
            Bar(
                label,
                (
                    Segment(tip, pct, KIND_COLORS[SpanKind.COMPUTE]),
                    Segment(tip, 100.0 - pct, KIND_COLORS[SpanKind.COMMUNICATION]),
                ),
                note=f"{pct:.1f} %",
            )
        )
    legend = [
        ("overlapped by compute", KIND_COLORS[SpanKind.COMPUTE]),
        ("exposed", KIND_COLORS[SpanKind.COMMUNICATION]),
    ]
    return stacked_bars(plot_id, title, bars, "% of communication time", legend, vmax=100.0)


def step_plot(step_times: Mapping[int, Sequence[tuple[int, float]]]) -> str:
    """``step_times``: rank → [(N of ProfilerStep#N, wall time µs)]."""
    plot_id, title = "plot-steps", "Step time per rank"
    if not any(step_times.values()):
        return empty_plot(plot_id, title, "no ProfilerStep annotations in this trace")
    numbers = sorted({n for steps in step_times.values() for n, _ in steps})
    colors = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(numbers)}
    groups = [
        (
            f"rank {rank}",
            [
                (f"rank {rank} step {n}: {dur / _US_PER_MS:.3f} ms", dur / _US_PER_MS, colors[n])
                for n, dur in sorted(steps)
            ],
        )
        for rank, steps in step_times.items()
    ]
    legend = [(f"step {n}", c) for n, c in colors.items()] if len(colors) <= 8 else []
    return grouped_columns(plot_id, title, groups, "ms", legend)
