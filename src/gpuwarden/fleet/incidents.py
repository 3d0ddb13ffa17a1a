"""Xid and ECC incidents with their timeline, the memory-health states, and ``rma-candidate``.

Xids are read from the most exact source a GPU has: gpuwarden's counter ``gpuwarden_xid_total``,
dcgm-exporter's counter ``DCGM_EXP_XID_ERRORS_TOTAL``, its windowed count
``DCGM_EXP_XID_ERRORS_COUNT``, and last the default ``DCGM_FI_DEV_XID_ERRORS`` gauge, whose value
is only the LAST Xid: a repeat of the same Xid does not change it, so its counts are lower bounds
(the findings say so). Severity and action come from the Xid catalog; Xid 79 is ``gpu-lost``.

RMA criteria (diagnosis.md §2 ``rma-candidate``): a fatal Xid ≥ 5 times within 24 h, uncorrectable
ECC in two episodes or more, a row-remap failure, ≥ 60 pages retired for DBE, or SRAM threshold
exceeded (from gpuwarden's exporter). Pure.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from gpuwarden.catalog.xid import CATALOG_URL, GPU_LOST_XID, XidInfo, xid_info, xid_severity
from gpuwarden.fleet.devices import device_ref, gpu_label
from gpuwarden.fleet.model import Event, FleetData, FleetFinding, GpuId, Incident, StateSpan
from gpuwarden.fleet.queries import EVENT_SOURCE, EVENT_SOURCES
from gpuwarden.fleet.thresholds import FleetThresholds
from gpuwarden.types.health import Confidence, Evidence, Finding, Severity

SBE_KIND = "ecc-correctable"
SRAM_CODE = "sram-threshold-exceeded"
# gpuwarden findings that are RMA criteria in themselves (the exporter's gpuwarden_finding)
RMA_FINDING_CODES = frozenset({SRAM_CODE, "memory-unrepairable"})
RMA_REMEDY = (
    "move the jobs off this GPU (drain the node), run NVIDIA's field diagnostics (`dcgmi diag -r "
    "3`), and open an RMA with the board's serial number and this evidence"
)
_STATE_FINDINGS = {
    "row-remap-failure": (
        Severity.CRITICAL,
        "a row remap failed: the GPU has no spare row left for a failing memory row",
        "drain the GPU; it meets NVIDIA's RMA criterion for row-remap failures",
    ),
    "row-remap-pending": (
        Severity.WARNING,
        "a memory row remap is waiting for a GPU reset",
        "reset the GPU when it is idle (nvidia-smi -r, or reboot the node)",
    ),
    "retired-pages-pending": (
        Severity.WARNING,
        "a memory page is waiting for retirement (pre-Ampere)",
        "reset the GPU when it is idle (nvidia-smi -r, or reboot the node)",
    ),
}


def _kind(source: str) -> str:
    return EVENT_SOURCE[source].kind


def _last_value(source: str) -> bool:
    """Read from the last-Xid gauge: its counts are lower bounds."""
    return EVENT_SOURCE[source].last_value


def _chosen(events: Iterable[Event]) -> list[Event]:
    """Per GPU and kind, the events of the most exact source it has (``EVENT_SOURCES``' order:
    Xids from a counter before the last-Xid gauge, DBE from volatile before aggregate)."""
    by_gpu: dict[str, dict[str, list[Event]]] = defaultdict(lambda: defaultdict(list))
    for event in events:
        by_gpu[event.uuid][event.source].append(event)
    kept: list[Event] = []
    for sources in by_gpu.values():
        kinds: set[str] = set()
        for source in EVENT_SOURCES:
            if sources.get(source.name) and source.kind not in kinds:
                kinds.add(source.kind)
                kept.extend(sources[source.name])
    return kept


def _episodes(times: Sequence[int], gap_s: float) -> int:
    return 1 + sum(1 for a, b in itertools.pairwise(times) if b - a > gap_s)


def incidents(data: FleetData, t: FleetThresholds) -> tuple[Incident, ...]:
    ends = [end for _, end in data.window.buckets()]
    starts = [start for start, _ in data.window.buckets()]
    grouped: dict[tuple[str, str, str, int | None], list[Event]] = defaultdict(list)
    for event in _chosen(data.events):
        grouped[(event.uuid, _kind(event.source), event.source, event.xid)].append(event)
    out = []
    for (uuid, kind, source, xid), events in grouped.items():
        events.sort(key=lambda e: e.at_s)
        per_bucket: dict[int, float] = defaultdict(float)
        for event in events:
            index = min(bisect.bisect_left(ends, event.at_s), len(ends) - 1)
            per_bucket[starts[index]] += event.amount
        times = [e.at_s for e in events]
        gpu = data.gpus.get(uuid) or GpuId(uuid, None, None, None)
        out.append(
            Incident(
                kind=kind,
                gpu=gpu,
                source=source,
                count=sum(e.amount for e in events),
                first_seen_s=times[0],
                last_seen_s=times[-1],
                timeline=tuple(sorted(per_bucket.items())),
                xid=xid,
                episodes=_episodes(times, t.incident_episode_gap_s),
            )
        )
    return tuple(sorted(out, key=lambda i: (i.first_seen_s, i.gpu.uuid, i.kind, i.xid or 0)))


def _counted(incident: Incident) -> str:
    count = f"{incident.count:g}×"
    return f"≥ {count}" if _last_value(incident.source) else count


def _xid_text(xid: int | None, info: XidInfo | None) -> tuple[str, str, str]:
    """(name, cause, remedy) of an Xid from the catalog."""
    if info is None:
        return (
            "not in NVIDIA's Xid catalog",
            f"Xid {xid} is not in NVIDIA's catalog",
            "see NVIDIA's Xid catalog",
        )
    cause = info.meaning + (f"; likely {info.likely_cause}" if info.likely_cause else "")
    remedy = info.recommended_action or "see NVIDIA's Xid catalog"
    if info.immediate_action:
        remedy += f" (NVIDIA: {info.immediate_action})"
    return info.mnemonic, cause, remedy


def _xid_finding(incident: Incident) -> Finding:
    xid = incident.xid
    info = xid_info(xid) if xid is not None else None
    lost = xid == GPU_LOST_XID
    name, cause, remedy = _xid_text(xid, info)
    if lost:
        severity = Severity.CRITICAL
    else:
        severity = xid_severity(xid) if xid is not None else Severity.WARNING
    gauge = _last_value(incident.source)
    confidence = Confidence.LOW if info is None else Confidence.MEDIUM if gauge else Confidence.HIGH
    detail = (
        "DCGM_FI_DEV_XID_ERRORS holds the last Xid only: repeats of the same Xid are not seen"
        if gauge
        else f"{incident.episodes} episode(s)"
    )
    where = gpu_label(incident.gpu, incident.gpu.uuid)
    return Finding(
        code="gpu-lost" if lost else "xid",
        severity=severity,
        title=f"Xid {xid} ({name}) {_counted(incident)} on {where}",
        cause=cause,
        remedy=remedy,
        device=device_ref(incident.gpu, incident.gpu.uuid),
        evidence=(Evidence(incident.source.split(":", 1)[1], xid, "prometheus", detail),),
        action=info.immediate_action if info else None,
        confidence=confidence,
        references=(CATALOG_URL,),
        first_seen_s=incident.first_seen_s,
        last_seen_s=incident.last_seen_s,
        count=round(incident.count),
    )


def _memory_finding(
    incident: Incident, code: str, severity: Severity, title: str, cause: str, remedy: str
) -> Finding:
    detail = f"{incident.episodes} episode(s)"
    return Finding(
        code=code,
        severity=severity,
        title=title,
        cause=cause,
        remedy=remedy,
        device=device_ref(incident.gpu, incident.gpu.uuid),
        evidence=(Evidence(incident.source, incident.count, "prometheus", detail),),
        first_seen_s=incident.first_seen_s,
        last_seen_s=incident.last_seen_s,
        count=round(incident.count),
    )


def _ecc_finding(incident: Incident, t: FleetThresholds, storm: float | None) -> Finding | None:
    where = gpu_label(incident.gpu, incident.gpu.uuid)
    if incident.kind in {"ecc-uncorrectable", "remapped-rows-uncorrectable"}:
        what = (
            "uncorrectable ECC errors"
            if incident.kind == "ecc-uncorrectable"
            else "rows remapped for uncorrectable errors"
        )
        return _memory_finding(
            incident,
            "ecc-uncorrectable",
            Severity.CRITICAL,
            f"{incident.count:g} {what} on {where} in {incident.episodes} episode(s)",
            "uncorrectable memory errors: the contexts that touched the memory died",
            "reset the GPU (nvidia-smi -r) when its jobs are off it; recurring → RMA",
        )
    if storm is None or storm < t.ecc_correctable_storm_per_minute:
        return None
    return _memory_finding(
        incident,
        "ecc-correctable-storm",
        Severity.WARNING,
        f"correctable ECC errors rising fast on {where}: up to {storm:g} a minute",
        f"corrected errors at ≥ {t.ecc_correctable_storm_per_minute:g} a minute: memory that "
        "degrades, often before uncorrectable errors",
        "watch it; run field diagnostics (`dcgmi diag -r 3`) when the GPU is free",
    )


def _state_findings(data: FleetData, t: FleetThresholds) -> list[Finding]:
    out = []
    for span in data.states:
        gpu = data.gpus.get(span.uuid)
        first, last = span.spans[0][0], span.spans[-1][1]
        if span.state in _STATE_FINDINGS:
            severity, cause, remedy = _STATE_FINDINGS[span.state]
            out.append(
                Finding(
                    code=span.state,
                    severity=severity,
                    title=f"{span.state} on {gpu_label(gpu, span.uuid)}",
                    cause=cause,
                    remedy=remedy,
                    device=device_ref(gpu, span.uuid),
                    evidence=(Evidence(span.state, 1, "prometheus", _on_text(span)),),
                    first_seen_s=first,
                    last_seen_s=last,
                )
            )
    for uuid, pages in sorted(data.retired_pages_dbe.items()):
        if pages >= t.rma_retired_pages_dbe_count:
            gpu = data.gpus.get(uuid)
            out.append(
                Finding(
                    code="retired-pages-limit",
                    severity=Severity.CRITICAL,
                    title=f"{pages:g} pages retired for DBE on {gpu_label(gpu, uuid)}",
                    cause=f"≥ {t.rma_retired_pages_dbe_count} pages retired for double-bit "
                    "errors: the pre-Ampere RMA line",
                    remedy=RMA_REMEDY,
                    device=device_ref(gpu, uuid),
                    evidence=(Evidence("DCGM_FI_DEV_RETIRED_DBE", pages, "prometheus"),),
                )
            )
    return out


def _on_text(span: StateSpan) -> str:
    minutes = sum((b - a) // 60 + 1 for a, b in span.spans)
    before = "on when the window began; " if span.on_at_start else ""
    return f"{before}on for {minutes} minute(s) in {len(span.spans)} span(s)"


def _passthrough(data: FleetData, produced: set[tuple[str, str]]) -> list[Finding]:
    """gpuwarden's exporter's own findings (warning and critical) the fleet rules did not make."""
    out = []
    for span in data.states:
        if span.state != "gpuwarden-finding" or span.code is None:
            continue
        if span.severity not in {"warning", "critical"} or (span.uuid, span.code) in produced:
            continue
        gpu = data.gpus.get(span.uuid)
        out.append(
            Finding(
                code=span.code,
                severity=Severity(span.severity),
                title=f"{span.code} on {gpu_label(gpu, span.uuid)} (gpuwarden's exporter)",
                cause=f"gpuwarden's exporter reported {span.code} on this GPU",
                remedy=f"`gpuwarden doctor` on {gpu.host if gpu and gpu.host else 'the node'} "
                "explains it and says what to do",
                device=device_ref(gpu, span.uuid),
                evidence=(Evidence("gpuwarden_finding", span.code, "prometheus", _on_text(span)),),
                first_seen_s=span.spans[0][0],
                last_seen_s=span.spans[-1][1],
            )
        )
    return out


def max_in_window(times: Sequence[int], amounts: Sequence[float], window_s: float) -> float:
    """The most events within any ``window_s`` (two pointers over sorted times)."""
    best, total, left = 0.0, 0.0, 0
    for right, at in enumerate(times):
        total += amounts[right]
        while at - times[left] >= window_s:
            total -= amounts[left]
            left += 1
        best = max(best, total)
    return best


@dataclass(frozen=True, slots=True)
class _Criterion:
    uuid: str
    evidence: Evidence
    confidence: Confidence


def _xid_criteria(data: FleetData, t: FleetThresholds) -> Iterator[_Criterion]:
    """A fatal (critical) Xid ≥ ``rma_fatal_xid_count`` times within ``rma_fatal_xid_window_s``."""
    by_xid: dict[tuple[str, int | None], list[Event]] = defaultdict(list)
    for event in _chosen(data.events):
        if _kind(event.source) == "xid":
            by_xid[(event.uuid, event.xid)].append(event)
    for (uuid, xid), events in by_xid.items():
        if xid is None or xid_severity(xid) is not Severity.CRITICAL:
            continue
        events.sort(key=lambda e: e.at_s)
        times, amounts = [e.at_s for e in events], [e.amount for e in events]
        most = max_in_window(times, amounts, t.rma_fatal_xid_window_s)
        if most < t.rma_fatal_xid_count:
            continue
        hours = t.rma_fatal_xid_window_s / 3600
        evidence = Evidence(
            f"xid {xid}", most, "prometheus", f"fatal Xid {xid} {most:g} times within {hours:g} h"
        )
        gauge = _last_value(events[0].source)  # a lower bound, still ≥ the line
        yield _Criterion(uuid, evidence, Confidence.MEDIUM if gauge else Confidence.HIGH)


def _ecc_criteria(found: Sequence[Incident]) -> Iterator[_Criterion]:
    for incident in found:
        if incident.kind == "ecc-uncorrectable" and incident.episodes >= 2:
            detail = f"uncorrectable ECC in {incident.episodes} episodes (recurring)"
            evidence = Evidence(incident.source, incident.count, "prometheus", detail)
            yield _Criterion(incident.gpu.uuid, evidence, Confidence.HIGH)


def _state_criteria(data: FleetData) -> Iterator[_Criterion]:
    for span in data.states:
        finding = span.state == "gpuwarden-finding" and span.code in RMA_FINDING_CODES
        if span.state == "row-remap-failure" or finding:
            what = span.code if finding and span.code else "row-remap failure"
            evidence = Evidence(
                span.code or span.state, 1, "prometheus", f"{what} ({_on_text(span)})"
            )
            yield _Criterion(span.uuid, evidence, Confidence.HIGH)


def _retired_criteria(data: FleetData, t: FleetThresholds) -> Iterator[_Criterion]:
    for uuid, pages in data.retired_pages_dbe.items():
        if pages >= t.rma_retired_pages_dbe_count:
            detail = f"{pages:g} pages retired for DBE (≥ {t.rma_retired_pages_dbe_count})"
            evidence = Evidence("DCGM_FI_DEV_RETIRED_DBE", pages, "prometheus", detail)
            yield _Criterion(uuid, evidence, Confidence.HIGH)


def _rma_criteria(
    data: FleetData, found: Sequence[Incident], t: FleetThresholds
) -> list[_Criterion]:
    return [
        *_xid_criteria(data, t),
        *_ecc_criteria(found),
        *_state_criteria(data),
        *_retired_criteria(data, t),
    ]


def _rma_findings(data: FleetData, found: Sequence[Incident], t: FleetThresholds) -> list[Finding]:
    by_gpu: dict[str, list[_Criterion]] = defaultdict(list)
    for criterion in _rma_criteria(data, found, t):
        by_gpu[criterion.uuid].append(criterion)
    out = []
    for uuid, criteria in sorted(by_gpu.items()):
        gpu = data.gpus.get(uuid)
        sure = (
            Confidence.HIGH
            if any(c.confidence is Confidence.HIGH for c in criteria)
            else Confidence.MEDIUM
        )
        out.append(
            Finding(
                code="rma-candidate",
                severity=Severity.CRITICAL,
                title=f"{gpu_label(gpu, uuid)} is an RMA candidate: "
                + "; ".join(c.evidence.detail for c in criteria),
                cause="the GPU meets NVIDIA's RMA criteria (diagnosis.md §2 rma-candidate)",
                remedy=RMA_REMEDY,
                device=device_ref(gpu, uuid),
                evidence=tuple(c.evidence for c in criteria),
                action="CONTACT_SUPPORT",
                confidence=sure,
                references=(CATALOG_URL,),
            )
        )
    return out


def incident_findings(
    data: FleetData, found: Sequence[Incident], t: FleetThresholds
) -> tuple[FleetFinding, ...]:
    storms: dict[str, float] = defaultdict(float)
    for event in data.events:
        if _kind(event.source) == SBE_KIND:
            storms[event.uuid] = max(storms[event.uuid], event.amount)
    findings: list[Finding] = []
    dbe_gpus = {i.gpu.uuid for i in found if i.kind == "ecc-uncorrectable"}
    for incident in found:
        if incident.kind == "xid":
            findings.append(_xid_finding(incident))
        elif incident.kind == "remapped-rows-uncorrectable" and incident.gpu.uuid in dbe_gpus:
            continue  # the DBE incident of the same GPU tells it
        else:
            ecc = _ecc_finding(incident, t, storms.get(incident.gpu.uuid))
            if ecc is not None:
                findings.append(ecc)
    findings += _state_findings(data, t)
    findings += _rma_findings(data, found, t)
    produced = {(f.device.uuid or "", f.code) for f in findings if f.device is not None}
    findings += _passthrough(data, produced)
    return tuple(FleetFinding(f) for f in findings)
