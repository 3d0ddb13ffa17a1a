"""Why a busy-looking GPU is slow, over a window of readings: low utilization, fake load, data
starvation, memory-bound kernels, no tensor cores, communication-bound steps.

State verdicts (low utilization, fake load, memory-bound, no tensor cores) hold when the
condition has held for the trailing stretch of the window — at least ``window_min_samples_count``
readings over ``window_min_span_s`` (low utilization: ``low_utilization_min_span_s``) — so a
verdict appears that long after the condition starts and clears when it stops. Pattern verdicts
(data starvation, communication-bound: ``patterns.py``) read the whole window.

Method: "dcgm-pillars" when DCGM's profiling fields (or NVML GPM) report SM activity on most
readings; "nvml-fallback" when utilization, power and memory counters decide. A verdict that needs
a pillar the input lacks is not made, and the check says so.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuwarden.health.rules.attempts import (
    FALLBACK,
    PILLARS,
    Attempt,
    Holds,
    Read,
    finding_for,
    has_pillar,
    mean_of,
    sm_active,
    summary,
    sustained,
)
from gpuwarden.health.rules.common import (
    Context,
    Verdict,
    WindowOutcome,
    busy_percent,
    compared_fractions,
    evidence,
    fraction_text,
    gpu_label,
    job_processes,
    power_limit,
)
from gpuwarden.health.rules.patterns import comm_bound, data_starved
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.health.window import (
    Series,
    Window,
    counter_increase,
    coverage,
    device_key,
    span_of,
)
from gpuwarden.types.health import Confidence, Evidence
from gpuwarden.types.telemetry import DeviceSample, DeviceState

# Architectures without tensor cores: "no tensor cores" is then the hardware, not the job.
_NO_TENSOR_CORES = frozenset({"Kepler", "Maxwell", "Pascal"})
_RULES = (
    "low-utilization",
    "fake-load",
    "data-starved",
    "memory-bound",
    "no-tensor-cores",
    "comm-bound",
)
# A specific verdict explains low utilization; the generic one is then not repeated.
_EXPLAINS_LOW_UTILIZATION = frozenset({"fake-load", "data-starved", "comm-bound"})


def _utilization(s: DeviceSample) -> float | None:
    return s.gpu_utilization_percent


# --- low utilization


def _low_utilization(series: Series, t: Thresholds, ctx: Context) -> Attempt:
    rule = "low-utilization"
    if coverage(series.samples, busy_percent) < t.pillar_coverage_min_share:
        return Attempt(rule, unable="utilization not reported")
    if coverage(series.samples, job_processes) < t.pillar_coverage_min_share:
        return Attempt(rule, unable="no process list in this input")

    def holds(s: DeviceSample) -> bool | None:
        procs, busy = job_processes(s), busy_percent(s)
        if procs is None or busy is None:
            return None
        return bool(procs) and busy < t.low_utilization_max_percent

    run, unable = sustained(series, holds, t, t.low_utilization_min_span_s)
    if unable or not run:
        return Attempt(rule, unable=unable, method=FALLBACK)
    busy, span = mean_of(run, busy_percent), span_of(run)
    names = sorted({n for s in run for n in job_processes(s) or ()})
    proof = (
        evidence(
            ctx,
            "gpu_utilization_percent",
            round(busy, 1),
            f"mean {busy:.0f} % < {t.low_utilization_max_percent:g} % for {span:.0f} s "
            "(busiest of the SM, encoder and decoder engines)",
        ),
        evidence(ctx, "processes", ", ".join(names[:5]), f"{len(names)} compute process(es)"),
    )
    verdict = Verdict(
        rule,
        f"{gpu_label(series.newest)}: held by {', '.join(names[:2])} but {busy:.0f} % busy "
        f"for {span:.0f} s",
        proof,
        method=FALLBACK,
        first_seen_s=run[0].timestamp_s,
        last_seen_s=run[-1].timestamp_s,
    )
    return Attempt(rule, finding_for(series, verdict, ctx), method=FALLBACK)


# --- fake load


def _fake_load_holds(t: Thresholds, pillars: bool) -> Holds:
    def by_pillars(s: DeviceSample) -> bool | None:
        util, sm = s.gpu_utilization_percent, s.sm_active_ratio
        if util is None or sm is None:
            return None
        return util >= t.fake_load_utilization_min_percent and sm < t.fake_load_sm_active_max_ratio

    def by_power(s: DeviceSample) -> bool | None:
        # NVML alone: kernels resident at idle power and without memory traffic compute nothing.
        util, power, limit = s.gpu_utilization_percent, s.power_draw_watts, power_limit(s)
        memory = s.memory_utilization_percent
        if util is None or power is None or limit is None or memory is None:
            return None
        return (
            util >= t.fake_load_utilization_min_percent
            and power <= t.fake_load_power_max_ratio * limit
            and memory <= t.fake_load_memory_utilization_max_percent
        )

    return by_pillars if pillars else by_power


def _fake_load_proof(
    run: Sequence[DeviceSample], pillars: bool, t: Thresholds, ctx: Context
) -> tuple[Evidence, ...]:
    util = mean_of(run, _utilization)
    proof = [
        evidence(
            ctx,
            "gpu_utilization_percent",
            round(util, 1),
            f"mean ≥ {t.fake_load_utilization_min_percent:g} % for {span_of(run):.0f} s",
        )
    ]
    if pillars:
        sm = mean_of(run, sm_active)
        sm_text, limit_text = compared_fractions(sm, t.fake_load_sm_active_max_ratio)
        detail = f"mean {sm_text} < {limit_text}"
        proof.append(evidence(ctx, "sm_active_ratio", round(sm, 4), detail))
        return tuple(proof)
    power, limit = mean_of(run, lambda s: s.power_draw_watts), mean_of(run, power_limit)
    detail = f"mean {power:.0f} W ≤ {fraction_text(t.fake_load_power_max_ratio)} of {limit:.0f} W"
    proof.append(evidence(ctx, "power_draw_watts", round(power, 1), detail))
    memory = mean_of(run, lambda s: s.memory_utilization_percent)
    detail = f"mean ≤ {t.fake_load_memory_utilization_max_percent:g} %: no memory traffic"
    proof.append(evidence(ctx, "memory_utilization_percent", round(memory, 1), detail))
    return tuple(proof)


def _hang_words(failed: dict[str, str], me: str) -> tuple[str, str] | None:
    """Cause and remedy when a peer GPU died: the job's collective waits for it forever."""
    culprits = [words for key, words in failed.items() if key != me]
    if not culprits:
        return None
    cause = (
        f"{'; '.join(culprits)}: this GPU's job spins in a collective waiting for it — kernels "
        "stay resident (utilization 100 %) while nothing is computed"
    )
    remedy = (
        "stop the job and restart it from its last checkpoint without the failed GPU; set "
        "NCCL/torch timeouts so a dead rank ends the job instead of hanging it"
    )
    return cause, remedy


