"""Judge readings: every rule family over a snapshot (point rules) or a window of snapshots (the
newest snapshot's point rules plus the windowed rules over all of them).

A ``HealthResult`` carries the findings (most severe first, then by device index) and one
``Check`` per family — pass, warn, fail, or skip with the reason when no device reports the
signal (NVIDIA's health validation: a signal that cannot be read is never a pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuwarden.health.checks import check_of
from gpuwarden.health.devices import attach_devices
from gpuwarden.health.rules import FAMILIES
from gpuwarden.health.rules.common import Context, Family, PointRule
from gpuwarden.health.rules.thermal_power import CLOCK_EVENTS, counted_clock_event_findings
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, Thresholds
from gpuwarden.health.window import Window, build_window
from gpuwarden.health.xid import groups_from_events, last_xid_findings, xid_findings
from gpuwarden.types.health import Check, CheckStatus, Finding, KernelLogReport
from gpuwarden.types.telemetry import DeviceSample, EventKind, Snapshot

ONE_READING = (
    "windowed rules need a series of readings (watch, a recorded run, an nvidia-smi -l or "
    "dmon log); this input is one reading"
)
_TITLES_IN_DETAIL = 4
_LAST = 1 << 30  # sorts findings about no device after every GPU


@dataclass(frozen=True, slots=True)
class HealthResult:
    findings: tuple[Finding, ...]  # most severe first, then by device index
    checks: tuple[Check, ...]  # one per rule family: pass / warn / fail / skip + detail


def evaluate_snapshot(
    snapshot: Snapshot, *, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> HealthResult:
    """The point rules over one reading; the windowed checks say they need a series."""
    result = _with_xids(_evaluate(snapshot, None, thresholds), (snapshot,))
    return _with_clock_events(result, (snapshot,), thresholds)


def evaluate_window(
    snapshots: Sequence[Snapshot], *, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> HealthResult:
    """The newest snapshot's point rules plus the windowed rules over all of them."""
    if not snapshots:
        checks = tuple(Check(f.check, CheckStatus.SKIP, "no readings") for f in FAMILIES)
        return HealthResult((), checks)
    window = build_window(snapshots)
    result = _with_xids(_evaluate(window.newest, window, thresholds), snapshots)
    return _with_clock_events(result, snapshots, thresholds)


