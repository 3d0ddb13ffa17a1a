"""Interconnects: the PCIe link under load and its replay counter, NVLinks (down, erroring), and
the NVSwitch fabric registration.

Expected NVLink counts come from the catalog: a GPU whose links are on its board (SXM / HGX
modules, Grace superchips) has total NVLink bandwidth ÷ the generation's per-link bandwidth links
(NVIDIA NVLink: 2nd gen 300 GB/s over 6 links, 3rd 600 over 12, 4th 900 over 18, 5th 1800 over
18). PCIe cards reach NVLink only through an optional bridge, so no link there is normal.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache

from gpuwarden.catalog.gpus import gpu_by_smi_name
from gpuwarden.health.checks import check_of
from gpuwarden.health.rules.common import (
    Context,
    PointRule,
    Verdict,
    WindowOutcome,
    answering,
    busiest_engine,
    device_ref,
    evidence,
    gpu_label,
    make,
    under_load,
)
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.health.window import (
    Increase,
    Series,
    Window,
    counter_increase,
    increase_of,
    shortfall,
)
from gpuwarden.types.health import (
    Check,
    CheckStatus,
    Confidence,
    DeviceRef,
    Evidence,
    Finding,
    Severity,
)
from gpuwarden.types.nvlink_counters import CounterReading, GpuLinkCounters
from gpuwarden.types.telemetry import DeviceSample, FabricHealthIssue, NvLinkSample
from gpuwarden.units import GB

_SECONDS_PER_MINUTE = 60.0
# Bidirectional bandwidth of one link, per NVLink generation (by GPU architecture).
_LINK_BYTES_PER_S = {"Volta": 50 * GB, "Ampere": 50 * GB, "Hopper": 50 * GB, "Blackwell": 100 * GB}
_BOARD_NVLINK_VARIANTS = ("SXM", "HGX", "Superchip")


# --- PCIe link under load


def _pcie_reports(sample: DeviceSample) -> bool:
    return answering(sample) and (
        (sample.pcie_link_gen_current is not None and sample.pcie_link_gen_max is not None)
        or (sample.pcie_link_width_current is not None and sample.pcie_link_width_max is not None)
    )


def _below(current: int | None, maximum: int | None) -> bool:
    return current is not None and maximum is not None and 0 < current < maximum


def _pcie(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    gen = _below(sample.pcie_link_gen_current, sample.pcie_link_gen_max)
    width = _below(sample.pcie_link_width_current, sample.pcie_link_width_max)
    # Idle downtraining (Gen1 at P8) saves power and is normal: only a busy GPU is judged.
    if not (gen or width) or not under_load(sample, ctx.thresholds):
        return
    proof: list[Evidence] = []
    words = []
    if gen:
        words.append(f"Gen{sample.pcie_link_gen_current} of Gen{sample.pcie_link_gen_max}")
        proof.append(
            evidence(
                ctx,
                "pcie_link_gen_current",
                sample.pcie_link_gen_current,
                f"below max Gen{sample.pcie_link_gen_max}",
            )
        )
    if width:
        words.append(f"x{sample.pcie_link_width_current} of x{sample.pcie_link_width_max}")
        proof.append(
            evidence(
                ctx,
                "pcie_link_width_current",
                sample.pcie_link_width_current,
                f"below max x{sample.pcie_link_width_max}",
            )
        )
    busiest = busiest_engine(sample)
    if busiest is not None:
        load = f"{busiest[1]:.0f} % busy"
        proof.append(evidence(ctx, busiest[0], busiest[1], f"under load: {load}"))
    else:
        load = f"{sample.pstate}, not idle"
        proof.append(evidence(ctx, "pstate", sample.pstate, f"under load: {load}"))
    title = f"{gpu_label(sample)}: PCIe link at {' and '.join(words)} under load ({load})"
    yield make(Verdict("pcie-link-degraded", title, tuple(proof)), device_ref(sample, ctx))


PCIE = PointRule(
    reports=_pcie_reports,
    judge=_pcie,
    missing="PCIe link generation/width not reported by this capture",
)


def pcie_replays(window: Window, t: Thresholds, ctx: Context) -> WindowOutcome:
    """PCIe replays above the driver team's 8 per minute (DCGM's PCIe health watch): more than 8
    in a window shorter than a minute, or that rate over a longer one."""
    findings: list[Finding] = []
    judged = False
    for series in window.series:
        grew = counter_increase(series.samples, lambda s: s.pcie_replay_total)
        if grew is None or grew.span_s <= 0:
            continue
        judged = True
        per_minute = grew.amount / max(1.0, grew.span_s / _SECONDS_PER_MINUTE)
        if per_minute <= t.pcie_replay_max_per_minute:
            continue
        sample = series.newest
        detail = (
            f"+{grew.amount:.0f} over {grew.span_s:.0f} s = {per_minute:.1f}/min "
            f"> {t.pcie_replay_max_per_minute:g}/min"
        )
        verdict = Verdict(
            "pcie-errors",
            f"{gpu_label(sample)}: PCIe replays +{grew.amount:.0f} in {grew.span_s:.0f} s",
            (evidence(ctx, "pcie_replay_total", sample.pcie_replay_total, detail),),
            first_seen_s=grew.first_s,
            last_seen_s=grew.last_s,
        )
        findings.append(make(verdict, device_ref(sample, ctx)))
    note = "PCIe replay rate: " + (
        "judged over the window"
        if judged
        else shortfall(len(window), window.span_s, 2, 0.0) or "no replay counter read"
    )
    return WindowOutcome(tuple(findings), (note,), judged)


# --- NVLink state


@cache
def board_links(name: str) -> int | None:
    """How many NVLinks the catalog's SKU for this product name has on its board, or None (no
    NVLink, bridge-only, or a name the catalog does not know)."""
    spec = gpu_by_smi_name(name)
    if spec is None or spec.nvlink_bytes_per_s is None:
        return None
    if not spec.variant.startswith(_BOARD_NVLINK_VARIANTS):
        return None
    per_link = _LINK_BYTES_PER_S.get(spec.architecture)
    return round(spec.nvlink_bytes_per_s / per_link) if per_link else None


def _nvlink_reports(sample: DeviceSample) -> bool:
    return answering(sample) and sample.nvlinks is not None


def _links_text(links: list[NvLinkSample]) -> str:
    return ",".join(str(link.link) for link in links)


def _nvlink(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    links = list(sample.nvlinks or ())
    active = [link for link in links if link.active is True]
    inactive = [link for link in links if link.active is False]
    expected = board_links(sample.info.name)
    ref = device_ref(sample, ctx)
    if active and inactive:
        detail = f"{len(active)} of {len(links)} links active"
        proof = (evidence(ctx, "nvlinks.inactive", _links_text(inactive), detail),)
        title = f"{gpu_label(sample)}: NVLink {_links_text(inactive)} down ({detail})"
        yield make(Verdict("nvlink-down", title, proof), ref)
    elif active and expected is not None and len(active) < expected:
        detail = f"{len(active)} active; the catalog's {sample.info.name} has {expected}"
        proof = (evidence(ctx, "nvlinks.active", len(active), detail),)
        title = f"{gpu_label(sample)}: {len(active)} of {expected} NVLinks reported active"
        yield make(Verdict("nvlink-down", title, proof, confidence=Confidence.MEDIUM), ref)
    elif not active and expected is not None:
        yield make(_no_link_active(sample, ctx, expected, len(links)), ref)


def _no_link_active(sample: DeviceSample, ctx: Context, expected: int, reported: int) -> Verdict:
    """None of the board's links is up: a GPU handed to a VM alone, or an NVSwitch system whose
    Fabric Manager has not trained the links. The reading cannot tell which: information, with
    what decides."""
    detail = f"0 of {reported or expected} active; the catalog's SKU has {expected} on its board"
    return Verdict(
        "nvlink-down",
        f"{gpu_label(sample)}: none of its {expected} NVLinks is active",
        (evidence(ctx, "nvlinks.active", 0, detail),),
        severity=Severity.INFO,
        confidence=Confidence.LOW,
        no_action=True,
        cause="no NVLink is active: normal for one GPU of a baseboard given to a VM; on the "
        "full node it means the links never trained (Fabric Manager down, a baseboard fault)",
        remedy="on the host: `nvidia-smi nvlink -s`, `nvidia-smi topo -m` and `systemctl status "
        "nvidia-fabricmanager` decide; a node that should have NVLink needs the Fabric Manager "
        "running at the driver's version",
    )


NVLINK = PointRule(
    reports=_nvlink_reports,
    judge=_nvlink,
    missing="NVLink state not reported by this capture (NVML, DCGM and `nvidia-smi nvlink -s` "
    "report it; `-q`, CSV and dmon do not; GPUs without NVLink have none)",
)


_LINK_COUNTERS = ("replay_errors_total", "recovery_errors_total", "crc_errors_total")
# what an error counter's key ends with: "..._errors", "..._events", "tx_discards", "..._total"
_ERROR_KEY = re.compile(r"(?:errors|events|discards)$")
# NVLink 5's "Link recovery failed events" (DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS):
# the link could not be retrained, so it went down; healthy links count none
_LINK_LOST = frozenset({"link_recovery_failed_events"})


def _link_counters(series: Series) -> dict[tuple[int, str], Increase]:
    """Growth of every error counter of every link over the window, (link, counter) → increase,
    from one pass over the readings."""
    points: dict[tuple[int, str], list[tuple[float, int | None]]] = {}
    for sample in series.samples:
        for link in sample.nvlinks or ():
            for name in _LINK_COUNTERS:
                points.setdefault((link.link, name), []).append(
                    (sample.timestamp_s, getattr(link, name))
                )
    grown = {key: increase_of(values) for key, values in points.items()}
    return {key: grew for key, grew in grown.items() if grew is not None}


class CounterKind(enum.Enum):
    """How an NVLink error counter is judged."""

    CRC = "crc"  # as a rate: DCGM's CRC errors matter at 100/s or more
    EVENT = "event"  # replays, recoveries, NVLink 5's packet and symbol errors: DCGM fails on one
    LOST = "lost"  # a recovery that failed: the link went down


def counter_class(name: str) -> CounterKind | None:
    """How an NVLink counter is judged, by its key (NVML's "crc_errors_total" or `nvlink -e`'s
    "crc_flit_errors", "link_recovery_failed_events"), or None for what counts no error
    (traffic, BER, the FEC histogram of corrected codewords, the pre-FEC raw counters --
    non-zero on a healthy link)."""
    key = name.removesuffix("_total")
    if key.startswith(("fec_", "raw_")) or not _ERROR_KEY.search(key):
        return None
    if key.startswith("crc"):
        return CounterKind.CRC
    return CounterKind.LOST if key in _LINK_LOST else CounterKind.EVENT


def _counter_label(name: str) -> str:
    """ "replay_errors_total" → "replay", "link_recovery_failed_events" → "link recovery failed
    events" (the words of the finding's title)."""
    return name.removesuffix("_total").removesuffix("_errors").replace("_", " ")


