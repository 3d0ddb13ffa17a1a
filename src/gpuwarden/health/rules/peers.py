"""GPUs judged against their peers over a window: the straggler (activity off the others' by a
robust z-score) and the thermal outlier (hotter than the others at the same load).

Peers are the busy GPUs of the same model in the window: an idle GPU runs no job to compare, and
different models run at different levels by design.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.health.rules.attempts import (
    FALLBACK,
    PILLARS,
    Attempt,
    Read,
    finding_for,
    has_pillar,
    mean_of,
    sm_active,
    summary,
)
from gpuwarden.health.rules.common import (
    Context,
    Verdict,
    WindowOutcome,
    busy_percent,
    celsius,
    evidence,
    fraction_text,
    gpu_label,
    job_processes,
)
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.health.window import Series, Window, coverage, median, shortfall, trailing
from gpuwarden.types.health import Confidence
from gpuwarden.types.telemetry import DeviceSample

# Iglewicz & Hoaglin: 0.6745 makes the MAD of normal data comparable to its standard deviation.
_MAD_SCALE = 0.6745


def _power(s: DeviceSample) -> float | None:
    return s.power_draw_watts


def job_of(sample: DeviceSample) -> frozenset[str] | None:
    """What identifies the job on a GPU: its Kubernetes pods, else its compute processes' names
    (the ranks of one data-parallel job run the same command); None when the input says
    neither."""
    if sample.pods:
        return frozenset(pod.pod for pod in sample.pods)
    names = job_processes(sample)
    return frozenset(names) if names else None


def _peer_groups(window: Window, t: Thresholds, *, by_job: bool) -> list[list[Series]]:
    """Busy GPUs grouped by model (and by job when ``by_job``: GPUs of a shared node running
    different jobs are not each other's stragglers), each cut to the stretch where every member
    has been busy (a GPU whose job ended or started inside the window is compared only while all
    run), and only groups large enough to have a median worth the name."""

    def busy(sample: DeviceSample) -> bool | None:
        level = busy_percent(sample)
        return None if level is None else level >= t.busy_utilization_min_percent

    groups: dict[tuple[str, frozenset[str] | None], list[Series]] = {}
    for series in window.series:
        run = trailing(series.samples, busy)
        if run:
            job = job_of(series.newest) if by_job else None
            key = (series.newest.info.name, job)
            groups.setdefault(key, []).append(Series(series.key, run))
    together = []
    for group in groups.values():
        if len(group) < t.peers_min_gpus_count:
            continue
        start = max(s.samples[0].timestamp_s for s in group)
        together.append(
            [Series(s.key, tuple(x for x in s.samples if x.timestamp_s >= start)) for s in group]
        )
    return together


def _too_short(group: list[Series], t: Thresholds) -> str | None:
    first = group[0]
    return shortfall(
        min(len(s.samples) for s in group),
        first.span_s,
        t.window_min_samples_count,
        t.window_min_span_s,
    )


@dataclass(frozen=True, slots=True)
class _Spread:
    median: float
    mad: float

    @classmethod
    def of(cls, values: list[float]) -> _Spread:
        middle = median(values)
        return cls(middle, median([abs(v - middle) for v in values]))

    def z(self, value: float) -> float:
        if self.mad > 0:
            return _MAD_SCALE * (value - self.median) / self.mad
        return 0.0 if value == self.median else float("inf") * (1 if value > self.median else -1)


@dataclass(frozen=True, slots=True)
class _Measure:
    """What straggler compares: SM activity (the DCGM pillar) or power (the NVML fallback)."""

    pillars: bool

    @property
    def field(self) -> str:
        return "sm_active_ratio" if self.pillars else "power_draw_watts"

    @property
    def read(self) -> Read:
        return sm_active if self.pillars else _power

    def text(self, value: float) -> str:
        return fraction_text(value) if self.pillars else f"{value:.0f} W"


def _straggler_verdict(
    series: Series,
    value: float,
    spread: _Spread,
    peers: int,
    measure: _Measure,
    t: Thresholds,
    ctx: Context,
) -> Verdict:
    gap = (value - spread.median) / spread.median
    shown = measure.text
    detail = (
        f"{shown(value)} vs peers' median {shown(spread.median)} ({gap:+.0%}); robust z = "
        f"{spread.z(value):+.1f} (|z| ≥ {t.straggler_robust_z_min:g}) among {peers + 1} GPUs"
    )
    what = "SM active" if measure.pillars else "power"
    way = "below" if gap < 0 else "above"
    return Verdict(
        "straggler",
        f"{gpu_label(series.newest)}: {what} {shown(value)}, {fraction_text(abs(gap))} {way} "
        f"its {peers} peers over {series.span_s:.0f} s",
        (evidence(ctx, measure.field, round(value, 4), detail),),
        confidence=Confidence.MEDIUM if measure.pillars else Confidence.LOW,
        method=PILLARS if measure.pillars else FALLBACK,
        first_seen_s=series.samples[0].timestamp_s,
        last_seen_s=series.newest.timestamp_s,
    )


def _straggler_group(group: list[Series], t: Thresholds, ctx: Context) -> list[Attempt]:
    rule = "straggler"
    measure = _Measure(all(has_pillar(s, sm_active, t) for s in group))
    if not all(coverage(s.samples, measure.read) >= t.pillar_coverage_min_share for s in group):
        return [Attempt(rule, unable="neither SM activity nor power reported") for _ in group]
    method = PILLARS if measure.pillars else FALLBACK
    min_gap = t.straggler_min_gap_ratio if measure.pillars else t.straggler_fallback_min_gap_ratio
    values = {s.key: mean_of(s.samples, measure.read) for s in group}
    spread = _Spread.of(list(values.values()))
    attempts = []
    for series in group:
        value = values[series.key]
        gap = (value - spread.median) / spread.median if spread.median > 0 else 0.0
        # both: a gap that matters (identical GPUs differ by a few %) and a robust outlier
        if abs(gap) < min_gap or abs(spread.z(value)) < t.straggler_robust_z_min:
            attempts.append(Attempt(rule, method=method))
            continue
        verdict = _straggler_verdict(series, value, spread, len(group) - 1, measure, t, ctx)
        attempts.append(Attempt(rule, finding_for(series, verdict, ctx), method=method))
    return attempts


def _temperature(s: DeviceSample) -> float | None:
    return celsius(s.temperature_gpu_celsius)


def _thermal_group(group: list[Series], t: Thresholds, ctx: Context) -> list[Attempt]:
    rule = "thermal-outlier"
    readable = all(
        coverage(s.samples, _temperature) >= t.pillar_coverage_min_share
        and coverage(s.samples, _power) >= t.pillar_coverage_min_share
        for s in group
    )
    if not readable:
        return [Attempt(rule, unable="needs temperature and power on every peer") for _ in group]
    temps = {s.key: mean_of(s.samples, _temperature) for s in group}
    powers = {s.key: mean_of(s.samples, _power) for s in group}
    hot, load = median(list(temps.values())), median(list(powers.values()))
    attempts = []
    for series in group:
        above = temps[series.key] - hot
        # Matched load: a GPU drawing clearly more power than its peers is hotter for a reason.
        loaded = powers[series.key] > (1 + t.thermal_outlier_load_match_ratio) * load
        if above < t.thermal_outlier_min_celsius or loaded:
            attempts.append(Attempt(rule, method=FALLBACK))
            continue
        detail = (
            f"mean {temps[series.key]:.0f} °C vs peers' median {hot:.0f} °C (+{above:.0f} °C ≥ "
            f"{t.thermal_outlier_min_celsius:g}) at {powers[series.key]:.0f} W vs {load:.0f} W"
        )
        verdict = Verdict(
            rule,
            f"{gpu_label(series.newest)}: {above:.0f} °C hotter than its peers at the same load",
            (evidence(ctx, "temperature_gpu_celsius", round(temps[series.key], 1), detail),),
            method=FALLBACK,
            first_seen_s=series.samples[0].timestamp_s,
            last_seen_s=series.newest.timestamp_s,
        )
        attempts.append(Attempt(rule, finding_for(series, verdict, ctx), method=FALLBACK))
    return attempts


_JUDGES = {
    "straggler": (_straggler_group, True),  # peers: the same job
    "thermal-outlier": (_thermal_group, False),  # peers: the same model at the same power
}


def peers(window: Window, t: Thresholds, ctx: Context) -> WindowOutcome:
    attempts: list[Attempt] = []
    for rule, (judge, by_job) in _JUDGES.items():
        groups = _peer_groups(window, t, by_job=by_job)
        if not groups:
            peers_of = "one job" if by_job else "one model"
            why = f"fewer than {t.peers_min_gpus_count} busy GPUs of {peers_of}"
            attempts.append(Attempt(rule, unable=why))
        for group in groups:
            short = _too_short(group, t)
            attempts += (
                [Attempt(rule, unable=f"busy together: {short}")] if short else judge(group, t, ctx)
            )
    findings = tuple(a.finding for a in attempts if a.finding)
    notes, judged = [], False
    for rule in _JUDGES:
        note, ok = summary(rule, [a for a in attempts if a.rule == rule])
        notes.append(note)
        judged = judged or ok
    return WindowOutcome(findings, tuple(notes), judged)
