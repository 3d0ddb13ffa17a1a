"""What every rule shares: where a reading came from, which device a finding is about, how a
finding is built from its code's row, and the reading tests several rules need ("is this GPU
under load", "is this temperature a reading").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.health.window import Window
from gpuwarden.types.health import Confidence, DeviceRef, Evidence, Finding, Severity
from gpuwarden.types.telemetry import (
    DeviceSample,
    DeviceState,
    MigDeviceSample,
    Snapshot,
    real_uuid,
)

EvidenceValue = float | int | str | bool | None

# A sensor that is absent still prints a number on some boards (0 °C: vGPU guests, GDDR memory
# on T4/Ada via DCGM); DCGM treats a memory temperature above 200 °C as invalid. Neither is a
# reading (diagnosis.md §2: a 0 °C reading is never a finding).
_SENSOR_MIN_CELSIUS = 0.0
_SENSOR_MAX_CELSIUS = 200.0
# NVML's P-states: P0/P1 are the performance states a busy GPU runs in.
_BUSY_PSTATES = frozenset({"P0", "P1"})
# Process types (nvidia-smi "Type", NVML): C compute, G graphics, M MPS. A desktop's compositor
# (G, or C+G on Windows/WDDM where every windowed app is one) does not "hold" a GPU for a job.
_JOB_PROCESS_KINDS = frozenset({"C", "M", "M+C"})


@dataclass(frozen=True, slots=True)
class Context:
    """What a rule needs besides the reading: the thresholds and where the reading came from."""

    thresholds: Thresholds
    host: str | None  # None when the input does not say (a saved nvidia-smi file)
    source: str  # "nvml", "smi:/path/q.txt", "dcgm:http://…/metrics", "sim:…"

    @classmethod
    def of(cls, snapshot: Snapshot, thresholds: Thresholds) -> Context:
        return cls(thresholds, snapshot.host or None, source_of(snapshot))


def source_of(snapshot: Snapshot) -> str:
    """Backend and file/URL, once: "smi:/tmp/q.txt", "sim:fake-load?seed=0&gpus=1", "nvml"."""
    where = snapshot.source
    if not where:
        return snapshot.backend
    return where if where.startswith(f"{snapshot.backend}:") else f"{snapshot.backend}:{where}"


def device_ref(sample: DeviceSample, ctx: Context, mig: MigDeviceSample | None = None) -> DeviceRef:
    info = sample.info
    return DeviceRef(
        index=info.index,
        uuid=real_uuid(info.uuid),
        pci_bus_id=info.pci_bus_id,
        name=info.name or None,
        host=ctx.host,
        mig_profile=mig.profile if mig else info.mig_profile,
        gpu_instance_id=mig.gpu_instance_id if mig else info.gpu_instance_id,
    )


def gpu_label(sample: DeviceSample) -> str:
    info = sample.info
    if info.mig_profile is not None:
        return f"GPU {info.index} MIG {info.mig_profile}"
    return f"GPU {info.index}"


def evidence(ctx: Context, name: str, value: EvidenceValue, detail: str = "") -> Evidence:
    return Evidence(field=name, value=value, source=ctx.source, detail=detail)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The parts of a finding a rule decides; ``make`` adds the code's fixed words."""

    code: str
    title: str
    evidence: tuple[Evidence, ...]
    severity: Severity | None = None  # None: the code's default
    confidence: Confidence = Confidence.HIGH
    method: str | None = None
    cause: str | None = None  # None: the code's cause; a rule that knows more says more
    remedy: str | None = None
    action: str | None = None  # None: the code's bucket ...
    no_action: bool = False  # ... unless the reading cannot say an action is due
    first_seen_s: float | None = None
    last_seen_s: float | None = None


def make(verdict: Verdict, device: DeviceRef | None) -> Finding:
    row = CODES[verdict.code]
    return Finding(
        code=verdict.code,
        severity=verdict.severity or row.severity,
        title=verdict.title,
        cause=verdict.cause or row.cause,
        remedy=verdict.remedy or row.remedy,
        device=device,
        evidence=verdict.evidence,
        action=None if verdict.no_action else verdict.action or row.action,
        confidence=verdict.confidence,
        method=verdict.method,
        first_seen_s=verdict.first_seen_s,
        last_seen_s=verdict.last_seen_s,
    )