def rising_link_errors(
    grown: Mapping[tuple[int, str], Increase], t: Thresholds
) -> tuple[list[str], Increase | None]:
    """What rose on a GPU's links, (link, counter) → its increase: replay/recovery and the other
    error events (any, DCGM fails on one) and CRC (only at 100/s or more). The live window and
    two `nvlink -e` readings are judged here, the same way."""
    said: list[str] = []
    first: Increase | None = None
    for (link, name), grew in sorted(grown.items()):
        kind = counter_class(name)
        if kind is CounterKind.CRC:
            rate = grew.per_second()
            if rate is None or rate < t.nvlink_crc_max_per_second:
                continue
            said.append(f"link {link} CRC {rate:.0f}/s")
        elif kind is not None and grew.amount >= t.nvlink_replay_recovery_max_count:
            said.append(f"link {link} {_counter_label(name)} +{grew.amount:.0f}")
        else:
            continue
        first = first or grew
    return said, first


def nvlink_errors(window: Window, t: Thresholds, ctx: Context) -> WindowOutcome:
    findings: list[Finding] = []
    read = [s for s in window.series if any(x.nvlinks for x in s.samples)]
    if len(window) < 2 or not read:
        why = shortfall(len(window), window.span_s, 2, 0.0) or "no NVLink counters read"
        return WindowOutcome(notes=(f"NVLink error counters: {why}",))
    for series in read:
        said, grew = rising_link_errors(_link_counters(series), t)
        if not said or grew is None:
            continue
        sample = series.newest
        verdict = Verdict(
            "nvlink-errors",
            f"{gpu_label(sample)}: NVLink errors rising ({'; '.join(said[:4])})",
            (evidence(ctx, "nvlinks.errors", "; ".join(said), f"over {grew.span_s:.0f} s"),),
            first_seen_s=grew.first_s,
            last_seen_s=grew.last_s,
        )
        findings.append(make(verdict, device_ref(sample, ctx)))
    return WindowOutcome(tuple(findings), ("NVLink error counters: judged over the window",), True)