def _fake_load(series: Series, t: Thresholds, ctx: Context, failed: dict[str, str]) -> Attempt:
    rule = "fake-load"
    if coverage(series.samples, _utilization) < t.pillar_coverage_min_share:
        return Attempt(rule, unable="utilization not reported")
    pillars = has_pillar(series, sm_active, t)
    method = PILLARS if pillars else FALLBACK
    run, unable = sustained(series, _fake_load_holds(t, pillars), t, t.window_min_span_s)
    if unable or not run:
        return Attempt(rule, unable=unable, method=method)
    hang = _hang_words(failed, series.key)
    how = f"SM active {fraction_text(mean_of(run, sm_active))}" if pillars else "idle power"
    verdict = Verdict(
        rule,
        f"{gpu_label(series.newest)}: utilization {mean_of(run, _utilization):.0f} % with {how} "
        f"for {span_of(run):.0f} s",
        _fake_load_proof(run, pillars, t, ctx),
        confidence=Confidence.HIGH if pillars else Confidence.MEDIUM,
        method=method,
        cause=hang[0] if hang else None,
        remedy=hang[1] if hang else None,
        first_seen_s=run[0].timestamp_s,
        last_seen_s=run[-1].timestamp_s,
    )
    return Attempt(rule, finding_for(series, verdict, ctx), method=method)


# --- memory-bound and no tensor cores (pillars only)


@dataclass(frozen=True, slots=True)
class _Bound:
    """One pillar's condition: ``field`` compared with ``limit`` by ``symbol``."""

    field: str
    read: Read
    symbol: str  # ">", "<", ">=", "<="
    limit: float

    def holds(self, value: float) -> bool:
        return _COMPARE[self.symbol](value, self.limit)

    @property
    def pillar(self) -> str:
        return self.field.removesuffix("_ratio").replace("_", " ")


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
}


