"""Inline SVG charts built as text: no JavaScript library, no network, one file.

Every chart is an ``<svg>`` with a stable ``id``, class ``plot`` and a ``<title>``; every drawn
mark carries a ``<title>`` too (its tooltip; the page's script turns it into a styled one).
Coordinates are rounded to 0.1 px to keep the page small.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

# Okabe–Ito palette (colour-blind safe; Okabe & Ito 2008, "Color Universal Design").
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#999999",
)
IDLE_COLOR = "#d9d9d9"

FONT_PX = 12
LABEL_WIDTH_PX = 150  # left margin for lane/bar labels
WIDTH_PX = 880


def fmt(value: float) -> str:
    """A coordinate with at most one decimal (``12``, ``12.5``)."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def attr(text: str) -> str:
    return escape(text, quote=True)


@dataclass(frozen=True, slots=True)
class Segment:
    """One coloured piece of a stacked bar."""

    label: str
    value: float
    color: str


@dataclass(frozen=True, slots=True)
class Bar:
    """One horizontal bar, made of stacked segments, with a label on its left."""

    label: str
    segments: tuple[Segment, ...]
    note: str = ""  # text right of the bar (e.g. the total)


@dataclass(frozen=True, slots=True)
class Span:
    """A drawn interval of a timeline lane."""

    start: float
    end: float
    color: str
    tip: str


@dataclass(frozen=True, slots=True)
class Lane:
    label: str
    spans: tuple[Span, ...]


class Canvas:
    """Collects SVG elements; ``render`` wraps them in the root element."""

    def __init__(self, plot_id: str, title: str, width: float, height: float) -> None:
        self.plot_id = plot_id
        self.title = title
        self.width = width
        self.height = height
        self.parts: list[str] = []

    def rect(
        self, x: float, y: float, w: float, h: float, color: str, tip: str = "", cls: str = "mark"
    ) -> None:
        box = (
            f'<rect class="{cls}" x="{fmt(x)}" y="{fmt(y)}" width="{fmt(max(w, 0.0))}" '
            f'height="{fmt(h)}" fill="{color}"'
        )
        self.parts.append(f"{box}><title>{escape(tip)}</title></rect>" if tip else f"{box}/>")

    def text(
        self, x: float, y: float, content: str, anchor: str = "start", cls: str = "label"
    ) -> None:
        self.parts.append(
            f'<text class="{cls}" x="{fmt(x)}" y="{fmt(y)}" text-anchor="{anchor}">'
            f"{escape(content)}</text>"
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, cls: str = "axis") -> None:
        self.parts.append(
            f'<line class="{cls}" x1="{fmt(x1)}" y1="{fmt(y1)}" x2="{fmt(x2)}" y2="{fmt(y2)}"/>'
        )

    def render(self) -> str:
        return (
            f'<svg id="{attr(self.plot_id)}" class="plot" xmlns="http://www.w3.org/2000/svg" '
            f'role="img" width="{fmt(self.width)}" height="{fmt(self.height)}" '
            f'viewBox="0 0 {fmt(self.width)} {fmt(self.height)}">'
            f"<title>{escape(self.title)}</title>" + "".join(self.parts) + "</svg>"
        )