# --- NVLink error counters of `nvidia-smi nvlink -e` captures (doctor --from)

COUNTERS_CHECK = "nvlink-counters"
# How long to wait before a second `nvlink -e` reading: a failing link retrains every few minutes
# (a GB200 link that went down days later counted +3 recoveries in 21 minutes, marin-community/
# marin#9086), while a healthy one counts nothing for hours. gpuwarden's choice.
SECOND_READING_MINUTES = 10
_SINCE_LOAD = (
    "counts since the driver loaded (or `nvidia-smi nvlink -re`): one reading cannot say whether "
    f"they rise; take a second reading in {SECOND_READING_MINUTES} minutes and pass both files, in "
    "order"
)


def _gpu_key(gpu: GpuLinkCounters) -> str:
    return gpu.uuid or gpu.pci_bus_id or f"{gpu.index}/{gpu.name}"


def _gpu_ref(gpu: GpuLinkCounters) -> DeviceRef:
    return DeviceRef(index=gpu.index, uuid=gpu.uuid, pci_bus_id=gpu.pci_bus_id, name=gpu.name)


def _counted(gpu: GpuLinkCounters, kinds: frozenset[CounterKind]) -> list[str]:
    """The non-zero error counts of ``kinds`` on a GPU's links, in words."""
    return [
        f"link {link.link} {_counter_label(key)} {count}"
        for link in gpu.links
        for key, count in sorted(link.counts.items())
        if count > 0 and counter_class(key) in kinds
    ]


