"""Heat and power: thermal slowdown, temperatures near the slowdown threshold, HW power brake, and
the SW power cap under load (information: a power-limited job is normal).

Clock-event reasons are NVML's (nvmlClocksEventReasons): "HW Slowdown" alone is not a finding —
NVML documents it as also reported during a P-state or clock change; its thermal and power-brake
sub-reasons say which it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gpuwarden.catalog.thermal import THERMAL_FILE, ThermalThresholds, thermal_thresholds_for
from gpuwarden.health.rules.common import (
    Context,
    PointRule,
    Verdict,
    answering,
    celsius,
    device_ref,
    evidence,
    gpu_label,
    make,
    power_limit,
    under_load,
)
from gpuwarden.types.health import Confidence, Evidence, Finding
from gpuwarden.types.telemetry import DeviceEvent, DeviceSample

_THERMAL_REASONS = ("hw_thermal_slowdown", "sw_thermal_slowdown")


def _reasons_read(sample: DeviceSample) -> bool:
    return answering(sample) and sample.clock_event_reasons is not None


def _reasons_text(reasons: tuple[str, ...]) -> str:
    return ", ".join(reasons) or "none"


# --- clock events: thermal slowdown


def _thermal_slowdown(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    reasons = sample.clock_event_reasons or ()
    active = [r for r in _THERMAL_REASONS if r in reasons]
    if not active:
        return
    proof: list[Evidence] = [
        evidence(ctx, "clock_event_reasons", _reasons_text(reasons), f"{' + '.join(active)} active")
    ]
    temperature = celsius(sample.temperature_gpu_celsius)
    if temperature is not None:
        proof.append(evidence(ctx, "temperature_gpu_celsius", temperature))
    clocks = ""
    if sample.clock_sm_mhz is not None and sample.clock_sm_max_mhz:
        clocks = f", SM clock {sample.clock_sm_mhz:.0f}/{sample.clock_sm_max_mhz:.0f} MHz"
        proof.append(evidence(ctx, "clock_sm_mhz", sample.clock_sm_mhz))
    hot = f" at {temperature:.0f} °C" if temperature is not None else ""
    title = f"{gpu_label(sample)}: {' and '.join(active).replace('_', ' ')}{hot}{clocks}"
    yield make(Verdict("thermal-slowdown", title, tuple(proof)), device_ref(sample, ctx))


CLOCK_EVENTS = PointRule(
    reports=_reasons_read,
    judge=_thermal_slowdown,
    missing="clock-event (throttle) reasons not reported by this capture (the table, dmon and "
    "old dcgm-exporter scrapes do not print them)",
)


# --- clock events counted by the reader (dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_COUNT / _TOTAL)

# nvml.h nvmlClocksEventReason* bits a counted stretch is a finding for, and the finding's code.
# The SW power cap (0x4) is a job at its power limit, normal; "HW Slowdown" alone (0x8) is also
# reported around P-state changes (see above); the reader makes no event of the benign bits.
PAST_EVENT_BITS: dict[int, tuple[str, str]] = {
    0x20: ("thermal-slowdown", "sw_thermal_slowdown"),
    0x40: ("thermal-slowdown", "hw_thermal_slowdown"),
    0x80: ("power-brake", "hw_power_brake_slowdown"),
}


def counted_clock_event_findings(
    events: Sequence[DeviceEvent], samples: Sequence[DeviceSample], ctx: Context
) -> list[Finding]:
    """Thermal slowdown and power brake that the reader counted (a CLOCK_EVENT per reason whose
    count rose), one finding per GPU and code: it happened within the count's window or since
    the exporter started, not necessarily now, so medium confidence with the counts as evidence.
    A reason the GPU's own clock-event mask shows active now is the point rule's, not repeated."""
    by_uuid = {s.info.uuid: s for s in samples}
    counted: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for event in events:
        code_reason = PAST_EVENT_BITS.get(event.code or 0)
        sample = by_uuid.get(event.uuid or "")
        if code_reason is None or sample is None:
            continue
        code, reason = code_reason
        if reason not in (sample.clock_event_reasons or ()):
            counted.setdefault((sample.info.uuid, code), []).append((reason, event.message))
    found: list[Finding] = []
    for (uuid, code), seen in counted.items():
        sample = by_uuid[uuid]
        proof = tuple(
            evidence(ctx, "clock_event_count", message, "counted, not the mask now")
            for _, message in dict(seen).items()
        )
        reasons = " and ".join(dict.fromkeys(r.replace("_", " ") for r, _ in seen))
        title = f"{gpu_label(sample)}: {reasons} counted by the exporter, not necessarily now"
        verdict = Verdict(code, title, proof, confidence=Confidence.MEDIUM)
        found.append(make(verdict, device_ref(sample, ctx)))
    return found


# --- temperature


def _near_slowdown(
    temperature: float | None, sample: DeviceSample, ctx: Context
) -> tuple[Evidence, str] | None:
    """Within the headroom of the HW slowdown threshold the board states."""
    headroom = ctx.thresholds.gpu_temperature_slowdown_headroom_celsius
    slowdown = celsius(sample.temperature_slowdown_celsius)
    if temperature is None or slowdown is None or temperature < slowdown - headroom:
        return None
    line = slowdown - headroom
    detail = f"{temperature:.0f} °C ≥ {line:.0f} °C = slowdown {slowdown:.0f} − {headroom:g}"
    proof = evidence(ctx, "temperature_gpu_celsius", temperature, detail)
    return proof, f"GPU at {temperature:.0f} °C (slowdown {slowdown:.0f} °C)"


def _max_operating_margin(temperature: float | None, sample: DeviceSample) -> float | None:
    """Degrees left before the max operating temperature: the T.Limit margin, else the absolute
    "GPU Max Operating Temp" less the temperature."""
    if sample.temperature_margin_celsius is not None:
        return sample.temperature_margin_celsius
    limit = celsius(sample.temperature_gpu_max_celsius)
    return None if limit is None or temperature is None else limit - temperature


def _near_max_operating(
    temperature: float | None, sample: DeviceSample, ctx: Context
) -> tuple[Evidence, str] | None:
    """Within the margin of the max operating temperature, where the driver's SW thermal
    slowdown starts capping clocks (nvidia-smi(1), "SW Thermal Slowdown": "GPU temperature is
    higher than Max Operating Temp") — on some boards far below the HW slowdown threshold."""
    least = ctx.thresholds.gpu_temperature_margin_min_celsius
    margin = _max_operating_margin(temperature, sample)
    if margin is None or margin > least:
        return None
    detail = (
        f"T.Limit margin {margin:.0f} °C ≤ {least:g} °C "
        "(degrees left before the max operating temperature)"
    )
    proof = evidence(ctx, "temperature_margin_celsius", margin, detail)
    return proof, f"GPU {margin:.0f} °C from its max operating temperature"


# A part of the temperature finding: the evidence it rests on and its words for the title.
_Part = tuple[tuple[Evidence, ...], str]


def _single(part: tuple[Evidence, str] | None) -> _Part | None:
    return None if part is None else ((part[0],), part[1])


def _gpu_temperature_check(sample: DeviceSample, ctx: Context) -> _Part | None:
    """The GPU part: against the slowdown threshold and the max operating temperature (T.Limit
    margin) the board states, else those the catalog holds for its model, else the fallback
    degrees. Relative T.Limit thresholds (negative numbers) are margins, never degrees: a
    slowdown threshold ≤ 0 °C is not used as one."""
    temperature = celsius(sample.temperature_gpu_celsius)
    near = _near_slowdown(temperature, sample, ctx) or _near_max_operating(temperature, sample, ctx)
    stated = (
        celsius(sample.temperature_slowdown_celsius) is not None
        or _max_operating_margin(temperature, sample) is not None
    )
    if near is not None or stated:
        return _single(near)
    known = thermal_thresholds_for(sample.info.name)
    if known is not None and (known.slowdown_celsius or known.max_operating_celsius):
        return _near_catalog_line(temperature, known, ctx)
    fallback = ctx.thresholds.gpu_temperature_fallback_celsius
    if temperature is None or temperature < fallback:
        return None
    detail = (
        f"{temperature:.0f} °C ≥ {fallback:g} °C (the board states no slowdown threshold or margin)"
    )
    proof = evidence(ctx, "temperature_gpu_celsius", temperature, detail)
    return (proof,), f"GPU at {temperature:.0f} °C"


# (the degrees a GPU is near a threshold at, the threshold's name, its degrees, the distance)
_Line = tuple[float, str, float, float]


def _catalog_lines(known: ThermalThresholds, ctx: Context) -> list[_Line]:
    """Where a GPU of this model is near its thresholds: the same distances as for thresholds
    a board states (slowdown − headroom, max operating − margin)."""
    t = ctx.thresholds
    named = (
        ("slowdown", known.slowdown_celsius, t.gpu_temperature_slowdown_headroom_celsius),
        ("max operating", known.max_operating_celsius, t.gpu_temperature_margin_min_celsius),
    )
    return [(value - less, what, value, less) for what, value, less in named if value]


def _catalog_evidence(known: ThermalThresholds) -> Evidence:
    """Where the line came from: the catalog's row and the captures behind it."""
    stated = [
        f"{what} {value:.0f} °C"
        for what, value in (
            ("slowdown", known.slowdown_celsius),
            ("max operating", known.max_operating_celsius),
        )
        if value
    ]
    return Evidence(
        field="catalog.gpu_thermal",
        value=f"{known.smi_name}: {', '.join(stated)}",
        source=f"catalog:{THERMAL_FILE}",
        detail=(
            "derived from the T.Limit margins of real captures at rest"
            if known.derived_from_tlimit
            else "as printed by real captures"
        )
        + f" (driver {', '.join(known.drivers)}): "
        + "; ".join(known.captures),
    )


def _near_catalog_line(
    temperature: float | None, known: ThermalThresholds, ctx: Context
) -> _Part | None:
    """Within the headroom of the slowdown threshold or the margin of the max operating
    temperature that real captures of this model print (the capture itself states neither);
    the lower line decides."""
    if temperature is None:
        return None
    crossed = [line for line in _catalog_lines(known, ctx) if temperature >= line[0]]
    if not crossed:
        return None
    line, what, value, less = min(crossed)
    detail = (
        f"{temperature:.0f} °C ≥ {line:.0f} °C = {what} {value:.0f} − {less:g} (the capture "
        f"states no threshold: the catalog's for a {known.smi_name})"
    )
    proof = evidence(ctx, "temperature_gpu_celsius", temperature, detail)
    title = f"GPU at {temperature:.0f} °C ({what} {value:.0f} °C for its model)"
    return (proof, _catalog_evidence(known)), title


def _memory_temperature_check(sample: DeviceSample, ctx: Context) -> _Part | None:
    t = ctx.thresholds
    temperature = celsius(sample.temperature_memory_celsius)
    limit = celsius(sample.temperature_memory_max_celsius)
    if temperature is None or limit is None:
        return None
    line = limit - t.memory_temperature_headroom_celsius
    if temperature < line:
        return None
    detail = (
        f"{temperature:.0f} °C ≥ {line:.0f} °C = memory max {limit:.0f} − "
        f"{t.memory_temperature_headroom_celsius:g}"
    )
    proof = evidence(ctx, "temperature_memory_celsius", temperature, detail)
    return (proof,), f"memory at {temperature:.0f} °C (max {limit:.0f} °C)"


def _temperature_reports(sample: DeviceSample) -> bool:
    return answering(sample) and (
        celsius(sample.temperature_gpu_celsius) is not None
        or sample.temperature_margin_celsius is not None
        or celsius(sample.temperature_memory_celsius) is not None
    )


def _temperature(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    parts = [
        part
        for part in (_gpu_temperature_check(sample, ctx), _memory_temperature_check(sample, ctx))
        if part is not None
    ]
    if not parts:
        return
    title = f"{gpu_label(sample)}: {' and '.join(words for _, words in parts)}"
    yield make(
        Verdict("temperature-high", title, tuple(p for proofs, _ in parts for p in proofs)),
        device_ref(sample, ctx),
    )


TEMPERATURE = PointRule(
    reports=_temperature_reports,
    judge=_temperature,
    missing="no temperature reported by this capture",
)


# --- power: HW power brake, SW power cap under load


def _power(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    reasons = sample.clock_event_reasons or ()
    text = _reasons_text(reasons)
    if "hw_power_brake_slowdown" in reasons:
        yield make(
            Verdict(
                "power-brake",
                f"{gpu_label(sample)}: HW power brake slowdown active",
                (evidence(ctx, "clock_event_reasons", text, "hw_power_brake_slowdown active"),),
            ),
            device_ref(sample, ctx),
        )
    if "sw_power_cap" in reasons and under_load(sample, ctx.thresholds):
        yield make(_power_capped(sample, ctx, text), device_ref(sample, ctx))


def _power_capped(sample: DeviceSample, ctx: Context, reasons: str) -> Verdict:
    proof = [evidence(ctx, "clock_event_reasons", reasons, "sw_power_cap active while busy")]
    limit = power_limit(sample)
    at = ""
    if sample.power_draw_watts is not None and limit is not None:
        at = f" at {sample.power_draw_watts:.0f}/{limit:.0f} W"
        proof.append(evidence(ctx, "power_draw_watts", sample.power_draw_watts))
        proof.append(evidence(ctx, "power_enforced_limit_watts", limit))
    if sample.clock_sm_mhz is not None and sample.clock_sm_max_mhz:
        at += f", SM clock {sample.clock_sm_mhz:.0f}/{sample.clock_sm_max_mhz:.0f} MHz"
    return Verdict(
        "power-capped", f"{gpu_label(sample)}: held at its power limit{at}", tuple(proof)
    )


POWER = PointRule(
    reports=_reasons_read,
    judge=_power,
    missing="clock-event (throttle) reasons not reported by this capture, so power brake and "
    "power cap cannot be told",
)
