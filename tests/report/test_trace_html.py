"""The trace page: self-contained, numbers from the report, and rendered by a real browser
(Debian's chromium, headless, through playwright) with no console error and every plot drawn."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.report.svg import nice_step, ticks
from gpuwarden.report.trace_html import render_trace_html, write_trace_html
from gpuwarden.traces.analyze import analyze
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.timeline import MAX_SPANS_TOTAL
from gpuwarden.types.trace import TraceReport

MEGATRON = "astra_megatron_tp8_a100"
CPU_ONLY = "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
CHROMIUM = Path("/usr/bin/chromium")
PLOTS = (
    "plot-timeline",
    "plot-temporal",
    "plot-idle",
    "plot-kernel-types",
    "plot-steps",
    "plot-overlap",
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def megatron(fixtures: Path) -> TraceReport:
    return analyze(load_traces([fixtures / "traces" / MEGATRON]))


@pytest.fixture(scope="module")
def megatron_html(megatron: TraceReport) -> str:
    return render_trace_html(megatron)


def _svg(html: str, plot_id: str) -> str:
    match = re.search(rf'<svg id="{plot_id}".*?</svg>', html, re.DOTALL)
    assert match, plot_id
    return match.group(0)


def test_page_is_self_contained(megatron_html: str) -> None:
    # Nothing to fetch: no external script, style, image or font, and a CSP that forbids it.
    assert "<link" not in megatron_html
    assert not re.search(r"\ssrc=", megatron_html)
    urls = set(re.findall(r"https?://[^\s\"'<>]+", megatron_html))
    assert urls <= {"http://www.w3.org/2000/svg"}
    assert "default-src 'none'" in megatron_html


def test_every_plot_has_an_id_a_title_and_marks(megatron_html: str) -> None:
    for plot_id in PLOTS:
        svg = _svg(megatron_html, plot_id)
        assert re.match(rf'<svg id="{plot_id}" class="plot"[^>]*><title>[^<]+</title>', svg)
        assert 'class="mark"' in svg, plot_id


def test_plots_show_the_reports_numbers(megatron: TraceReport, megatron_html: str) -> None:
    temporal = _svg(megatron_html, "plot-temporal")
    for row in megatron.hta.temporal_breakdown:
        assert f"rank {row.rank}: idle {row.idle_time_pctg:.2f} %" in temporal
    overlap = _svg(megatron_html, "plot-overlap")
    for o in megatron.hta.comm_comp_overlap:
        assert f"rank {o.rank}: {o.comp_comm_overlap_pctg:.2f} % of communication overlapped" in (
            overlap
        )
    steps = _svg(megatron_html, "plot-steps")
    for rank, ins in megatron.ranks.items():
        for s in ins.steps:
            assert f"rank {rank} step {s.step}: {s.wall_us / 1000:.3f} ms" in steps
    kinds = _svg(megatron_html, "plot-kernel-types")
    for k in megatron.hta.kernel_type_breakdown:
        assert f"{k.kernel_type}: {k.sum_us / 1000:.3f} ms ({k.percentage:.1f} %)" in kinds
    timeline = _svg(megatron_html, "plot-timeline")
    drawn = len(re.findall(r'<rect class="mark"', timeline))
    assert drawn == sum(len(lane.spans) for lane in megatron.timelines)
    assert drawn <= MAX_SPANS_TOTAL
    assert megatron.verdict.summary.replace("'", "&#x27;") in megatron_html


def test_cpu_only_page_says_why_gpu_plots_are_empty(fixtures: Path) -> None:
    html = render_trace_html(analyze(load_traces([fixtures / "traces" / CPU_ONLY])))
    for plot_id in PLOTS:
        if plot_id != "plot-steps":
            assert 'class="empty"' in _svg(html, plot_id)
    assert "no-gpu-activity" in html
    # The ProfilerStep is a CPU annotation: its wall time is plotted without any GPU activity.
    steps = _svg(html, "plot-steps")
    assert 'class="empty"' not in steps
    assert "rank 34 step 551: 210.109 ms" in steps


def test_write_to_a_missing_directory_is_an_input_error(
    megatron: TraceReport, tmp_path: Path
) -> None:
    from gpuwarden.errors import InputError

    with pytest.raises(InputError, match="cannot write"):
        write_trace_html(megatron, tmp_path / "no" / "such" / "dir" / "page.html")


def _browse(paths: list[Path]) -> list[dict[str, Any]]:
    """Open each page in one headless chromium: its console messages, page errors, requests,
    and per plot its bounding box and number of drawn shapes; hovers one mark to exercise the
    tooltip script."""
    from playwright.sync_api import sync_playwright

    results = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for path in paths:
                result: dict[str, Any] = {"console": [], "errors": [], "requests": []}
                page = browser.new_page(viewport={"width": 1100, "height": 900})
                page.on("console", lambda m, r=result: r["console"].append((m.type, m.text)))
                page.on("pageerror", lambda e, r=result: r["errors"].append(str(e)))
                page.on("request", lambda q, r=result: r["requests"].append(q.url))
                page.goto(path.as_uri(), wait_until="load")
                for plot_id in PLOTS:
                    svg = page.locator(f"svg#{plot_id}")
                    result[plot_id] = {
                        "count": svg.count(),
                        "box": svg.bounding_box() if svg.count() else None,
                        "shapes": svg.locator("rect, line, path, circle").count(),
                        "title": svg.locator(":scope > title").text_content(),
                    }
                mark = page.locator("svg#plot-temporal rect.mark, svg.plot rect.empty").first
                mark.hover(timeout=5000)
                result["tip"] = {
                    "visible": page.locator("#tip").is_visible(),
                    "text": page.locator("#tip").text_content(),
                    "expected": mark.get_attribute("data-tip"),
                    # The script moved every mark's <title> into data-tip.
                    "titles_left": page.locator("svg.plot rect > title").count(),
                    "tips": page.locator("svg.plot rect[data-tip]").count(),
                }
                page.close()
                results.append(result)
        finally:
            browser.close()
    return results


@pytest.mark.slow
def test_pages_render_in_headless_chromium(
    megatron: TraceReport, fixtures: Path, tmp_path: Path
) -> None:
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is not installed (scripts/install puts it there)")
    # An 8-rank job with every plot full, and a GPU-less trace where every plot is a
    # placeholder saying why.
    pages = [tmp_path / "megatron.html", tmp_path / "cpu_only.html"]
    write_trace_html(megatron, pages[0])
    write_trace_html(analyze(load_traces([fixtures / "traces" / CPU_ONLY])), pages[1])
    results = _browse(pages)
    for path, result in zip(pages, results, strict=True):
        assert result["errors"] == [], path
        assert [m for m in result["console"] if m[0] == "error"] == [], path
        assert all(url.startswith("file://") for url in result["requests"]), result["requests"]
        for plot_id in PLOTS:
            plot = result[plot_id]
            assert plot["count"] == 1, (path, plot_id)
            assert plot["box"]["width"] > 100, (path, plot_id)
            assert plot["box"]["height"] > 20, (path, plot_id)
            assert plot["shapes"] > 0, (path, plot_id)
            assert plot["title"], (path, plot_id)
        # Hovering a mark shows its tooltip: the inline script ran.
        assert result["tip"]["visible"], path
        assert result["tip"]["expected"]
        assert result["tip"]["text"] == result["tip"]["expected"], path
        assert result["tip"]["titles_left"] == 0
        assert result["tip"]["tips"] > 0
    # The timeline draws one lane per (rank, stream) and every span.
    lanes = len(megatron.timelines)
    spans = sum(len(lane.spans) for lane in megatron.timelines)
    assert results[0]["plot-timeline"]["shapes"] >= lanes + spans


@given(span=st.floats(1e-6, 1e9), target=st.integers(2, 10))
@settings(max_examples=200, deadline=None)
def test_axis_ticks_cover_the_span_with_few_round_steps(span: float, target: int) -> None:
    step = nice_step(span, target)
    mantissa = step / 10 ** math.floor(math.log10(step) + 1e-12)
    assert round(mantissa, 6) in {1.0, 2.0, 5.0, 10.0}
    marks = ticks(span, step)
    assert marks[0] == 0
    assert marks[-1] <= span * (1 + 1e-9)
    assert span - marks[-1] < step * (1 + 1e-9)  # the last tick is within one step of the end
    assert 2 <= len(marks) <= 3 * target