def _one_reading(gpu: GpuLinkCounters, source: str) -> Finding | None:
    """A lifetime count: a failed recovery is a link that went down (warning); other errors are
    said (info), since a count since the driver loaded has no rate."""
    lost = _counted(gpu, frozenset({CounterKind.LOST}))
    if lost:
        verdict = Verdict(
            "nvlink-errors",
            f"{gpu.label}: NVLink recovery failed ({'; '.join(lost[:4])})",
            (Evidence("nvlinks.errors", "; ".join(lost), source, _SINCE_LOAD),),
            confidence=Confidence.MEDIUM,
            cause="a link recovery failed since the driver loaded: the link could not be "
            "retrained and went down; whether it still fails, one reading cannot say",
        )
        return make(verdict, _gpu_ref(gpu))
    counted = _counted(gpu, frozenset({CounterKind.CRC, CounterKind.EVENT}))
    if not counted:
        return None
    verdict = Verdict(
        "nvlink-errors",
        f"{gpu.label}: NVLink errors counted since the driver loaded ({'; '.join(counted[:4])})",
        (Evidence("nvlinks.errors", "; ".join(counted), source, _SINCE_LOAD),),
        severity=Severity.INFO,
        confidence=Confidence.LOW,
        cause="NVLink errors were counted since the driver loaded (replays and CRC errors are "
        "corrected by retransmission); whether they still rise, one reading cannot say",
        no_action=True,
    )
    return make(verdict, _gpu_ref(gpu))


def _growth(readings: Sequence[tuple[float, GpuLinkCounters]]) -> dict[tuple[int, str], Increase]:
    """(link, counter) → its growth over the readings, in the order given."""
    points: dict[tuple[int, str], list[tuple[float, int | None]]] = {}
    for when, gpu in readings:
        for link in gpu.links:
            for key, count in link.counts.items():
                points.setdefault((link.link, key), []).append((when, count))
    grown = {key: increase_of(values) for key, values in points.items()}
    return {key: grew for key, grew in grown.items() if grew is not None}


def _readings_rising(
    readings: Sequence[tuple[float, GpuLinkCounters]], sources: str, t: Thresholds
) -> Finding | None:
    said, grew = rising_link_errors(_growth(readings), t)
    if not said or grew is None:
        return None
    gpu = readings[-1][1]
    span = f"between {len(readings)} readings" + (f", {grew.span_s:.0f} s" if grew.span_s else "")
    verdict = Verdict(
        "nvlink-errors",
        f"{gpu.label}: NVLink errors rising ({'; '.join(said[:4])})",
        (Evidence("nvlinks.errors", "; ".join(said), sources, span),),
        first_seen_s=grew.first_s if grew.span_s > 0 else None,
        last_seen_s=grew.last_s if grew.span_s > 0 else None,
    )
    return make(verdict, _gpu_ref(gpu))


