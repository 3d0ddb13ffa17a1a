"""``gpuwarden trace`` for people: the verdict first, then the tables (progress while loading
and the warnings are in ``report.trace_status``).

Times are shown in ms (the trace's µs ÷ 1000); JSON keeps µs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from gpuwarden.report.output import console
from gpuwarden.types.trace import TraceReport, Verdict
from gpuwarden.types.trace_insights import RankInsights, SdpaBackend

if TYPE_CHECKING:
    from gpuwarden.types.trace_attention import AttentionReport
    from gpuwarden.types.trace_diff import TraceDiff
    from gpuwarden.types.trace_tensor_cores import TensorCoreReport

_NONE = "–"


def _ms(us: float | None) -> str:
    return _NONE if us is None else f"{us / 1000:,.2f}"


def _pct(ratio: float | None) -> str:
    return _NONE if ratio is None else f"{100 * ratio:.1f}"


def _num(value: float | None, spec: str = ".2f") -> str:
    return _NONE if value is None else format(value, spec)


def _count(value: float) -> str:
    """A kernel count; per-step averages are not whole numbers."""
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _table(title: str, columns: Sequence[str], left: int = 1) -> Table:
    # min_width: a narrow table must not wrap its title over several lines.
    table = Table(title=title, title_justify="left", min_width=len(title) + 2)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i < left else "right")
    return table


def verdict_lines(verdict: Verdict) -> list[Text]:
    lines = [Text.assemble((verdict.kind, "bold"), f": {verdict.summary}")]
    lines += [Text(f"  • {e}") for e in verdict.evidence]
    lines.append(Text.assemble("  ", ("fix:", "bold"), f" {verdict.fix}"))
    return lines


def _files_table(report: TraceReport) -> Table:
    table = _table("files", ("rank", "file", "rank from", "device", "events", "MB JSON"), 4)
    for f in report.files:
        table.add_row(
            str(f.rank),
            Path(f.path).name,
            f.rank_source,
            f.device or _NONE,
            f"{f.events:,}",
            f"{f.size_bytes / 1e6:.1f}",
        )
    return table


def _hta_tables(report: TraceReport) -> list[Table]:
    hta = report.hta
    temporal = _table(
        "HTA temporal breakdown (% of each rank's GPU-active span)",
        ("rank", "span ms", "idle %", "compute %", "non-compute %"),
    )
    for t in hta.temporal_breakdown:
        temporal.add_row(
            str(t.rank),
            _ms(t.kernel_time_us),
            _num(t.idle_time_pctg),
            _num(t.compute_time_pctg),
            _num(t.non_compute_time_pctg),
        )
    idle = _table(
        "HTA idle-time breakdown (ms per stream; share of the stream's idle time)",
        ("rank", "stream", "host_wait", "kernel_wait", "other"),
    )
    by_stream: dict[tuple[int, int], dict[str, str]] = {}
    for i in hta.idle_time_breakdown:
        share = "" if i.idle_time_ratio is None else f" ({_pct(i.idle_time_ratio)} %)"
        cell = f"{_ms(i.idle_time_us)}{share}"
        by_stream.setdefault((i.rank, i.stream), {})[i.idle_category] = cell
    for (rank, stream), cells in by_stream.items():
        idle.add_row(
            str(rank),
            str(stream),
            *(cells.get(c, _NONE) for c in ("host_wait", "kernel_wait", "other")),
        )
    overlap = _table("HTA communication/computation overlap", ("rank", "overlap %"))
    for o in hta.comm_comp_overlap:
        overlap.add_row(str(o.rank), _num(o.comp_comm_overlap_pctg))
    kinds = _table("HTA kernel-type breakdown (all ranks)", ("kernel type", "ms", "%"))
    for k in hta.kernel_type_breakdown:
        kinds.add_row(k.kernel_type, _ms(k.sum_us), _num(k.percentage, ".1f"))
    return [temporal, idle, overlap, kinds]


def _median_step_us(ins: RankInsights) -> float | None:
    return median(s.wall_us for s in ins.steps) if ins.steps else None


def _gemm_precision(tc: TensorCoreReport | None) -> str:
    """The precision of most GEMM time (kernel names) and its share, e.g. ``bf16 99.6``."""
    if tc is None or not tc.dtypes or tc.gemm_time_us <= 0:
        return _NONE
    top = tc.dtypes[0]
    return f"{top.dtype} {_pct(top.time_us / tc.gemm_time_us)}"


def _attention(att: AttentionReport | None) -> str:
    """The attention backends that ran, most used first; math with its share of SDPA calls."""
    if att is None:
        return _NONE
    names = [
        f"math {b.calls}/{att.sdpa_calls}"
        if b.backend is SdpaBackend.MATH and att.sdpa_calls
        else str(b.backend)
        for b in att.backends
    ]
    return "+".join(names) or _NONE


def rank_rows(report: TraceReport) -> list[dict[str, str]]:
    """One row of headline numbers per rank, as display text (terminal and HTML)."""
    rows = []
    for rank, ins in report.ranks.items():
        busy = ins.gpu_busy_us / ins.gpu_span_us if ins.gpu_span_us > 0 else None
        launch, tc, comm = ins.launch, ins.tensor_cores, ins.communication
        rows.append(
            {
                "rank": str(rank),
                "GPU events": f"{ins.gpu_events:,}",
                "steps": str(len(ins.steps)),
                "median step ms": _ms(_median_step_us(ins)),
                "GPU busy %": _pct(busy),
                "DL idle ms": _ms(ins.data_loading.gpu_idle_us) if ins.data_loading else _NONE,
                "kernel p50 µs": _num(launch.gpu_kernel_p50_us, ".1f") if launch else _NONE,
                "launch p50 µs": _num(launch.cpu_launch_p50_us, ".1f") if launch else _NONE,
                # "–" when no GEMM kernel's name says tensor core or not (MIOpen's convolutions)
                "TC % GEMM": _pct(tc.tensor_core_ratio)
                if tc and tc.unknown_us < tc.gemm_time_us
                else _NONE,
                "GEMM dtype %": _gemm_precision(tc),
                "attention": _attention(ins.attention),
                "exposed comm ms": _ms(comm.exposed_us) if comm else _NONE,
            }
        )
    return rows


def _insights_table(report: TraceReport) -> Table:
    rows = rank_rows(report)
    table = _table("per rank", list(rows[0]) if rows else ["rank"])
    for row in rows:
        table.add_row(*row.values())
    return table


def _straggler_table(report: TraceReport) -> Table | None:
    st = report.stragglers
    if st is None:
        return None
    table = _table(
        f"stragglers ({st.metric}; {st.matched_collectives} collectives matched)",
        ("rank", "median step ms", "late µs (mean)", "last arrivals", "waited ms", "score", ""),
    )
    for r in st.ranks:
        table.add_row(
            str(r.rank),
            _ms(r.step_time_median_us),
            _num(r.late_arrival_mean_us, ".0f"),
            str(r.last_arrivals),
            _ms(r.waited_us),
            _num(r.score),
            "straggler" if r.is_straggler else "",
        )
    return table


def other_findings(report: TraceReport) -> list[str]:
    """Remedies the per-rank analyses suggest beyond the verdict's, each once."""
    seen = {report.verdict.fix}
    out = []
    for rank, ins in report.ranks.items():
        parts = (
            ("data loading", ins.data_loading),
            ("host-to-device copies", ins.h2d),
            ("kernel launches", ins.launch),
            ("tensor cores", ins.tensor_cores),
            ("communication", ins.communication),
            ("attention", ins.attention),
        )
        for label, part in parts:
            fix = part.fix if part is not None else None
            # the verdict's fix may quote a rank's remedy inside a longer one: said once
            if fix and fix not in seen and fix not in report.verdict.fix:
                seen.add(fix)
                out.append(f"{label} (rank {rank}): {fix}")
    return out