def evaluate_readings(
    readings: Sequence[Snapshot], *, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> HealthResult:
    """The health rules over the readings: one reading → point rules, a series → a window."""
    if len(readings) > 1:
        return evaluate_window(readings, thresholds=thresholds)
    return evaluate_snapshot(readings[-1], thresholds=thresholds)


def _evaluate(newest: Snapshot, window: Window | None, t: Thresholds) -> HealthResult:
    ctx = Context.of(newest, t)
    findings: list[Finding] = []
    checks: list[Check] = []
    for family in FAMILIES:
        found, check = _judge_family(family, newest, window, t, ctx)
        findings += found
        checks.append(check)
    return HealthResult(_ordered(_unique(findings)), tuple(checks))


def _with_xids(result: HealthResult, snapshots: Sequence[Snapshot]) -> HealthResult:
    """Xids the backend reported as events (NVML's event set, dcgm-exporter's counters), judged
    like kernel-log lines. No event is no verdict: a one-shot read sees no past Xid, so the
    `xid` check comes from the kernel log (doctor), not from here."""
    events = [e for s in snapshots for e in s.events if e.kind is EventKind.XID]
    newest = snapshots[-1]
    where = newest.backend + (f":{newest.source}" if newest.source else "")
    with_events = {e.uuid for e in events}
    # a GPU without events but with a last Xid (dcgm-exporter's default gauge): it had one
    only_last = [s for s in newest.samples if s.xid_last and s.info.uuid not in with_events]
    if not events and not only_last:
        return result
    devices = [sample.info for sample in newest.samples]
    groups = groups_from_events(events, devices=devices)
    report = KernelLogReport(groups=groups)
    found = attach_devices(xid_findings(report, source=where, devices=devices), devices)
    found += last_xid_findings(only_last, where)
    said = [f"{len(events)} Xid event(s) from {where}"] if events else []
    said += [f"GPU {s.info.index}: last Xid {s.xid_last}, time unknown" for s in only_last]
    check = _check("xid", found, True, said)
    return HealthResult(_ordered(_unique([*result.findings, *found])), (*result.checks, check))


def _with_clock_events(
    result: HealthResult, snapshots: Sequence[Snapshot], t: Thresholds
) -> HealthResult:
    """Thermal slowdown and power brake the reader counted (dcgm-exporter's clock-event
    counters): findings of the clock-events family, which a capture without the mask skips."""
    events = [e for s in snapshots for e in s.events if e.kind is EventKind.CLOCK_EVENT]
    newest = snapshots[-1]
    found = counted_clock_event_findings(events, newest.samples, Context.of(newest, t))
    if not found:
        return result
    name = next(f.check for f in FAMILIES if f.point is CLOCK_EVENTS)
    before = next((c for c in result.checks if c.name == name), None)
    parts = [before.detail] if before is not None and before.status is not CheckStatus.SKIP else []
    check = _check(name, found, True, parts)
    checks = tuple(check if c.name == name else c for c in result.checks)
    if before is None:
        checks += (check,)
    return HealthResult(_ordered(_unique([*result.findings, *found])), checks)


def _judge_family(
    family: Family, newest: Snapshot, window: Window | None, t: Thresholds, ctx: Context
) -> tuple[list[Finding], Check]:
    found: list[Finding] = []
    parts: list[str] = []
    judged = False
    if family.point is not None:
        readers = [s for s in newest.samples if family.point.reports(s)]
        if readers:
            judged = True
            for sample in readers:
                found += family.point.judge(sample, ctx)
            parts.append(f"{len(readers)} device reading(s) judged")
            parts += _observed(family.point, readers, found, ctx)
        else:
            parts.append(family.point.missing)
    if family.window is not None:
        if window is None:
            parts.append(ONE_READING)
        else:
            outcome = family.window(window, t, ctx)
            judged = judged or outcome.judged
            found += outcome.findings
            parts += outcome.notes
    return found, _check(family.check, found, judged, parts)


def _observed(
    rule: PointRule, readers: list[DeviceSample], found: list[Finding], ctx: Context
) -> list[str]:
    """The rule's sentences on the readings it raised nothing for."""
    if rule.observed is None:
        return []
    flagged = {f.device.index for f in found if f.device is not None}
    said = [
        text for s in readers if s.info.index not in flagged and (text := rule.observed(s, ctx))
    ]
    more = len(said) - _TITLES_IN_DETAIL
    return said[:_TITLES_IN_DETAIL] + ([f"{more} more GPU(s) alike"] if more > 0 else [])


def _check(name: str, found: list[Finding], judged: bool, parts: list[str]) -> Check:
    ordered = _ordered(found)
    titles = [f.title for f in ordered][:_TITLES_IN_DETAIL]
    more = len(found) - len(titles)
    detail = "; ".join(titles + ([f"{more} more"] if more > 0 else []) + parts)
    return check_of(name, ordered, detail, judged=judged)


def _identity(finding: Finding) -> tuple[str, str | None, int | None, int | None]:
    device = finding.device
    if device is None:
        return finding.code, None, None, None
    return finding.code, device.uuid or device.pci_bus_id, device.index, device.gpu_instance_id


def _unique(findings: list[Finding]) -> list[Finding]:
    """One finding per code and device: a backend that reports a MIG instance both as a device
    and inside its parent must not double it."""
    seen: dict[tuple[str, str | None, int | None, int | None], Finding] = {}
    for finding in findings:
        seen.setdefault(_identity(finding), finding)
    return list(seen.values())


def finding_order(f: Finding) -> tuple[int, int, int, str]:
    """The order findings are shown in: worst first, then by GPU (node-wide findings after the
    GPUs), MIG instance and code."""
    device = f.device
    index = device.index if device is not None and device.index is not None else _LAST
    instance = device.gpu_instance_id if device and device.gpu_instance_id is not None else -1
    return (-f.severity.rank, index, instance, f.code)


def _ordered(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=finding_order))