def nvlink_counter_findings(
    readings: Sequence[CounterReading], t: Thresholds
) -> tuple[tuple[Finding, ...], Check]:
    """The verdict on `nvidia-smi nvlink -e` outputs of one node: one reading of a GPU is judged
    on its lifetime counts, two or more (in the order given) on the counters' growth, with the
    live rule's thresholds."""
    by_gpu: dict[str, list[tuple[float, GpuLinkCounters]]] = {}
    sources: dict[str, list[str]] = {}
    for reading in readings:
        for gpu in reading.counters.gpus:
            by_gpu.setdefault(_gpu_key(gpu), []).append((reading.time_s, gpu))
            sources.setdefault(_gpu_key(gpu), []).append(reading.source)
    found: list[Finding] = []
    for key, series in by_gpu.items():
        where = ", ".join(dict.fromkeys(sources[key]))
        if len(series) == 1:
            finding = _one_reading(series[0][1], where)
        else:  # read twice or more: the growth decides, not what was counted before
            finding = _readings_rising(series, where, t)
        if finding is not None:
            found.append(finding)
    links = sum(len(series[-1][1].links) for series in by_gpu.values())
    twice = sum(1 for series in by_gpu.values() if len(series) > 1)
    detail = f"{len(by_gpu)} GPU(s), {links} link(s)" + (f", {twice} read twice" if twice else "")
    if not found:
        none = "no NVLink error rose between readings" if twice else "no NVLink error counted"
        return (), Check(COUNTERS_CHECK, CheckStatus.PASS, f"{detail}: {none}")
    return tuple(found), check_of(COUNTERS_CHECK, found, f"{detail}: " + found[0].title)


# --- NVSwitch fabric


_NO_FABRIC = "not-supported"


def _fabric_reports(sample: DeviceSample) -> bool:
    # "not-supported": the GPU is on no fabric (no NVSwitch); nothing to judge, whatever health
    # a reader may carry. A reader with the health but not the registration (a dcgm-exporter page
    # with fields 174/175 only) still reports: the driver gives a health summary, and answers the
    # mask's conditions, only for a GPU on a fabric.
    if sample.fabric_state == _NO_FABRIC:
        return False
    health = sample.fabric_health_summary or sample.fabric_health_issues
    return answering(sample) and bool(sample.fabric_state or health)


