"""What the windowed bottleneck rules share: one attempt's outcome, pillar coverage, the trailing
stretch a state verdict rests on, and the per-rule sentence of a check's detail."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuwarden.health.rules.common import Context, Verdict, device_ref, make
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.health.window import Series, coverage, mean, shortfall, span_of, trailing
from gpuwarden.types.health import Finding
from gpuwarden.types.telemetry import DeviceSample

PILLARS = "dcgm-pillars"
FALLBACK = "nvml-fallback"

Holds = Callable[[DeviceSample], bool | None]
Read = Callable[[DeviceSample], float | None]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One rule on one GPU (or the node): a finding, nothing, or why it could not judge."""

    rule: str
    finding: Finding | None = None
    unable: str | None = None  # None: the rule judged (with or without a finding)
    method: str | None = None


def sm_active(sample: DeviceSample) -> float | None:
    return sample.sm_active_ratio


def has_pillar(series: Series, read: Read, t: Thresholds) -> bool:
    """A DCGM pillar decides only when most readings report it."""
    return coverage(series.samples, read) >= t.pillar_coverage_min_share


def sustained(
    series: Series, holds: Holds, t: Thresholds, min_span_s: float
) -> tuple[tuple[DeviceSample, ...], str | None]:
    """The trailing stretch where ``holds`` is true if it is long enough (else empty), or why the
    window is too short to tell."""
    samples = series.samples
    short = shortfall(len(samples), series.span_s, t.window_min_samples_count, min_span_s)
    if short:
        return (), short
    run = trailing(samples, holds)
    if len(run) >= t.window_min_samples_count and span_of(run) >= min_span_s:
        return run, None
    return (), None


def mean_of(run: Sequence[DeviceSample], read: Read) -> float:
    return mean(v for s in run if (v := read(s)) is not None) or 0.0


def finding_for(series: Series, verdict: Verdict, ctx: Context) -> Finding:
    return make(verdict, device_ref(series.newest, ctx))


def summary(rule: str, attempts: Sequence[Attempt]) -> tuple[str, bool]:
    """One sentence for the check's detail: how many GPUs a rule judged and how, or why it could
    not; and whether it judged any."""
    judged = [a for a in attempts if a.unable is None]
    if judged:
        methods = sorted({a.method for a in judged if a.method})
        how = f" ({', '.join(methods)})" if methods else ""
        return f"{rule}: judged {len(judged)} GPU(s){how}", True
    reasons = sorted({a.unable for a in attempts if a.unable})
    return f"{rule}: {'; '.join(reasons) or 'no GPU to judge'}", False