def _pillar_state(
    series: Series, t: Thresholds, ctx: Context, rule: str, bounds: tuple[_Bound, _Bound]
) -> Attempt:
    """A verdict on two pillars that both held their bound over the trailing stretch."""
    if not all(has_pillar(series, b.read, t) for b in bounds):
        needs = " and ".join(b.pillar for b in bounds)
        return Attempt(rule, unable=f"needs the {needs} pillars (DCGM profiling / NVML GPM)")

    def holds(s: DeviceSample) -> bool | None:
        values = [b.read(s) for b in bounds]
        if any(v is None for v in values):
            return None
        return all(b.holds(v) for b, v in zip(bounds, values, strict=True) if v is not None)

    run, unable = sustained(series, holds, t, t.window_min_span_s)
    if unable or not run:
        return Attempt(rule, unable=unable, method=PILLARS)
    means = [(b, mean_of(run, b.read)) for b in bounds]
    proof = tuple(
        evidence(ctx, b.field, round(v, 4), f"mean {b.symbol} {fraction_text(b.limit)}")
        for b, v in means
    )
    words = ", ".join(f"{b.pillar} {fraction_text(v)}" for b, v in means)
    verdict = Verdict(
        rule,
        f"{gpu_label(series.newest)}: {words} for {span_of(run):.0f} s",
        proof,
        method=PILLARS,
        first_seen_s=run[0].timestamp_s,
        last_seen_s=run[-1].timestamp_s,
    )
    return Attempt(rule, finding_for(series, verdict, ctx), method=PILLARS)


def _memory_bound(series: Series, t: Thresholds, ctx: Context) -> Attempt:
    dram = _Bound(
        "dram_active_ratio",
        lambda s: s.dram_active_ratio,
        ">",
        t.memory_bound_dram_active_min_ratio,
    )
    sm = _Bound("sm_active_ratio", sm_active, "<", t.memory_bound_sm_active_max_ratio)
    return _pillar_state(series, t, ctx, "memory-bound", (dram, sm))


def _no_tensor_cores(series: Series, t: Thresholds, ctx: Context) -> Attempt:
    rule = "no-tensor-cores"
    architecture = series.newest.info.architecture
    if architecture in _NO_TENSOR_CORES:
        return Attempt(rule, unable=f"{architecture} GPUs have no tensor cores")
    sm = _Bound("sm_active_ratio", sm_active, ">=", t.no_tensor_sm_active_min_ratio)
    tensor = _Bound(
        "tensor_active_ratio",
        lambda s: s.tensor_active_ratio,
        "<=",
        t.no_tensor_tensor_active_max_ratio,
    )
    return _pillar_state(series, t, ctx, rule, (sm, tensor))


# --- the family


def failed_gpus(window: Window) -> dict[str, str]:
    """GPUs that died (lost now, or an uncorrectable ECC error during the window): their peers'
    fake load is a hang waiting for them. An old error count, from before the window, explains
    nothing that happens now."""
    failed: dict[str, str] = {}
    for sample in window.newest.samples:
        if sample.state is DeviceState.GPU_LOST:
            failed[device_key(sample)] = f"GPU {sample.info.index} is lost (fell off the bus)"
    for series in window.series:
        grew = counter_increase(series.samples, lambda s: s.ecc_errors_uncorrected_volatile)
        if grew is not None and grew.amount > 0:
            failed[series.key] = f"GPU {series.index} hit an uncorrectable ECC error"
    return failed


def utilization(window: Window, t: Thresholds, ctx: Context) -> WindowOutcome:
    failed = failed_gpus(window)
    attempts: list[Attempt] = []
    for series in window.series:
        specific = [
            _fake_load(series, t, ctx, failed),
            data_starved(series, t, ctx),
            _memory_bound(series, t, ctx),
            _no_tensor_cores(series, t, ctx),
        ]
        attempts += specific
        low = _low_utilization(series, t, ctx)
        explained = any(a.finding and a.rule in _EXPLAINS_LOW_UTILIZATION for a in specific)
        attempts.append(dataclasses.replace(low, finding=None) if explained else low)
    attempts += comm_bound(window, t, ctx)
    # comm-bound explains a GPU's low utilization too
    stalled = {a.finding.device for a in attempts if a.finding and a.rule == "comm-bound"}
    findings = tuple(
        a.finding
        for a in attempts
        if a.finding and not (a.rule == "low-utilization" and a.finding.device in stalled)
    )
    notes, judged = [], False
    for rule in _RULES:
        note, ok = summary(rule, [a for a in attempts if a.rule == rule])
        notes.append(note)
        judged = judged or ok
    return WindowOutcome(findings, tuple(notes), judged)
