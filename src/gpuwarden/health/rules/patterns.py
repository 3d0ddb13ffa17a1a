"""Bottlenecks seen as a pattern over the whole window: data starvation (a GPU computing in
regular bursts and waiting in between) and communication-bound steps (the GPUs stop computing
together while the interconnect is busy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwarden.health.rules.attempts import (
    FALLBACK,
    PILLARS,
    Attempt,
    Read,
    finding_for,
    has_pillar,
    sm_active,
)
from gpuwarden.health.rules.common import Context, Verdict, evidence, fraction_text, gpu_label
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.health.window import (
    Series,
    Window,
    correlation,
    device_key,
    mean,
    median,
    percentile,
    shortfall,
)
from gpuwarden.types.health import Confidence, Evidence
from gpuwarden.types.telemetry import DeviceSample

# The busy level of a GPU in a window: the 90th percentile of its activity (its peak, without
# letting one outlier reading set it).
_BUSY_LEVEL = 0.9
# A PCIe RX burst: the 90th percentile of RX at least this many times its median.
_BURST_FACTOR = 3.0
# Regular cycles (a training loop) vary little in length; bursts of requests do. Coefficient of
# variation of the cycle lengths above this: not an input pipeline's rhythm.
_REGULAR_CYCLE_CV = 0.5
_REGULARITY_MIN_CYCLES = 3


def _utilization_ratio(s: DeviceSample) -> float | None:
    return None if s.gpu_utilization_percent is None else s.gpu_utilization_percent / 100


# --- data starvation


@dataclass(frozen=True, slots=True)
class _Sawtooth:
    cycles: int  # idle → busy transitions
    idle_share: float
    cycle_starts_s: tuple[float, ...]

    def cycle_cv(self) -> float | None:
        lengths = [
            b - a for a, b in zip(self.cycle_starts_s, self.cycle_starts_s[1:], strict=False)
        ]
        average = mean(lengths)
        if len(lengths) < 2 or not average:
            return None
        spread = math.sqrt(sum((x - average) ** 2 for x in lengths) / len(lengths))
        return spread / average


def _sawtooth(
    points: Sequence[tuple[DeviceSample, float]], peak: float, t: Thresholds
) -> _Sawtooth:
    """Busy (≥ half the busy level) and idle (≤ a tenth of it) phases; readings in between keep
    the phase they are in."""
    last: str | None = None
    cycles, idle = 0, 0
    starts: list[float] = []
    for sample, activity in points:
        if activity >= t.data_starved_busy_min_ratio * peak:
            phase = "busy"
        elif activity <= t.data_starved_idle_max_ratio * peak:
            phase, idle = "idle", idle + 1
        else:
            continue
        if phase == "busy" and last == "idle":
            cycles += 1
            starts.append(sample.timestamp_s)
        last = phase
    return _Sawtooth(cycles, idle / len(points), tuple(starts))


def _rx_bursts(samples: Sequence[DeviceSample]) -> tuple[float, float] | None:
    """(90th percentile, median) of PCIe RX when it comes in bursts, else None."""
    rx = [s.pcie_rx_bytes_per_second for s in samples if s.pcie_rx_bytes_per_second is not None]
    if len(rx) < 3:
        return None
    high, typical = percentile(rx, _BUSY_LEVEL), median(rx)
    return (high, typical) if high > 0 and high >= _BURST_FACTOR * typical else None


def _starved_proof(
    series: Series,
    pattern: _Sawtooth,
    power_r: float | None,
    rx: tuple[float, float] | None,
    field: str,
    ctx: Context,
) -> tuple[Evidence, ...]:
    proof = [
        evidence(
            ctx,
            field,
            pattern.cycles,
            f"{pattern.cycles} busy → idle → busy cycles; idle {fraction_text(pattern.idle_share)} "
            f"of {len(series.samples)} readings over {series.span_s:.0f} s",
        )
    ]
    if power_r is not None:
        detail = f"Pearson r = {power_r:.2f} with {field}: the gaps are real"
        proof.append(evidence(ctx, "power_draw_watts", round(power_r, 3), detail))
    if rx is not None:
        detail = f"90th percentile {rx[0] / 1e9:.2f} GB/s vs median {rx[1] / 1e9:.2f} GB/s: bursts"
        proof.append(evidence(ctx, "pcie_rx_bytes_per_second", round(rx[0]), detail))
    return tuple(proof)


def data_starved(series: Series, t: Thresholds, ctx: Context) -> Attempt:
    rule = "data-starved"
    samples = series.samples
    short = shortfall(
        len(samples), series.span_s, t.window_min_samples_count, t.data_starved_min_span_s
    )
    if short:
        return Attempt(rule, unable=short)
    spacing = series.median_interval_s
    if spacing is not None and spacing > t.data_starved_max_interval_s:
        return Attempt(
            rule,
            unable=f"readings {spacing:g} s apart; a data-starved rhythm needs readings at most "
            f"{t.data_starved_max_interval_s:g} s apart",
        )
    pillars = has_pillar(series, sm_active, t)
    read: Read = sm_active if pillars else _utilization_ratio
    method = PILLARS if pillars else FALLBACK
    points = [(s, a) for s in samples if (a := read(s)) is not None]
    if len(points) < t.window_min_samples_count:
        return Attempt(rule, unable="neither SM activity nor utilization reported")
    peak = percentile([a for _, a in points], _BUSY_LEVEL)
    if 100 * peak < t.busy_utilization_min_percent:
        return Attempt(rule, method=method)  # no job runs: nothing to starve
    pattern = _sawtooth(points, peak, t)
    if pattern.cycles < t.data_starved_min_cycles_count or (
        pattern.idle_share < t.data_starved_idle_min_share
    ):
        return Attempt(rule, method=method)
    cv = pattern.cycle_cv() if pattern.cycles >= _REGULARITY_MIN_CYCLES else None
    if cv is not None and cv > _REGULAR_CYCLE_CV:
        return Attempt(rule, method=method)  # irregular bursts: load, not a pipeline's rhythm
    pairs = [(a, s.power_draw_watts) for s, a in points if s.power_draw_watts is not None]
    power_r = correlation([a for a, _ in pairs], [p for _, p in pairs])
    if power_r is not None and power_r < t.data_starved_power_correlation_min_ratio:
        return Attempt(rule, method=method)  # power does not follow: the gaps are not real
    rx = _rx_bursts(samples)
    sure = pillars and power_r is not None and cv is not None
    field = "sm_active_ratio" if pillars else "gpu_utilization_percent"
    verdict = Verdict(
        rule,
        f"{gpu_label(series.newest)}: computes in bursts, idle {fraction_text(pattern.idle_share)} "
        f"of {series.span_s:.0f} s over {pattern.cycles} cycles",
        _starved_proof(series, pattern, power_r, rx, field, ctx),
        confidence=Confidence.MEDIUM if sure else Confidence.LOW,
        method=method,
        first_seen_s=samples[0].timestamp_s,
        last_seen_s=samples[-1].timestamp_s,
    )
    return Attempt(rule, finding_for(series, verdict, ctx), method=method)


# --- communication-bound


def _link_bytes(sample: DeviceSample) -> float | None:
    totals = [
        (x.tx_bytes_total or 0) + (x.rx_bytes_total or 0)
        for x in sample.nvlinks or ()
        if x.tx_bytes_total is not None or x.rx_bytes_total is not None
    ]
    return float(sum(totals)) if totals else None


def _traffic(samples: Sequence[DeviceSample]) -> list[float | None]:
    """Interconnect bytes/s at each reading: NVLink rates when the backend gives them, else from
    two readings of the link byte counters, else PCIe TX + RX."""
    out: list[float | None] = []
    previous: DeviceSample | None = None
    for sample in samples:
        rates = (sample.nvlink_tx_bytes_per_second, sample.nvlink_rx_bytes_per_second)
        value: float | None = None
        if any(r is not None for r in rates):
            value = sum(r or 0.0 for r in rates)
        elif previous is not None and (now := _link_bytes(sample)) is not None:
            before = _link_bytes(previous)
            dt = sample.timestamp_s - previous.timestamp_s
            if before is not None and dt > 0 and now >= before:
                value = (now - before) / dt
        if value is None and sample.pcie_tx_bytes_per_second is not None:
            value = sample.pcie_tx_bytes_per_second + (sample.pcie_rx_bytes_per_second or 0.0)
        out.append(value)
        previous = sample
    return out


def _stalled_at(series: Series, t: Thresholds) -> dict[float, bool]:
    """Reading time → this GPU was in a communication phase: SM activity below half its busy
    level while its interconnect ran at half its peak or more."""
    traffic = _traffic(series.samples)
    moving = [x for x in traffic if x is not None]
    busy = [s.sm_active_ratio for s in series.samples if s.sm_active_ratio is not None]
    if not moving or not busy:
        return {}
    peak_traffic, busy_level = percentile(moving, _BUSY_LEVEL), percentile(busy, _BUSY_LEVEL)
    if peak_traffic < t.comm_bound_traffic_min_bytes_per_second:
        return {}
    stalled = {}
    for sample, rate in zip(series.samples, traffic, strict=True):
        if rate is None or sample.sm_active_ratio is None:
            continue
        stalled[sample.timestamp_s] = (
            sample.sm_active_ratio < t.comm_bound_sm_drop_max_ratio * busy_level
            and rate >= t.comm_bound_traffic_min_ratio * peak_traffic
        )
    return stalled


def comm_bound(window: Window, t: Thresholds, ctx: Context) -> list[Attempt]:
    rule = "comm-bound"
    gpus = [s for s in window.series if has_pillar(s, sm_active, t)]
    if len(gpus) < 2:
        return [Attempt(rule, unable="needs SM activity (DCGM profiling / NVML GPM) on 2+ GPUs")]
    short = shortfall(len(window), window.span_s, t.window_min_samples_count, t.window_min_span_s)
    if short:
        return [Attempt(rule, unable=short)]
    stalled = {s.key: _stalled_at(s, t) for s in gpus}
    lockstep: list[set[str]] = []
    for snapshot in window.snapshots:
        read = {}
        for sample in snapshot.samples:
            key = device_key(sample)
            if key in stalled and sample.timestamp_s in stalled[key]:
                read[key] = stalled[key][sample.timestamp_s]
        down = {key for key, is_down in read.items() if is_down}
        if len(read) >= 2 and len(down) >= t.comm_bound_lockstep_min_share * len(read):
            lockstep.append(down)
    share = len(lockstep) / len(window)
    if share < t.comm_bound_min_share:
        return [Attempt(rule, method=PILLARS) for _ in gpus]
    attempts = []
    for series in gpus:
        joined = sum(series.key in down for down in lockstep)
        if joined < len(lockstep) / 2:
            attempts.append(Attempt(rule, method=PILLARS))
            continue
        detail = (
            f"SM activity dropped with the interconnect busy, together with the other GPUs, at "
            f"{joined} of {len(window)} readings ({fraction_text(share)} of the window)"
        )
        verdict = Verdict(
            rule,
            f"{gpu_label(series.newest)}: stalls on communication in lockstep with its peers "
            f"({fraction_text(share)} of {window.span_s:.0f} s)",
            (evidence(ctx, "sm_active_ratio", joined, detail),),
            confidence=Confidence.MEDIUM,
            method=PILLARS,
            first_seen_s=window.snapshots[0].timestamp_s,
            last_seen_s=window.newest.timestamp_s,
        )
        attempts.append(Attempt(rule, finding_for(series, verdict, ctx), method=PILLARS))
    return attempts
