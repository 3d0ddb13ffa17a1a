"""``analyze(trace) -> TraceReport``: every analysis of one job, and the verdict. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpuwarden.errors import InputError
from gpuwarden.traces.hta import hta_report
from gpuwarden.traces.insights import (
    held_idle_us,
    host_op_idle,
    host_record,
    rank_insights,
    rank_timings,
    rank_view,
    step_launched_us,
    stragglers_of,
)
from gpuwarden.traces.memory import release_free_heap
from gpuwarden.traces.model import SKIP_REASONS, LoadedTrace, RankTrace
from gpuwarden.traces.timeline import stream_timelines
from gpuwarden.traces.verdict import MIN_GPU_EVENTS, HostOpIdle, HostRecord, diagnose
from gpuwarden.types.trace import SkippedFile, TraceFile, TraceReport
from gpuwarden.types.trace_hta import HtaReport
from gpuwarden.types.trace_insights import RankInsights


def _host_records(
    trace: LoadedTrace, insights: dict[int, RankInsights]
) -> dict[int, HostRecord] | None:
    """Each rank's host record, read only when no rank has a GPU event (the verdict needs
    them only then to say why)."""
    if any(ins.gpu_events for ins in insights.values()):
        return None
    return {r: host_record(t) for r, t in trace.ranks.items()}


def select_ranks(trace: LoadedTrace, ranks: Iterable[int]) -> LoadedTrace:
    """Only ``ranks`` of ``trace``; an unknown rank is an error that lists the loaded ones."""
    wanted = sorted(set(ranks))
    missing = [r for r in wanted if r not in trace.ranks]
    if missing:
        have = ", ".join(str(r) for r in trace.ranks) or "none"
        raise InputError(
            f"--ranks {','.join(map(str, missing))}: not among the loaded ranks ({have})",
            reference="trace-unknown-rank",
            hint="the rank of a file comes from distributedInfo.rank, else `rank-N` in its name",
        )
    return LoadedTrace(ranks={r: trace.ranks[r] for r in wanted}, skipped=trace.skipped)


def skipped_warning(rank: int, skipped: dict[str, int]) -> str | None:
    """``rank 0: 81 events left out of the analyses: 79 dur is not a finite number: the event
    is dropped; 2 ...``; None when nothing was."""
    if not skipped:
        return None
    total = sum(skipped.values())
    parts = "; ".join(f"{n:,} × {SKIP_REASONS[reason]}" for reason, n in skipped.items())
    return f"rank {rank}: {total:,} event(s) left out of the analyses: {parts}"


def _warnings(
    trace: LoadedTrace, hta: HtaReport, insights: dict[int, RankInsights]
) -> tuple[str, ...]:
    out = [
        line
        for r, t in trace.ranks.items()
        if (line := skipped_warning(r, t.meta.skipped_events)) is not None
    ]
    out += [f"rank {p.rank}: HTA {p.analysis}: {p.message}" for p in hta.problems]
    no_steps = [r for r, ins in insights.items() if ins.gpu_events > 0 and not ins.steps]
    if no_steps:
        out.append(
            f"rank(s) {', '.join(map(str, no_steps))}: no ProfilerStep annotation, so no "
            "per-step numbers (call prof.step() each iteration with a profiler schedule)"
        )
    world = trace.world_sizes()
    if len(world) == 1 and (size := world.pop()) > len(trace.ranks):
        out.append(_subset_warning(sorted(trace.ranks), size))
    return tuple(out)


def _subset_warning(ranks: list[int], world_size: int) -> str:
    """Some ranks of a larger job: what is judged among them only, and what one alone hides."""
    if len(ranks) > 1:
        return (
            f"{len(ranks)} of {world_size} ranks loaded: stragglers and communication are "
            "judged among these only"
        )
    return (
        f"1 of {world_size} ranks loaded (rank {ranks[0]}): its collectives' time includes "
        "waiting for the other ranks, and stragglers are not judged; load every rank's trace "
        "to tell"
    )


# What a training step records on the host: autograd's backward nodes and torch.optim's
# record_function around Optimizer.step / zero_grad (an inference trace has neither)
_TRAINING_OP = re.compile(r"^(?:autograd::engine::evaluate_function|Optimizer\.(?:step|zero_grad))")


def _trains(rank: RankTrace) -> bool:
    return any(_TRAINING_OP.match(name) for name in rank.names)


def analyze(trace: LoadedTrace) -> TraceReport:
    hta = hta_report(trace)
    insights: dict[int, RankInsights] = {}
    timings = {}
    kinds = {}
    launched: dict[int, float] = {}
    host_ops: dict[int, HostOpIdle] = {}
    held_idle: dict[int, float] = {}
    for r, t in trace.ranks.items():
        # one rank's view at a time (classified once, shared by the analyses below), so memory
        # grows with the largest rank, not with the number of ranks
        view = rank_view(t)
        insights[r] = rank_insights(t, view)
        timings[r] = rank_timings(view)
        kinds[r] = view.kinds
        if insights[r].gpu_events < MIN_GPU_EVENTS:
            # read only by the verdict on a job with too few GPU events to weigh
            launched[r] = step_launched_us(view)
        elif (op := host_op_idle(view)) is not None:
            # read only by the verdict on a GPU idle waiting for its host
            host_ops[r] = op
        if insights[r].launch is not None:
            # read only by the verdict, on a GPU idle while its kernels start long after their
            # launches: how much of the idle time launched work waited with its stream free.
            # Measured on every rank the verdict sums, whatever the rank's own median delay
            # (measuring takes about a millisecond a rank on the largest fixtures)
            held = held_idle_us(view)
            if held is not None:
                held_idle[r] = held
        del view
        release_free_heap()
    stragglers = stragglers_of(timings) if len(trace.ranks) > 1 else None
    timelines, end_us = stream_timelines(trace, kinds)
    files = tuple(
        TraceFile(
            path=t.meta.path,
            rank=r,
            rank_source=t.meta.rank_source,
            size_bytes=t.meta.trace_bytes,
            events=t.meta.event_count,
            device=insights[r].device_name,
            skipped_events=dict(t.meta.skipped_events),
        )
        for r, t in trace.ranks.items()
    )
    return TraceReport(
        files=files,
        skipped=tuple(SkippedFile(path, reason) for path, reason in trace.skipped),
        hta=hta,
        ranks=insights,
        stragglers=stragglers,
        verdict=diagnose(
            hta,
            insights,
            stragglers,
            _host_records(trace, insights),
            launched_in_steps=launched,
            host_ops=host_ops,
            held_idle=held_idle,
            training=any(_trains(r) for r in trace.ranks.values()),
        ),
        timelines=timelines,
        timeline_end_us=end_us,
        warnings=_warnings(trace, hta, insights),
    )