def nice_step(span: float, target_ticks: int = 6) -> float:
    """A 1/2/5 × 10^k tick step giving about ``target_ticks`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / target_ticks
    power = 10.0 ** _floor_log10(raw)
    steps = [m * power for m in (1.0, 2.0, 5.0, 10.0)]
    return min(steps, key=lambda step: abs(span / step - target_ticks))


def ticks(span: float, step: float) -> list[float]:
    """0, step, 2·step, ... up to ``span``, rounded so 3 × 0.1 prints as 0.3."""
    count = int(span / step + 1e-9) + 1 if step > 0 and span > 0 else 1
    return [round(i * step, 12) for i in range(count)]


def _floor_log10(value: float) -> int:
    exponent = 0
    while value >= 10.0:
        value /= 10.0
        exponent += 1
    while value < 1.0:
        value *= 10.0
        exponent -= 1
    return exponent


def _x_axis(
    canvas: Canvas, x0: float, x1: float, y: float, vmax: float, unit: str, vmin: float = 0.0
) -> None:
    canvas.line(x0, y, x1, y)
    step = nice_step(vmax - vmin)
    scale = (x1 - x0) / (vmax - vmin) if vmax > vmin else 0.0
    for tick in ticks(vmax - vmin, step):
        x = x0 + tick * scale
        canvas.line(x, y, x, y + 4)
        canvas.text(x, y + 16, f"{tick:g}", anchor="middle", cls="tick")
    canvas.text(x1, y + 30, unit, anchor="end", cls="tick")


def legend(canvas: Canvas, items: Sequence[tuple[str, str]], y: float) -> None:
    x = float(LABEL_WIDTH_PX)
    for label, color in items:
        canvas.rect(x, y - 9, 10, 10, color, cls="legend-swatch")
        canvas.text(x + 14, y, label, cls="legend")
        x += 30 + 7.5 * len(label)


def stacked_bars(
    plot_id: str,
    title: str,
    bars: Sequence[Bar],
    unit: str,
    legend_items: Sequence[tuple[str, str]] = (),
    vmax: float | None = None,
) -> str:
    """Horizontal stacked bars, one row per ``Bar``; the axis is in ``unit``."""
    row_h, gap = 18.0, 6.0
    top = 28.0 if legend_items else 8.0
    height = top + len(bars) * (row_h + gap) + 40
    canvas = Canvas(plot_id, title, WIDTH_PX, height)
    if legend_items:
        legend(canvas, legend_items, 16)
    total_max = max((sum(s.value for s in b.segments) for b in bars), default=0.0)
    top_value = vmax if vmax is not None else total_max
    if top_value <= 0:
        top_value = 1.0
    x0, x1 = float(LABEL_WIDTH_PX), WIDTH_PX - 70.0
    scale = (x1 - x0) / top_value
    y = top
    for bar in bars:
        canvas.text(x0 - 6, y + row_h - 5, bar.label, anchor="end")
        x = x0
        for seg in bar.segments:
            if seg.value > 0:
                canvas.rect(x, y, seg.value * scale, row_h, seg.color, seg.label)
                x += seg.value * scale
        if bar.note:
            canvas.text(x + 4, y + row_h - 5, bar.note, cls="note")
        y += row_h + gap
    _x_axis(canvas, x0, x1, y + 2, top_value, unit)
    return canvas.render()


def grouped_columns(
    plot_id: str,
    title: str,
    groups: Sequence[tuple[str, Sequence[tuple[str, float, str]]]],
    unit: str,
    legend_items: Sequence[tuple[str, str]] = (),
) -> str:
    """Vertical columns in groups: ``groups`` = [(group label, [(tip, value, color), ...])]."""
    plot_h = 180.0
    top = 34.0 if legend_items else 16.0
    height = top + plot_h + 40
    canvas = Canvas(plot_id, title, WIDTH_PX, height)
    if legend_items:
        legend(canvas, legend_items, 16)
    values = [v for _, cols in groups for _, v, _ in cols]
    vmax = max(values, default=0.0) or 1.0
    x0, x1 = 60.0, WIDTH_PX - 10.0
    base = top + plot_h
    canvas.line(x0, top, x0, base)
    canvas.line(x0, base, x1, base)
    step = nice_step(vmax, 4)
    for tick in ticks(vmax, step):
        yy = base - tick / vmax * plot_h
        canvas.line(x0 - 4, yy, x0, yy)
        canvas.text(x0 - 6, yy + 4, f"{tick:g}", anchor="end", cls="tick")
    canvas.text(x0 - 6, top - 4, unit, anchor="end", cls="tick")
    n_cols = sum(max(len(cols), 1) for _, cols in groups)
    # At most 48 px per column: a single rank's few steps should not become slabs.
    slot = min((x1 - x0 - 8) / max(n_cols + len(groups), 1), 48.0)
    x = x0 + 4
    for label, cols in groups:
        start = x
        for tip, value, color in cols:
            h = value / vmax * plot_h
            canvas.rect(x + 1, base - h, max(slot - 2, 1.0), h, color, tip)
            x += slot
        canvas.text((start + x) / 2, base + 16, label, anchor="middle", cls="tick")
        x += slot
    return canvas.render()


def timeline(
    plot_id: str,
    title: str,
    lanes: Sequence[Lane],
    t_end: float,
    unit: str,
    legend_items: Sequence[tuple[str, str]] = (),
    t_start: float = 0.0,
) -> str:
    """One horizontal lane per stream; busy spans drawn, idle left as the lane background."""
    lane_h, gap = 14.0, 5.0
    top = 28.0 if legend_items else 8.0
    height = top + len(lanes) * (lane_h + gap) + 40
    canvas = Canvas(plot_id, title, WIDTH_PX, height)
    if legend_items:
        legend(canvas, legend_items, 16)
    x0, x1 = float(LABEL_WIDTH_PX), WIDTH_PX - 20.0
    duration = t_end - t_start
    scale = (x1 - x0) / duration if duration > 0 else 0.0
    y = top
    for lane in lanes:
        canvas.text(x0 - 6, y + lane_h - 3, lane.label, anchor="end")
        canvas.rect(x0, y, x1 - x0, lane_h, IDLE_COLOR, f"{lane.label}: idle", cls="lane")
        for span in lane.spans:
            # At least 0.5 px so a short kernel in a long trace stays visible.
            w = max((span.end - span.start) * scale, 0.5)
            canvas.rect(x0 + (span.start - t_start) * scale, y, w, lane_h, span.color, span.tip)
        y += lane_h + gap
    _x_axis(canvas, x0, x1, y + 2, duration, unit)
    return canvas.render()


def empty_plot(plot_id: str, title: str, reason: str) -> str:
    """A placeholder with the reason drawn in it, so a missing analysis is visible, not blank."""
    canvas = Canvas(plot_id, title, WIDTH_PX, 40)
    canvas.rect(0, 0, WIDTH_PX, 40, "#f4f4f4", reason, cls="empty")
    canvas.text(12, 25, reason, cls="note")
    return canvas.render()


def join(parts: Iterable[str]) -> str:
    return "\n".join(parts)