def _fabric(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    state, status = sample.fabric_state, sample.fabric_status
    proof = (
        evidence(ctx, "fabric_state", state),
        evidence(ctx, "fabric_status", status, "counts once the state is 'completed'"),
    )
    ref = device_ref(sample, ctx)
    failed = status is not None and status.lower() != "success"
    if state == "completed" and failed:
        title = f"{gpu_label(sample)}: fabric registration completed with error: {status}"
        yield make(Verdict("fabric-manager-down", title, proof), ref)
    elif not state or state == "completed":  # registered, or the health alone was read
        health = _fabric_health(sample, ctx)
        if health is not None:
            yield make(health, ref)
    elif state == "in-progress":
        # Registration takes a moment after boot or a reset; only a lasting one is a fault.
        title = f"{gpu_label(sample)}: NVSwitch fabric registration still in progress"
        yield make(
            Verdict(
                "fabric-manager-down",
                title,
                proof,
                severity=Severity.WARNING,
                confidence=Confidence.MEDIUM,
            ),
            ref,
        )
    elif state == "not-started":
        title = f"{gpu_label(sample)}: not registered with the NVSwitch fabric (not started)"
        yield make(Verdict("fabric-manager-down", title, proof), ref)
    else:  # a state this table does not know: not "completed", so not usable yet
        title = f"{gpu_label(sample)}: NVSwitch fabric state {state!r}"
        verdict = Verdict(
            "fabric-manager-down",
            title,
            proof,
            severity=Severity.WARNING,
            confidence=Confidence.LOW,
        )
        yield make(verdict, ref)


# What each fabric health condition means (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*): the GPU
# has lost NVLink paths on the fabric (bandwidth degraded, routes unhealthy, too few NVLinks to
# join): nvlink-down; the fabric is recovering a route or an access timeout right now (it
# happened, it may heal): nvlink-errors; the rest is the NVLink domain's configuration (system
# GUID, chassis serial, partition, firmware, location, GPU state) set up by the Fabric Manager.
_LINKS_LOST = frozenset(
    {
        FabricHealthIssue.DEGRADED_BANDWIDTH,
        FabricHealthIssue.ROUTE_UNHEALTHY,
        FabricHealthIssue.INSUFFICIENT_NVLINKS,
    }
)
_RECOVERING = frozenset(
    {FabricHealthIssue.ROUTE_RECOVERY, FabricHealthIssue.ACCESS_TIMEOUT_RECOVERY}
)
# Losses that leave the GPU unusable for fabric traffic, not just slower (degraded bandwidth
# alone is NVML's "limited capacity")
_LINKS_GONE = frozenset({FabricHealthIssue.ROUTE_UNHEALTHY, FabricHealthIssue.INSUFFICIENT_NVLINKS})
_HEALTHY = "healthy"
_UNHEALTHY = "unhealthy"
_LIMITED = "limited-capacity"


def _fabric_health(sample: DeviceSample, ctx: Context) -> Verdict | None:
    """The NVLink fabric health of a GPU registered with the fabric (or whose registration was
    not read): nothing when healthy or not reported; otherwise one verdict, its code by what the
    conditions say was lost."""
    summary = sample.fabric_health_summary
    issues = tuple(sample.fabric_health_issues or ())
    if summary in (None, _HEALTHY) and not issues:
        return None
    lost = [i for i in issues if i in _LINKS_LOST]
    recovering = [i for i in issues if i in _RECOVERING]
    configuration = [i for i in issues if i not in _LINKS_LOST and i not in _RECOVERING]
    gone = summary == _UNHEALTHY or any(i in _LINKS_GONE for i in issues)
    said = ", ".join(issues) or "no condition named"
    # the reader (ctx.source) is NVML, nvidia-smi's "Fabric / Health" rows or DCGM fields 174/175
    registered = "registered: the health counts" if sample.fabric_state else "not read"
    proof = (
        evidence(ctx, "fabric_health_summary", summary, "the fabric's health summary"),
        evidence(ctx, "fabric_health_issues", said, "health conditions reported present"),
        evidence(ctx, "fabric_state", sample.fabric_state, registered),
    )
    head = f"{gpu_label(sample)}: NVLink fabric {summary or 'health'} ({said})"
    if configuration and not lost:
        return _misconfigured(head, proof, configuration, gone)
    if recovering and not lost and summary != _UNHEALTHY:
        return _recovering(head, proof)
    known = summary in (None, _UNHEALTHY, _LIMITED)
    # An unhealthy summary without a named condition still means lost paths (the mask may be
    # cut from the capture): as sure as the summary, less sure of which links.
    confidence = Confidence.HIGH if lost else Confidence.MEDIUM if known else Confidence.LOW
    return _links_lost(head, proof, gone, confidence)


def _misconfigured(
    head: str, proof: tuple[Evidence, ...], configuration: list[str], gone: bool
) -> Verdict:
    return Verdict(
        "fabric-manager-down",
        head,
        proof,
        severity=Severity.CRITICAL if gone else Severity.WARNING,
        cause="the Fabric Manager reports the GPU's NVLink domain misconfigured ("
        + ", ".join(configuration)
        + "): the GPU cannot take full part in the NVLink partition",
        remedy="check `journalctl -u nvidia-fabricmanager` and the NVLink domain's "
        "configuration (partition, chassis serial, system GUID, GPU firmware); reset the "
        "GPU once it is corrected",
    )


def _recovering(head: str, proof: tuple[Evidence, ...]) -> Verdict:
    return Verdict(
        "nvlink-errors",
        head,
        proof,
        severity=Severity.WARNING,
        cause="the NVLink fabric is recovering a route or an access timeout of this GPU "
        "right now: an NVLink fault happened; fabric traffic may stall until it heals",
        remedy=_FABRIC_REMEDY,
    )


def _links_lost(
    head: str, proof: tuple[Evidence, ...], gone: bool, confidence: Confidence
) -> Verdict:
    return Verdict(
        "nvlink-down",
        head,
        proof,
        severity=Severity.CRITICAL if gone else Severity.WARNING,
        confidence=confidence,
        cause="the NVLink fabric reports this GPU "
        + ("unable to reach its peers fully" if gone else "at reduced bandwidth")
        + ": NVLink routes or links to the switches are lost; NCCL over NVLink may fail, "
        "hang or slow down",
        remedy=_FABRIC_REMEDY,
    )


_FABRIC_REMEDY = (
    "drain the node; `nvidia-smi -q | grep -A14 Fabric` and `nvidia-smi nvlink -s` on every "
    "GPU, the Fabric Manager / NVLink switch logs (`journalctl -u nvidia-fabricmanager`); reset "
    "the GPU; run the field diagnostic if the fabric stays unhealthy"
)


FABRIC = PointRule(
    reports=_fabric_reports,
    judge=_fabric,
    missing="no NVSwitch fabric reported (GPUs outside NVSwitch systems, or a capture that "
    "does not print the Fabric section)",
)