@dataclass(frozen=True, slots=True)
class PointRule:
    """A family of rules over one reading of one device."""

    reports: Callable[[DeviceSample], bool]  # does the reading carry this family's signal?
    judge: Callable[[DeviceSample, Context], Iterable[Finding]]
    missing: str  # the skip reason when no device reports the signal
    # what a reading that raised nothing still shows (a fault's history below any line): a
    # sentence for the check's detail, the evidence a pass rests on; None when there is none
    observed: Callable[[DeviceSample, Context], str | None] | None = None


@dataclass(frozen=True, slots=True)
class WindowOutcome:
    """What a family of windowed rules concluded over a window."""

    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()  # one sentence per rule: judged how, or why not
    judged: bool = False  # at least one rule had the evidence it needs


WindowRule = Callable[[Window, Thresholds, Context], WindowOutcome]


@dataclass(frozen=True, slots=True)
class Family:
    """One doctor check: its point rules over the newest reading and its windowed rules."""

    check: str
    point: PointRule | None = None
    window: WindowRule | None = None


# --- reading tests shared by several rules


def answering(sample: DeviceSample) -> bool:
    """The device answered (a lost one has no readings to judge; the devices check reports it)."""
    return sample.state is DeviceState.OK


def celsius(value: float | None) -> float | None:
    """A temperature that is a reading, or None (absent sensor, N/A, nonsense)."""
    if value is None or not _SENSOR_MIN_CELSIUS < value < _SENSOR_MAX_CELSIUS:
        return None
    return value


_ENGINES = (
    "gpu_utilization_percent",
    "encoder_utilization_percent",
    "decoder_utilization_percent",
)


def busiest_engine(sample: DeviceSample) -> tuple[str, float] | None:
    """The busiest engine's utilization field and value: the SMs (utilization.gpu) or a video
    engine (an NVENC job reads 8 % GPU and 100 % encoder — busy)."""
    known = [(name, value) for name in _ENGINES if (value := getattr(sample, name)) is not None]
    return max(known, key=lambda pair: pair[1]) if known else None


def busy_percent(sample: DeviceSample) -> float | None:
    busiest = busiest_engine(sample)
    return busiest[1] if busiest else None


def under_load(sample: DeviceSample, t: Thresholds) -> bool | None:
    """Busy enough that the driver holds links and clocks at full speed; None = cannot tell.

    Utilization decides when reported; otherwise a P0/P1 state counts only with the clock-event
    reasons read and 'GPU idle' not among them (an H100 or A100 idles in P0)."""
    busy = busy_percent(sample)
    if busy is not None:
        return busy >= t.load_utilization_min_percent
    if sample.pstate is None or sample.clock_event_reasons is None:
        return None
    return sample.pstate in _BUSY_PSTATES and "gpu_idle" not in sample.clock_event_reasons


def job_processes(sample: DeviceSample) -> tuple[str, ...] | None:
    """Names of the compute processes holding the GPU; None when the reading lists none at all."""
    if sample.processes is None:
        return None
    return tuple(
        p.name or f"pid {p.pid}"
        for p in sample.processes
        if p.kind is None or p.kind.upper() in _JOB_PROCESS_KINDS
    )


def power_limit(sample: DeviceSample) -> float | None:
    limit = sample.power_enforced_limit_watts or sample.power_limit_watts
    return limit if limit and limit > 0 else None


def fraction_text(value: float, digits: int = 0) -> str:
    return f"{100 * value:.{digits}f} %"


def compared_fractions(value: float, limit: float) -> tuple[str, str]:
    """A reading and the limit it crossed, as percentages with the fewest decimals (up to two) that
    tell them apart: 95.4 % against a limit of 95 % must not read "95 % > 95 %". Still alike at
    two (1 MiB over 95 % of an 80 GiB GPU reads 95.0012 %), the reading is shown one step of the
    last decimal past the limit, on its own side: the text keeps the comparison the verdict made."""
    digits = next(
        (d for d in (0, 1, 2) if fraction_text(value, d) != fraction_text(limit, d)), None
    )
    if digits is None:
        digits, step = 2, 0.0001  # 0.01 %, the last decimal printed
        value = round(limit / step) * step + (step if value > limit else -step)
    return fraction_text(value, digits), fraction_text(limit, digits)