def print_trace_report(report: TraceReport) -> None:
    out = console()
    for verdict_line in verdict_lines(report.verdict):
        out.print(verdict_line, soft_wrap=True)
    out.print()
    out.print(_files_table(report))
    tables = _hta_tables(report)
    for table in tables:
        if table.row_count:
            out.print(table)
    empty = [str(t.title).split(" (")[0].removeprefix("HTA ") for t in tables if not t.row_count]
    if empty:
        # an empty box says nothing: name the tables; the warnings above say why they are empty
        out.print(f"HTA: no rows for the {', '.join(empty)} (see the warnings)", soft_wrap=True)
    if report.hta.last_step_dropped:
        out.print(
            "note: HTA's tables leave out the last ProfilerStep of each rank (HTA's rule: the "
            "profiler often cuts it short); the per-rank numbers include it",
            soft_wrap=True,
        )
    out.print(_insights_table(report))
    stragglers = _straggler_table(report)
    if stragglers is not None:
        out.print(stragglers)
    fixes = other_findings(report)
    if fixes:
        out.print(Text("other findings", style="bold"))
        for line in fixes:
            out.print(f"  • {line}", soft_wrap=True)


def print_diff(diff: TraceDiff, *, a_path: str, b_path: str) -> None:
    out = console()
    for line in diff.warnings:  # before any number: what the numbers cannot tell
        out.print(Text.assemble(("warning:", "bold yellow"), f" {line}"), soft_wrap=True)
    unit = "per step" if diff.per_step else "per trace"
    out.print(
        Text.assemble(
            ("before", "bold"), f" {a_path}  →  ", ("after", "bold"), f" {b_path}  ({unit})"
        ),
        soft_wrap=True,
    )
    if diff.before_step_us is not None and diff.after_step_us is not None:
        change = diff.after_step_us / diff.before_step_us if diff.before_step_us else None
        out.print(
            f"median step {_ms(diff.before_step_us)} → {_ms(diff.after_step_us)} ms"
            + (f" (×{change:.2f})" if change is not None else "")
        )
    busy = "GPU busy in the median step" if diff.per_step else "GPU busy"
    out.print(f"{busy} {_ms(diff.before_busy_us)} → {_ms(diff.after_busy_us)} ms")
    for label, names in (("faster", diff.faster), ("slower", diff.slower)):
        if names:
            out.print(f"{label}: " + ", ".join(n.lower() for n in names), soft_wrap=True)
    kinds = _table(f"GPU time by kernel kind ({unit})", ("kind", "before ms", "after ms", "Δ ms"))
    for k in diff.kinds:
        kinds.add_row(
            k.kind.name.lower(), _ms(k.before_us), _ms(k.after_us), f"{k.delta_us / 1000:+,.2f}"
        )
    out.print(kinds)
    top = _table(
        f"kernels that changed most ({diff.new_kernels} new, {diff.gone_kernels} gone)",
        ("kernel", "kind", "count before", "count after", "before ms", "after ms", "Δ ms"),
        2,
    )
    top.columns[0].no_wrap = True
    top.columns[0].overflow = "ellipsis"
    top.columns[0].max_width = 50
    top.columns[1].no_wrap = True
    for d in diff.top_kernels:
        top.add_row(
            d.name.removeprefix("void "),
            d.kind.name.lower(),
            _count(d.before_count),
            _count(d.after_count),
            _ms(d.before_us),
            _ms(d.after_us),
            f"{d.delta_us / 1000:+,.2f}",
        )
    out.print(top)
