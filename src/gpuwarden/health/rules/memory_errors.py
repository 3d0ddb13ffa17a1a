"""Memory errors: uncorrectable ECC, page retirement (pre-Ampere), row remapping (Ampere+), the SRAM
threshold (Hopper+), and corrected errors rising over a window.

Sources: NVIDIA "GPU Memory Error Management" (row remapping, RMA thresholds, SRAM threshold),
NVIDIA Dynamic Page Retirement, DCGM's health watch (MonitorMem) and its hardware limits.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuwarden.health.rules.common import (
    Context,
    PointRule,
    Verdict,
    WindowOutcome,
    answering,
    device_ref,
    evidence,
    gpu_label,
    make,
)
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.health.window import Window, counter_increase, shortfall
from gpuwarden.types.health import Finding
from gpuwarden.types.telemetry import DeviceSample

_SECONDS_PER_MINUTE = 60.0


# --- ecc


def _ecc_reports(sample: DeviceSample) -> bool:
    return answering(sample) and (
        sample.ecc_errors_uncorrected_volatile is not None or sample.ecc_mode_enabled is not None
    )


def _ecc(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    count = sample.ecc_errors_uncorrected_volatile
    if not count or count <= 0:
        return
    proof = [
        evidence(
            ctx,
            "ecc_errors_uncorrected_volatile",
            count,
            f"{count} > 0 since the last driver load or GPU reset",
        )
    ]
    if sample.ecc_errors_uncorrected_aggregate is not None:
        proof.append(
            evidence(
                ctx, "ecc_errors_uncorrected_aggregate", sample.ecc_errors_uncorrected_aggregate
            )
        )
    title = f"{gpu_label(sample)}: {count} uncorrectable ECC error(s) since the last reset"
    yield make(Verdict("ecc-uncorrectable", title, tuple(proof)), device_ref(sample, ctx))


def _ecc_history(sample: DeviceSample, ctx: Context) -> str | None:
    """Uncorrectable errors in the GPU's life but none since the last reset: handled then (the
    page retired or the row remapped at that reset), worth knowing, not a fault now."""
    lifetime = sample.ecc_errors_uncorrected_aggregate
    if not lifetime or lifetime <= 0 or sample.ecc_errors_uncorrected_volatile != 0:
        return None
    return (
        f"{gpu_label(sample)}: {lifetime} uncorrectable ECC error(s) in its life (aggregate), "
        "none since the last reset"
    )


ECC = PointRule(
    reports=_ecc_reports,
    judge=_ecc,
    observed=_ecc_history,
    missing="ECC not reported by this capture (consumer GPUs have no ECC; the table and dmon "
    "formats do not print it)",
)


# --- retired pages (pre-Ampere; Ampere+ reports them N/A and uses row remapping)


def _retired_reports(sample: DeviceSample) -> bool:
    return answering(sample) and (
        sample.retired_pages_pending is not None
        or sample.retired_pages_double_bit is not None
        or sample.retired_pages_single_bit is not None
    )


def _retired(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    t = ctx.thresholds
    dbe, sbe = sample.retired_pages_double_bit, sample.retired_pages_single_bit
    if sample.retired_pages_pending:
        yield make(
            Verdict(
                "retired-pages-pending",
                f"{gpu_label(sample)}: a page retirement waits for a GPU reset",
                (evidence(ctx, "retired_pages_pending", True),),
            ),
            device_ref(sample, ctx),
        )
    total = (dbe or 0) + (sbe or 0)
    if (dbe is not None and dbe >= t.retired_pages_dbe_limit_count) or (
        total >= t.retired_pages_total_limit_count
    ):
        proof = (
            evidence(
                ctx,
                "retired_pages_double_bit",
                dbe,
                f"≥ {t.retired_pages_dbe_limit_count} from double-bit errors is the RMA line",
            ),
            evidence(
                ctx,
                "retired_pages_single_bit",
                sbe,
                f"single + double = {total}; ≥ {t.retired_pages_total_limit_count} fills the table",
            ),
        )
        title = f"{gpu_label(sample)}: {total} retired pages ({dbe or 0} from double-bit errors)"
        yield make(Verdict("retired-pages-limit", title, proof), device_ref(sample, ctx))


def _retired_history(sample: DeviceSample, ctx: Context) -> str | None:
    dbe, sbe = sample.retired_pages_double_bit or 0, sample.retired_pages_single_bit or 0
    if dbe + sbe <= 0:
        return None
    line = ctx.thresholds.retired_pages_dbe_limit_count
    return (
        f"{gpu_label(sample)}: {dbe + sbe} page(s) retired ({dbe} from double-bit errors), "
        f"below the RMA line of {line}"
    )


RETIRED_PAGES = PointRule(
    reports=_retired_reports,
    judge=_retired,
    observed=_retired_history,
    missing="retired pages not reported by this capture (Ampere and newer remap rows instead; "
    "consumer GPUs have no ECC)",
)


# --- row remapping (Ampere+)


def _remap_reports(sample: DeviceSample) -> bool:
    return answering(sample) and (
        sample.remapped_rows_pending is not None
        or sample.remapped_rows_failure is not None
        or sample.remapped_rows_banks_exhausted is not None
    )


def _remap(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    exhausted = sample.remapped_rows_banks_exhausted
    failure = sample.remapped_rows_failure
    broken = []
    if failure:
        broken.append(evidence(ctx, "remapped_rows_failure", True, "a row remap failed"))
    if exhausted and exhausted > 0:
        broken.append(
            evidence(
                ctx,
                "remapped_rows_banks_exhausted",
                exhausted,
                f"{exhausted} bank(s) in the histogram's 'None' bucket: no spare rows left",
            )
        )
    if broken:
        what = "a row remap failed" if failure else f"{exhausted} memory bank(s) out of spare rows"
        yield make(
            Verdict("row-remap-failure", f"{gpu_label(sample)}: {what}", tuple(broken)),
            device_ref(sample, ctx),
        )
    if sample.remapped_rows_pending:
        proof = [evidence(ctx, "remapped_rows_pending", True, "applied at the next GPU reset")]
        if sample.remapped_rows_uncorrectable is not None:
            proof.append(
                evidence(ctx, "remapped_rows_uncorrectable", sample.remapped_rows_uncorrectable)
            )
        yield make(
            Verdict(
                "row-remap-pending",
                f"{gpu_label(sample)}: a row remap waits for a GPU reset",
                tuple(proof),
            ),
            device_ref(sample, ctx),
        )


def _remap_history(sample: DeviceSample, ctx: Context) -> str | None:
    """Rows remapped with spare rows left: the memory repaired itself, as designed."""
    corrected = sample.remapped_rows_correctable or 0
    uncorrected = sample.remapped_rows_uncorrectable or 0
    if corrected + uncorrected <= 0:
        return None
    return (
        f"{gpu_label(sample)}: {corrected + uncorrected} row(s) remapped ({uncorrected} after "
        "uncorrectable errors), spare rows left"
    )


ROW_REMAP = PointRule(
    reports=_remap_reports,
    judge=_remap,
    observed=_remap_history,
    missing="row remapping not reported by this capture (Ampere and newer data-center GPUs "
    "report it; consumer GPUs and older drivers do not)",
)


# --- SRAM threshold (Hopper+)


def _sram_reports(sample: DeviceSample) -> bool:
    return answering(sample) and sample.sram_threshold_exceeded is not None


def _sram(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    if sample.sram_threshold_exceeded:
        yield make(
            Verdict(
                "sram-threshold-exceeded",
                f"{gpu_label(sample)}: SRAM uncorrectable-error threshold exceeded",
                (evidence(ctx, "sram_threshold_exceeded", True, "'SRAM Threshold Exceeded: Yes'"),),
            ),
            device_ref(sample, ctx),
        )


SRAM = PointRule(
    reports=_sram_reports,
    judge=_sram,
    missing="the SRAM threshold flag is not reported by this capture (Hopper and newer, recent "
    "drivers)",
)


# --- corrected errors over a window


def correctable_storm(window: Window, t: Thresholds, ctx: Context) -> WindowOutcome:
    """Corrected ECC errors rising faster than DCGM's health watch allows (10 in its 1-minute
    window): over a window shorter than a minute, more than the per-minute limit in the window;
    over a longer one, the rate."""
    findings: list[Finding] = []
    judged = False
    for series in window.series:
        grew = counter_increase(series.samples, lambda s: s.ecc_errors_corrected_volatile)
        if grew is None or grew.span_s <= 0:
            continue
        judged = True
        minutes = max(1.0, grew.span_s / _SECONDS_PER_MINUTE)
        per_minute = grew.amount / minutes
        if per_minute < t.ecc_corrected_max_per_minute:
            continue
        sample = series.newest
        proof = (
            evidence(
                ctx,
                "ecc_errors_corrected_volatile",
                sample.ecc_errors_corrected_volatile,
                f"+{grew.amount:.0f} over {grew.span_s:.0f} s = {per_minute:.1f}/min "
                f"≥ {t.ecc_corrected_max_per_minute:g}/min",
            ),
        )
        verdict = Verdict(
            "ecc-correctable-storm",
            f"{gpu_label(sample)}: corrected ECC errors +{grew.amount:.0f} in {grew.span_s:.0f} s",
            proof,
            first_seen_s=grew.first_s,
            last_seen_s=grew.last_s,
        )
        findings.append(make(verdict, device_ref(sample, ctx)))
    if judged:
        note = "corrected-error rate: judged over the window"
    else:
        note = "corrected-error rate: " + (
            shortfall(len(window), window.span_s, 2, 0.0) or "no corrected-ECC counter read"
        )
    return WindowOutcome(tuple(findings), (note,), judged)
